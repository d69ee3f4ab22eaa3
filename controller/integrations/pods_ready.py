"""The Workload's `PodsReady` condition, as Kueue's job side computes it (pure, no I/O).

Kueue's jobframework reconciler (`generatePodsReadyCondition`), with `waitForPodsReady`
configured, keeps one condition on every Workload of a job it manages:

- not admitted (pending, or evicted and requeued) → False `WaitForStart`;
- admitted and the pods ready → True `Started`, or `Recovered` when the condition was
  `WaitForRecovery` or `Recovered`;
- admitted, pods not ready, and the condition was True → False `WaitForRecovery`, and it
  stays `WaitForRecovery` until the pods are ready again;
- admitted, pods not ready otherwise → False `WaitForStart`.

It is written only when its status or reason changes (`HasConditionWithTypeAndReason`),
as a server-side apply of that one condition (see `workload_writes.apply_pods_ready`),
with `lastTransitionTime` = the time of the write. The waitForPodsReady timers read it.

Readiness: a Job's pods are ready when `succeeded + ready` (plus succeeded pods the Job
controller has not counted yet) reaches `min(parallelism, completions)` (Kueue's
`Job.PodsReady`); a unit of pods when as many of its pods as the admission allows are
Ready or Succeeded (pods being deleted do not count).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from api import workload_status
from api.constants import PodsReadyReason, WorkloadConditionType

NOT_READY_MESSAGE: Final = "Not all pods are ready or succeeded"
WAITING_FOR_RECOVERY_MESSAGE: Final = "At least one pod has failed, waiting for recovery"
READY_MESSAGE: Final = "All pods reached readiness and the workload is running"

PODS_READY: Final = WorkloadConditionType.PODS_READY


@dataclass(frozen=True, slots=True)
class PodsReadyCondition:
    """The PodsReady condition a Workload should have."""

    status: bool
    reason: str
    message: str

    @property
    def first_start(self) -> bool:
        """True `Started`: the pods became ready for the first time since the admission
        (Kueue observes the ready wait-time histograms only then, not on `Recovered`)."""
        return self.status and self.reason == PodsReadyReason.STARTED


def _not_ready(reason: str) -> PodsReadyCondition:
    message = (
        WAITING_FOR_RECOVERY_MESSAGE
        if reason == PodsReadyReason.WAIT_FOR_RECOVERY
        else NOT_READY_MESSAGE
    )
    return PodsReadyCondition(False, reason, message)


def desired(workload: Mapping[str, Any], pods_ready: bool) -> PodsReadyCondition:
    """The condition the Workload should carry, given whether its pods are ready now."""
    if not workload_status.is_admitted(workload):
        return _not_ready(PodsReadyReason.WAIT_FOR_START)
    current = workload_status.condition(workload, PODS_READY)
    reason = (current or {}).get("reason")
    if pods_ready:
        recovering = reason in (PodsReadyReason.WAIT_FOR_RECOVERY, PodsReadyReason.RECOVERED)
        return PodsReadyCondition(
            True,
            PodsReadyReason.RECOVERED if recovering else PodsReadyReason.STARTED,
            READY_MESSAGE,
        )
    if current is not None and (
        current.get("status") == "True" or reason == PodsReadyReason.WAIT_FOR_RECOVERY
    ):
        return _not_ready(PodsReadyReason.WAIT_FOR_RECOVERY)
    return _not_ready(PodsReadyReason.WAIT_FOR_START)


def unchanged(workload: Mapping[str, Any], wanted: PodsReadyCondition) -> bool:
    """The Workload already has a PodsReady condition of that status and reason (the
    message and transition time are not compared, as in Kueue)."""
    current = workload_status.condition(workload, PODS_READY)
    return (
        current is not None
        and current.get("status") == ("True" if wanted.status else "False")
        and current.get("reason") == wanted.reason
    )


def condition_body(
    workload: Mapping[str, Any], wanted: PodsReadyCondition, now: float
) -> dict[str, Any]:
    """The condition as written: transition time now, the Workload's generation."""
    body: dict[str, Any] = {
        "type": PODS_READY.value,
        "status": "True" if wanted.status else "False",
        "reason": wanted.reason,
        "message": wanted.message,
        "lastTransitionTime": workload_status.rfc3339(now),
    }
    generation = (workload.get("metadata") or {}).get("generation")
    if isinstance(generation, int):
        body["observedGeneration"] = generation
    return body


# -- readiness -----------------------------------------------------------------------------


def job_pods_count(job: Mapping[str, Any]) -> int:
    """min(parallelism, completions): how many pods a Job runs at once (Kueue's
    `podsCount`; parallelism defaults to 1)."""
    spec = job.get("spec") or {}
    parallelism = spec.get("parallelism")
    count = int(parallelism) if parallelism is not None else 1
    completions = spec.get("completions")
    if completions is not None and int(completions) < count:
        count = int(completions)
    return count


def job_pods_ready(job: Mapping[str, Any]) -> bool:
    """succeeded + ready (+ succeeded pods not yet counted) ≥ the Job's pod count."""
    status = job.get("status") or {}
    uncounted = len((status.get("uncountedTerminatedPods") or {}).get("succeeded") or ())
    done = int(status.get("succeeded") or 0) + int(status.get("ready") or 0) + uncounted
    return done >= job_pods_count(job)


def pod_ready(pod: Mapping[str, Any]) -> bool:
    """The pod's `Ready` condition is True."""
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or ()
    )


def unit_pods_ready(pods: Iterable[Mapping[str, Any]], needed: int) -> bool:
    """At least `needed` of the pods (those not being deleted) are Ready or Succeeded."""
    done = sum(
        1
        for pod in pods
        if not (pod.get("metadata") or {}).get("deletionTimestamp")
        and ((pod.get("status") or {}).get("phase") == "Succeeded" or pod_ready(pod))
    )
    return done >= max(1, needed)


# -- the wait-time histograms --------------------------------------------------------------


def _epoch(text: object) -> float | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def ready_wait_times(workload: Mapping[str, Any], now: float) -> tuple[float, float] | None:
    """(queued until ready, admitted until ready) in seconds, when the pods became ready at
    `now`: from the Workload's creation or its last `Requeued` transition (Kueue's
    `QueuedWaitTime`), and from its `Admitted` transition. None without an admission time."""
    admitted = workload_status.condition(workload, WorkloadConditionType.ADMITTED)
    admitted_at = _epoch((admitted or {}).get("lastTransitionTime"))
    if admitted_at is None:
        return None
    queued_at = _epoch((workload.get("metadata") or {}).get("creationTimestamp"))
    requeued = workload_status.condition(workload, WorkloadConditionType.REQUEUED)
    if requeued is not None:
        queued_at = _epoch(requeued.get("lastTransitionTime")) or queued_at
    queued = max(0.0, now - queued_at) if queued_at is not None else 0.0
    return queued, max(0.0, now - admitted_at)


__all__ = [
    "NOT_READY_MESSAGE",
    "READY_MESSAGE",
    "WAITING_FOR_RECOVERY_MESSAGE",
    "PodsReadyCondition",
    "condition_body",
    "desired",
    "job_pods_count",
    "job_pods_ready",
    "pod_ready",
    "ready_wait_times",
    "unchanged",
    "unit_pods_ready",
]
