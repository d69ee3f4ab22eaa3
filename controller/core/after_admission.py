"""What happens to a Workload after admission as time passes (Kueue's workload controller:
`admittedNotReadyWorkload`, `reconcileNotReadyTimeout`, `triggerDeactivation`,
`UpdateRequeueState` and `reconcileMaxExecutionTime`).

- **waitForPodsReady**: an admitted Workload that is not PodsReady `timeout` after its
  admission (PodsReady absent, or False with reason WaitForStart/PodsReady), or
  `recoveryTimeout` after PodsReady turned False with reason WaitForRecovery, is evicted
  with reason PodsReadyTimeout; its `requeueState.count` goes up by one and it waits until
  `requeueAt` = now + base·2^(count−1) (capped, with Kueue's jitter) before it competes
  again. Once count+1 would pass `backoffLimitCount` it is deactivated instead
  (DeactivationTarget, reason RequeuingLimitExceeded).
- **maximumExecutionTimeSeconds**: an admitted Workload whose admitted time plus
  `accumulatedPastExecutionTimeSeconds` reaches the limit is deactivated
  (DeactivationTarget, reason MaximumExecutionTimeExceeded).
- **Backoff finished**: a pending Workload whose PodsReadyTimeout backoff has passed gets
  Requeued=True with reason BackoffFinished; until then (Requeued=False, reason
  PodsReadyTimeout) it does not compete (`awaits_backoff_finished`, read by the state).
- **Restarted**: a Workload released with Requeued=False because it was deactivated or its
  ClusterQueue or LocalQueue was stopped gets Requeued=True once that is over, with
  Kueue's reason: Reactivated (`spec.active` true again), ClusterQueueRestarted,
  LocalQueueRestarted.

A deactivation is two writes, as in Kueue: the DeactivationTarget condition and
`spec.active: false`; the Workload is then evicted with reason Deactivated and the
condition's reason as underlying cause (`ClusterState.upsert_workload`).

Pure: Workloads and the time in, actions and the next deadline out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final

from controller.core.model.workloads import Workload, WorkloadKey

__all__ = [
    "JITTER_FACTOR",
    "Action",
    "AfterAdmission",
    "BackoffFinished",
    "Deactivate",
    "PodsReadyPolicy",
    "PodsReadyTimeout",
    "QueuesRunning",
    "Requeue",
    "admitted_at",
    "awaits_backoff_finished",
    "backoff_seconds",
    "due",
    "execution_deadline",
    "may_come_due",
    "not_ready_deadline",
]

JITTER_FACTOR: Final = 0.0001
"""Kueue's requeuing jitter: each delay is d·(1 + U·0.0001), U uniform in [0, 1)."""

_UNCAPPED: Final = (2**63 - 1) / 2 / 1e9
"""Kueue's cap when backoffMaxSeconds is 0: half of the largest Go duration, in seconds."""

WAIT_FOR_START: Final = "WaitForStart"
WAIT_FOR_RECOVERY: Final = "WaitForRecovery"
REQUEUING_LIMIT_EXCEEDED: Final = "RequeuingLimitExceeded"
MAXIMUM_EXECUTION_TIME_EXCEEDED: Final = "MaximumExecutionTimeExceeded"
PODS_READY_TIMEOUT: Final = "PodsReadyTimeout"
ADMISSION_CHECK: Final = "AdmissionCheck"
_BACKOFF_REASONS: Final = (PODS_READY_TIMEOUT, ADMISSION_CHECK)


@dataclass(frozen=True, slots=True)
class PodsReadyPolicy:
    """The configured waitForPodsReady (seconds). `recovery_timeout` None = no recovery
    timeout; `backoff_limit_count` None = requeue forever; `backoff_max_seconds` 0 = no cap."""

    timeout: float
    recovery_timeout: float | None = None
    backoff_limit_count: int | None = None
    backoff_base_seconds: int = 60
    backoff_max_seconds: int = 3600


@dataclass(frozen=True, slots=True)
class PodsReadyTimeout:
    """Evict with reason PodsReadyTimeout and record the requeue state."""

    workload_key: WorkloadKey
    cluster_queue: str
    underlying_cause: str  # WaitForStart | WaitForRecovery
    message: str
    requeue_count: int
    requeue_at: float


@dataclass(frozen=True, slots=True)
class Deactivate:
    """Set DeactivationTarget=True (`reason`, `message`), then `spec.active: false`.
    `clear_accumulated`: drop accumulatedPastExecutionTimeSeconds (maximum execution time)."""

    workload_key: WorkloadKey
    reason: str
    message: str
    clear_accumulated: bool = False
    maximum_execution_time_seconds: int | None = None


@dataclass(frozen=True, slots=True)
class BackoffFinished:
    """Requeued=True (BackoffFinished) and requeueAt cleared: the backoff has passed."""

    workload_key: WorkloadKey


@dataclass(frozen=True, slots=True)
class Requeue:
    """Requeued=True with `reason` and `message`: what released the Workload with
    Requeued=False (a deactivation, a stopped queue) is over."""

    workload_key: WorkloadKey
    reason: str
    message: str


Action = PodsReadyTimeout | Deactivate | BackoffFinished | Requeue

QueuesRunning = Callable[[Workload], tuple[bool, bool]]
"""For a Workload: whether its LocalQueue, and its ClusterQueue, exist and are not stopped."""

_RESTARTED: Final = {
    "Deactivated": ("Reactivated", "The workload was reactivated"),
    "ClusterQueueStopped": (
        "ClusterQueueRestarted",
        "The ClusterQueue was restarted after being stopped",
    ),
    "LocalQueueStopped": (
        "LocalQueueRestarted",
        "The LocalQueue was restarted after being stopped",
    ),
}


def _restarted(workload: Workload, running: QueuesRunning | None) -> Requeue | None:
    """Kueue's workload controller: Requeued=False (Deactivated) on an active Workload →
    Reactivated; (ClusterQueueStopped / LocalQueueStopped) once the queue runs again →
    ClusterQueueRestarted / LocalQueueRestarted."""
    requeued = workload.requeued  # whether it holds quota again does not matter (Kueue)
    if requeued is None or requeued.status or requeued.reason not in _RESTARTED:
        return None
    reason, message = _RESTARTED[requeued.reason]
    if requeued.reason == "Deactivated":
        over = workload.active
    elif running is None:
        return None
    else:
        local_queue, cluster_queue = running(workload)
        over = local_queue if requeued.reason == "LocalQueueStopped" else cluster_queue
    return Requeue(workload.key, reason, message) if over else None


@dataclass(frozen=True, slots=True)
class AfterAdmission:
    actions: tuple[Action, ...] = ()
    next_deadline: float | None = None  # the earliest deadline not yet reached


def backoff_seconds(count: int, base: int, maximum: int, jitter: float = 0.0) -> float:
    """Kueue's delay before the `count`-th requeue: base·2^(count−1), capped at `maximum`
    (0 = no cap), times (1 + jitter·JITTER_FACTOR); `jitter` is uniform in [0, 1)."""
    if not 0.0 <= jitter < 1.0:
        raise ValueError(f"jitter must be in [0, 1), not {jitter!r}")
    cap = float(maximum) if maximum > 0 else _UNCAPPED
    # Exact integers: base·2^(n−1) stops growing at the cap (base 0 stays 0, as in Kueue).
    delay = min(base * 2 ** min(max(0, count - 1), 64), cap)
    return float(delay) * (1.0 + jitter * JITTER_FACTOR)


def admitted_at(workload: Workload) -> float | None:
    """When the Workload was admitted (Kueue times PodsReady and the maximum execution
    time from the Admitted condition): with admission checks, once they all passed; without
    them, at its reservation. None while it is not admitted."""
    if workload.admission_checks:
        return workload.admitted_at if workload.admitted else None
    return workload.quota_reserved_at


def _evictable(workload: Workload) -> bool:
    return (
        workload.admission is not None
        and workload.active
        and not workload.finished
        and admitted_at(workload) is not None
    )


def not_ready_deadline(workload: Workload, policy: PodsReadyPolicy) -> tuple[str, float] | None:
    """(underlying cause, when the PodsReady timeout fires) for an admitted Workload that
    is not PodsReady; None when no timeout runs (not admitted, ready, evicted, inactive)."""
    if not _evictable(workload) or workload.evicted:
        return None
    ready = workload.pods_ready
    if ready is not None and ready.status:
        return None
    if ready is None or ready.reason in (WAIT_FOR_START, "PodsReady"):
        since = admitted_at(workload)
        assert since is not None
        return WAIT_FOR_START, since + policy.timeout
    if ready.reason == WAIT_FOR_RECOVERY and policy.recovery_timeout is not None:
        return WAIT_FOR_RECOVERY, ready.last_transition + policy.recovery_timeout
    return None


def execution_deadline(workload: Workload) -> float | None:
    """When an admitted Workload reaches spec.maximumExecutionTimeSeconds (admitted time
    plus accumulatedPastExecutionTimeSeconds); None without a limit or an admission, or
    once it is marked for deactivation."""
    limit = workload.maximum_execution_time_seconds
    if limit is None or not _evictable(workload) or workload.deactivation_target is not None:
        return None
    since = admitted_at(workload)
    assert since is not None
    return since + limit - workload.accumulated_past_execution_time_seconds


def awaits_backoff_finished(workload: Workload) -> bool:
    """Requeued=False after a PodsReadyTimeout or AdmissionCheck eviction: the Workload does
    not compete until Requeued=True (BackoffFinished) is written (Kueue's
    `backoffWaitingTimeExpired`, and its workload controller for both reasons)."""
    requeued = workload.requeued
    return requeued is not None and not requeued.status and requeued.reason in _BACKOFF_REASONS


def may_come_due(workload: Workload) -> bool:
    """Whether anything can come due for the Workload as it stands: it has an admission, a
    requeueAt, or Requeued=False. `due` passes over the others; the state keeps the live
    Workloads that may in `ClusterState.timed`, so the timers need not read every pending one."""
    requeued = workload.requeued
    return (
        workload.admission is not None
        or workload.requeue_at is not None
        or (requeued is not None and not requeued.status)
    )


def _backoff_finished(workload: Workload, now: float) -> bool:
    return (
        workload.admission is None
        and workload.active
        and not workload.finished
        and awaits_backoff_finished(workload)
        and (workload.requeue_at is None or workload.requeue_at <= now)
    )


def due(
    workloads: Iterable[Workload],
    policy: PodsReadyPolicy | None,
    now: float,
    jitter: float = 0.0,
    running: QueuesRunning | None = None,
) -> AfterAdmission:
    """The actions due at `now` for `workloads`, and the earliest deadline still ahead.
    `policy` None: waitForPodsReady is off (only maximum execution time applies).
    `running` says whether a Workload's queues run (None: no queue restart is reported)."""
    actions: list[Action] = []
    ahead: float | None = None

    def later(at: float) -> None:
        nonlocal ahead
        ahead = at if ahead is None else min(ahead, at)

    for workload in workloads:
        if not may_come_due(workload):
            continue  # nothing can be due: no admission, no backoff, no Requeued=False
        key = workload.key
        limit_at = execution_deadline(workload)
        if limit_at is not None:
            if limit_at <= now:
                actions.append(
                    Deactivate(
                        key,
                        MAXIMUM_EXECUTION_TIME_EXCEEDED,
                        "exceeding the maximum execution time",
                        clear_accumulated=True,
                        maximum_execution_time_seconds=workload.maximum_execution_time_seconds,
                    )
                )
                continue
            later(limit_at)
        restarted = _restarted(workload, running)
        if restarted is not None:
            actions.append(restarted)
            continue
        # The end of a backoff is written whatever the configuration (a Workload evicted
        # before waitForPodsReady was turned off must not wait forever).
        if _backoff_finished(workload, now):
            actions.append(BackoffFinished(key))
            continue
        if workload.requeue_at is not None and awaits_backoff_finished(workload):
            later(workload.requeue_at)
        if policy is None:
            continue
        found = not_ready_deadline(workload, policy)
        if found is None:
            continue
        cause, at = found
        if at > now:
            later(at)
            continue
        limit = policy.backoff_limit_count
        if limit is not None and workload.requeue_count + 1 > limit:
            if workload.deactivation_target is None:
                actions.append(
                    Deactivate(
                        key,
                        REQUEUING_LIMIT_EXCEEDED,
                        "exceeding the maximum number of re-queuing retries",
                    )
                )
            continue
        count = workload.requeue_count + 1
        delay = backoff_seconds(
            count, policy.backoff_base_seconds, policy.backoff_max_seconds, jitter
        )
        requeue_at = now + delay
        if workload.requeue_at is not None:  # never moves a later requeueAt earlier
            requeue_at = max(requeue_at, workload.requeue_at)
        assert workload.admission is not None
        actions.append(
            PodsReadyTimeout(
                key,
                workload.admission.cluster_queue,
                cause,
                f"Exceeded the PodsReady timeout {key}",
                count,
                requeue_at,
            )
        )
    return AfterAdmission(tuple(actions), ahead)
