"""Event sync: watch events → `core` state, and the copies status writes are computed from.

Stale events: while a write for a Workload is in flight, events for it are held back,
and afterwards only events newer than what our write returned are applied, so an old
copy of a Workload can never undo a reservation we just made. Every status write of a
Workload goes through `WorkloadSync.write`, which computes it from the newest copy.

Watch delay: the resourceVersion a decision write returned is remembered until the watch
delivers it (or a newer version of the Workload); the time between the two is
`quotagate_watch_delay_seconds`. It grows when the API server falls behind its own watch
(a CPU-saturated server does), and the controller then decides on a cluster seconds old.
The mean wait in each second (`watch_lag`) sets how many decision writes go out at once,
when `writeParallelismMax` allows more than `writeParallelism` (`WriteSlots.adapt`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubernetes.aio.client.exceptions import ApiException

from api import workload_status
from api.workload_status import apply_body
from controller.core.model import from_api
from controller.core.model.unsupported import (
    UNSUPPORTED_CONDITION,
    findings_message,
    unsupported_fields,
)
from controller.core.model.workloads import Workload, WorkloadKey, workload_key
from controller.core.state import ClusterState
from controller.kube.client import (
    API_ERRORS,
    CONNECTION_ERRORS,
    FIELD_MANAGER,
    WriteInDoubt,
    outcome_unknown,
    retrying,
)
from controller.runtime.context import Context, priority_class_of

log = logging.getLogger(__name__)

# The builder of a write: the Kueue-managed status wanted, from the current Workload (None:
# nothing to write).
StatusBuilder = Callable[[dict[str, Any]], dict[str, Any] | None]


def resource_version(obj: dict[str, Any]) -> int:
    """resourceVersion as an integer (etcd revisions); unknown forms compare as 0."""
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:
        return 0


def _display(obj: dict[str, Any]) -> str:
    """`namespace/name`, or `name` for a cluster-scoped object, for a log line."""
    meta = obj.get("metadata") or {}
    return "/".join(str(p) for p in (meta.get("namespace"), meta.get("name")) if p)


def key_of(obj: dict[str, Any]) -> WorkloadKey:
    meta = obj.get("metadata") or {}
    return workload_key(meta.get("namespace", ""), meta.get("name", ""))


def resolved_preemptibility(state: ClusterState, key: WorkloadKey) -> dict[str, Any] | None:
    """`status.resolvedPreemptibility` as the state resolved it (None: not resolved)."""
    record = state.cache.records.get(key)
    if record is None:
        return None
    resolution = record.resolution
    out = {"value": str(resolution.value), "source": str(resolution.source)}
    if resolution.problems:
        out["message"] = "; ".join(resolution.problems)
    return out


def same_resolution(current: Any, wanted: dict[str, Any]) -> bool:
    current = current or {}
    return all(current.get(k) == wanted.get(k) for k in ("value", "source")) and (
        current.get("message") or None
    ) == wanted.get("message")


@dataclass(slots=True)
class WorkloadCopy:
    """The newest Workload object seen (for status patches computed from it)."""

    body: dict[str, Any]
    rv: int


@dataclass(slots=True)
class _InFlight:
    held_events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


ECHO_FORGOTTEN = 60.0  # seconds: see `WorkloadSync.watch_lag`


@dataclass(slots=True)
class _Echo:
    """A decision write's answer not yet seen on the watch."""

    rv: int
    answered: float  # monotonic time of the answer


class WorkloadSync:
    """Applies watch events to the state; holds the newest copy of every Workload."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.copies: dict[WorkloadKey, WorkloadCopy] = {}
        self.in_flight: dict[WorkloadKey, _InFlight] = {}
        self.echoes: dict[WorkloadKey, _Echo] = {}  # see "Watch delay" above
        # The delays seen since the last `watch_lag`: their sum and number.
        self._delays_seen = 0.0
        self._seen = 0
        self.monotonic: Callable[[], float] = time.monotonic
        self.problems: dict[str, str] = {}  # object key → last conversion problem reported
        # object key → what Kueue's rules find wrong with it, as last reported
        self.invalid: dict[str, str] = {}
        # kind/key → the unsupported Kueue fields last reported (controller/core/model/unsupported.py)
        self.unsupported: dict[str, str] = {}
        # Called with every Workload applied (the pending reasons, then the integrations)
        # and with the key of every Workload deleted.
        self.workload_listeners: list[Callable[[dict[str, Any]], None]] = []
        self.deletion_listeners: list[Callable[[WorkloadKey], None]] = []
        # Called with `kind/namespace/name` of every other object deleted.
        self.object_deletion_listeners: list[Callable[[str], None]] = []

    def reset(self) -> None:
        """Forget every object (the state is replaced by the caller)."""
        self.copies.clear()
        self.echoes.clear()
        self._delays_seen, self._seen = 0.0, 0
        self.problems.clear()
        self.invalid.clear()
        self.unsupported.clear()

    def body(self, key: WorkloadKey) -> dict[str, Any] | None:
        copy = self.copies.get(key)
        return copy.body if copy is not None else None

    # -- events --------------------------------------------------------------------------------

    def apply_event(self, event_type: str | None, body: dict[str, Any]) -> None:
        """Apply one watch event (type None/ADDED/MODIFIED/DELETED) to the state."""
        self._check_unsupported(event_type, body)
        if body.get("kind") == "Workload":
            key = key_of(body)
            if key in self.echoes:
                self._seen_on_watch(key, resource_version(body))
            flight = self.in_flight.get(key)
            if flight is not None:
                flight.held_events.append((event_type or "MODIFIED", body))
                return
            self._apply_workload(event_type, body)
        else:
            self._apply_other(event_type, body)
        self.ctx.wake.set()

    def _apply_workload(self, event_type: str | None, body: dict[str, Any]) -> None:
        state = self.ctx.state
        key = key_of(body)
        rv = resource_version(body)
        seen = self.copies.get(key)
        if event_type == "DELETED":
            if seen is None or rv >= seen.rv:
                self.copies.pop(key, None)
                self.problems.pop(key, None)
                self.invalid.pop(key, None)
                for forget in self.deletion_listeners:
                    forget(key)
                state.remove_workload(key)
            return
        if seen is not None and rv and rv <= seen.rv:
            return  # an older copy than one already applied
        self.copies[key] = WorkloadCopy(body, rv)
        try:
            same = self._same_spec(key, seen, body)
            workload = from_api.convert(
                body,
                pod_sets=same.pod_sets if same is not None else None,
                spec_errors=same.spec_errors if same is not None else None,
            )
        except from_api.InvalidObject as exc:
            self._report_problem(key, body, str(exc))
            return
        self.problems.pop(key, None)
        self._report_invalid(key, body, getattr(workload, "invalid", None))
        held = state.cache.admitted.get(key)
        cluster_queue = held.cluster_queue if held is not None else None
        state.apply(workload)
        if (
            seen is not None
            and workload_status.is_admitted(body)
            and not workload_status.is_admitted(seen.body)
        ):
            # Admission fair sharing settles the entry penalty on every transition into
            # Admitted (Kueue's workload controller); a first copy is no transition.
            state.settle_admission(key, self.ctx.clock())
        finished = isinstance(workload, Workload) and workload.finished
        metrics = self.ctx.metrics
        if cluster_queue is not None and finished and self.ctx.leading:
            priority_class = priority_class_of(body)
            metrics.finished_workloads_total.inc(cluster_queue, priority_class, metrics.role)
            metrics.local_queue.observe_finished(body, priority_class, metrics.role)
            metrics.workload.observe_finished(body, cluster_queue, priority_class, metrics.role)
        if seen is not None and self.ctx.leading:
            metrics.workload.observe_released(seen.body, body, self.ctx.clock(), metrics.role)
        for listener in self.workload_listeners:
            listener(body)

    def _same_spec(
        self, key: WorkloadKey, seen: WorkloadCopy | None, body: dict[str, Any]
    ) -> Workload | None:
        """The state's copy of this Workload when its spec cannot have changed since the
        copy it came from: same uid and same metadata.generation (the API server bumps it
        on every spec change). Most events are status changes; reading the pod templates
        again for each (their requests, Kueue's rules on them) was a few percent of the
        controller's CPU."""
        if seen is None or key in self.problems:  # the state's copy is not seen's
            return None
        before, after = seen.body.get("metadata") or {}, body.get("metadata") or {}
        generation = after.get("generation")
        if generation is None or generation != before.get("generation"):
            return None
        if not after.get("uid") or after.get("uid") != before.get("uid"):
            return None
        previous: Workload | None = self.ctx.state.cache.workloads.get(key)
        return previous

    def _apply_other(self, event_type: str | None, body: dict[str, Any]) -> None:
        state = self.ctx.state
        kind = body.get("kind")
        meta = body.get("metadata") or {}
        name = meta.get("name", "")
        key = f"{kind}/{meta.get('namespace', '')}/{name}"
        if event_type == "DELETED":
            self.problems.pop(key, None)
            self.invalid.pop(key, None)
            for listener in self.object_deletion_listeners:
                listener(key)
            if kind == "ResourceFlavor":
                state.remove_flavor(name)
            elif kind == "ClusterQueue":
                state.remove_cluster_queue(name)
            elif kind == "Cohort":
                state.remove_cohort(name)
            elif kind == "AdmissionCheck":
                state.remove_admission_check(name)
            elif kind == "LocalQueue":
                state.remove_local_queue(meta.get("namespace", ""), name)
            elif kind == "Namespace":
                state.remove_namespace(name)
            elif kind == "Topology":
                state.remove_topology(name)
            return
        try:
            obj = from_api.convert(body)
        except from_api.InvalidObject as exc:
            # Never left as its previous version: a queue, flavor or Cohort that cannot be
            # read stands in inactive, with what is wrong (its condition and an Event).
            message = "; ".join(f"{path}: {problem}" for path, problem in exc.problems)
            rules = from_api.invalid_message(body)
            message = f"{rules}; {message}" if rules else message
            self._report_problem(key, body, message)
            placeholder = from_api.stand_in(body, message)
            if placeholder is not None:
                state.apply(placeholder)
            return
        self.problems.pop(key, None)
        self._report_invalid(key, body, getattr(obj, "invalid", None))
        state.apply(obj)

    def _check_unsupported(self, event_type: str | None, body: dict[str, Any]) -> None:
        """Report the Kueue fields of an object that quotagate does not implement yet: a
        Warning Event when they change and, on a Workload, the `UnsupportedFields`
        condition (queues get theirs from the queue status writer). Leader only: a new
        leader starts from an empty record and reports again what it finds."""
        if not self.ctx.leading:
            return
        meta = body.get("metadata") or {}
        key = f"{body.get('kind')}/{meta.get('namespace', '')}/{meta.get('name', '')}"
        if event_type == "DELETED":
            self.unsupported.pop(key, None)
            return
        state = self.ctx.state
        message = findings_message(
            unsupported_fields(
                body,
                fair_sharing=state.fair_sharing is not None,
                admission_fair_sharing=state.admission_fair_sharing is not None,
            )
        )
        if self.unsupported.get(key, "") == message:
            return
        if message:
            self.unsupported[key] = message
            if self.ctx.events is not None:
                self.ctx.spawn(self.ctx.events(body, "Warning", UNSUPPORTED_CONDITION, message))
        else:
            self.unsupported.pop(key, None)
        if body.get("kind") == "Workload":
            self.ctx.spawn(self._write_unsupported_condition(body, message))

    async def _write_unsupported_condition(self, body: dict[str, Any], message: str) -> None:
        """The Workload's `UnsupportedFields` condition, applied under quotagate's own field
        manager (no other writer owns it; an empty list removes it)."""
        current = workload_status.condition(body, UNSUPPORTED_CONDITION)
        if (current or {}).get("message", "") == message:
            return
        conditions = (
            workload_status.set_condition(
                [], UNSUPPORTED_CONDITION, True, "NotImplemented", message, self.ctx.clock()
            )
            if message
            else []
        )
        apply = apply_body(body, {"conditions": conditions}, strict=False)
        try:
            async with self.ctx.writes.information():
                await self.ctx.api.apply_workload_status(apply, field_manager=FIELD_MANAGER)
        except API_ERRORS as exc:
            log.info("UnsupportedFields condition of %s not written: %s", key_of(body), exc)

    def _report_problem(self, key: str, body: dict[str, Any], message: str) -> None:
        """An object that cannot be converted: logged, with a Warning Event."""
        if self.problems.get(key) == message:
            return
        self.problems[key] = message
        log.warning("unreadable %s %s: %s", body.get("kind"), _display(body), message)
        if self.ctx.events is not None:
            self.ctx.spawn(self.ctx.events(body, "Warning", "InvalidObject", message))

    def _report_invalid(self, key: str, body: dict[str, Any], message: str | None) -> None:
        """An object Kueue's rules refuse (stored before the validating webhook, or while it
        was down): a Warning Event when what is wrong changes. Its condition comes with
        its status (a queue's Active=False, a pending Workload's QuotaReserved=False)."""
        if message is None:
            self.invalid.pop(key, None)
            return
        if self.invalid.get(key) == message:
            return
        self.invalid[key] = message
        log.warning("invalid %s %s: %s", body.get("kind"), _display(body), message)
        if self.ctx.events is not None and self.ctx.leading:
            self.ctx.spawn(self.ctx.events(body, "Warning", "InvalidObject", message))

    def _seen_on_watch(self, key: WorkloadKey, rv: int) -> None:
        echo = self.echoes[key]
        if rv >= echo.rv:
            del self.echoes[key]
            delay = max(0.0, self.monotonic() - echo.answered)
            self.ctx.metrics.watch_delay.observe(delay)
            self._delays_seen += delay
            self._seen += 1

    def watch_lag(self) -> float:
        """How far the watch runs behind the controller's decision writes: the mean, over
        the answers it brought since the last call and those it has not brought yet, of
        the time from the answer to its event (or to now). A mean, not the longest: one
        event held up by a long admission cycle says nothing about the API server. An
        answer awaited for more than ECHO_FORGOTTEN seconds is forgotten (its Workload's
        events may never come: a lost watch is re-listed, not replayed)."""
        now = self.monotonic()
        total, count = self._delays_seen, self._seen
        self._delays_seen, self._seen = 0.0, 0
        for key, echo in list(self.echoes.items()):
            age = now - echo.answered
            if age > ECHO_FORGOTTEN:
                del self.echoes[key]
            else:
                total += age
                count += 1
        return total / count if count else 0.0

    def _await_echo(self, key: WorkloadKey, answer: dict[str, Any]) -> None:
        """Remember a decision write's answer until the watch brings it; one the watch
        brought before the answer (applied, or held back meanwhile) counts as no delay."""
        rv = resource_version(answer)
        if not rv:
            return
        copy, flight = self.copies.get(key), self.in_flight.get(key)
        if (copy is not None and copy.rv >= rv) or (
            flight is not None
            and any(resource_version(body) >= rv for _, body in flight.held_events)
        ):
            self.ctx.metrics.watch_delay.observe(0.0)
            return
        self.echoes[key] = _Echo(rv, self.monotonic())

    # -- writes --------------------------------------------------------------------------------

    def begin_write(self, key: WorkloadKey) -> None:
        """Hold back this Workload's events until `end_write`."""
        self.in_flight.setdefault(key, _InFlight())

    def end_write(self, key: WorkloadKey, result: dict[str, Any] | None) -> None:
        """Apply what the write returned, then the held-back events (older ones drop out)."""
        flight = self.in_flight.pop(key, None)
        if result is not None:
            self._apply_workload("MODIFIED", result)
        for event_type, body in flight.held_events if flight else ():
            self._apply_workload(event_type, body)
        self.ctx.wake.set()

    def replace_copy(self, key: WorkloadKey, body: dict[str, Any]) -> None:
        """A copy our own write returned, outside the event stream."""
        self.copies[key] = WorkloadCopy(body, resource_version(body))

    async def write(
        self,
        key: WorkloadKey,
        build: StatusBuilder,
        write: str,
        refetch: bool = True,
        information: bool = False,
    ) -> dict[str, Any] | None:
        """Apply the Kueue-managed status `build(current Workload)` returns, as the field
        manager `kueue-admission` (api/workload_status.py says why), with the state's
        resolvedPreemptibility riding along. On a conflict the Workload is re-read and the
        status recomputed (`refetch`). `build` returning None = nothing to write. Counted
        and timed as `write` in the metrics. An `information` write (no decision rides on
        it) takes one of the slots kept for information (`WriteSlots`). A refusal after an
        attempt whose outcome is unknown raises `WriteInDoubt`: that attempt may have been
        made."""
        namespace, name = key.split("/", 1)
        if key not in self.copies:
            return None
        ctx = self.ctx
        body: dict[str, Any] = {}
        sent = False
        in_doubt = False  # an attempt failed with its outcome unknown

        async def attempt() -> dict[str, Any] | None:
            nonlocal body, sent, in_doubt
            status = build(body)
            if status is None:
                # Nothing to write, or nothing any more: after a conflict the Workload as
                # re-read may need no write (a victim that finished meanwhile); a write
                # that ends so is not counted.
                sent = False
                return None
            resolved = resolved_preemptibility(ctx.state, key)
            if resolved is not None:
                status["resolvedPreemptibility"] = resolved
            sent = True
            try:
                return await ctx.api.apply_workload_status(apply_body(body, status))
            except API_ERRORS as exc:
                in_doubt = in_doubt or outcome_unknown(exc)
                if isinstance(exc, ApiException) and exc.status == 409 and refetch:
                    body = await ctx.api.get_workload(namespace, name)
                raise

        metrics = ctx.metrics
        asked = time.perf_counter()
        slot = ctx.writes.information() if information else ctx.writes.decision()
        async with slot:
            # Built on the copy as it is once the slot is ours, not as it was when the
            # write was asked for: what the watch brought during the wait counts (a victim
            # that finished meanwhile is left alone, with no request refused as stale).
            copy = self.copies.get(key)
            if copy is None:
                return None
            body = copy.body
            started = time.perf_counter()
            try:
                result = await (
                    retrying(attempt, on_retry=lambda _: self._retried(write))
                    if refetch
                    else attempt()
                )
            except ApiException as exc:
                metrics.api_writes.labels(write, f"error{exc.status}").inc()
                if in_doubt and not outcome_unknown(exc):
                    raise WriteInDoubt(exc) from exc
                raise
            except CONNECTION_ERRORS:
                metrics.api_writes.labels(write, "connection-error").inc()
                raise
            if sent and result is not None and not information:
                self._await_echo(key, result)
            if sent:  # `build` found something to write and it was written
                metrics.api_writes.labels(write, "ok").inc()
                metrics.api_write_seconds.labels(write, "wait").observe(started - asked)
                metrics.api_write_seconds.labels(write, "request").observe(
                    time.perf_counter() - started
                )
            return result

    async def _retried(self, write: str) -> None:
        self.ctx.metrics.api_write_retries.labels(write).inc()

    async def reread(self, key: WorkloadKey, attempts: int | None = 10) -> dict[str, Any] | None:
        """The Workload as the API server has it now; None if it is gone or cannot be read
        within `attempts` (None: until the API server answers) (then the informer's next
        event or re-list brings it back: no copy is held)."""
        namespace, name = key.split("/", 1)
        try:
            return await retrying(
                lambda: self.ctx.api.get_workload(namespace, name), attempts=attempts
            )
        except API_ERRORS as exc:
            if not (isinstance(exc, ApiException) and exc.status == 404):
                log.error("cannot re-read Workload %s: %s", key, exc)
            return None
