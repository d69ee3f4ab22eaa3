"""The writers of the after-admission timers (controller/core/after_admission.py):
PodsReadyTimeout evictions with their requeue state, deactivations (DeactivationTarget,
then `spec.active: false`), the end of a requeue backoff, and Requeued=True once a
deactivated Workload is active again or its stopped queue runs again.

`AfterAdmissionWriter.check(now)` runs from the scheduling loop, which wakes at least
once a second; it asks `core` at most once a second (or sooner when a deadline it knows
of has come) and starts one write per due action. A Workload with a write in flight gets
no second one; when the write lands, its echo updates the state and the timers see the
new status (evicted, marked, or active: false), so nothing is issued twice.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from typing import Any

from api import workload_status
from api.constants import EvictionReason, StopPolicy
from api.workload_status import has_quota_reservation, rfc3339
from controller.config import WaitForPodsReady
from controller.core.after_admission import (
    MAXIMUM_EXECUTION_TIME_EXCEEDED,
    BackoffFinished,
    Deactivate,
    PodsReadyPolicy,
    PodsReadyTimeout,
    Requeue,
    due,
)
from controller.core.model.workloads import Workload, WorkloadKey
from controller.kube.client import API_ERRORS
from controller.runtime.context import Context, priority_class_of
from controller.runtime.sync import WorkloadSync

log = logging.getLogger(__name__)

__all__ = ["AfterAdmissionWriter", "pods_ready_policy"]


def pods_ready_policy(config: WaitForPodsReady | None) -> PodsReadyPolicy | None:
    """The engine's policy for a configured waitForPodsReady (None: off). recoveryTimeout
    unset means the timeout; 0s turns it off (Kueue's rules)."""
    if config is None or not config.enable:
        return None
    recovery = config.timeout if config.recovery_timeout is None else config.recovery_timeout
    strategy = config.requeuing_strategy
    return PodsReadyPolicy(
        timeout=config.timeout,
        recovery_timeout=recovery if recovery > 0 else None,
        backoff_limit_count=strategy.backoff_limit_count,
        backoff_base_seconds=strategy.backoff_base_seconds,
        backoff_max_seconds=strategy.backoff_max_seconds,
    )


class AfterAdmissionWriter:
    def __init__(
        self,
        ctx: Context,
        sync: WorkloadSync,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.ctx = ctx
        self.sync = sync
        self.policy = pods_ready_policy(ctx.config.wait_for_pods_ready)
        self.jitter = jitter
        self.in_flight: set[WorkloadKey] = set()
        self._checked_at = float("-inf")
        self._next_deadline: float | None = None

    def check(self, now: float) -> int:
        """Start the writes of the actions due at `now`; returns how many were started."""
        deadline = self._next_deadline
        if now - self._checked_at < 1.0 and (deadline is None or now < deadline):
            return 0
        self._checked_at = now
        state = self.ctx.state
        # Only the unfinished that may have something due (`state.index.timed`: admitted, in a
        # backoff, or Requeued=False): nothing is due for a finished Workload (Kueue's
        # workload controller returns early on one), most of a long run's are finished, and
        # most of the rest are pending with no timer.
        records = state.cache.records
        workloads = (records[key].workload for key in state.index.timed)
        result = due(workloads, self.policy, now, self.jitter(), self._running)
        self._next_deadline = result.next_deadline
        started = 0
        for action in result.actions:
            key = action.workload_key
            if key in self.in_flight or key in self.sync.in_flight:
                continue
            self.in_flight.add(key)
            started += 1
            if isinstance(action, PodsReadyTimeout):
                self.ctx.spawn(self._guarded(key, self.write_timeout(action, now)))
            elif isinstance(action, Deactivate):
                self.ctx.spawn(self._guarded(key, self.write_deactivation(action, now)))
            elif isinstance(action, Requeue):
                self.ctx.spawn(self._guarded(key, self.write_requeued(action, now)))
            else:
                self.ctx.spawn(self._guarded(key, self.write_backoff_finished(action, now)))
        return started

    async def _guarded(self, key: WorkloadKey, write: Any) -> None:
        try:
            await write
        except API_ERRORS as exc:
            log.warning("after-admission write for %s failed (%s); retried later", key, exc)
        finally:
            self.in_flight.discard(key)
            self._next_deadline = None  # look again at the next check
            self._checked_at = float("-inf")
            self.ctx.wake.set()

    async def write_timeout(self, action: PodsReadyTimeout, now: float) -> None:
        """Evict for PodsReadyTimeout with the requeue count and time (Kueue's
        `reconcileNotReadyTimeout` with `UpdateRequeueState`)."""
        requeue = {"count": action.requeue_count, "requeueAt": rfc3339(action.requeue_at)}

        def build(wl: dict[str, Any]) -> dict[str, Any] | None:
            if (
                workload_status.is_evicted(wl)
                or workload_status.is_finished(wl)
                or not has_quota_reservation(wl)
                or workload_status.is_true(wl, "PodsReady")
            ):
                return None
            return workload_status.evict(
                wl,
                EvictionReason.PODS_READY_TIMEOUT,
                action.message,
                now,
                underlying_cause=action.underlying_cause,
                requeue_state=requeue,
            )

        result = await self.sync.write(action.workload_key, build, "evict")
        if result is None:
            return
        self.sync.apply_event("MODIFIED", result)
        await self._report_eviction(
            result, action.cluster_queue, EvictionReason.PODS_READY_TIMEOUT, action
        )

    async def _report_eviction(
        self, body: dict[str, Any], cluster_queue: str, reason: str, action: PodsReadyTimeout
    ) -> None:
        ctx = self.ctx
        metrics = ctx.metrics
        labels = (cluster_queue, reason, action.underlying_cause, priority_class_of(body))
        metrics.evicted_workloads.labels(*labels, metrics.role).inc()
        stats = (body.get("status") or {}).get("schedulingStats") or {}
        if any(
            e.get("reason") == reason
            and e.get("underlyingCause", "") == action.underlying_cause
            and e.get("count") == 1
            for e in stats.get("evictions") or ()
        ):
            metrics.evicted_workloads_once.labels(*labels, metrics.role).inc()
        if ctx.events is not None:
            await ctx.events(body, "Normal", f"EvictedDueTo{reason}", action.message)

    async def write_deactivation(self, action: Deactivate, now: float) -> None:
        """DeactivationTarget=True, then `spec.active: false`; the state then evicts the
        Workload with reason Deactivated and the target's reason as underlying cause."""
        key = action.workload_key

        def build(wl: dict[str, Any]) -> dict[str, Any] | None:
            if workload_status.is_true(wl, workload_status.DEACTIVATION_TARGET):
                return None
            return workload_status.set_deactivation_target(
                wl, action.reason, action.message, now, action.clear_accumulated
            )

        marked = await self.sync.write(key, build, "deactivation-target")
        if marked is not None:
            self.sync.apply_event("MODIFIED", marked)
        body = marked or self.sync.body(key)
        if body is None:
            return
        meta = body.get("metadata") or {}
        if (body.get("spec") or {}).get("active") is False:
            return
        async with self.ctx.writes.decision():
            result = await self.ctx.api.deactivate_workload(
                str(meta.get("namespace")), str(meta.get("name")), meta.get("uid")
            )
        self.ctx.metrics.api_writes.labels("deactivate", "ok").inc()
        self.sync.apply_event("MODIFIED", result)
        if self.ctx.events is not None and action.reason == MAXIMUM_EXECUTION_TIME_EXCEEDED:
            await self.ctx.events(
                result,
                "Warning",
                MAXIMUM_EXECUTION_TIME_EXCEEDED,
                f"The maximum execution time ({action.maximum_execution_time_seconds}s) exceeded",
            )

    def _running(self, workload: Workload) -> tuple[bool, bool]:
        """Whether the Workload's LocalQueue, and its ClusterQueue, exist and run."""
        state = self.ctx.state
        lq = state.objects.local_queues.get(f"{workload.namespace}/{workload.queue_name}")
        if lq is None:
            return False, False
        cq = state.objects.cluster_queues.get(lq.cluster_queue)
        return (
            lq.stop_policy is StopPolicy.NONE,
            cq is not None and cq.stop_policy is StopPolicy.NONE,
        )

    async def write_requeued(self, action: Requeue, now: float) -> None:
        """Requeued=True (Reactivated, ClusterQueueRestarted, LocalQueueRestarted)."""

        def build(wl: dict[str, Any]) -> dict[str, Any] | None:
            if workload_status.is_true(wl, "Requeued"):
                return None
            return workload_status.mark_requeued(wl, action.reason, action.message, now)

        result = await self.sync.write(action.workload_key, build, "requeued")
        if result is not None:
            self.sync.apply_event("MODIFIED", result)

    async def write_backoff_finished(self, action: BackoffFinished, now: float) -> None:
        def build(wl: dict[str, Any]) -> dict[str, Any] | None:
            if has_quota_reservation(wl) or workload_status.is_true(wl, "Requeued"):
                return None
            return workload_status.finish_backoff(wl, now)

        result = await self.sync.write(action.workload_key, build, "backoff-finished")
        if result is not None:
            self.sync.apply_event("MODIFIED", result)
