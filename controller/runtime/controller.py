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

from api import workload_status
from api.workload_status import admission_to_api, apply_body, has_quota_reservation
from controller.core import from_api
from controller.core.cycle import run_cycle
from controller.core.decisions import Admit, Evict, Inadmissible, Preempt
from controller.core.pending import unqueued_reason
from controller.core.queues import BackoffPolicy
from controller.core.state import ClusterState
from controller.core.unsupported import UNSUPPORTED_CONDITION, findings_message, unsupported_fields
from controller.core.workloads import PodSet, Workload, WorkloadKey, workload_key
from controller.kube.client import API_ERRORS, FIELD_MANAGER, WORKLOADS, Api, retrying
from controller.kube.workqueue import KeyQueue
from controller.runtime.config import ControllerConfig
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


def _key(obj: dict[str, Any]) -> WorkloadKey:
    meta = obj.get("metadata") or {}
    return workload_key(meta.get("namespace", ""), meta.get("name", ""))


@dataclass(slots=True)
class _WorkloadCopy:
    """The newest Workload object seen (for status patches computed from it)."""

    body: dict[str, Any]
    rv: int


@dataclass(slots=True)
class _InFlight:
    held_events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


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
        self.state = self._new_state()
        self.wake = asyncio.Event()
        self.writes = asyncio.Semaphore(config.write_parallelism)
        # Admissions and evictions are decisions: they get `write_parallelism` slots. Pending
        # reasons and resolvedPreemptibility are information: they wait in a de-duplicating
        # queue worked by a quarter as many writers (`_status_worker`), so ten thousand
        # pending Workloads never delay an admission, and a Workload whose reason changes
        # every cycle is written once per pass through the queue, with its latest reason.
        self.status_queue: KeyQueue[WorkloadKey] = KeyQueue()
        self.wanted_reason: dict[WorkloadKey, Inadmissible] = {}
        self.reason_delayed: set[WorkloadKey] = set()  # wanted reasons waiting out the delay
        self.copies: dict[WorkloadKey, _WorkloadCopy] = {}
        self.in_flight: dict[WorkloadKey, _InFlight] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        self.problems: dict[str, str] = {}  # object key → last conversion problem reported
        # kind/key → the unsupported Kueue fields last reported (controller/core/unsupported.py)
        self.unsupported: dict[str, str] = {}
        self.written_reason: dict[WorkloadKey, str] = {}  # Workload → last pending message written
        self._explained_at = 0.0
        self.leading = False  # set by the leader-election loop; followers never write
        self.workload_listeners: list[Callable[[dict[str, Any]], None]] = []

    # -- events --------------------------------------------------------------------------------

    def reset(self) -> None:
        """Forget every object: the next LIST rebuilds the state from the API server alone
        (a new leader must not keep admissions it assumed while an earlier term's writes
        were cut off)."""
        self.state = self._new_state()
        self.copies.clear()
        self.problems.clear()
        self.unsupported.clear()

    def _new_state(self) -> ClusterState:
        backoff = BackoffPolicy(
            self.config.requeue_backoff.base_seconds, self.config.requeue_backoff.max_seconds
        )
        state = ClusterState(backoff=backoff)
        state.preemptibility_threshold = self.config.preemptibility.priority_threshold
        return state

    def known_keys(self) -> set[str]:
        """Every Workload the controller holds a copy of."""
        return set(self.copies)

    def apply_event(self, event_type: str | None, body: dict[str, Any]) -> None:
        """Apply one watch event (type None/ADDED/MODIFIED/DELETED) to the state."""
        self._check_unsupported(event_type, body)
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
                self.wanted_reason.pop(key, None)
                self.state.remove_workload(key)
            return
        if seen is not None and rv and rv <= seen.rv:
            return  # an older copy than one already applied
        self.copies[key] = _WorkloadCopy(body, rv)
        try:
            workload = from_api.convert(body, pod_sets=self._unchanged_pod_sets(key, seen, body))
        except from_api.InvalidObject as exc:
            self._report_problem(key, body, str(exc))
            return
        self.problems.pop(key, None)
        held = self.state.admitted.get(key)
        cluster_queue = held.cluster_queue if held is not None else None
        from_api.apply(self.state, workload)
        finished = isinstance(workload, Workload) and workload.finished
        if cluster_queue is not None and finished and self.leading:
            self.metrics.finished_workloads_total.inc(
                cluster_queue, _priority_class(body), self.metrics.role
            )
        self._check_resolution(key, body)
        for listener in self.workload_listeners:
            listener(body)

    def _unchanged_pod_sets(
        self, key: WorkloadKey, seen: _WorkloadCopy | None, body: dict[str, Any]
    ) -> tuple[PodSet, ...] | None:
        """The state's pod sets of this Workload when its spec cannot have changed since
        the copy they came from: same uid and same metadata.generation (the API server bumps
        it on every spec change). Most events are status changes; converting the pod
        templates again for each was a few percent of the controller's CPU."""
        if seen is None or key in self.problems:  # the state's pod sets are not seen's
            return None
        before, after = seen.body.get("metadata") or {}, body.get("metadata") or {}
        generation = after.get("generation")
        if generation is None or generation != before.get("generation"):
            return None
        if not after.get("uid") or after.get("uid") != before.get("uid"):
            return None
        previous = self.state.workloads.get(key)
        return previous.pod_sets if previous is not None else None

    def _check_resolution(self, key: WorkloadKey, body: dict[str, Any]) -> None:
        """Queue a write of its own when the object's `status.resolvedPreemptibility`
        differs from what the state resolved and the Workload is admitted, or the
        resolution found a problem. A pending Workload's goes out with its pending reason or
        its admission: fifteen thousand Workloads arriving need no fifteen thousand extra
        writes."""
        if not self.leading:
            return
        wanted = self._resolution(key)
        current = (body.get("status") or {}).get("resolvedPreemptibility")
        if wanted is None or _same_resolution(current, wanted):
            return
        record = self.state.records.get(key)
        if record is not None and (record.holds_quota or record.resolution.problems):
            self.status_queue.add(key)

    def _resolution(self, key: WorkloadKey) -> dict[str, Any] | None:
        """`status.resolvedPreemptibility` as the state resolved it (None: not resolved)."""
        record = self.state.records.get(key)
        if record is None:
            return None
        resolution = record.resolution
        out = {"value": str(resolution.value), "source": str(resolution.source)}
        if resolution.problems:
            out["message"] = "; ".join(resolution.problems)
        return out

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

    def _check_unsupported(self, event_type: str | None, body: dict[str, Any]) -> None:
        """Report the Kueue fields of an object that quotagate does not implement yet: a
        Warning Event when they change and, on a Workload, the `UnsupportedFields`
        condition (queues get theirs from the queue status writer). Leader only: a new
        leader starts from an empty record and reports again what it finds."""
        if not self.leading:
            return
        meta = body.get("metadata") or {}
        key = f"{body.get('kind')}/{meta.get('namespace', '')}/{meta.get('name', '')}"
        if event_type == "DELETED":
            self.unsupported.pop(key, None)
            return
        message = findings_message(unsupported_fields(body))
        if self.unsupported.get(key, "") == message:
            return
        if message:
            self.unsupported[key] = message
            if self.events is not None:
                self._spawn(self.events(body, "Warning", UNSUPPORTED_CONDITION, message))
        else:
            self.unsupported.pop(key, None)
        if body.get("kind") == "Workload":
            self._spawn(self._write_unsupported_condition(body, message))

    async def _write_unsupported_condition(self, body: dict[str, Any], message: str) -> None:
        """The Workload's `UnsupportedFields` condition, applied under quotagate's own field
        manager (no other writer owns it; an empty list removes it)."""
        current = workload_status.condition(body, UNSUPPORTED_CONDITION)
        if (current or {}).get("message", "") == message:
            return
        conditions = (
            workload_status.set_condition(
                [], UNSUPPORTED_CONDITION, True, "NotImplemented", message, self.clock()
            )
            if message
            else []
        )
        apply = apply_body(body, {"conditions": conditions}, strict=False)
        try:
            async with self.writes:
                await self.api.apply_workload_status(apply, field_manager=FIELD_MANAGER)
        except API_ERRORS as exc:
            log.info("UnsupportedFields condition of %s not written: %s", _key(body), exc)

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
        for _ in range(max(1, self.config.write_parallelism // 4)):
            self._spawn(self._status_worker())
        for key in self.copies:  # resolutions a follower saw but could not write
            self._check_resolution(key, self.copies[key].body)
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
        role = self.metrics.role
        self.metrics.admission_attempts.labels(outcome, role).inc()
        self.metrics.admission_attempt_duration.labels(outcome, role).observe(elapsed)
        for evict in result.evicted:
            self._spawn(self._write_eviction(evict))
        for preempt in result.preempting:
            self._spawn(self._write_preemption(preempt))
        for admit in result.admitted:
            self._begin_write(admit.workload_key)
            self._spawn(self._write_admission(admit))
        for pending in result.inadmissible:
            self._want_pending(pending)
        if result.changed:
            self.wake.set()
        if now - self._explained_at >= 1.0:
            self._explained_at = now
            self._explain_unqueued()

    def _explain_unqueued(self) -> None:
        """Pending Workloads the cycle never looks at still get a reason: deactivated, no
        such LocalQueue or ClusterQueue, or one of them stopped or inactive (core decides
        it: `ClusterState.unqueued_reason`)."""
        state = self.state
        for key in list(state.pending()):
            if key in self.in_flight or key in state.nominated:
                continue  # a nominated preemptor's reason is the one `_write_preemption` gave
            unqueued = unqueued_reason(state, key)
            if unqueued is not None:
                cq = state.queued_in(key)
                self._want_pending(Inadmissible(key, cq, unqueued.message, unqueued.reason))

    # -- writes --------------------------------------------------------------------------------

    def _spawn(self, coro: Awaitable[None]) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def _begin_write(self, key: WorkloadKey) -> None:
        self.in_flight.setdefault(key, _InFlight())

    def _end_write(self, key: WorkloadKey, result: dict[str, Any] | None) -> None:
        flight = self.in_flight.pop(key, None)
        if result is not None:
            self._apply_workload("MODIFIED", result)
        for event_type, body in flight.held_events if flight else ():
            self._apply_workload(event_type, body)
        self.wake.set()

    async def _write_workload(
        self,
        key: WorkloadKey,
        build: Callable[[dict[str, Any]], dict[str, Any] | None],
        write: str,
        refetch: bool = True,
    ) -> dict[str, Any] | None:
        """Apply the Kueue-managed status `build(current Workload)` returns, as the field
        manager `kueue-admission` (api/workload_status.py says why), with the state's
        resolvedPreemptibility riding along. On a conflict the Workload is re-read and the
        status recomputed. `build` returning None = nothing to write."""
        namespace, name = key.split("/", 1)
        copy = self.copies.get(key)
        if copy is None:
            return None
        body = copy.body
        sent = False

        async def attempt() -> dict[str, Any] | None:
            nonlocal body, sent
            status = build(body)
            if status is None:
                return None
            resolved = self._resolution(key)
            if resolved is not None:
                status["resolvedPreemptibility"] = resolved
            sent = True
            try:
                return await self.api.apply_workload_status(apply_body(body, status))
            except ApiException as exc:
                if exc.status == 409 and refetch:
                    body = await self.api.get_workload(namespace, name)
                raise

        asked = time.perf_counter()
        async with self.writes:
            started = time.perf_counter()
            try:
                result = await (retrying(attempt) if refetch else attempt())
            except ApiException as exc:
                self.metrics.api_writes.labels(write, f"error{exc.status}").inc()
                raise
            if sent:  # `build` may have found nothing to write: no request, not counted
                self.metrics.api_writes.labels(write, "ok").inc()
                self.metrics.api_write_seconds.labels(write, "wait").observe(started - asked)
                self.metrics.api_write_seconds.labels(write, "request").observe(
                    time.perf_counter() - started
                )
            return result

    async def _write_admission(self, admit: Admit) -> None:
        key = admit.workload_key
        admission = admission_to_api(admit.admission)
        now = self.clock()

        def build(wl: dict[str, Any]) -> dict[str, Any] | None:
            if has_quota_reservation(wl) or workload_status.is_finished(wl):
                raise _Superseded(key)
            return workload_status.admit(wl, admission, now)

        result: dict[str, Any] | None = None
        try:
            await self._clear_stale_admission(key)
            result = await self._write_workload(key, build, "admit")
        except _ADMISSION_FAILURES as exc:
            log.warning("admission of %s not written (%s); re-reading it", key, exc)
            # Forget the assumed admission and whatever copy it was decided on: the API
            # server's current object decides (applied by _end_write below).
            self.copies.pop(key, None)
            self.state.remove_workload(key)
            result = await self._reread(key)
        finally:
            self._end_write(key, result)
        if result is not None and has_quota_reservation(result):
            self.written_reason.pop(key, None)
            await self._record_admitted(result, admit)

    async def _clear_stale_admission(self, key: WorkloadKey) -> None:
        """Remove a `status.admission` left behind without a reservation before admitting.
        Server-side apply merges into what other field managers own, so a new admission
        applied over an old one that another writer put there could keep some of the old
        one's pod sets or flavors. Kueue-style job sides remove the admission they release
        (it is ours, as `kueue-admission`); this costs a request only after a writer that
        clears QuotaReserved and leaves the admission (a merge patch without it, say)."""
        copy = self.copies.get(key)
        if copy is None:
            return
        if not (copy.body.get("status") or {}).get("admission") or has_quota_reservation(copy.body):
            return
        namespace, name = key.split("/", 1)
        meta = copy.body.get("metadata") or {}
        async with self.writes:
            cleared = await self.api.patch_workload_status(
                namespace, name, {"admission": None}, meta.get("resourceVersion")
            )
        self.metrics.api_writes.labels("clear-stale-admission", "ok").inc()
        self.copies[key] = _WorkloadCopy(cleared, _rv(cleared))

    async def _reread(self, key: WorkloadKey) -> dict[str, Any] | None:
        """The Workload as the API server has it now; None if it is gone or cannot be read
        (then the informer's next event or re-list brings it back: no copy is held)."""
        namespace, name = key.split("/", 1)
        try:
            return await retrying(lambda: self.api.get_workload(namespace, name), attempts=10)
        except API_ERRORS as exc:
            if not (isinstance(exc, ApiException) and exc.status == 404):
                log.error("cannot re-read Workload %s: %s", key, exc)
            return None

    async def _record_admitted(self, body: dict[str, Any], admit: Admit) -> None:
        priority_class = _priority_class(body)
        labels = (admit.cluster_queue, priority_class, self.metrics.role)
        self.metrics.quota_reserved_workloads.labels(*labels).inc()
        self.metrics.admitted_workloads.labels(*labels).inc()
        created = _parse_time((body.get("metadata") or {}).get("creationTimestamp"))
        if created is not None:
            waited = max(0.0, self.clock() - created)
            self.metrics.admission_wait_time.labels(*labels).observe(waited)
            self.metrics.quota_reserved_wait_time.labels(*labels).observe(waited)
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

    def _want_pending(self, pending: Inadmissible) -> None:
        key = pending.workload_key
        if self.written_reason.get(key) == pending.reason:
            return
        delay = self.config.pending_reason_delay_seconds
        if delay <= 0:
            self.wanted_reason[key] = pending
            self.status_queue.add(key)
            return
        # A head refused now is often admitted a moment later: its reason waits out the
        # delay and is dropped if it was admitted meanwhile (`_write_status` checks), and
        # reasons decided within the delay replace each other; one write at most.
        self.wanted_reason[key] = pending
        if key not in self.reason_delayed:
            self.reason_delayed.add(key)
            asyncio.get_running_loop().call_later(delay, self._reason_due, key)

    def _reason_due(self, key: WorkloadKey) -> None:
        self.reason_delayed.discard(key)
        if key in self.wanted_reason:
            self.status_queue.add(key)

    async def _status_worker(self) -> None:
        while True:
            key = await self.status_queue.get()
            try:
                await self._write_status(key)
            except Exception:  # a bug here must not stop the other Workloads' statuses
                log.exception("writing the status of Workload %s failed", key)

    async def _write_status(self, key: WorkloadKey) -> None:
        """Write the latest pending reason and resolvedPreemptibility wanted for a Workload,
        in one patch. Admitted, in-flight or deleted Workloads need no pending reason; on a
        conflict the key goes to the back of the queue (the watch brings the newer copy)."""
        pending = self.wanted_reason.pop(key, None)
        if key not in self.copies or key in self.in_flight:
            if key in self.in_flight and pending is not None:
                self.wanted_reason[key] = pending  # decided again after the write ends
            return
        before: dict[str, Any] = {}

        def build(wl: dict[str, Any]) -> dict[str, Any] | None:
            before.clear()
            before.update(wl)
            reason_due = (
                pending is not None
                and key not in self.state.admitted
                and not has_quota_reservation(wl)
                and workload_status.pending_changed(wl, pending.condition_reason, pending.reason)
            )
            if reason_due:
                assert pending is not None
                return workload_status.unset_quota_reservation(
                    wl, pending.condition_reason, pending.reason, self.clock()
                )
            wanted = self._resolution(key)
            current = (wl.get("status") or {}).get("resolvedPreemptibility")
            if wanted is not None and not _same_resolution(current, wanted):
                return workload_status.kueue_status(wl)
            return None

        try:
            result = await self._write_workload(key, build, "status", refetch=False)
        except API_ERRORS as exc:
            if isinstance(exc, ApiException) and exc.status == 409:
                if pending is not None:
                    self.wanted_reason.setdefault(key, pending)
                self.status_queue.add(key)
            else:
                log.info("status of %s not written: %s", key, exc)
            return
        if result is None:
            return
        if pending is not None:
            self.written_reason[key] = pending.reason
        self.apply_event("MODIFIED", result)
        if self.events is None:
            return
        status = result.get("status") or {}
        if pending is not None and workload_status.pending_changed(
            before, pending.condition_reason, pending.reason
        ):
            await self.events(result, "Normal", "Pending", pending.reason)
        message = (status.get("resolvedPreemptibility") or {}).get("message")
        earlier = (before.get("status") or {}).get("resolvedPreemptibility") or {}
        if message and earlier.get("message") != message:
            await self.events(result, "Warning", "InvalidPreemptibility", message)

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
        self._want_pending(waiting)
        await asyncio.gather(*writes)

    async def _write_partial_preemption(self, key: WorkloadKey, pods: int, message: str) -> None:
        """DisruptionMode Pod: the victim stays admitted with `pods` fewer pods; its owner
        removes that many pods. The admission shrinks, so quota is released at once."""
        try:
            result = await self._write_workload(
                key, lambda wl: workload_status.shrink(wl, pods), "partial-preempt"
            )
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
            return workload_status.evict(wl, evict.reason, evict.message, now, preemption_reason)

        try:
            result = await self._write_workload(key, build, "evict")
        except API_ERRORS as exc:
            log.warning("eviction of %s not written (%s); it stays admitted", key, exc)
            self.state.cancel_eviction(key)
            self.wake.set()
            return
        if result is not None:
            self.apply_event("MODIFIED", result)
            role = self.metrics.role
            priority_class = _priority_class(result)
            labels = (evict.cluster_queue, evict.reason, "", priority_class, role)
            self.metrics.evicted_workloads.labels(*labels).inc()
            if _first_eviction(result, evict.reason):
                self.metrics.evicted_workloads_once.labels(*labels).inc()
            if preemption_reason is not None and preempting_cluster_queue is not None:
                self.metrics.preempted_workloads.labels(
                    preempting_cluster_queue, preemption_reason, role
                ).inc()
            if self.events is not None:
                if preemption_reason is not None:
                    await self.events(result, "Normal", "Preempted", evict.message)
                await self.events(result, "Normal", f"EvictedDueTo{evict.reason}", evict.message)


def _priority_class(body: dict[str, Any]) -> str:
    return str(((body.get("spec") or {}).get("priorityClassRef") or {}).get("name") or "")


def _first_eviction(body: dict[str, Any], reason: str) -> bool:
    """Whether the eviction just written is the Workload's first with `reason`."""
    stats = (body.get("status") or {}).get("schedulingStats") or {}
    return any(
        e.get("reason") == reason and e.get("underlyingCause", "") == "" and e.get("count") == 1
        for e in stats.get("evictions") or ()
    )


def _same_resolution(current: Any, wanted: dict[str, Any]) -> bool:
    current = current or {}
    return all(current.get(k) == wanted.get(k) for k in ("value", "source")) and (
        current.get("message") or None
    ) == wanted.get("message")


class _Superseded(Exception):
    """The Workload changed under us so that the decision no longer applies."""


_ADMISSION_FAILURES: tuple[type[BaseException], ...] = (_Superseded, *API_ERRORS)

_PREEMPTION_TEXT = {
    "InClusterQueue": "prioritization in the ClusterQueue",
    "InCohortReclamation": "reclamation within the cohort",
    "InCohortReclaimWhileBorrowing": "reclamation within the cohort while borrowing",
}


__all__ = ["WORKLOADS", "Controller"]
