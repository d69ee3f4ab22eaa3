"""Workloads as the admission engine sees them: podsets with per-pod requests, priority
inputs, queue-order inputs and (when quota is reserved) the admission.

Times are seconds since the epoch (floats) and always come from the caller.
Quantities are integers in milli-units.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NewType

from api.constants import CheckState, DisruptionMode
from api.validation import FieldError
from api.workload_status import Admission
from controller.core.model.admission_checks import CheckStatus
from controller.core.model.clusterqueues import FlavorResource
from controller.core.model.requests import EMPTY_INT
from controller.core.model.selectors import EMPTY_LABELS, Requirement
from controller.core.model.topology import TopologyRequest

__all__ = [
    "ConditionState",
    "OrderKey",
    "OwnerReference",
    "PodSet",
    "PriorityClassRef",
    "Toleration",
    "Usage",
    "Workload",
    "WorkloadKey",
    "add_usage",
    "order_key",
    "workload_key",
]

WorkloadKey = NewType("WorkloadKey", str)
"""`namespace/name` of a Workload: how the engine names it everywhere."""

Usage = Mapping[FlavorResource, int]
"""Quota a Workload holds or asks for: milli-units per (flavor, resource)."""


OrderKey = tuple[int, int, float, str, WorkloadKey]
"""A Workload's place in its queue (digest §4.1): (−priority, −preemption cost, queue-order
time, UID, workload key); smaller is first."""


def order_key(priority: int, cost: int, created: float, uid: str, key: WorkloadKey) -> OrderKey:
    return (-priority, -cost, created, uid, key)


def workload_key(namespace: str, name: str) -> WorkloadKey:
    return WorkloadKey(f"{namespace}/{name}")


def add_usage(into: dict[FlavorResource, int], usage: Usage) -> None:
    for fr, value in usage.items():
        into[fr] = into.get(fr, 0) + value


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    seconds: int | None = None  # tolerationSeconds (NoExecute): None = for ever

    def tolerates(self, key: str, value: str, effect: str) -> bool:
        """Kubernetes `ToleratesTaint`: empty effect matches all; empty key + Exists matches all."""
        if self.effect and self.effect != effect:
            return False
        if self.key and self.key != key:
            return False
        if self.operator == "Exists":
            return True
        return self.key == key and self.value == value


@dataclass(frozen=True, slots=True)
class PodSet:
    """One podset: `count` identical pods each requesting `requests` (milli-units)."""

    name: str
    count: int
    requests: Mapping[str, int] = field(default_factory=lambda: EMPTY_INT)
    node_selector: Mapping[str, str] = field(default_factory=lambda: EMPTY_LABELS)
    # Required node affinity: OR of terms, each an AND of requirements. Empty = none.
    affinity_terms: tuple[tuple[Requirement, ...], ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    min_count: int | None = None
    # The pod set's `topologyRequest` (topology-aware scheduling); None: none asked for.
    topology: TopologyRequest | None = None


@dataclass(frozen=True, slots=True)
class ConditionState:
    """One status condition as the engine reads it: status, reason, message and
    lastTransitionTime (seconds since the epoch; 0 when the condition has none)."""

    status: bool
    reason: str = ""
    message: str = ""
    last_transition: float = 0.0


@dataclass(frozen=True, slots=True)
class OwnerReference:
    """One of `metadata.ownerReferences` (what Kueue's visibility API repeats)."""

    api_version: str
    kind: str
    name: str
    uid: str


@dataclass(frozen=True, slots=True)
class PriorityClassRef:
    """`spec.priorityClassRef`; group `kueue.x-k8s.io` or `scheduling.k8s.io`."""

    group: str
    kind: str
    name: str


@dataclass(frozen=True, slots=True, eq=False)
class Workload:
    """A Kueue Workload reduced to what admission needs."""

    namespace: str
    name: str
    uid: str
    queue_name: str
    pod_sets: tuple[PodSet, ...]
    creation_timestamp: float = 0.0
    priority: int | None = None
    priority_class: PriorityClassRef | None = None
    active: bool = True
    on_hold: bool = False  # QuotaReserved=False OnHold: its job asked not to be queued
    preemption_cost: int = 0  # milli-units; unset = 0
    admission: Admission | None = None  # set iff QuotaReserved=True
    evicted: bool = False  # Evicted=True (still holds quota while admission is set)
    finished: bool = False
    requeue_at: float | None = None  # status.requeueState.requeueAt
    requeue_count: int = 0
    # Conditions the after-admission timers read (controller/core/after_admission.py).
    pods_ready: ConditionState | None = None  # PodsReady, written by the job side
    eviction: ConditionState | None = None  # Evicted=True (reason, time)
    requeued: ConditionState | None = None  # Requeued
    deactivation_target: ConditionState | None = None  # DeactivationTarget=True
    preemptibility: str | None = None  # spec.preemptibility as written (resolved by the state)
    # The preemptibility labels of the pods' owners (nearest first) and of the pods, for
    # Workloads made from pods (OWNER_/POD_PREEMPTIBILITY_ANNOTATION).
    owner_preemptibility: tuple[str, ...] = ()
    pod_preemptibility: str | None = None
    # spec.disruptionMode: PodGroup (whole) or Pod (KEP-5710)
    disruption_mode: DisruptionMode = DisruptionMode.POD_GROUP
    quota_reserved_at: float | None = None  # QuotaReserved=True lastTransitionTime
    # status.admissionChecks: each check's state, as its controller wrote it; `admitted`:
    # Admitted=True (quota reserved and every check Ready).
    admission_checks: tuple[CheckStatus, ...] = ()
    admitted: bool = False
    admitted_at: float | None = None  # Admitted=True lastTransitionTime
    # status.unhealthyNodes: the failed node whose replacement it waits for (topology-aware
    # scheduling; controller/core/tas/node_failure.py), as last written
    unhealthy_nodes: tuple[str, ...] = ()
    maximum_execution_time_seconds: int | None = None  # spec.maximumExecutionTimeSeconds
    accumulated_past_execution_time_seconds: int = 0  # status.accumulatedPastExecutionTimeSeconds
    # EXPECTED_RUNTIME_ANNOTATION as written: what its owner expects it to run. Read only
    # by the admission forecast (controller/core/forecast.py), which reports a bad value.
    expected_runtime: str | None = None
    # The `kueue.x-k8s.io/admission-gated-by` annotation as written ("" without gates): a
    # Workload with a gate left is not queued (Kueue's AdmissionGated).
    admission_gated_by: str = ""
    # The `kueue.x-k8s.io/priority-boost` annotation as written (None without it): added to
    # the priority while Kueue's PriorityBoost gate is on (ClusterState.priority_boost).
    priority_boost: str | None = None
    owner_references: tuple[OwnerReference, ...] = field(default=(), compare=False, repr=False)
    # What Kueue's rules find wrong with it (api/validation), or None: an invalid Workload
    # is not queued (Misconfigured); one holding quota keeps it as its admission says.
    invalid: str | None = None
    # What the rules found on its spec alone: the same for every copy of one generation, so
    # a status change is checked without reading the pod templates again (runtime/sync.py).
    spec_errors: tuple[FieldError, ...] = field(default=(), compare=False, repr=False)

    @property
    def held_back(self) -> bool:
        """Not to be queued for its own reasons: deactivated, gated, invalid, or with
        failed checks before any reservation."""
        return (
            not self.active
            or bool(self.admission_gated_by)
            or self.invalid is not None
            or self.checks_failed
        )

    @property
    def checks_failed(self) -> bool:
        """Without a reservation, a check in Retry or Rejected state (its controller
        decided before the reservation): Kueue's scheduler does not nominate it ("The
        workload has failed admission checks") until the states change."""
        return self.admission is None and any(
            c.state is CheckState.RETRY or c.state is CheckState.REJECTED
            for c in self.admission_checks
        )

    @property
    def pod_count(self) -> int:
        return sum(ps.count for ps in self.pod_sets)

    @property
    def key(self) -> WorkloadKey:
        return WorkloadKey(f"{self.namespace}/{self.name}")

    def total_request(self, resource: str) -> int:
        """What all its pods request of `resource` together (milli-units)."""
        return sum(ps.count * ps.requests.get(resource, 0) for ps in self.pod_sets)
