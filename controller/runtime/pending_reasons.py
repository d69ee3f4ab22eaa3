"""Pending reasons and resolvedPreemptibility: information, written off the decision path.

Admissions and evictions are decisions: they may take any of the `write_parallelism`
slots. Pending reasons and resolvedPreemptibility are information: they wait in a
de-duplicating queue worked by one writer per information slot (`worker`), which share the
information slots (`context.WriteSlots`), so ten thousand pending Workloads never delay an
admission, and a Workload whose reason changes every cycle is written once per
pass through the queue, with its latest reason. A head refused now is often admitted a
moment later: a reason first waits out `pendingReasonDelaySeconds`, and reasons decided
within the delay replace each other.

The check states a pending Workload carries before any reservation (Kueue's workload
controller lists the checks that apply to every flavor of its ClusterQueue:
`controller/core/admission_checks.py`, `pending_check_syncs`) are information too: they
go through the same queue, in the same patch as the Workload's pending reason when both
are due.

Which reason a Workload gets is core's decision (`controller/core/pending.py`); this module
only decides when it is written.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from kubernetes.aio.client.exceptions import ApiException

from api import workload_status
from api.workload_status import has_quota_reservation
from controller.core.admission_checks import checks_by_local_queue, pending_check_syncs
from controller.core.decisions import Inadmissible
from controller.core.model.workloads import WorkloadKey
from controller.core.pending import ADMISSION_GATED, unqueued_decisions
from controller.kube.client import API_ERRORS
from controller.kube.workqueue import KeyQueue
from controller.runtime.context import Context
from controller.runtime.events import TokenBucket
from controller.runtime.sync import WorkloadSync, resolved_preemptibility, same_resolution

log = logging.getLogger(__name__)


def _event_reason(before: dict[str, Any], pending: Inadmissible) -> str:
    """The Event of a new pending reason: Kueue's for admission gates (AdmissionGated when
    the gates hold it, AdmissionGateCleared once they are gone), Pending otherwise."""
    if pending.condition_reason == ADMISSION_GATED:
        return ADMISSION_GATED
    earlier = workload_status.condition(before, "QuotaReserved") or {}
    if earlier.get("reason") == ADMISSION_GATED:
        return "AdmissionGateCleared"
    return "Pending"


class PendingReasons:
    def __init__(self, ctx: Context, sync: WorkloadSync) -> None:
        self.ctx = ctx
        self.sync = sync
        self.queue: KeyQueue[WorkloadKey] = KeyQueue()
        self.wanted: dict[WorkloadKey, Inadmissible] = {}
        # Pending Workloads whose `status.admissionChecks` are to be these check names.
        self.checks_wanted: dict[WorkloadKey, tuple[str, ...]] = {}
        self._checks_synced_at = 0.0
        # What each LocalQueue's pending Workloads listed at the last pass (None: no pass
        # yet), and the Workloads changed since: while the first stays the same only these
        # are looked at again.
        self._checks_by_queue: dict[str, tuple[str, ...] | None] | None = None
        self._changed: set[WorkloadKey] = set()
        self.delayed: set[WorkloadKey] = set()  # wanted reasons waiting out the delay
        self.written: dict[WorkloadKey, str] = {}  # Workload → last pending message written
        self._explained_at = 0.0
        config = ctx.config
        self.budget = TokenBucket(
            config.pending_reason_qps, config.pending_reason_burst, time.monotonic
        )
        sync.workload_listeners.append(self.check_resolution)
        sync.workload_listeners.append(self._workload_changed)
        sync.deletion_listeners.append(self.forget)

    def forget(self, key: WorkloadKey) -> None:
        self.written.pop(key, None)
        self.wanted.pop(key, None)
        self.checks_wanted.pop(key, None)

    def admitted(self, key: WorkloadKey) -> None:
        """An admission was written: the next pending reason is news again."""
        self.written.pop(key, None)

    def start(self) -> None:
        """Start the writers and queue the resolutions a follower saw but could not write."""
        self._checks_by_queue = None  # a new term: every pending Workload looked at
        for _ in range(self.ctx.writes.information_slots):
            self.ctx.spawn(self.worker())
        for copy in self.sync.copies.values():
            self.check_resolution(copy.body)

    # -- what is wanted ------------------------------------------------------------------------

    def want(self, pending: Inadmissible) -> None:
        key = pending.workload_key
        if self.written.get(key) == pending.reason:
            return
        self.wanted[key] = pending
        delay = self.ctx.config.pending_reason_delay_seconds
        if delay <= 0:
            self.queue.add(key)
        elif key not in self.delayed:
            self.delayed.add(key)
            asyncio.get_running_loop().call_later(delay, self._due, key)

    def _due(self, key: WorkloadKey) -> None:
        self.delayed.discard(key)
        if key in self.wanted:
            self.queue.add(key)

    def explain_unqueued(self, now: float) -> None:
        """At most once a second: reasons for the pending Workloads the cycle never looks at
        (core decides them: `unqueued_decisions`). A Workload being written, or a nominated
        preemptor (its reason is the preemption's), is left alone."""
        if now - self._explained_at < 1.0:
            return
        self._explained_at = now
        for pending in unqueued_decisions(self.ctx.state, skip=self.sync.in_flight):
            self.want(pending)

    def sync_pending_checks(self, now: float) -> None:
        """At most once a second: queue the pending Workloads whose check states are out of
        step with their ClusterQueue's checks (core decides which: `pending_check_syncs`).
        A Workload being written is left alone; it is looked at again next time."""
        if now - self._checks_synced_at < 1.0:
            return
        self._checks_synced_at = now
        state = self.ctx.state
        by_queue = checks_by_local_queue(state)
        among = self._changed if by_queue == self._checks_by_queue else None
        self._checks_by_queue, self._changed = by_queue, set()
        found = pending_check_syncs(state, self.sync.in_flight, among, by_queue)
        for key in self.sync.in_flight:
            self._changed.add(key)  # skipped now: looked at again next time
        for sync in found:
            if self.checks_wanted.get(sync.workload_key) != sync.checks:
                self.checks_wanted[sync.workload_key] = sync.checks
                self.queue.add(sync.workload_key)

    def _workload_changed(self, body: dict[str, Any]) -> None:
        if not self.ctx.leading:
            return  # a new term looks at every Workload
        meta = body.get("metadata") or {}
        self._changed.add(WorkloadKey(f"{meta.get('namespace', '')}/{meta.get('name', '')}"))

    def check_resolution(self, body: dict[str, Any]) -> None:
        """Queue a write of its own when the object's `status.resolvedPreemptibility`
        differs from what the state resolved and the Workload is admitted, or the
        resolution found a problem. A pending Workload's goes out with its pending reason or
        its admission: fifteen thousand Workloads arriving need no fifteen thousand extra
        writes."""
        if not self.ctx.leading:
            return
        meta = body.get("metadata") or {}
        key = WorkloadKey(f"{meta.get('namespace', '')}/{meta.get('name', '')}")
        wanted = resolved_preemptibility(self.ctx.state, key)
        current = (body.get("status") or {}).get("resolvedPreemptibility")
        if wanted is None or same_resolution(current, wanted):
            return
        record = self.ctx.state.cache.records.get(key)
        if record is not None and (record.holds_quota or record.resolution.problems):
            self.queue.add(key)

    # -- writing -------------------------------------------------------------------------------

    def _status(
        self,
        key: WorkloadKey,
        pending: Inadmissible | None,
        checks: tuple[str, ...] | None,
        wl: dict[str, Any],
    ) -> dict[str, Any] | None:
        """The status to write on Workload `wl`: its pending reason when it is news (and the
        Workload is not admitted), with its check states when they are wanted, else its
        resolvedPreemptibility when that changed; None: nothing to write."""
        ctx = self.ctx
        status: dict[str, Any] | None = None
        pending_now = key not in ctx.state.cache.admitted and not has_quota_reservation(wl)
        if (
            pending is not None
            and pending_now
            and workload_status.pending_changed(wl, pending.condition_reason, pending.reason)
        ):
            status = workload_status.unset_quota_reservation(
                wl, pending.condition_reason, pending.reason, ctx.clock()
            )
        if checks is not None and pending_now:
            base = status if status is not None else workload_status.kueue_status(wl)
            if workload_status.sync_admission_checks(base, checks, ctx.clock()):
                status = base
        if status is not None:
            return status
        wanted = resolved_preemptibility(ctx.state, key)
        current = (wl.get("status") or {}).get("resolvedPreemptibility")
        if wanted is not None and not same_resolution(current, wanted):
            return workload_status.kueue_status(wl)
        return None

    async def worker(self) -> None:
        while True:
            key = await self.queue.get()
            try:
                await self.write(key)
            except Exception:  # a bug here must not stop the other Workloads' statuses
                log.exception("writing the status of Workload %s failed", key)

    async def write(self, key: WorkloadKey) -> None:
        """Write the latest pending reason, check states and resolvedPreemptibility wanted
        for a Workload, in one patch. Admitted, in-flight or deleted Workloads need no pending reason; on a
        conflict the key goes to the back of the queue (the watch brings the newer copy)."""
        ctx, sync = self.ctx, self.sync
        body = sync.body(key)
        if (
            key not in sync.in_flight
            and body is not None
            and self._status(key, self.wanted.get(key), self.checks_wanted.get(key), body)
            is not None
        ):
            await self.budget.spend()  # pendingReasonQPS: the latest reason waits its turn
        pending = self.wanted.pop(key, None)
        checks = self.checks_wanted.pop(key, None)
        if key not in sync.copies or key in sync.in_flight:
            if key in sync.in_flight and pending is not None:
                self.wanted[key] = pending  # decided again after the write ends
            if key in sync.in_flight and checks is not None:
                self.checks_wanted[key] = checks
            return
        before: dict[str, Any] = {}

        def build(wl: dict[str, Any]) -> dict[str, Any] | None:
            before.clear()
            before.update(wl)
            return self._status(key, pending, checks, wl)

        try:
            result = await sync.write(key, build, "status", refetch=False, information=True)
        except API_ERRORS as exc:
            if isinstance(exc, ApiException) and exc.status == 409:
                if pending is not None:
                    self.wanted.setdefault(key, pending)
                if checks is not None:
                    self.checks_wanted.setdefault(key, checks)
                self.queue.add(key)
            else:
                log.info("status of %s not written: %s", key, exc)
                self._changed.add(key)  # its check states looked at again next pass
            return
        if result is None:
            return
        if pending is not None:
            self.written[key] = pending.reason
        sync.apply_event("MODIFIED", result)
        if ctx.events is None:
            return
        status = result.get("status") or {}
        if pending is not None and workload_status.pending_changed(
            before, pending.condition_reason, pending.reason
        ):
            await ctx.events(result, "Normal", _event_reason(before, pending), pending.reason)
        message = (status.get("resolvedPreemptibility") or {}).get("message")
        earlier = (before.get("status") or {}).get("resolvedPreemptibility") or {}
        if message and earlier.get("message") != message:
            await ctx.events(result, "Warning", "InvalidPreemptibility", message)
