"""The controller: API events → `core` state; the admission cycle → API writes.

One `Controller` owns one `ClusterState`. Watch events are applied as they arrive
(`apply_event`); the scheduling loop (`schedule_forever`, leader only) runs a cycle
whenever something changed and sends its decisions out as concurrent, bounded writes.
The cycle never waits on the network: admissions are charged to the state at once
("assumed", as Kueue does) and a write that finally fails is rolled back.

Stale events: while a write for a Workload is in flight, events for it are held back,
and afterwards only events newer than what our write returned are applied, so an old
copy of a Workload can never undo a reservation we just made.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kubernetes.aio.client.exceptions import ApiException

from controller.core import from_api
from controller.core.cycle import run_cycle
from controller.core.decisions import Admit, Evict, Inadmissible, Preempt
from controller.core.queues import BackoffPolicy
from controller.core.state import ClusterState
from controller.core.workloads import Admission
from controller.runtime import workload_status
from controller.runtime.config import ControllerConfig
from controller.runtime.kube import API_ERRORS, WORKLOADS, Api, retrying
from controller.runtime.metrics import Metrics

log = logging.getLogger(__name__)

Clock = Callable[[], float]


def _rv(obj: dict[str, Any]) -> int:
    """resourceVersion as an integer (etcd revisions); unknown forms compare as 0."""
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:
        return 0


def _parse_time(text: Any) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


def _key(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


@dataclass(slots=True)
class _WorkloadCopy:
    """The newest Workload object seen (for status patches computed from it)."""

    body: dict[str, Any]
    rv: int


@dataclass(slots=True)
class _InFlight:
    held_events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


def admission_to_api(admission: Admission) -> dict[str, Any]:
    """`status.admission` as Kueue writes it (quantities in canonical text)."""
    from controller.core.quantities import Quantity

    return {
        "clusterQueue": admission.cluster_queue,
        "podSetAssignments": [
            {
                "name": psa.name,
                "count": psa.count,
                "flavors": dict(psa.flavors),
                "resourceUsage": {
                    resource: str(Quantity(value)) for resource, value in psa.resource_usage.items()
                },
            }
            for psa in admission.pod_set_assignments
        ],
    }


class Controller:
    """Keeps `core` state current and acts on the cycle's decisions."""

    def __init__(
        self,
        api: Api,
        config: ControllerConfig,
        metrics: Metrics | None = None,
        clock: Clock = time.time,
        events: Callable[[dict[str, Any], str, str, str], Awaitable[None]] | None = None,
    ) -> None:
        self.api = api
        self.config = config
        self.metrics = metrics or Metrics()
        self.clock = clock
        self.events = events
        backoff = BackoffPolicy(
            config.requeue_backoff.base_seconds, config.requeue_backoff.max_seconds
        )
        self.state = ClusterState(backoff=backoff)
        self.state.preemptibility_threshold = config.preemptibility.priority_threshold
        self.wake = asyncio.Event()
        self.writes = asyncio.Semaphore(config.write_parallelism)
        # Pending reasons are informative, admissions and evictions are decisions: reasons
        # get a quarter of the write slots of their own, so a queue of thousands of
        # pending Workloads never delays an admission.
        self.pending_writes = asyncio.Semaphore(max(1, config.write_parallelism // 4))
        self.copies: dict[str, _WorkloadCopy] = {}
        self.in_flight: dict[str, _InFlight] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        self.problems: dict[str, str] = {}  # object key → last conversion problem reported
        self.written_reason: dict[str, str] = {}  # Workload → last pending message written
        self._explained_at = 0.0
        self.leading = False  # set by the leader-election loop; followers never write
        self.workload_listeners: list[Callable[[dict[str, Any]], None]] = []
        self.written_resolution: dict[str, tuple[str, str, str]] = {}

    # -- events --------------------------------------------------------------------------------

    def workload_keys(self) -> set[str]:
        """Every Workload the controller holds a copy of."""
        return set(self.copies)

    def apply_event(self, event_type: str | None, body: dict[str, Any]) -> None:
        """Apply one watch event (type None/ADDED/MODIFIED/DELETED) to the state."""
        if body.get("kind") == "Workload":
            key = _key(body)
            flight = self.in_flight.get(key)
            if flight is not None:
                flight.held_events.append((event_type or "MODIFIED", body))
                return
            self._apply_workload(event_type, body)
        else:
            self._apply_other(event_type, body)
        self.wake.set()

    def _apply_workload(self, event_type: str | None, body: dict[str, Any]) -> None:
        key = _key(body)
        rv = _rv(body)
        seen = self.copies.get(key)
        if event_type == "DELETED":
            if seen is None or rv >= seen.rv:
                self.copies.pop(key, None)
                self.written_reason.pop(key, None)
                self.state.remove_workload(key)
            return
        if seen is not None and rv and rv <= seen.rv:
            return  # an older copy than one already applied
        self.copies[key] = _WorkloadCopy(body, rv)
        try:
            workload = from_api.convert(body)
        except from_api.InvalidObject as exc:
            self._report_problem(key, body, str(exc))
            return
        self.problems.pop(key, None)
        from_api.apply(self.state, workload)
        self._check_resolution(key, body)
        for listener in self.workload_listeners:
            listener(body)

    def _check_resolution(self, key: str, body: dict[str, Any]) -> None:
        """Write `status.resolvedPreemptibility` when it differs from what the state resolved;
        an invalid value that was skipped becomes a Warning Event."""
        resolution = self.state.resolutions.get(key)
        if resolution is None or not self.leading:
            return
        message = "; ".join(resolution.problems)
        wanted = (str(resolution.value), str(resolution.source), message)
        current = (body.get("status") or {}).get("resolvedPreemptibility") or {}
        have = (current.get("value", ""), current.get("source", ""), current.get("message") or "")
        if have == wanted or self.written_resolution.get(key) == wanted or key in self.in_flight:
            return
        self.written_resolution[key] = wanted
        resolved: dict[str, Any] = {
            "value": wanted[0],
            "source": wanted[1],
            "message": message or None,
        }

        def build(status: dict[str, Any]) -> dict[str, Any] | None:
            return {"resolvedPreemptibility": resolved}

        async def write() -> None:
            try:
                await self._patch_workload(key, build, "preemptibility")
            except API_ERRORS as exc:
                self.written_resolution.pop(key, None)
                log.info("resolvedPreemptibility of %s not written: %s", key, exc)
                return
            if message and self.events is not None:
                await self.events(body, "Warning", "InvalidPreemptibility", message)

        self._spawn(write())

    def _apply_other(self, event_type: str | None, body: dict[str, Any]) -> None:
        kind = body.get("kind")
        meta = body.get("metadata") or {}
        name = meta.get("name", "")
        if event_type == "DELETED":
            if kind == "ResourceFlavor":
                self.state.remove_flavor(name)
            elif kind == "ClusterQueue":
                self.state.remove_cluster_queue(name)
            elif kind == "LocalQueue":
                self.state.remove_local_queue(meta.get("namespace", ""), name)
            elif kind == "Namespace":
                self.state.remove_namespace(name)
            return
        try:
            obj = from_api.convert(body)
        except from_api.InvalidObject as exc:
            self._report_problem(f"{kind}/{name}", body, str(exc))
            return
        from_api.apply(self.state, obj)

    def _report_problem(self, key: str, body: dict[str, Any], message: str) -> None:
        if self.problems.get(key) == message:
            return
        self.problems[key] = message
        log.warning("ignoring invalid %s %s: %s", body.get("kind"), key, message)
        if self.events is not None:
            self._spawn(self.events(body, "Warning", "InvalidObject", message))

    # -- the loop ------------------------------------------------------------------------------

    async def load(self, resources: Any) -> None:
        """Initial state from a full LIST of every watched resource (restart safety: admitted
        usage comes from `status.admission`, so nothing is admitted twice or forgotten)."""
        for resource in resources:
            items = await retrying(functools.partial(self.api.list, resource), attempts=10)
            for item in items:
                self.apply_event(None, item)

    async def schedule_forever(self) -> None:
        """Run cycles until cancelled (on leadership loss, cancellation stops it at once)."""
        interval = self.config.cycle_interval_seconds
        try:
            while True:
                # Backoff expiries need no event, so look at least once a second.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.wake.wait(), timeout=1.0)
                self.wake.clear()
                self.schedule_once()
                await asyncio.sleep(interval)  # let a burst of events land before the next cycle
        finally:
            for task in list(self.tasks):
                task.cancel()

    def schedule_once(self) -> None:
        """One admission cycle and the dispatch of its decisions (no waiting)."""
        now = self.clock()
        self.state.release_backoff(now)
        started = time.perf_counter()
        result = run_cycle(self.state, now)
        elapsed = time.perf_counter() - started
        self.metrics.cycle_latency.observe(elapsed)
        outcome = "success" if result.admitted else "inadmissible"
        self.metrics.admission_attempts.labels(outcome).inc()
        self.metrics.admission_attempt_duration.labels(outcome).observe(elapsed)
        for evict in result.evicted:
            self._spawn(self._write_eviction(evict))
        for preempt in result.preempting:
            self._spawn(self._write_preemption(preempt))
        for admit in result.admitted:
            self._begin_write(admit.workload_key)
            self._spawn(self._write_admission(admit))
        for pending in result.inadmissible:
            if self.written_reason.get(pending.workload_key) != pending.reason:
                self._spawn(self._write_pending(pending))
        if result.changed:
            self.wake.set()
        if now - self._explained_at >= 1.0:
            self._explained_at = now
            self._explain_unqueued()

    def _explain_unqueued(self) -> None:
        """Pending Workloads the cycle never looks at still get a reason: no such LocalQueue
        or ClusterQueue, an inactive ClusterQueue (missing flavor, stopped), deactivated."""
        state = self.state
        for key in list(state.pending()):
            if key in self.in_flight:
                continue
            cq = state.queued_in(key)
            if cq is not None:
                inactive = state.inactive_reason(cq)
                if inactive is None:
                    continue  # the cycle explains it
                reason, code = inactive, "OnHold" if "stopped" in inactive else "Misconfigured"
            elif key in state.reasons:
                reason, code = state.reasons[key], "Misconfigured"
                if not state.workloads[key].active:
                    code = "Inactive"
            else:
                continue  # in eviction backoff: explained when it is requeued
            if self.written_reason.get(key) != reason:
                self._spawn(self._write_pending(Inadmissible(key, cq, reason, code)))

    # -- writes --------------------------------------------------------------------------------

    def _spawn(self, coro: Awaitable[None]) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def _begin_write(self, key: str) -> None:
        self.in_flight.setdefault(key, _InFlight())

    def _end_write(self, key: str, result: dict[str, Any] | None) -> None:
        flight = self.in_flight.pop(key, None)
        if result is not None:
            self._apply_workload("MODIFIED", result)
        for event_type, body in flight.held_events if flight else ():
            self._apply_workload(event_type, body)
        self.wake.set()

    async def _patch_workload(
        self,
        key: str,
        build: Callable[[dict[str, Any]], dict[str, Any] | None],
        write: str,
        gate: asyncio.Semaphore | None = None,
    ) -> dict[str, Any] | None:
        """Patch a Workload's status computed by `build(current status)`; on a conflict the
        Workload is re-read and the patch recomputed. `build` returning None = nothing to do."""
        namespace, name = key.split("/", 1)
        copy = self.copies.get(key)
        if copy is None:
            return None
        body = copy.body

        async def attempt() -> dict[str, Any] | None:
            nonlocal body
            status = build(body.get("status") or {})
            if status is None:
                return None
            try:
                return await self.api.patch_workload_status(
                    namespace, name, status, (body.get("metadata") or {}).get("resourceVersion")
                )
            except ApiException as exc:
                if exc.status == 409:
                    body = await self.api.get_workload(namespace, name)
                raise

        async with gate or self.writes:
            try:
                result = await retrying(attempt)
            except ApiException as exc:
                self.metrics.api_writes.labels(write, f"error{exc.status}").inc()
                raise
            self.metrics.api_writes.labels(write, "ok").inc()
            return result

    async def _write_admission(self, admit: Admit) -> None:
        key = admit.workload_key
        admission = admission_to_api(admit.admission)
        now = self.clock()

        def build(status: dict[str, Any]) -> dict[str, Any] | None:
            if status.get("admission") or workload_status.is_true(status, workload_status.FINISHED):
                raise _Superseded(key)
            return workload_status.admitted(status, admission, now, None)

        result: dict[str, Any] | None = None
        try:
            result = await self._patch_workload(key, build, "admit")
        except _ADMISSION_FAILURES as exc:
            log.warning("admission of %s not written (%s); rolled back", key, exc)
            if key in self.state.admitted:
                self.state.release(key, requeue=False)
            try:
                namespace, name = key.split("/", 1)
                result = await self.api.get_workload(namespace, name)
            except ApiException as fetch_error:
                if fetch_error.status == 404:
                    self.in_flight.pop(key, None)
                    self.state.remove_workload(key)
                    self.copies.pop(key, None)
                    return
                result = None
            if result is not None:
                self.copies.pop(key, None)
                self.state.remove_workload(key)
        finally:
            self._end_write(key, result)
        if result is not None and result.get("status", {}).get("admission"):
            self.written_reason.pop(key, None)
            await self._record_admitted(result, admit)

    async def _record_admitted(self, body: dict[str, Any], admit: Admit) -> None:
        priority_class = ((body.get("spec") or {}).get("priorityClassRef") or {}).get("name", "")
        self.metrics.quota_reserved_workloads.labels(admit.cluster_queue, priority_class).inc()
        self.metrics.admitted_workloads.labels(admit.cluster_queue, priority_class).inc()
        created = _parse_time((body.get("metadata") or {}).get("creationTimestamp"))
        if created is not None:
            waited = max(0.0, self.clock() - created)
            self.metrics.admission_wait_time.labels(admit.cluster_queue, priority_class).observe(
                waited
            )
            self.metrics.quota_reserved_wait_time.labels(
                admit.cluster_queue, priority_class
            ).observe(waited)
        if self.events is not None:
            await self.events(
                body,
                "Normal",
                "QuotaReserved",
                f"Quota reserved in ClusterQueue {admit.cluster_queue}",
            )
            await self.events(
                body, "Normal", "Admitted", f"Admitted by ClusterQueue {admit.cluster_queue}"
            )

    async def _write_pending(self, pending: Inadmissible) -> None:
        """Write why a Workload waits. By the time a write slot is free the reason may be
        stale: a newer reason for the same Workload supersedes it, and an admitted or
        deleted Workload needs none."""
        key = pending.workload_key
        reason = pending.condition_reason
        self.written_reason[key] = pending.reason

        def build(status: dict[str, Any]) -> dict[str, Any] | None:
            if (
                self.written_reason.get(key) != pending.reason
                or key in self.state.admitted
                or status.get("admission")
                or not workload_status.pending_changed(status, reason, pending.reason)
            ):
                return None
            return workload_status.pending(status, reason, pending.reason, self.clock(), None)

        try:
            result = await self._patch_workload(key, build, "pending", self.pending_writes)
        except API_ERRORS as exc:
            if self.written_reason.get(key) == pending.reason:
                self.written_reason.pop(key, None)
            log.info("pending status of %s not written: %s", key, exc)
            return
        if result is not None:
            self.apply_event("MODIFIED", result)
            if self.events is not None:
                await self.events(result, "Normal", "Pending", pending.reason)

    async def _write_preemption(self, preempt: Preempt) -> None:
        """Evict the victims (or take pods from partial ones) and tell the preemptor why it
        waits; it is admitted by a later cycle once the victims have released their quota."""
        preemptor = self.copies.get(preempt.preemptor_key)
        uid = ((preemptor.body.get("metadata") or {}).get("uid", "") if preemptor else "") or "?"
        writes = []
        for victim in preempt.victims:
            text = _PREEMPTION_TEXT.get(victim.reason, "preemption")
            message = (
                f"Preempted to accommodate a workload (UID: {uid}, {preempt.preemptor_key}) due to {text}; "
                f"preemptor path: /{preempt.cluster_queue}; preemptee path: /{victim.cluster_queue}"
            )
            if victim.whole:
                writes.append(
                    self._write_eviction(
                        Evict(victim.workload_key, victim.cluster_queue, "Preempted", message),
                        preemption_reason=victim.reason,
                        preempting_cluster_queue=preempt.cluster_queue,
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
        writes.append(self._write_pending(waiting))
        await asyncio.gather(*writes)

    async def _write_partial_preemption(self, key: str, pods: int, message: str) -> None:
        """DisruptionMode Pod: the victim stays admitted with `pods` fewer pods; its owner
        removes that many pods. The admission shrinks, so quota is released at once."""

        def build(status: dict[str, Any]) -> dict[str, Any] | None:
            admission = status.get("admission")
            if not admission:
                return None
            assignments = [dict(a) for a in admission.get("podSetAssignments") or []]
            if len(assignments) != 1:
                return None
            first = assignments[0]
            count = int(first.get("count", 0))
            left = count - pods
            if left <= 0:
                return None
            from controller.core.quantities import Quantity

            first["count"] = left
            first["resourceUsage"] = {
                resource: str(Quantity(Quantity.parse(value).milli * left // count))
                for resource, value in (first.get("resourceUsage") or {}).items()
            }
            shrunk = {**admission, "podSetAssignments": [first]}
            return {
                "admission": shrunk,
                "schedulingStats": workload_status.count_eviction(status, "Preempted"),
            }

        try:
            result = await self._patch_workload(key, build, "partial-preempt")
        except API_ERRORS as exc:
            log.warning("partial preemption of %s not written: %s", key, exc)
            return
        if result is not None:
            self.apply_event("MODIFIED", result)
            if self.events is not None:
                await self.events(
                    result, "Normal", "PartiallyPreempted", f"{pods} pod(s): {message}"
                )

    async def _write_eviction(
        self,
        evict: Evict,
        preemption_reason: str | None = None,
        preempting_cluster_queue: str | None = None,
    ) -> None:
        key = evict.workload_key
        now = self.clock()

        def build(status: dict[str, Any]) -> dict[str, Any] | None:
            if workload_status.is_true(status, workload_status.EVICTED) or not status.get(
                "admission"
            ):
                return None
            return workload_status.evicted(
                status, evict.reason, evict.message, now, None, preemption_reason
            )

        try:
            result = await self._patch_workload(key, build, "evict")
        except API_ERRORS as exc:
            log.warning("eviction of %s not written: %s", key, exc)
            return
        if result is not None:
            self.apply_event("MODIFIED", result)
            self.metrics.evicted_workloads.labels(evict.cluster_queue, evict.reason, "", "").inc()
            if preemption_reason is not None and preempting_cluster_queue is not None:
                self.metrics.preempted_workloads.labels(
                    preempting_cluster_queue, preemption_reason
                ).inc()
            if self.events is not None:
                if preemption_reason is not None:
                    await self.events(result, "Normal", "Preempted", evict.message)
                await self.events(result, "Normal", f"EvictedDueTo{evict.reason}", evict.message)


class _Superseded(Exception):
    """The Workload changed under us so that the decision no longer applies."""


_ADMISSION_FAILURES: tuple[type[BaseException], ...] = (_Superseded, *API_ERRORS)

_PREEMPTION_TEXT = {
    "InClusterQueue": "prioritization in the ClusterQueue",
    "InCohortReclamation": "reclamation within the cohort",
    "InCohortReclaimWhileBorrowing": "reclamation within the cohort while borrowing",
}


__all__ = ["WORKLOADS", "Controller", "admission_to_api"]
