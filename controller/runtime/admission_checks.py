"""The writers of two-phase admission (controller/core/admission_checks.py): a Workload
holding quota in a ClusterQueue with admission checks gets its `status.admissionChecks`
kept to the checks its reservation needs and Admitted=True once all are Ready; a Retry
check evicts it (reason AdmissionCheck, quota released by its owner, the checks reset,
the retry time kept in `requeueState.requeueAt`); a Rejected check deactivates it.

`AdmissionCheckWriter.check(now)` runs from the scheduling loop after each cycle, like the
after-admission timers, and never waits on the network there: it starts one write per
action. It looks only when some ClusterQueue names a check or some Workload holding quota
carries check states, so a cluster without admission checks pays one pass over the
ClusterQueues per second, nothing per Workload.
"""

from __future__ import annotations

import logging
from typing import Any

from api import workload_status
from api.constants import EvictionReason
from api.workload_status import has_quota_reservation, parse_rfc3339, rfc3339
from controller.core.admission_checks import (
    RejectChecks,
    RetryChecks,
    SyncChecks,
    check_actions,
)
from controller.core.after_admission import ADMISSION_CHECK, Deactivate
from controller.core.model.workloads import WorkloadKey
from controller.kube.client import API_ERRORS
from controller.runtime.after_admission import AfterAdmissionWriter
from controller.runtime.context import Context, priority_class_of
from controller.runtime.sync import WorkloadSync

log = logging.getLogger(__name__)

__all__ = ["AdmissionCheckWriter"]


class AdmissionCheckWriter:
    def __init__(self, ctx: Context, sync: WorkloadSync, after: AfterAdmissionWriter) -> None:
        self.ctx = ctx
        self.sync = sync
        self.after = after  # its deactivation write (DeactivationTarget, spec.active)
        self.in_flight: set[WorkloadKey] = set()
        self._checked_at = float("-inf")

    def check(self, now: float, force: bool = False) -> int:
        """Start the writes the check states call for; returns how many were started."""
        if not force and now - self._checked_at < 1.0:
            return 0
        self._checked_at = now
        state = self.ctx.state
        queues = state.objects.cluster_queues
        records = state.cache.records
        any_checks = any(cq.admission_checks for cq in queues.values())
        workloads = [
            records[key].workload
            for key in state.index.timed
            if any_checks or records[key].workload.admission_checks
        ]
        if not workloads:
            return 0
        started = 0
        for action in check_actions(workloads, queues, now):
            key = action.workload_key
            if key in self.in_flight or key in self.sync.in_flight:
                continue
            self.in_flight.add(key)
            started += 1
            if isinstance(action, SyncChecks):
                write = self.write_sync(action, now)
            elif isinstance(action, RetryChecks):
                write = self.write_retry(action, now)
            else:
                write = self.write_rejection(action, now)
            self.ctx.spawn(self._guarded(key, write))
        return started

    async def _guarded(self, key: WorkloadKey, write: Any) -> None:
        try:
            await write
        except API_ERRORS as exc:
            log.warning("admission-check write for %s failed (%s); retried later", key, exc)
        finally:
            self.in_flight.discard(key)
            self._checked_at = float("-inf")
            self.ctx.wake.set()

    async def write_sync(self, action: SyncChecks, now: float) -> None:
        """`status.admissionChecks` kept to the checks, Admitted once all are Ready."""

        def build(wl: dict[str, Any]) -> dict[str, Any] | None:
            if not has_quota_reservation(wl) or workload_status.is_evicted(wl):
                return None
            return workload_status.sync_checks(wl, action.checks, now)

        was_admitted = workload_status.is_admitted(self.sync.body(action.workload_key) or {})
        result = await self.sync.write(action.workload_key, build, "admission-checks")
        if result is None:
            return
        self.sync.apply_event("MODIFIED", result)
        if not was_admitted and workload_status.is_admitted(result):
            await self._record_admitted(result, action.cluster_queue, now)

    async def _record_admitted(self, body: dict[str, Any], cluster_queue: str, now: float) -> None:
        """Kueue's Admitted Event and metrics, with the time since the reservation."""
        ctx = self.ctx
        metrics = ctx.metrics
        labels = (cluster_queue, priority_class_of(body), metrics.role)
        metrics.admitted_workloads.labels(*labels).inc()
        reserved = workload_status.condition(body, "QuotaReserved") or {}
        since = parse_rfc3339(reserved.get("lastTransitionTime"))
        waited = max(0.0, now - since) if since is not None else 0.0
        metrics.admission_checks_wait_time.labels(*labels).observe(waited)
        metrics.local_queue.observe_checks_passed(body, labels[1], metrics.role, waited)
        created = parse_rfc3339((body.get("metadata") or {}).get("creationTimestamp"))
        since_created = max(0.0, now - created) if created is not None else None
        if since_created is not None:
            metrics.admission_wait_time.labels(*labels).observe(since_created)
        metrics.local_queue.observe_admitted(
            body, labels[1], metrics.role, since_created, reserved=False
        )
        metrics.cohort.observe_admitted(ctx.state, cluster_queue, labels[1], metrics.role)
        if ctx.events is not None:
            message = (
                f"Admitted by ClusterQueue {cluster_queue}, wait time since reservation was "
                f"{waited:.0f}s"
            )
            await ctx.events(body, "Normal", "Admitted", message)

    async def write_retry(self, action: RetryChecks, now: float) -> None:
        """Evict with reason AdmissionCheck; the checks go back to Pending and the retry
        time is kept as `requeueState.requeueAt` (the count is the PodsReady backoff's)."""

        def build(wl: dict[str, Any]) -> dict[str, Any] | None:
            if workload_status.is_evicted(wl) or not has_quota_reservation(wl):
                return None
            requeue = None
            if action.requeue_at is not None:
                current = dict((wl.get("status") or {}).get("requeueState") or {})
                requeue = {**current, "requeueAt": rfc3339(action.requeue_at)}
            return workload_status.evict(
                wl, EvictionReason.ADMISSION_CHECK, action.message, now, requeue_state=requeue
            )

        result = await self.sync.write(action.workload_key, build, "evict")
        if result is None:
            return
        self.sync.apply_event("MODIFIED", result)
        metrics = self.ctx.metrics
        labels = (
            action.cluster_queue,
            EvictionReason.ADMISSION_CHECK,
            "",
            priority_class_of(result),
        )
        metrics.evicted_workloads.labels(*labels, metrics.role).inc()
        if self.ctx.events is not None:
            await self.ctx.events(
                result, "Normal", f"EvictedDueTo{EvictionReason.ADMISSION_CHECK}", action.message
            )

    async def write_rejection(self, action: RejectChecks, now: float) -> None:
        """DeactivationTarget=True (AdmissionCheck), then `spec.active: false`; the state
        then evicts it with reason Deactivated (underlying cause AdmissionCheck)."""
        await self.after.write_deactivation(
            Deactivate(action.workload_key, ADMISSION_CHECK, action.message), now
        )
        body = self.sync.body(action.workload_key)
        if body is not None and self.ctx.events is not None:
            await self.ctx.events(
                body, "Warning", "AdmissionCheckRejected", f"Deactivated due to {action.message}"
            )
