"""ClusterQueue: quota per (flavor, resource), cohort membership, and preemption policy."""

from __future__ import annotations

from typing import ClassVar

from pydantic import ConfigDict, Field

from api.common import (
    Condition,
    DNSSubdomain,
    FairSharing,
    FairSharingStatus,
    Int32,
    KueueModel,
    LabelSelector,
    NonNegativeInt32,
    atomic_list,
    cel,
    list_map,
    set_list,
)
from api.constants import (
    AdmissionMode,
    BorrowWithinCohortPolicy,
    ConcurrentAdmissionMode,
    FlavorFungibilityPolicy,
    FlavorFungibilityPreference,
    Kind,
    QueueingStrategy,
    ReclaimWithinCohortPolicy,
    StopPolicy,
    WithinClusterQueuePolicy,
)
from api.objects import WIDE_AGE_COLUMN, CRDNames, KueueObject, PrinterColumn, Scope
from api.quantity import QuantityValue, QuotaQuantity

__all__ = [
    "AdmissionCheckStrategyRule",
    "AdmissionChecksStrategy",
    "AdmissionScope",
    "BorrowWithinCohort",
    "ClusterQueue",
    "ClusterQueuePreemption",
    "ClusterQueueSpec",
    "ClusterQueueStatus",
    "ConcurrentAdmissionPolicy",
    "FlavorFungibility",
    "FlavorQuotas",
    "FlavorUsage",
    "ResourceGroup",
    "ResourceQuota",
    "ResourceUsage",
]


class ResourceQuota(KueueModel):
    """Quota of one resource in one flavor."""

    name: str
    """The resource name, e.g. `cpu`, `memory`, `nvidia.com/gpu`, `pods`."""
    nominal_quota: QuotaQuantity
    """What this ClusterQueue may use at any time; must not be negative."""
    borrowing_limit: QuotaQuantity | None = None
    """How much more than nominal it may borrow from its cohort (unset: unlimited)."""
    lending_limit: QuotaQuantity | None = None
    """How much of its nominal quota the cohort may borrow (unset: all of it)."""


class FlavorQuotas(KueueModel):
    """The quotas of one flavor, one entry per covered resource."""

    name: DNSSubdomain
    """The ResourceFlavor's name."""
    resources: list[ResourceQuota] = Field(
        min_length=1, max_length=64, json_schema_extra=list_map("name")
    )


class ResourceGroup(KueueModel):
    """Resources that are assigned a flavor together, with the flavors in order of preference."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                "self.flavors.all(x, size(x.resources) == size(self.coveredResources))",
                "flavors must have the same number of resources as the coveredResources",
            )
        )
    )

    covered_resources: list[str] = Field(
        min_length=1, max_length=64, json_schema_extra=atomic_list()
    )
    flavors: list[FlavorQuotas] = Field(
        min_length=1, max_length=64, json_schema_extra=list_map("name")
    )


class BorrowWithinCohort(KueueModel):
    """Whether a borrowing Workload may preempt in the cohort, and below which priority."""

    policy: BorrowWithinCohortPolicy = BorrowWithinCohortPolicy.NEVER
    max_priority_threshold: Int32 | None = None
    """Only Workloads with priority up to this value may be preempted."""


class ClusterQueuePreemption(KueueModel):
    """Which admitted Workloads a pending Workload of this ClusterQueue may preempt."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                "!(self.reclaimWithinCohort == 'Never' && has(self.borrowWithinCohort) && "
                "self.borrowWithinCohort.policy != 'Never')",
                "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never",
            )
        )
    )

    reclaim_within_cohort: ReclaimWithinCohortPolicy = ReclaimWithinCohortPolicy.NEVER
    """Preempt Workloads of other ClusterQueues in the cohort that borrow this queue's quota."""
    borrow_within_cohort: BorrowWithinCohort | None = Field(
        default=None, json_schema_extra={"default": {}}
    )
    within_cluster_queue: WithinClusterQueuePolicy = WithinClusterQueuePolicy.NEVER
    """Preempt Workloads of this ClusterQueue."""


class FlavorFungibility(KueueModel):
    """Whether the flavor search stops at a flavor that fits by borrowing or preempting."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                "!has(self.preference) || (self.whenCanBorrow == 'TryNextFlavor' && "
                "self.whenCanPreempt == 'TryNextFlavor')",
                "preference can only be set when both whenCanBorrow and whenCanPreempt are "
                "TryNextFlavor",
            )
        )
    )

    when_can_borrow: FlavorFungibilityPolicy = FlavorFungibilityPolicy.MAY_STOP_SEARCH
    when_can_preempt: FlavorFungibilityPolicy = FlavorFungibilityPolicy.TRY_NEXT_FLAVOR
    preference: FlavorFungibilityPreference | None = None


class AdmissionScope(KueueModel):
    """Whether the ClusterQueue orders its Workloads by their LocalQueue's recent usage."""

    admission_mode: AdmissionMode
    """UsageBasedAdmissionFairSharing: the least-used LocalQueue's Workloads go first."""


class AdmissionCheckStrategyRule(KueueModel):
    """An admission check the queue's Workloads need, on all or some of its flavors."""

    name: str = Field(min_length=1, max_length=316)
    on_flavors: list[DNSSubdomain] | None = Field(
        default=None, max_length=64, json_schema_extra=set_list()
    )


class AdmissionChecksStrategy(KueueModel):
    """Kueue's admission checks (not run by quotagate: a queue naming any is inactive)."""

    admission_checks: list[AdmissionCheckStrategyRule] = Field(
        min_length=1, max_length=64, json_schema_extra=list_map("name")
    )


class MigrationConstraints(KueueModel):
    last_acceptable_flavor_name: DNSSubdomain | None = None


class ConcurrentAdmissionMigration(KueueModel):
    mode: ConcurrentAdmissionMode = Field(json_schema_extra={"maxLength": 253})
    constraints: MigrationConstraints | None = None


class ConcurrentAdmissionPolicy(KueueModel):
    """Kueue's concurrent admission (not implemented by quotagate: reported); immutable."""

    migration: ConcurrentAdmissionMigration


class ClusterQueueSpec(KueueModel):
    """ClusterQueueSpec defines quota, cohort, queueing and preemption of a ClusterQueue."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                "has(self.cohortName) || !has(self.resourceGroups) || "
                "self.resourceGroups.all(rg, rg.flavors.all(f, "
                "f.resources.all(r, !has(r.borrowingLimit))))",
                "borrowingLimit must be nil when cohort is empty",
            )
        )
    )

    resource_groups: list[ResourceGroup] | None = Field(
        default=None, max_length=16, json_schema_extra=atomic_list()
    )
    """Quota per flavor and resource; a resource belongs to one group only."""
    cohort_name: DNSSubdomain | None = None
    """ClusterQueues in the same cohort borrow unused quota from each other."""
    queueing_strategy: QueueingStrategy = QueueingStrategy.BEST_EFFORT_FIFO
    """StrictFIFO blocks behind the head; BestEffortFIFO sets an inadmissible head aside."""
    namespace_selector: LabelSelector | None = None
    """Namespaces whose LocalQueues may use this ClusterQueue; unset: none, `{}`: all."""
    flavor_fungibility: FlavorFungibility = Field(
        default_factory=FlavorFungibility, json_schema_extra={"default": {}}
    )
    preemption: ClusterQueuePreemption = Field(
        default_factory=ClusterQueuePreemption, json_schema_extra={"default": {}}
    )
    stop_policy: StopPolicy = StopPolicy.NONE
    """Hold stops new admissions; HoldAndDrain also evicts admitted Workloads."""
    fair_sharing: FairSharing | None = None
    """Its weight when fair sharing is on in the controller configuration."""
    admission_scope: AdmissionScope | None = None
    """Admission fair sharing (with the configuration's admissionFairSharing section)."""
    admission_checks_strategy: AdmissionChecksStrategy | None = None
    """Admission checks: quotagate runs none, so a queue that names any admits nothing."""
    concurrent_admission_policy: ConcurrentAdmissionPolicy | None = None
    """Concurrent admission (not implemented by quotagate: reported)."""


class ResourceUsage(KueueModel):
    name: str
    total: QuantityValue | None = None
    """Quota reserved (or used by admitted Workloads) in this flavor."""
    borrowed: QuantityValue | None = None
    """The part of total above nominal quota, borrowed from the cohort."""


class FlavorUsage(KueueModel):
    name: DNSSubdomain
    resources: list[ResourceUsage] = Field(max_length=64, json_schema_extra=list_map("name"))


class ClusterQueueStatus(KueueModel):
    """ClusterQueueStatus is what the controller observed for this ClusterQueue."""

    conditions: list[Condition] | None = Field(
        default=None, max_length=16, json_schema_extra=list_map("type")
    )
    pending_workloads: NonNegativeInt32 | None = None
    reserving_workloads: NonNegativeInt32 | None = None
    admitted_workloads: NonNegativeInt32 | None = None
    flavors_reservation: list[FlavorUsage] | None = Field(
        default=None, max_length=64, json_schema_extra=list_map("name")
    )
    flavors_usage: list[FlavorUsage] | None = Field(
        default=None, max_length=64, json_schema_extra=list_map("name")
    )
    fair_sharing: FairSharingStatus | None = None
    """Its weighted share while fair sharing is on (written by the controller)."""


class ClusterQueue(KueueObject):
    """ClusterQueue is the Schema for the clusterqueues API."""

    CRD: ClassVar[CRDNames] = CRDNames(
        plural="clusterqueues",
        singular="clusterqueue",
        scope=Scope.CLUSTER,
        short_names=("cq",),
        printer_columns=(
            PrinterColumn("Cohort", ".spec.cohortName"),
            PrinterColumn("Strategy", ".spec.queueingStrategy", priority=1),
            PrinterColumn("Pending Workloads", ".status.pendingWorkloads", "integer"),
            PrinterColumn("Admitted Workloads", ".status.admittedWorkloads", "integer", 1),
            WIDE_AGE_COLUMN,
        ),
    )

    kind: str = Kind.CLUSTER_QUEUE.value
    spec: ClusterQueueSpec = Field(default_factory=ClusterQueueSpec)
    status: ClusterQueueStatus | None = None
