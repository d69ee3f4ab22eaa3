"""ClusterQueues and LocalQueues as the admission engine sees them (Kueue v1beta2).

Quota values are integers in milli-units (`Quantity.milli`); a ClusterQueue's quota is
a list of resource groups, each covering some resources with an ordered list of flavors.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Final

from api.constants import (
    AdmissionMode,
    BorrowWithinCohortPolicy,
    FlavorFungibilityPolicy,
    FlavorFungibilityPreference,
    QueueingStrategy,
    ReclaimWithinCohortPolicy,
    StopPolicy,
    WithinClusterQueuePolicy,
)
from controller.core.model.admission_checks import CheckRule
from controller.core.model.selectors import LabelSelector

__all__ = [
    "DEFAULT_WEIGHT",
    "ClusterQueue",
    "FlavorFungibility",
    "FlavorQuotas",
    "LocalQueue",
    "PreemptionPolicy",
    "ResourceGroup",
    "ResourceQuota",
]

FlavorResource = tuple[str, str]
"""A (flavor name, resource name) pair: the unit quota is counted in."""

DEFAULT_WEIGHT: Final = Fraction(1)
"""A node's fair sharing weight when `spec.fairSharing.weight` is unset."""


@dataclass(frozen=True, slots=True)
class FlavorFungibility:
    """How far the flavor scan goes once a flavor fits by borrowing or by preempting."""

    when_can_borrow: FlavorFungibilityPolicy = FlavorFungibilityPolicy.MAY_STOP_SEARCH
    when_can_preempt: FlavorFungibilityPolicy = FlavorFungibilityPolicy.TRY_NEXT_FLAVOR
    preference: FlavorFungibilityPreference = FlavorFungibilityPreference.BORROWING_OVER_PREEMPTION


@dataclass(frozen=True, slots=True)
class PreemptionPolicy:
    """`spec.preemption`, kept for the preemption engine."""

    reclaim_within_cohort: ReclaimWithinCohortPolicy = ReclaimWithinCohortPolicy.NEVER
    within_cluster_queue: WithinClusterQueuePolicy = WithinClusterQueuePolicy.NEVER
    borrow_within_cohort: BorrowWithinCohortPolicy = BorrowWithinCohortPolicy.NEVER
    borrow_within_cohort_max_priority: int | None = None

    def may_preempt(self) -> bool:
        """Whether the queue may preempt anyone at all (within itself or its cohort)."""
        return (
            self.within_cluster_queue is not WithinClusterQueuePolicy.NEVER
            or self.reclaim_within_cohort is not ReclaimWithinCohortPolicy.NEVER
        )


@dataclass(frozen=True, slots=True)
class ResourceQuota:
    """One resource's quota in one flavor. Absent limits are None (unlimited / all lendable)."""

    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(frozen=True, slots=True)
class FlavorQuotas:
    name: str
    resources: Mapping[str, ResourceQuota]


@dataclass(frozen=True, slots=True)
class ResourceGroup:
    covered_resources: tuple[str, ...]
    flavors: tuple[FlavorQuotas, ...]


@dataclass(frozen=True, slots=True)
class ClusterQueue:
    name: str
    resource_groups: tuple[ResourceGroup, ...] = ()
    cohort: str | None = None
    queueing_strategy: QueueingStrategy = QueueingStrategy.BEST_EFFORT_FIFO
    namespace_selector: LabelSelector | None = None
    flavor_fungibility: FlavorFungibility = field(default_factory=FlavorFungibility)
    preemption: PreemptionPolicy = field(default_factory=PreemptionPolicy)
    stop_policy: StopPolicy = StopPolicy.NONE
    # The admission checks its Workloads need (spec.admissionChecksStrategy), with the
    # flavors each applies to (controller/core/admission_checks.py).
    admission_checks: tuple[CheckRule, ...] = ()
    # quotagate's minimum runtime before preemption, from the annotation
    # MINIMUM_RUNTIME_ANNOTATION (controller/core/preemption/minimum_runtime.py); None = off.
    minimum_runtime_seconds: int | None = None
    # spec.fairSharing.weight, exact (controller/core/fairsharing/settings.py); used with fair sharing.
    fair_weight: Fraction = DEFAULT_WEIGHT
    # spec.admissionScope.admissionMode (None: no admissionScope); with the configuration's
    # admissionFairSharing, UsageBasedAdmissionFairSharing orders Workloads by their
    # LocalQueue's usage (controller/core/afs/queue.py).
    admission_mode: AdmissionMode | None = None
    # What Kueue's rules find wrong with it (api/validation), or None: an invalid queue is
    # inactive (reason Invalid), whatever else its spec says.
    invalid: str | None = None

    def group_for(self, resource: str) -> ResourceGroup | None:
        """The resource group covering `resource`, or None when the queue does not cover it."""
        for group in self.resource_groups:
            if resource in group.covered_resources:
                return group
        return None

    def covers(self, resource: str) -> bool:
        return self.group_for(resource) is not None

    def quotas(self) -> Iterator[tuple[FlavorResource, ResourceQuota]]:
        """Every (flavor, resource) quota the queue defines."""
        for group in self.resource_groups:
            for flavor in group.flavors:
                for resource, quota in flavor.resources.items():
                    yield (flavor.name, resource), quota

    def flavor_names(self) -> Iterator[str]:
        for group in self.resource_groups:
            for flavor in group.flavors:
                yield flavor.name

    @property
    def stopped(self) -> bool:
        return self.stop_policy is not StopPolicy.NONE


@dataclass(frozen=True, slots=True)
class LocalQueue:
    namespace: str
    name: str
    cluster_queue: str
    stop_policy: StopPolicy = StopPolicy.NONE
    # spec.fairSharing.weight, exact: its usage is divided by it under admission fair sharing.
    fair_weight: Fraction = DEFAULT_WEIGHT
    # status.fairSharing.admissionFairSharingStatus.consumedResources (whole units per
    # resource; None: no such status): seeds its admission fair sharing history once
    # (controller/core/afs/ledger.py). Not compared: our own status writes come back.
    consumed_status: Mapping[str, float] | None = field(default=None, compare=False)
    # What makes it unreadable, or None: an invalid LocalQueue is inactive (Invalid).
    invalid: str | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"
