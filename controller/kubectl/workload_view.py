"""What a user wants to know about a Workload, read from its API object (a dict). Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from api.constants import PreemptibilitySource
from api.workload_status import (
    condition,
    has_quota_reservation,
    is_admitted,
    is_evicted,
    is_finished,
)
from controller.core.model.from_api import InvalidObject, convert
from controller.core.model.priorities import PriorityClasses, ResolvedPriority
from controller.core.model.workloads import Workload

__all__ = [
    "PENDING",
    "admission_of",
    "cluster_queue_of",
    "condition",
    "describe_preemptibility_source",
    "describe_priority",
    "engine_workload",
    "is_pending",
    "pods_ready_of",
    "priority_value",
    "status_of",
]

PENDING = "Pending"
QUOTA_RESERVED = "QuotaReserved"
ADMITTED = "Admitted"
EVICTED = "Evicted"
FINISHED = "Finished"

_PREEMPTIBILITY_SOURCES = {
    PreemptibilitySource.SPEC: "spec.preemptibility",
    PreemptibilitySource.OWNER_LABEL: "label kai.scheduler/preemptibility on an owner",
    PreemptibilitySource.POD_LABEL: "label kai.scheduler/preemptibility on the pod",
    PreemptibilitySource.PRIORITY_THRESHOLD: "the controller's priority threshold",
    PreemptibilitySource.DEFAULT: "default, as in Kueue",
}


def status_of(obj: Mapping[str, Any]) -> str:
    """Finished, Evicted, Admitted, QuotaReserved or Pending, from the conditions.

    Evicted stays until the Workload is admitted again (the controller resets it then), so
    a preempted Workload waiting in its queue reads Evicted, not Pending."""
    if is_finished(obj):
        return FINISHED
    if is_evicted(obj):
        return EVICTED
    if is_admitted(obj):
        return ADMITTED
    if has_quota_reservation(obj):
        return QUOTA_RESERVED
    return PENDING


def is_pending(obj: Mapping[str, Any]) -> bool:
    """Waiting for quota: neither holding a reservation nor finished."""
    return not is_finished(obj) and not has_quota_reservation(obj)


def admission_of(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """`status.admission` while the Workload holds quota; a stale one left by a writer that
    cleared only QuotaReserved is not an admission (Kueue's rule)."""
    admission = (obj.get("status") or {}).get("admission")
    return admission if admission and has_quota_reservation(obj) else None


def cluster_queue_of(obj: Mapping[str, Any], local_queues: Mapping[str, str]) -> str | None:
    """The admitting ClusterQueue, else the one its LocalQueue (`namespace/name` → CQ) names."""
    admission = admission_of(obj) or {}
    if admission.get("clusterQueue"):
        return str(admission["clusterQueue"])
    meta = obj.get("metadata") or {}
    queue = (obj.get("spec") or {}).get("queueName")
    return local_queues.get(f"{meta.get('namespace')}/{queue}")


def engine_workload(obj: Mapping[str, Any]) -> Workload | None:
    """The engine's view of the Workload, or None when it cannot be read."""
    try:
        converted = convert(obj)
    except InvalidObject:
        return None
    return converted if isinstance(converted, Workload) else None


def priority_value(obj: Mapping[str, Any], classes: PriorityClasses) -> str:
    """The effective priority, resolved like the engine (spec, class, global default, 0)."""
    workload = engine_workload(obj)
    if workload is None:
        spec_priority = (obj.get("spec") or {}).get("priority")
        return "<unknown>" if spec_priority is None else str(spec_priority)
    return str(classes.resolve(workload).value)


def describe_priority(obj: Mapping[str, Any], resolved: ResolvedPriority) -> str:
    """`100 (WorkloadPriorityClass high)`: the value and where it came from."""
    ref = (obj.get("spec") or {}).get("priorityClassRef") or {}
    named = ""
    if ref.get("name"):
        kind = ref.get("kind") or (
            "PriorityClass" if ref.get("group") == "scheduling.k8s.io" else "WorkloadPriorityClass"
        )
        named = f"{kind} {ref['name']}"
    if resolved.source == "spec":
        origin = "spec.priority" + (f", set from {named}" if named else "")
    elif resolved.source in ("workloadPriorityClass", "priorityClass"):
        origin = named
    elif resolved.source == "globalDefault":
        origin = "the globalDefault PriorityClass"
    else:
        origin = "default: no priority or class"
    if named and resolved.source in ("globalDefault", "default"):
        origin += f"; {named} not found"
    return f"{resolved.value} ({origin})"


def describe_preemptibility_source(source: str) -> str:
    try:
        return _PREEMPTIBILITY_SOURCES[PreemptibilitySource(source)]
    except ValueError:
        return source


def pods_ready_of(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """The PodsReady condition of a Workload holding quota, as `describe` shows it: status,
    reason, message and since when (None: not admitted, or the job side keeps no such
    condition because waitForPodsReady is off)."""
    if not has_quota_reservation(obj) or is_finished(obj):
        return None
    found = condition(obj, "PodsReady")
    if found is None:
        return None
    return {
        "status": found.get("status"),
        "reason": found.get("reason") or "",
        "message": found.get("message") or "",
        "since": found.get("lastTransitionTime"),
    }
