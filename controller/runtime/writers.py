"""The writers of the cycle's decisions: admissions, evictions, preemptions.

The cycle never waits on the network: admissions are charged to the state at once
("assumed", as Kueue does) and a write that finally fails is rolled back. Each write is
computed from the newest copy of the Workload (`WorkloadSync.write`) and re-checked there:
a Workload that finished or was evicted while the write waited for a slot costs no request.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from api import workload_status
from api.constants import JOB_UID_LABEL
from api.workload_status import admission_to_api, has_quota_reservation
from controller.core.admission_checks import required_checks
from controller.core.decisions import (
    Admit,
    CycleResult,
    Evict,
    Inadmissible,
    Preempt,
    ReplaceNode,
    UnhealthyNodes,
)
from controller.core.model.workloads import WorkloadKey
from controller.kube.client import API_ERRORS, outcome_unknown
from controller.runtime.context import Context, priority_class_of
from controller.runtime.pending_reasons import PendingReasons
from controller.runtime.sync import WorkloadSync

log = logging.getLogger(__name__)


class _Superseded(Exception):
    """The Workload changed under us so that the decision no longer applies: `workload`,
    the API server's object as last read, already holds quota or finished."""

    def __init__(self, key: WorkloadKey, workload: dict[str, Any]) -> None:
        super().__init__(key)
        self.workload = workload


_PREEMPTION_TEXT = {
    "InClusterQueue": "prioritization in the ClusterQueue",
    "InCohortReclamation": "reclamation within the cohort",
    "InCohortReclaimWhileBorrowing": "reclamation within the cohort while borrowing",
    "InCohortFairSharing": "Fair Sharing within the cohort",
}


def _parse_time(text: Any) -> float | None:
    if not isinstance(text, str) or len(text) != 20 or not text.endswith("Z"):
        return None  # not RFC 3339 in whole seconds, as the API writes creationTimestamp
    return workload_status.parse_rfc3339(text)


def admitted_message(admit: Admit, waited: float | None) -> str:
    """The admission Event's message: Kueue's QuotaReserved and Admitted messages in one
    (`kubectl describe workload` shows it beside the conditions)."""
    text = f"Quota reserved in ClusterQueue {admit.cluster_queue} and admitted"
    if waited is None:
        return text
    return f"{text}, wait time since queued was {waited:.0f}s"


def _first_eviction(body: dict[str, Any], reason: str, cause: str = "") -> bool:
    """Whether the eviction just written is the Workload's first with `reason` (and
    underlying `cause`)."""
    stats = (body.get("status") or {}).get("schedulingStats") or {}
    return any(
        e.get("reason") == reason and e.get("underlyingCause", "") == cause and e.get("count") == 1
        for e in stats.get("evictions") or ()
    )


class DecisionWriter:
    def __init__(self, ctx: Context, sync: WorkloadSync, pending: PendingReasons) -> None:
        self.ctx = ctx
        self.sync = sync
        self.pending = pending

    def dispatch(self, result: CycleResult) -> None:
        """Start the writes of one cycle's decisions (no waiting); its pending reasons go to
        the pending-reason writer."""
        spawn = self.ctx.spawn
        for evict in result.evicted:
            spawn(self.write_eviction(evict))
        for preempt in result.preempting:
            spawn(self.write_preemption(preempt))
        for admit in result.admitted:
            self.sync.begin_write(admit.workload_key)
            spawn(self.write_admission(admit))
        for replaced in result.replaced:
            self.sync.begin_write(replaced.workload_key)
            spawn(self.write_replacement(replaced))
        for unhealthy in result.unhealthy_nodes:
            self.sync.begin_write(unhealthy.workload_key)
            spawn(self.write_unhealthy_nodes(unhealthy))
        for pending in result.inadmissible:
            self.pending.want(pending)

    # -- admission -----------------------------------------------------------------------------

    async def write_admission(self, admit: Admit) -> None:
        """Write an admission the cycle already charged to the state; on failure forget it
        and take the API server's current object instead."""
        key = admit.workload_key
        admission = admission_to_api(admit.admission)
        now = self.ctx.clock()
        cq = self.ctx.state.objects.cluster_queues.get(admit.cluster_queue)
        checks = required_checks(cq.admission_checks, admit.admission) if cq is not None else ()

        def build(wl: dict[str, Any]) -> dict[str, Any] | None:
            if has_quota_reservation(wl) or workload_status.is_finished(wl):
                raise _Superseded(key, wl)
            return workload_status.admit(wl, admission, now, checks)

        result: dict[str, Any] | None = None
        try:
            await self._clear_stale_admission(key)
            result = await self.sync.write(key, build, "admit")
        except _Superseded as exc:
            # The API server's object decides, as read: not read again, which would leave
            # the quota it holds uncounted meanwhile (when it holds it by an earlier
            # attempt of this very write, whose answer was lost, another admission could
            # be written into that quota).
            log.info("admission of %s superseded: it holds quota or finished", key)
            self.sync.copies.pop(key, None)
            self.ctx.state.remove_workload(key)
            result = exc.workload
        except API_ERRORS as exc:
            if outcome_unknown(exc):
                # The admission may have been written (the connection broke after the
                # request went out): it keeps its quota until the API server says, or
                # another admission could be written into the same quota meanwhile.
                log.warning(
                    "admission of %s may have been written (%s); holding its quota until "
                    "the API server answers",
                    key,
                    exc,
                )
                result = await self.sync.reread(key, attempts=None)
                self.sync.copies.pop(key, None)
                self.ctx.state.remove_workload(key)
            else:
                log.warning("admission of %s not written (%s); re-reading it", key, exc)
                # Forget the assumed admission and whatever copy it was decided on: the API
                # server's current object decides (applied by end_write below).
                self.sync.copies.pop(key, None)
                self.ctx.state.remove_workload(key)
                result = await self.sync.reread(key)
        finally:
            self.sync.end_write(key, result)
        if result is not None and has_quota_reservation(result):
            self.pending.admitted(key)
            await self._record_admitted(result, admit)

    async def write_replacement(self, replaced: ReplaceNode) -> None:
        """Write the new `topologyAssignment`s of a Workload whose failed node was replaced
        (the state already holds them), with `status.unhealthyNodes` cleared, as Kueue's
        scheduler writes them; the topology ungater then releases its new pods onto the
        replacement. On failure the API server's object is taken back."""
        key = replaced.workload_key
        admission = admission_to_api(replaced.admission)

        def build(wl: dict[str, Any]) -> dict[str, Any] | None:
            if not has_quota_reservation(wl) or workload_status.is_finished(wl):
                return None  # released meanwhile: nothing left to replace
            status = workload_status.kueue_status(wl)
            status["admission"] = dict(admission)
            status.pop("unhealthyNodes", None)
            return status

        result: dict[str, Any] | None = None
        try:
            result = await self.sync.write(key, build, "replace-node")
            log.info("%s: node %s replaced in its topology assignment", key, replaced.failed_node)
        except API_ERRORS as exc:
            log.warning(
                "replacement of node %s for %s not written (%s)", replaced.failed_node, key, exc
            )
            # It stays admitted, its quota counted while it is read again; then the API
            # server's object (or, unreadable, the copy the replacement was built on)
            # takes the place of the assumed assignment.
            result = await self.sync.reread(key) or self.sync.body(key)
            self.sync.copies.pop(key, None)
            self.ctx.state.remove_workload(key)
        finally:
            self.sync.end_write(key, result)

    async def write_unhealthy_nodes(self, unhealthy: UnhealthyNodes) -> None:
        """Write `status.unhealthyNodes` (`[{name: NODE}]`, or none) of a Workload holding
        quota, as Kueue's TAS node controller writes it: the failed node whose replacement
        it waits for, or none once that node is healthy again. The field is how the waiting
        survives a restart (ClusterState.upsert_workload reads it back), and the topology
        ungater releases no pod to a node it lists."""
        key = unhealthy.workload_key
        wanted = [{"name": name} for name in unhealthy.nodes]

        def build(wl: dict[str, Any]) -> dict[str, Any] | None:
            if not has_quota_reservation(wl) or workload_status.is_finished(wl):
                return None  # released meanwhile: nothing waits
            status = workload_status.kueue_status(wl)
            if (status.get("unhealthyNodes") or []) == wanted:
                return None
            if wanted:
                status["unhealthyNodes"] = wanted
            else:
                status.pop("unhealthyNodes", None)
            return status

        result: dict[str, Any] | None = None
        try:
            result = await self.sync.write(key, build, "unhealthy-nodes")
        except API_ERRORS as exc:
            log.warning("status.unhealthyNodes of %s not written (%s); again next cycle", key, exc)
            failed = self.ctx.state.failed_nodes
            if failed.unhealthy.get(key) == next(iter(unhealthy.nodes), None):
                failed.written.setdefault(key, unhealthy.nodes)  # still what is wanted
            result = await self.sync.reread(key)
        finally:
            self.sync.end_write(key, result)

    async def _clear_stale_admission(self, key: WorkloadKey) -> None:
        """Remove a `status.admission` left behind without a reservation before admitting.
        Server-side apply merges into what other field managers own, so a new admission
        applied over an old one that another writer put there could keep some of the old
        one's pod sets or flavors. Kueue-style job sides remove the admission they release
        (it is ours, as `kueue-admission`); this costs a request only after a writer that
        clears QuotaReserved and leaves the admission (a merge patch without it, say)."""
        body = self.sync.body(key)
        if body is None:
            return
        if not (body.get("status") or {}).get("admission") or has_quota_reservation(body):
            return
        namespace, name = key.split("/", 1)
        meta = body.get("metadata") or {}
        async with self.ctx.writes.decision():
            cleared = await self.ctx.api.patch_workload_status(
                namespace, name, {"admission": None}, meta.get("resourceVersion")
            )
        self.ctx.metrics.api_writes.labels("clear-stale-admission", "ok").inc()
        self.sync.replace_copy(key, cleared)

    async def _written_after_all(
        self, key: WorkloadKey, exc: BaseException
    ) -> dict[str, Any] | None:
        """After a write failed with `exc`: the Workload as the API server has it, when the
        write may have been made after all (read until the API server answers), else None."""
        if not outcome_unknown(exc):
            return None
        log.warning("a write to %s may have been made (%s); reading it again", key, exc)
        return await self.sync.reread(key, attempts=None)

    async def _record_admitted(self, body: dict[str, Any], admit: Admit) -> None:
        ctx = self.ctx
        metrics = ctx.metrics
        labels = (admit.cluster_queue, priority_class_of(body), metrics.role)
        admitted = workload_status.is_admitted(body)
        metrics.quota_reserved_workloads.labels(*labels).inc()
        if admitted:
            metrics.admitted_workloads.labels(*labels).inc()
        created = _parse_time((body.get("metadata") or {}).get("creationTimestamp"))
        waited: float | None = None
        if created is not None:
            waited = max(0.0, ctx.clock() - created)
            metrics.quota_reserved_wait_time.labels(*labels).observe(waited)
            if admitted:
                metrics.admission_wait_time.labels(*labels).observe(waited)
        if not admitted:  # admission checks to pass first (controller/runtime/admission_checks.py)
            metrics.local_queue.observe_reserved(body, labels[1], metrics.role, waited)
            if ctx.events is not None:
                text = f"Quota reserved in ClusterQueue {admit.cluster_queue}"
                if waited is not None:
                    text += f", wait time since queued was {waited:.0f}s"
                await ctx.events(body, "Normal", "QuotaReserved", text)
            return
        metrics.local_queue.observe_admitted(body, labels[1], metrics.role, waited)
        metrics.cohort.observe_admitted(ctx.state, admit.cluster_queue, labels[1], metrics.role)
        if ctx.events is not None:
            # One Event for both steps (Kueue records QuotaReserved, then Admitted): without
            # admission checks they are the same write, and the conditions keep both.
            await ctx.events(body, "Normal", "Admitted", admitted_message(admit, waited))

    # -- preemption and eviction ---------------------------------------------------------------

    async def write_preemption(self, preempt: Preempt) -> None:
        """Evict the victims (or take pods from partial ones; those already being evicted
        are only waited for) and tell the preemptor why it waits; it is admitted by a later
        cycle once the victims have released their quota."""
        meta = (self.sync.body(preempt.preemptor_key) or {}).get("metadata") or {}
        uid = meta.get("uid") or "UNKNOWN"
        job_uid = (meta.get("labels") or {}).get(JOB_UID_LABEL) or "UNKNOWN"
        writes = []
        for victim in preempt.to_evict:
            # Kueue's message, word for word (pkg/scheduler/preemption `preemptionMessage`):
            # tools that read it find the preemptor's UID where Kueue puts it.
            text = _PREEMPTION_TEXT.get(victim.reason, "UNKNOWN")
            message = (
                f"Preempted to accommodate a workload (UID: {uid}, JobUID: {job_uid}) due to "
                f"{text}; preemptor path: {self._path(preempt.cluster_queue)}; "
                f"preemptee path: {self._path(victim.cluster_queue)}"
            )
            if victim.whole:
                writes.append(
                    self.write_eviction(
                        Evict(victim.workload_key, victim.cluster_queue, "Preempted", message),
                        preemption_reason=victim.reason,
                        preempting_cluster_queue=preempt.cluster_queue,
                        preemptor=preempt.preemptor_key,
                    )
                )
            else:
                writes.append(
                    self._write_partial_preemption(victim.workload_key, victim.pods, message)
                )
        count = len(preempt.victims)
        waiting = Inadmissible(
            preempt.preemptor_key,
            preempt.cluster_queue,
            f"waiting for {count} preempted workload{'s' if count != 1 else ''} to release quota",
            "WaitingForPreemptedWorkloads",
        )
        self.pending.want(waiting)
        await asyncio.gather(*writes)

    def _path(self, cluster_queue: str) -> str:
        """Kueue's path of a ClusterQueue: `/root/…/cohort/name` through its tree of
        cohorts, or `/name` outside a cohort."""
        ancestors = reversed(self.ctx.state.cache.quota.path(cluster_queue))
        return "/" + "/".join([*ancestors, cluster_queue])

    async def _write_partial_preemption(self, key: WorkloadKey, pods: int, message: str) -> None:
        """DisruptionMode Pod: the victim stays admitted with `pods` fewer pods; its owner
        removes that many pods. The admission shrinks, so quota is released at once."""
        try:
            result = await self.sync.write(
                key, lambda wl: workload_status.shrink(wl, pods), "partial-preempt"
            )
        except API_ERRORS as exc:
            log.warning("partial preemption of %s not written: %s", key, exc)
            return
        if result is not None:
            self.sync.apply_event("MODIFIED", result)
            if self.ctx.events is not None:
                await self.ctx.events(
                    result, "Normal", "PartiallyPreempted", f"{pods} pod(s): {message}"
                )

    async def write_eviction(
        self,
        evict: Evict,
        preemption_reason: str | None = None,
        preempting_cluster_queue: str | None = None,
        preemptor: WorkloadKey | None = None,
    ) -> None:
        """Evict a Workload (for a preemptor: its Preempted Event names it, which Kueue's
        condition message does not)."""
        ctx = self.ctx
        preemptor_note = f"; preemptor: {preemptor}" if preemptor else ""
        key = evict.workload_key
        now = ctx.clock()

        def build(wl: dict[str, Any]) -> dict[str, Any] | None:
            # Already evicted, not holding quota, or finished while the write waited for a
            # slot: a finished Workload releases its quota by itself, evicting it only
            # costs a write.
            if (
                workload_status.is_evicted(wl)
                or workload_status.is_finished(wl)
                or not has_quota_reservation(wl)
            ):
                return None
            return workload_status.evict(
                wl,
                evict.reason,
                evict.message,
                now,
                preemption_reason,
                underlying_cause=evict.underlying_cause,
            )

        try:
            result = await self.sync.write(key, build, "evict")
        except API_ERRORS as exc:
            result = await self._written_after_all(key, exc)
            if result is None or not workload_status.is_evicted(result):
                log.warning("eviction of %s not written (%s); it stays admitted", key, exc)
                ctx.state.cancel_eviction(key)
                ctx.wake.set()
                return
        if result is None:
            return
        self.sync.apply_event("MODIFIED", result)
        metrics = ctx.metrics
        role = metrics.role
        cause = evict.underlying_cause
        labels = (evict.cluster_queue, evict.reason, cause, priority_class_of(result), role)
        metrics.evicted_workloads.labels(*labels).inc()
        metrics.local_queue.observe_evicted(result, evict.reason, cause, labels[3], role)
        metrics.workload.observe_evicted(result, evict.cluster_queue, evict.reason, cause, role)
        if _first_eviction(result, evict.reason, cause):
            metrics.evicted_workloads_once.labels(*labels).inc()
        if preemption_reason is not None and preempting_cluster_queue is not None:
            metrics.preempted_workloads.labels(
                preempting_cluster_queue, preemption_reason, role
            ).inc()
        if ctx.events is not None:
            # A preemption is one Event, `Preempted` (Kueue adds EvictedDueToPreempted with
            # the same message; the Evicted condition says it).
            if preemption_reason is not None:
                await ctx.events(result, "Normal", "Preempted", evict.message + preemptor_note)
            else:
                await ctx.events(result, "Normal", f"EvictedDueTo{evict.reason}", evict.message)
