"""Workload: the unit of admission — pod sets with their counts, queue and priority —
and what the controller decided about it (admission, conditions, evictions, cost).

quotagate's additions (all optional): `spec.preemptibility`, `spec.disruptionMode`,
`status.preemptionCost` (KEP-7990) and `status.resolvedPreemptibility`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, ClassVar, Final

from pydantic import ConfigDict, Field, StringConstraints

from api.admission_checks import AdmissionCheckState, PodSetUpdate
from api.common import (
    Condition,
    DNSLabel,
    DNSSubdomain,
    Int32,
    KueueModel,
    NonNegativeInt32,
    PositiveInt32,
    atomic_list,
    cel,
    list_map,
)
from api.constants import (
    DEFAULT_POD_SET_NAME,
    DelayedTopologyRequestState,
    DisruptionMode,
    GatePosition,
    Kind,
    Preemptibility,
    PreemptibilitySource,
    PriorityClassGroup,
    PriorityClassKind,
    WorkloadConditionType,
)
from api.objects import AGE_COLUMN, CRDNames, KueueObject, PrinterColumn, Scope
from api.podtemplate import PodTemplateSpec
from api.quantity import NonNegativeQuantity, QuantityValue
from api.topology import PodSetTopologyRequest, TopologyAssignment

__all__ = [
    "Admission",
    "AdmissionCheckState",
    "EvictionCount",
    "PodSet",
    "PodSetAssignment",
    "PodSetTopologyRequest",
    "PodSetUpdate",
    "PriorityClassRef",
    "RequeueState",
    "ResolvedPreemptibility",
    "SchedulingStats",
    "TopologyAssignment",
    "Workload",
    "WorkloadSpec",
    "WorkloadStatus",
]


class PodSet(KueueModel):
    """A group of identical pods: `count` copies of `template`."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                "!has(self.minCount) || self.minCount <= self.count",
                "minCount should be positive and less or equal to count",
            )
        )
    )

    name: DNSLabel = DEFAULT_POD_SET_NAME
    template: PodTemplateSpec
    count: NonNegativeInt32 = 1
    """How many pods (0: a pod set that asks for nothing, as Kueue allows)."""
    min_count: PositiveInt32 | None = None
    """Fewest pods the Workload can run with (partial admission; `Pod` disruption floor)."""
    topology_request: PodSetTopologyRequest | None = None


class PriorityClassRef(KueueModel):
    """The priority class a Workload's priority came from."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                "self.group != 'scheduling.k8s.io' || self.kind == 'PriorityClass'",
                "only the PriorityClass kind is allowed for the scheduling.k8s.io group",
            ),
            (
                "self.group != 'kueue.x-k8s.io' || self.kind == 'WorkloadPriorityClass'",
                "only the WorkloadPriorityClass kind is allowed for the kueue.x-k8s.io group",
            ),
        )
    )

    group: PriorityClassGroup
    kind: PriorityClassKind
    name: Annotated[DNSSubdomain, StringConstraints(min_length=1)]


class PreemptionGate(KueueModel):
    name: str = Field(min_length=1, max_length=63)


class WorkloadSpec(KueueModel):
    """WorkloadSpec is what a Workload asks for."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                "!has(self.priorityClassRef) || has(self.priority)",
                "priority should not be nil when priorityClassRef is set",
            )
        )
    )

    pod_sets: list[PodSet] = Field(
        default_factory=list, min_length=1, max_length=18, json_schema_extra=list_map("name")
    )
    """The pod sets, each a number of identical pods; 1 to 18, unique names (optional in
    Kueue's schema: a Workload without one is reported, never admitted)."""
    queue_name: DNSSubdomain | None = None
    """The LocalQueue (in the Workload's namespace) the Workload is submitted to."""
    priority_class_ref: PriorityClassRef | None = None
    priority: Int32 | None = None
    """Higher is more important; unset counts as 0."""
    active: bool = True
    """False evicts the Workload (reason Deactivated) and keeps it from being admitted."""
    maximum_execution_time_seconds: PositiveInt32 | None = None
    """Once admitted this long, the Workload is deactivated."""
    preemption_gates: list[PreemptionGate] | None = Field(
        default=None, max_length=8, json_schema_extra=list_map("name")
    )
    """Kueue's preemption gates (not implemented by quotagate: reported)."""
    preemptibility: Preemptibility | None = None
    """quotagate: whether the Workload may be preempted (overrides labels and priority)."""
    disruption_mode: DisruptionMode = DisruptionMode.POD_GROUP
    """quotagate: PodGroup preempts the whole Workload; Pod may take pods above minCount."""


class PodSetAssignment(KueueModel):
    """The flavors and quota assigned to one pod set."""

    name: DNSLabel = DEFAULT_POD_SET_NAME
    flavors: dict[str, DNSSubdomain] | None = None
    """Resource name → flavor name."""
    resource_usage: dict[str, QuantityValue] | None = None
    """Resource name → total for `count` pods."""
    count: NonNegativeInt32 | None = None
    """Pods admitted (less than the pod set's count under partial admission)."""
    topology_assignment: TopologyAssignment | None = None
    delayed_topology_request: DelayedTopologyRequestState | None = Field(
        default=None, json_schema_extra={"maxLength": 7}
    )


class Admission(KueueModel):
    """Where a Workload's quota is reserved."""

    cluster_queue: DNSSubdomain | None = None
    pod_set_assignments: list[PodSetAssignment] | None = Field(
        default=None, max_length=18, json_schema_extra=list_map("name")
    )


class RequeueState(KueueModel):
    count: NonNegativeInt32 | None = None
    requeue_at: datetime | None = None


class EvictionCount(KueueModel):
    """How many times the Workload was evicted for one (reason, underlying cause)."""

    reason: str = Field(max_length=316)
    underlying_cause: str = Field(max_length=316)
    count: NonNegativeInt32


class SchedulingStats(KueueModel):
    evictions: list[EvictionCount] | None = Field(
        default=None, max_length=256, json_schema_extra=list_map("reason", "underlyingCause")
    )


class ResolvedPreemptibility(KueueModel):
    """quotagate: the preemptibility in force and which source decided it."""

    value: Preemptibility
    """The preemptibility the controller applies."""
    source: PreemptibilitySource
    """Which source decided it: spec, ownerLabel, podLabel, priorityThreshold or default."""
    message: str | None = None
    """Why, e.g. an invalid label value that was skipped."""


class PreemptionGateState(KueueModel):
    name: str = Field(min_length=1, max_length=63)
    position: GatePosition
    last_transition_time: datetime


class ReclaimablePod(KueueModel):
    name: DNSLabel
    count: NonNegativeInt32


class PodSetRequest(KueueModel):
    name: DNSLabel
    resources: dict[str, QuantityValue] | None = None


class UnhealthyNode(KueueModel):
    name: str = Field(max_length=63)


class WorkloadStatus(KueueModel):
    """WorkloadStatus is what the controller decided about a Workload."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                "!has(oldSelf.clusterName) || !has(self.clusterName) || "
                "oldSelf.clusterName == self.clusterName",
                "clusterName is immutable once set",
            ),
            (
                "!has(self.clusterName) || !has(self.nominatedClusterNames) || "
                "size(self.nominatedClusterNames) == 0",
                "clusterName and nominatedClusterNames are mutually exclusive",
            ),
        )
    )

    conditions: list[Condition] | None = Field(
        default=None, max_length=16, json_schema_extra=list_map("type")
    )
    admission: Admission | None = None
    requeue_state: RequeueState | None = None
    scheduling_stats: SchedulingStats | None = None
    accumulated_past_execution_time_seconds: Int32 | None = None
    """Time the Workload ran in earlier admissions (maximumExecutionTimeSeconds)."""
    admission_checks: list[AdmissionCheckState] | None = Field(
        default=None, max_length=8, json_schema_extra=list_map("name")
    )
    reclaimable_pods: list[ReclaimablePod] | None = Field(
        default=None, max_length=18, json_schema_extra=list_map("name")
    )
    """Kueue's reclaimable pods (not implemented by quotagate: reported)."""
    resource_requests: list[PodSetRequest] | None = Field(
        default=None, max_length=18, json_schema_extra=list_map("name")
    )
    """Per pod set, the requests Kueue computed while the Workload is pending."""
    cluster_name: str | None = Field(default=None, max_length=256)
    nominated_cluster_names: list[Annotated[str, StringConstraints(max_length=256)]] | None = Field(
        default=None, max_length=20, json_schema_extra=atomic_list()
    )
    unhealthy_nodes: list[UnhealthyNode] | None = Field(
        default=None, max_length=8, json_schema_extra=list_map("name")
    )
    preemption_gates: list[PreemptionGateState] | None = Field(
        default=None, max_length=8, json_schema_extra=list_map("name")
    )
    preemption_cost: NonNegativeQuantity | None = None
    """quotagate (KEP-7990): higher is more expensive to preempt; unset counts as 0."""
    resolved_preemptibility: ResolvedPreemptibility | None = None

    def condition(self, condition_type: WorkloadConditionType | str) -> Condition | None:
        """The condition of that type, if present."""
        for condition in self.conditions or ():
            if condition.type == condition_type:
                return condition
        return None


def _condition_status(condition_type: WorkloadConditionType) -> str:
    return f'.status.conditions[?(@.type=="{condition_type}")].status'


def _reserved(obj: str) -> str:
    return (
        f"has({obj}.status) && has({obj}.status.conditions) && "
        f"{obj}.status.conditions.exists(c, c.type == 'QuotaReserved' && c.status == 'True')"
    )


def _admitted(obj: str) -> str:
    return (
        f"has({obj}.status) && has({obj}.status.conditions) && "
        f"{obj}.status.conditions.exists(c, c.type == 'Admitted' && c.status == 'True')"
    )


_OLD_REF = "oldSelf.spec.priorityClassRef"
_NEW_REF = "self.spec.priorityClassRef"
_BOTH_REFS = f"has({_OLD_REF}) && has({_NEW_REF})"

# Kueue's rules on a Workload as a whole (`workload_types.go`), with its messages: the
# admission covers the pod sets, and what decided the reservation does not change under it.
_WORKLOAD_RULES: Final = (
    (
        f"!({_reserved('self')} && has(self.status.admission)) || "
        "size(self.spec.podSets) == "
        "(has(self.status.admission.podSetAssignments) ? "
        "size(self.status.admission.podSetAssignments) : 0)",
        "podSetAssignments must have the same number of podSets as the spec",
    ),
    (
        f"!({_reserved('oldSelf')}) || has({_OLD_REF}) == has({_NEW_REF})",
        "priorityClassRef is immutable while workload quota reserved",
    ),
    (
        f"!({_reserved('oldSelf')} && {_BOTH_REFS}) || {_OLD_REF}.group == {_NEW_REF}.group",
        "priorityClassRef.group is immutable while workload quota reserved",
    ),
    (
        f"!({_reserved('oldSelf')} && {_BOTH_REFS}) || {_OLD_REF}.kind == {_NEW_REF}.kind",
        "priorityClassRef.kind is immutable while workload quota reserved",
    ),
    (
        f"!({_reserved('oldSelf')} && {_BOTH_REFS} && "
        f"{_NEW_REF}.group == 'scheduling.k8s.io' && {_NEW_REF}.kind == 'PriorityClass') || "
        f"{_OLD_REF}.name == {_NEW_REF}.name",
        "priorityClassRef.name is immutable for scheduling.k8s.io/priorityclass while workload "
        "quota reserved",
    ),
    (
        f"!({_reserved('oldSelf')} && {_reserved('self')}) || "
        "(has(oldSelf.spec.queueName) == has(self.spec.queueName) && "
        "(!has(oldSelf.spec.queueName) || oldSelf.spec.queueName == self.spec.queueName))",
        "queueName is immutable while workload quota reserved",
    ),
    (
        f"!({_admitted('oldSelf')} && {_admitted('self')}) || "
        "(has(oldSelf.spec.maximumExecutionTimeSeconds) ? "
        "oldSelf.spec.maximumExecutionTimeSeconds : 0) == "
        "(has(self.spec.maximumExecutionTimeSeconds) ? self.spec.maximumExecutionTimeSeconds : 0)",
        "maximumExecutionTimeSeconds is immutable while workload quota reserved",
    ),
)


class Workload(KueueObject):
    """Workload is the Schema for the workloads API."""

    model_config = ConfigDict(json_schema_extra=cel(*_WORKLOAD_RULES))

    CRD: ClassVar[CRDNames] = CRDNames(
        plural="workloads",
        singular="workload",
        scope=Scope.NAMESPACED,
        short_names=("kwl", "kueueworkload", "kueueworkloads"),
        # Kueue's columns; quotagate's own (priority, cost, preemptibility) with -o wide.
        printer_columns=(
            PrinterColumn("Queue", ".spec.queueName"),
            PrinterColumn("Reserved in", ".status.admission.clusterQueue"),
            PrinterColumn("Admitted", _condition_status(WorkloadConditionType.ADMITTED)),
            PrinterColumn("Finished", _condition_status(WorkloadConditionType.FINISHED)),
            AGE_COLUMN,
            PrinterColumn("Priority", ".spec.priority", "integer", priority=1),
            PrinterColumn("Cost", ".status.preemptionCost", priority=1),
            PrinterColumn("Preemptibility", ".status.resolvedPreemptibility.value", priority=1),
        ),
    )

    kind: str = Kind.WORKLOAD.value
    spec: WorkloadSpec = Field(default_factory=WorkloadSpec)
    status: WorkloadStatus | None = None
