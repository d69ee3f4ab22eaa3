"""Workload: the unit of admission — pod sets with their counts, queue and priority —
and what the controller decided about it (admission, conditions, evictions, cost).

quotagate's additions (all optional): `spec.preemptibility`, `spec.disruptionMode`,
`status.preemptionCost` (KEP-7990) and `status.resolvedPreemptibility`.
"""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

from pydantic import Field

from api.common import (
    Condition,
    DNSSubdomain,
    Int32,
    KueueModel,
    NonNegativeInt32,
    OpenModel,
    PositiveInt32,
    list_map,
)
from api.constants import (
    DEFAULT_POD_SET_NAME,
    DisruptionMode,
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

__all__ = [
    "Admission",
    "EvictionCount",
    "PodSet",
    "PodSetAssignment",
    "PriorityClassRef",
    "RequeueState",
    "ResolvedPreemptibility",
    "SchedulingStats",
    "Workload",
    "WorkloadSpec",
    "WorkloadStatus",
]


class PodSet(OpenModel):
    """A group of identical pods: `count` copies of `template`."""

    name: str = DEFAULT_POD_SET_NAME
    template: PodTemplateSpec
    count: PositiveInt32 = 1
    """How many pods; at least 1 (quotagate rejects empty pod sets)."""
    min_count: PositiveInt32 | None = None
    """Fewest pods the Workload can run with (partial admission; `Pod` disruption floor)."""


class PriorityClassRef(KueueModel):
    """The priority class a Workload's priority came from."""

    group: PriorityClassGroup
    kind: PriorityClassKind
    name: DNSSubdomain


class WorkloadSpec(OpenModel):
    """WorkloadSpec is what a Workload asks for."""

    pod_sets: list[PodSet] = Field(min_length=1, max_length=18, json_schema_extra=list_map("name"))
    """The pod sets, each a number of identical pods; 1 to 18, unique names."""
    queue_name: DNSSubdomain | None = None
    """The LocalQueue (in the Workload's namespace) the Workload is submitted to."""
    priority_class_ref: PriorityClassRef | None = None
    priority: Int32 | None = None
    """Higher is more important; unset counts as 0."""
    active: bool = True
    """False evicts the Workload (reason Deactivated) and keeps it from being admitted."""
    maximum_execution_time_seconds: PositiveInt32 | None = None
    """Once admitted this long, the Workload is deactivated."""
    preemptibility: Preemptibility | None = None
    """quotagate: whether the Workload may be preempted (overrides labels and priority)."""
    disruption_mode: DisruptionMode = DisruptionMode.POD_GROUP
    """quotagate: PodGroup preempts the whole Workload; Pod may take pods above minCount."""


class PodSetAssignment(OpenModel):
    """The flavors and quota assigned to one pod set."""

    name: str = DEFAULT_POD_SET_NAME
    flavors: dict[str, str] | None = None
    """Resource name → flavor name."""
    resource_usage: dict[str, QuantityValue] | None = None
    """Resource name → total for `count` pods."""
    count: NonNegativeInt32 | None = None
    """Pods admitted (less than the pod set's count under partial admission)."""


class Admission(KueueModel):
    """Where a Workload's quota is reserved."""

    cluster_queue: DNSSubdomain
    pod_set_assignments: list[PodSetAssignment] | None = Field(
        default=None, max_length=18, json_schema_extra=list_map("name")
    )


class RequeueState(KueueModel):
    count: NonNegativeInt32 | None = None
    requeue_at: datetime | None = None


class EvictionCount(KueueModel):
    """How many times the Workload was evicted for one (reason, underlying cause)."""

    reason: str
    underlying_cause: str
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


class WorkloadStatus(OpenModel):
    """WorkloadStatus is what the controller decided about a Workload."""

    conditions: list[Condition] | None = Field(
        default=None, max_length=16, json_schema_extra=list_map("type")
    )
    admission: Admission | None = None
    requeue_state: RequeueState | None = None
    scheduling_stats: SchedulingStats | None = None
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


class Workload(KueueObject):
    """Workload is the Schema for the workloads API."""

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
    spec: WorkloadSpec
    status: WorkloadStatus | None = None
