"""Why a Workload is pending: one owner for each answer (why a queue admits nothing is the
object store's: `ObjectStore.cluster_queue_inactive`, `local_queue_inactive`).

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

from api.constants import QuotaReservedReason, StopPolicy
from controller.core.after_admission import awaits_backoff_finished
from controller.core.cache.records import Phase
from controller.core.decisions import Inadmissible
from controller.core.model.workloads import WorkloadKey
from controller.core.state import ClusterState

__all__ = [
    "ADMISSION_GATED",
    "CHECKS_FAILED",
    "MISCONFIGURED",
    "Unqueued",
    "unqueued_decisions",
    "unqueued_reason",
    "why_pending",
]


@dataclass(frozen=True, slots=True)
class Unqueued:
    """Why a pending Workload is in no active queue: Kueue's `QuotaReserved=False` reason
    (Deactivated, Misconfigured, Suspended) and message (Kueue's text, with detail)."""

    reason: str
    message: str


MISCONFIGURED: Final = "Misconfigured"
"""Kueue's `QuotaReserved=False` reason for a Workload that fails its checks."""
CHECKS_FAILED: Final = "The workload has failed admission checks"
"""Kueue's message for a pending Workload whose checks failed before its reservation."""
ADMISSION_GATED: Final = "AdmissionGated"
"""Kueue's `QuotaReserved=False` reason for a Workload held by admission gates."""


def unqueued_reason(
    state: ClusterState,
    key: WorkloadKey,
    by_local_queue: dict[str, Unqueued | None] | None = None,
) -> Unqueued | None:
    """Why a pending Workload is in no active queue, as Kueue's workload controller says
    it (`getQueueBlocker`): deactivated, its LocalQueue or ClusterQueue missing, or one of
    them stopped or inactive. None when it waits in an active queue, in eviction backoff
    or for its victims (the cycle, the backoff or the preemption explain it), or on hold
    (its QuotaReserved=False OnHold says why). What its queues say is kept in
    `by_local_queue` when given (one pass over many Workloads)."""
    record = state.cache.records[key]
    workload = record.workload
    if not workload.active:
        return Unqueued("Deactivated", "The workload is deactivated")
    if workload.on_hold:
        return None  # its QuotaReserved=False OnHold, the job side's, says why
    if record.phase is Phase.NOMINATED or key in state.queues.backoff:
        return None
    lq_key = state.cache.local_queue_key(key)
    if by_local_queue is None:
        blocker = _queue_blocker(state, lq_key, workload.queue_name)
    else:
        if lq_key not in by_local_queue:
            by_local_queue[lq_key] = _queue_blocker(state, lq_key, workload.queue_name)
        blocker = by_local_queue[lq_key]
    if blocker is not None:
        return blocker
    if workload.checks_failed:  # Kueue's scheduler: before the Workload's own checks
        return Unqueued(QuotaReservedReason.PENDING_EVALUATION, CHECKS_FAILED)
    # Kueue's order (`resolveGranularUnadmittedQuotaReservedCondition`): the queues first,
    # then the Workload's own checks, then its admission gates.
    if workload.invalid is not None:
        return Unqueued(MISCONFIGURED, workload.invalid)
    if workload.admission_gated_by:
        return Unqueued(ADMISSION_GATED, f"Admission is gated by: {workload.admission_gated_by}")
    return None


def _queue_blocker(state: ClusterState, lq_key: str, queue: str) -> Unqueued | None:
    lq = state.objects.local_queues.get(lq_key)
    if lq is None:
        return Unqueued("Misconfigured", f"LocalQueue {queue} doesn't exist")
    if lq.invalid is not None:
        return Unqueued("Suspended", f"LocalQueue {queue} is inactive: {lq.invalid}")
    if lq.stop_policy is not StopPolicy.NONE:
        detail = f"stopped ({lq.stop_policy.value})"
        return Unqueued("Suspended", f"LocalQueue {queue} is inactive: {detail}")
    if lq.cluster_queue not in state.objects.cluster_queues:
        return Unqueued("Misconfigured", f"ClusterQueue {lq.cluster_queue} doesn't exist")
    inactive = state.objects.cluster_queue_inactive(lq.cluster_queue)
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
        lq_key: _queue_blocker(state, lq_key, lq_key.split("/", 1)[1])
        for lq_key in state.index.live_in
    }
    blocked = any(blocker is not None for blocker in by_local_queue.values())
    candidates = state.pending() if blocked else state.pending(among=state.index.held_back)
    decisions = []
    for key in candidates:
        if key in skip or key in state.holds.nominated:
            continue
        unqueued = unqueued_reason(state, key, by_local_queue)
        if unqueued is not None:
            decisions.append(
                Inadmissible(key, state.queues.queued_in(key), unqueued.message, unqueued.reason)
            )
    return decisions


def why_pending(state: ClusterState, key: WorkloadKey) -> str:
    """The best available explanation of why a pending Workload is not admitted."""
    record = state.cache.records.get(key)
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
    at = state.queues.backoff.requeue_at(key)
    if at is not None:
        until = datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z")
        return f"waiting for eviction backoff until {until}"
    if awaits_backoff_finished(record.workload):
        return "waiting for the PodsReadyTimeout backoff to be marked finished (Requeued)"
    return "waiting in queue behind higher-ordered Workloads"
