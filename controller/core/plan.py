"""What admission cycles decide over a given state, as data: the plan `quotagate plan`
prints and `kubectl quotagate whatif` and `describe` show.

The objects are applied in dependency order (namespaces and priority classes, flavors,
Cohorts, ClusterQueues, LocalQueues, then Workloads); cycles run until nothing changes,
evictions taken as completed (the evicted Workload releases its quota and waits again),
while preemptions are not (their victims keep their quota: the plan says who would wait
for whom). The result lists the Workloads admitted, those that would preempt, the evicted
and the pending with the reason, and with admission fair sharing every LocalQueue's usage.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from controller.core.admission_checks import required_checks
from controller.core.afs.sampling import LocalQueueUsage, local_queue_usages
from controller.core.decisions import Admit, Evict, Preempt
from controller.core.engine import Engine
from controller.core.model.from_api import CoreObject
from controller.core.pending import why_pending
from controller.core.preemption.types import Victim
from controller.core.state import ClusterState
from controller.core.tas.encoding import describe

__all__ = ["plan"]

_APPLY_ORDER = (
    "Namespace",
    "PriorityClass",
    "WorkloadPriorityClass",
    "Topology",
    "Node",
    "ResourceFlavor",
    "AdmissionCheck",
    "Cohort",
    "ClusterQueue",
    "LocalQueue",
    "Workload",
)


def plan(
    objects: Iterable[CoreObject],
    now: float,
    max_cycles: int = 100_000,
    state: ClusterState | None = None,
) -> dict[str, Any]:
    """Build a state from `objects` (on `state`, configured from the controller's
    configuration, or an empty one), run cycles until nothing changes, return the plan."""
    state = state if state is not None else ClusterState()
    ordered = sorted(objects, key=lambda o: _APPLY_ORDER.index(_kind(o)))
    for obj in ordered:
        state.apply(obj)
    admits: dict[str, Admit] = {}
    evictions: dict[str, Evict] = {}
    preempting: dict[str, Preempt] = {}
    for result in Engine(state).until_quiet(now, max_cycles=max_cycles):
        for preempt in result.preempting:  # not completed: the victims keep their quota
            preempting[preempt.preemptor_key] = preempt
        for admit in result.admitted:
            admits[admit.workload_key] = admit
        for evict in result.evicted:
            evictions[evict.workload_key] = evict
            admits.pop(evict.workload_key, None)
            state.release(evict.workload_key, requeue=True)
    pending = []
    for key in sorted(state.pending()):
        if key in preempting:
            continue
        workload = state.cache.workloads[key]
        lq = state.objects.local_queues.get(f"{workload.namespace}/{workload.queue_name}")
        pending.append(
            {
                "workload": key,
                "clusterQueue": state.queues.queued_in(key) or (lq.cluster_queue if lq else None),
                "reason": why_pending(state, key),
            }
        )
    decided: dict[str, Any] = {
        "admitted": [_admitted(admits[key], state) for key in sorted(admits)],
        "preempting": [_preempting(preempting[key], state) for key in sorted(preempting)],
        "pending": pending,
        "evicted": [
            {"workload": e.workload_key, "clusterQueue": e.cluster_queue, "reason": e.reason}
            for e in sorted(evictions.values(), key=lambda e: e.workload_key)
        ],
    }
    usages = local_queue_usages(state.queues, state.objects)
    if usages:
        decided["localQueueUsage"] = [_local_queue_usage(usage) for usage in usages]
    return decided


def _local_queue_usage(usage: LocalQueueUsage) -> dict[str, Any]:
    """Admission fair sharing's record of one LocalQueue at the end of the plan (amounts in
    whole units; `usage` is "+Inf" for a LocalQueue of weight 0)."""
    return {
        "localQueue": usage.local_queue,
        "clusterQueue": usage.cluster_queue,
        "consumed": dict(sorted(usage.consumed.items())),
        "pendingPenalty": dict(sorted(usage.penalty.items())),
        "usage": "+Inf" if math.isinf(usage.usage) else usage.usage,
    }


def _kind(obj: CoreObject) -> str:
    name = type(obj).__name__
    return name if name in _APPLY_ORDER else "Workload"


def _preempting(preempt: Preempt, state: ClusterState) -> dict[str, Any]:
    out = {
        "workload": preempt.preemptor_key,
        "clusterQueue": preempt.cluster_queue,
        "victims": [_victim(v) for v in sorted(preempt.victims, key=lambda v: v.workload_key)],
    }
    partial = [ps for ps in _pod_sets(preempt.admit, state) if "requestedCount" in ps]
    if partial:  # admitted with fewer pods once the victims are gone
        out["podSets"] = [{k: v for k, v in ps.items() if k != "flavors"} for ps in partial]
    return out


def _victim(victim: Victim) -> dict[str, Any]:
    out: dict[str, Any] = {
        "workload": victim.workload_key,
        "clusterQueue": victim.cluster_queue,
        "reason": victim.reason,
        "pods": victim.pods,
    }
    if victim.leaving:
        out["alreadyEvicting"] = True  # waited for; evicted for another reason or preemptor
    return out


def _pod_sets(admit: Admit, state: ClusterState) -> list[dict[str, Any]]:
    """Each pod set's admitted count and flavors, and its `requestedCount` when partial
    admission gave it fewer pods than it asked for."""
    workload = state.cache.workloads.get(admit.workload_key)
    requested = {ps.name: ps.count for ps in workload.pod_sets} if workload else {}
    out = []
    for ps in admit.pod_sets:
        entry: dict[str, Any] = {
            "name": ps.name,
            "count": ps.count,
            "flavors": dict(sorted(ps.flavors.items())),
        }
        if requested.get(ps.name, ps.count) > ps.count:
            entry["requestedCount"] = requested[ps.name]
        if ps.topology_assignment is not None:
            entry["topology"] = describe(ps.topology_assignment)
        out.append(entry)
    return out


def _admitted(admit: Admit, state: ClusterState) -> dict[str, Any]:
    out = {
        "workload": admit.workload_key,
        "clusterQueue": admit.cluster_queue,
        "borrowing": admit.borrowing,
        "podSets": _pod_sets(admit, state),
    }
    cq = state.objects.cluster_queues.get(admit.cluster_queue)
    checks = required_checks(cq.admission_checks, admit.admission) if cq is not None else ()
    if checks:  # quota reserved now; admitted once every check is Ready
        out["admissionChecks"] = list(checks)
    return out
