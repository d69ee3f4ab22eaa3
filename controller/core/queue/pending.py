"""Why a Workload is pending, and why a queue admits nothing: one owner for each answer.

- `cluster_queue_inactive` / `local_queue_inactive`: a queue's `Active=False` reason, as
  Kueue names it (the queue status writer shows it);
- `unqueued_reason`: why a pending Workload is in no active queue, with Kueue's
  `QuotaReserved=False` reason; `unqueued_decisions`: those reasons for every pending
  Workload the cycle never looks at (the controller writes them; the cycle's decisions
  explain the others);
- `why_pending`: the best explanation available for any pending Workload (`plan`,
  `kubectl quotagate describe`).
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from api.constants import StopPolicy
from controller.core.after_admission import awaits_backoff_finished
from controller.core.cache.records import Phase
from controller.core.model.cohorts import invalid_cohort, unsupported_cohort
from controller.core.model.workloads import WorkloadKey
from controller.core.scheduler.decisions import Inadmissible
from controller.core.state import ClusterState

__all__ = [
    "ADMISSION_GATED",
    "INVALID",
    "MISCONFIGURED",
    "UNSUPPORTED_COHORT",
    "Inactive",
    "Unqueued",
    "cluster_queue_inactive",
    "local_queue_inactive",
    "unqueued_decisions",
    "unqueued_reason",
    "why_pending",
]


@dataclass(frozen=True, slots=True)
class Inactive:
    """Why a ClusterQueue or LocalQueue admits nothing now: its `Active=False` reason, as
    Kueue names it (Stopped, FlavorNotFound, AdmissionCheckNotFound,
    ClusterQueueDoesNotExist, ClusterQueueIsInactive), and a message."""

    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Unqueued:
    """Why a pending Workload is in no active queue: Kueue's `QuotaReserved=False` reason
    (Deactivated, Misconfigured, Suspended) and message (Kueue's text, with detail)."""

    reason: str
    message: str


INVALID: Final = "Invalid"
"""quotagate's `Active=False` reason for a queue that Kueue's rules find invalid, or whose
flavor or Cohort they do (an object stored before the validating webhook, or while it was
down): it admits nothing rather than admit by a spec its owner did not write."""
MISCONFIGURED: Final = "Misconfigured"
"""Kueue's `QuotaReserved=False` reason for a Workload that fails its checks."""
ADMISSION_GATED: Final = "AdmissionGated"
"""Kueue's `QuotaReserved=False` reason for a Workload held by admission gates."""

UNSUPPORTED_COHORT: Final = "UnsupportedCohort"
"""quotagate's `Active=False` reason for a ClusterQueue whose tree of Cohorts has a cycle
of parents (controller/core/model/cohorts.py); Kueue makes such queues inactive too."""


def cluster_queue_inactive(state: ClusterState, name: str) -> Inactive | None:
    """Why a ClusterQueue admits nothing now: missing, stopped, a flavor or an admission
    check missing (quotagate runs no admission checks: controller/core/model/unsupported.py),
    or its tree of Cohorts a cycle. Remembered until a queue, flavor or Cohort changes."""
    cache = state.inactive
    if name in cache:
        found: Inactive | None = cache[name]
        return found
    found = cache[name] = _cluster_queue_inactive(state, name)
    return found


def _cluster_queue_inactive(state: ClusterState, name: str) -> Inactive | None:
    cq = state.cluster_queues.get(name)
    if cq is None:
        return Inactive("ClusterQueueDoesNotExist", f"ClusterQueue {name} doesn't exist")
    if cq.invalid is not None:
        return Inactive(INVALID, f"ClusterQueue {cq.name} is inactive: {cq.invalid}")
    if cq.stopped:
        message = f"ClusterQueue {cq.name} is inactive: stopped ({cq.stop_policy.value})"
        return Inactive("Stopped", message)
    missing = sorted({flavor for flavor in cq.flavor_names() if flavor not in state.flavors})
    if missing:
        message = f"ClusterQueue {cq.name} is inactive: flavor {', '.join(missing)} not found"
        return Inactive("FlavorNotFound", message)
    for flavor in dict.fromkeys(cq.flavor_names()):
        problem = state.flavors[flavor].invalid
        if problem is not None:
            message = (
                f"ClusterQueue {cq.name} is inactive: ResourceFlavor {flavor} is invalid: {problem}"
            )
            return Inactive(INVALID, message)
    if cq.admission_checks:
        message = (
            f"ClusterQueue {cq.name} is inactive: admission check "
            f"{', '.join(cq.admission_checks)} not found (quotagate runs no admission "
            "checks and admits nothing without them)"
        )
        return Inactive("AdmissionCheckNotFound", message)
    unsupported = unsupported_cohort(state.cohorts, cq.cohort) if cq.cohort else None
    if unsupported is not None:
        message = f"ClusterQueue {cq.name} is inactive: {unsupported}"
        return Inactive(UNSUPPORTED_COHORT, message)
    invalid = invalid_cohort(state.cohorts, cq.cohort) if cq.cohort else None
    if invalid is not None:
        return Inactive(INVALID, f"ClusterQueue {cq.name} is inactive: {invalid}")
    return None


def local_queue_inactive(state: ClusterState, lq_key: str) -> Inactive | None:
    """Why a LocalQueue (`namespace/name`) admits nothing now: stopped, or its ClusterQueue
    is missing or inactive (Kueue's LocalQueue `Active` condition)."""
    lq = state.local_queues.get(lq_key)
    if lq is None:
        return Inactive("NotFound", f"LocalQueue {lq_key} doesn't exist")
    if lq.invalid is not None:
        return Inactive(INVALID, f"LocalQueue {lq.name} is inactive: {lq.invalid}")
    if lq.stop_policy is not StopPolicy.NONE:
        message = f"LocalQueue {lq.name} is inactive: stopped ({lq.stop_policy.value})"
        return Inactive("Stopped", message)
    inactive = cluster_queue_inactive(state, lq.cluster_queue)
    if inactive is None:
        return None
    if lq.cluster_queue not in state.cluster_queues:
        return Inactive("ClusterQueueDoesNotExist", inactive.message)
    return Inactive("ClusterQueueIsInactive", inactive.message)


def unqueued_reason(
    state: ClusterState,
    key: WorkloadKey,
    by_local_queue: dict[str, Unqueued | None] | None = None,
) -> Unqueued | None:
    """Why a pending Workload is in no active queue, as Kueue's workload controller says
    it (`getQueueBlocker`): deactivated, its LocalQueue or ClusterQueue missing, or one of
    them stopped or inactive. None when it waits in an active queue, in eviction backoff
    or for its victims (the cycle, the backoff or the preemption explain it). What its
    queues say is kept in `by_local_queue` when given (one pass over many Workloads)."""
    record = state.records[key]
    workload = record.workload
    if not workload.active:
        return Unqueued("Deactivated", "The workload is deactivated")
    if record.phase is Phase.NOMINATED or key in state.backoff_queue:
        return None
    lq_key = state.local_queue_key(key)
    if by_local_queue is None:
        blocker = _queue_blocker(state, lq_key, workload.queue_name)
    else:
        if lq_key not in by_local_queue:
            by_local_queue[lq_key] = _queue_blocker(state, lq_key, workload.queue_name)
        blocker = by_local_queue[lq_key]
    if blocker is not None:
        return blocker
    # Kueue's order (`resolveGranularUnadmittedQuotaReservedCondition`): the queues first,
    # then the Workload's own checks, then its admission gates.
    if workload.invalid is not None:
        return Unqueued(MISCONFIGURED, workload.invalid)
    if workload.admission_gated_by:
        return Unqueued(ADMISSION_GATED, f"Admission is gated by: {workload.admission_gated_by}")
    return None


def _queue_blocker(state: ClusterState, lq_key: str, queue: str) -> Unqueued | None:
    lq = state.local_queues.get(lq_key)
    if lq is None:
        return Unqueued("Misconfigured", f"LocalQueue {queue} doesn't exist")
    if lq.invalid is not None:
        return Unqueued("Suspended", f"LocalQueue {queue} is inactive: {lq.invalid}")
    if lq.stop_policy is not StopPolicy.NONE:
        detail = f"stopped ({lq.stop_policy.value})"
        return Unqueued("Suspended", f"LocalQueue {queue} is inactive: {detail}")
    if lq.cluster_queue not in state.cluster_queues:
        return Unqueued("Misconfigured", f"ClusterQueue {lq.cluster_queue} doesn't exist")
    inactive = cluster_queue_inactive(state, lq.cluster_queue)
    if inactive is not None:
        return Unqueued("Suspended", inactive.message)
    return None


def unqueued_decisions(state: ClusterState, skip: Container[WorkloadKey]) -> list[Inadmissible]:
    """The pending reason of every pending Workload in no active queue (`unqueued_reason`),
    as the cycle's own `Inadmissible` decisions are. Workloads in `skip` (being written) and
    nominated preemptors (their reason is the preemption's) are left out. What each
    LocalQueue with Workloads says is found once; while all of them are active only the
    Workloads held back (deactivated, invalid or gated) can have a reason, and only they
    are looked at."""
    by_local_queue: dict[str, Unqueued | None] = {
        lq_key: _queue_blocker(state, lq_key, lq_key.split("/", 1)[1]) for lq_key in state.live_in
    }
    blocked = any(blocker is not None for blocker in by_local_queue.values())
    candidates = state.pending() if blocked else state.pending(among=state.held_back)
    decisions = []
    for key in candidates:
        if key in skip or key in state.nominated:
            continue
        unqueued = unqueued_reason(state, key, by_local_queue)
        if unqueued is not None:
            decisions.append(
                Inadmissible(key, state.queued_in(key), unqueued.message, unqueued.reason)
            )
    return decisions


def why_pending(state: ClusterState, key: WorkloadKey) -> str:
    """The best available explanation of why a pending Workload is not admitted."""
    record = state.records.get(key)
    if record is None:
        return "the engine does not hold this Workload"
    unqueued = unqueued_reason(state, key)
    if unqueued is not None:
        return unqueued.message
    cq = record.queued_in
    if cq is not None:
        tag = state.queues[cq].tag_of(key)  # parked with a refused head like it
        if tag is not None:
            return str(tag)
    if record.reason is not None:
        return record.reason
    at = state.backoff_queue.requeue_at(key)
    if at is not None:
        until = datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z")
        return f"waiting for eviction backoff until {until}"
    if awaits_backoff_finished(record.workload):
        return "waiting for the PodsReadyTimeout backoff to be marked finished (Requeued)"
    return "waiting in queue behind higher-ordered Workloads"
