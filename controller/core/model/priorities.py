"""Priority classes and a Workload's effective priority.

Resolution order (Kueue `ExtractPriority`): `spec.priority` if set; else the class named by
`priorityClassRef` (a kueue.x-k8s.io WorkloadPriorityClass or a scheduling.k8s.io
PriorityClass); else the global-default PriorityClass (lowest value if several); else 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from api.constants import GROUP, SCHEDULING_GROUP, PriorityClassPreemptionPolicy
from controller.core.model.workloads import Workload

__all__ = [
    "KUEUE_GROUP",
    "SCHEDULING_GROUP",
    "PriorityClass",
    "PriorityClasses",
    "ResolvedPriority",
    "WorkloadPriorityClass",
]

KUEUE_GROUP: Final = GROUP


@dataclass(frozen=True, slots=True)
class PriorityClass:
    """scheduling.k8s.io/v1 PriorityClass."""

    name: str
    value: int
    preemption_policy: PriorityClassPreemptionPolicy = (
        PriorityClassPreemptionPolicy.PREEMPT_LOWER_PRIORITY
    )
    global_default: bool = False


@dataclass(frozen=True, slots=True)
class WorkloadPriorityClass:
    name: str
    value: int


@dataclass(frozen=True, slots=True)
class ResolvedPriority:
    value: int
    preemption_policy: PriorityClassPreemptionPolicy
    source: str  # "spec", "workloadPriorityClass", "priorityClass", "globalDefault", "default"


class PriorityClasses:
    """The known classes; add/remove is O(1) except the global-default lookup (few classes)."""

    def __init__(self) -> None:
        self._pod: dict[str, PriorityClass] = {}
        self._workload: dict[str, WorkloadPriorityClass] = {}

    def set_priority_class(self, cls: PriorityClass) -> None:
        self._pod[cls.name] = cls

    def remove_priority_class(self, name: str) -> None:
        self._pod.pop(name, None)

    def workload_class(self, name: str) -> WorkloadPriorityClass | None:
        return self._workload.get(name)

    def pod_class(self, name: str) -> PriorityClass | None:
        return self._pod.get(name)

    def set_workload_priority_class(self, cls: WorkloadPriorityClass) -> None:
        self._workload[cls.name] = cls

    def remove_workload_priority_class(self, name: str) -> None:
        self._workload.pop(name, None)

    def global_default(self) -> PriorityClass | None:
        defaults = [cls for cls in self._pod.values() if cls.global_default]
        return min(defaults, key=lambda cls: (cls.value, cls.name)) if defaults else None

    def resolve(self, workload: Workload) -> ResolvedPriority:
        ref = workload.priority_class
        pod_class = None
        if ref is not None and ref.group == SCHEDULING_GROUP:
            pod_class = self._pod.get(ref.name)
        policy = (
            pod_class.preemption_policy
            if pod_class
            else PriorityClassPreemptionPolicy.PREEMPT_LOWER_PRIORITY
        )
        if workload.priority is not None:
            return ResolvedPriority(workload.priority, policy, "spec")
        if ref is not None:
            if ref.group == KUEUE_GROUP:
                wpc = self._workload.get(ref.name)
                if wpc is not None:
                    return ResolvedPriority(wpc.value, policy, "workloadPriorityClass")
            elif pod_class is not None:
                return ResolvedPriority(pod_class.value, policy, "priorityClass")
        default = self.global_default()
        if default is not None:
            return ResolvedPriority(default.value, default.preemption_policy, "globalDefault")
        return ResolvedPriority(0, policy, "default")
