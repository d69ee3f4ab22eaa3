"""ClusterQueue and LocalQueue status, kept like Kueue's, written only when it changes.

Status is computed from the `core` state (counts, reserved and admitted usage per
flavor and resource, the `Active` condition with a reason when inactive) once per interval,
with Kueue's per-ClusterQueue gauges from the same snapshot. A queue whose status changed
goes into a de-duplicating queue of writes, worked by as many writers as there are
information slots (`context.WriteSlots`): the tick never waits for a write, so the gauges
are never older than the interval, and when the API server is slower than the changes,
each queue is written in turn with its latest status (at 1,000 ClusterQueues under load,
every queue within a few minutes rather than some never).

With admission fair sharing the same writer runs its sampling tick every
`usageSamplingInterval` (controller/core/afs/sampling.py) and writes each sampled
LocalQueue's `status.fairSharing.admissionFairSharingStatus` — when its consumed resources
changed — and the gauge `kueue_local_queue_admission_fair_sharing_usage`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes.aio.client.exceptions import ApiException

from api import workload_status
from api.quantities import Quantity, decimal_text
from controller.core.afs.sampling import LocalQueueUsage, fair_local_queues, sample
from controller.core.cache.objects import INVALID, Inactive
from controller.core.cache.records import Phase
from controller.core.fairsharing.shares import Shares, shares_of
from controller.core.model.clusterqueues import FlavorResource
from controller.core.model.unsupported import UNSUPPORTED_CONDITION
from controller.core.state import ClusterState
from controller.kube.client import CLUSTER_QUEUES, COHORTS, LOCAL_QUEUES, Resource, describe
from controller.kube.workqueue import KeyQueue
from controller.runtime.context import Context

log = logging.getLogger(__name__)


def _flavor_list(
    usage: dict[str, dict[str, int]], borrowed: dict[str, dict[str, int]] | None
) -> list[dict[str, Any]]:
    flavors = []
    for flavor in sorted(usage):
        resources = []
        for resource in sorted(usage[flavor]):
            entry: dict[str, Any] = {
                "name": resource,
                "total": str(Quantity(usage[flavor][resource])),
            }
            if borrowed is not None:
                entry["borrowed"] = str(Quantity(borrowed.get(flavor, {}).get(resource, 0)))
            resources.append(entry)
        flavors.append({"name": flavor, "resources": resources})
    return flavors


@dataclass(frozen=True, slots=True)
class QueueFigures:
    """A ClusterQueue's status and gauges in numbers, cheap to take and compare: the
    status is formatted and the gauges set again only when they change (at 1,000
    ClusterQueues, formatting all of them every second took a tenth of a core)."""

    pending: int
    inadmissible: int
    reserving: int
    admitted: int
    reserved: tuple[tuple[FlavorResource, int], ...]  # per quota, in the queue's order
    used: tuple[tuple[FlavorResource, int], ...]  # by admitted (not evicting) Workloads
    finished: int


def cluster_queue_figures(state: ClusterState, name: str, finished: int = 0) -> QueueFigures:
    cq = state.objects.cluster_queues[name]
    queue = state.queues.get(name)
    keys = state.cache.admitted_in(name)
    admitted = 0
    used: dict[FlavorResource, int] = {fr: 0 for fr, _ in cq.quotas()}
    for key in keys:
        held = state.cache.admitted[key]
        if held.evicting:
            continue
        admitted += 1
        for fr, value in (held.usage or {}).items():
            used[fr] = used.get(fr, 0) + value
    return QueueFigures(
        pending=len(queue) if queue is not None else 0,
        inadmissible=queue.inadmissible_count() if queue is not None else 0,
        reserving=len(keys),
        admitted=admitted,
        reserved=tuple((fr, state.cache.quota.usage(name, fr)) for fr, _ in cq.quotas()),
        used=tuple(used.items()),
        finished=finished,
    )


@dataclass(slots=True)
class _Gauges:
    """A ClusterQueue's gauge series, looked up once, with the values last set on them; a
    value is set again only when it changes. (Setting every gauge of every changed queue,
    each looked up by `labels()`, was 4.4 % of the controller's CPU in a large-scale run,
    half of it in `labels()`.)"""

    cq: Any
    scalars: tuple[Any, ...]  # pending active/inadmissible, reserving, admitted, finished, status
    quotas: tuple[tuple[FlavorResource, Any, Any], ...]  # (flavor, resource): reservation, usage
    values: tuple[float | None, ...]  # None: not set yet
    quota_values: tuple[tuple[float | None, float | None], ...]


def cluster_queue_status(
    state: ClusterState, name: str, figures: QueueFigures | None = None
) -> dict[str, Any]:
    """The `status` Kueue keeps on a ClusterQueue (without conditions' timestamps)."""
    cq = state.objects.cluster_queues[name]
    if figures is None:
        figures = cluster_queue_figures(state, name)
    reserved: dict[str, dict[str, int]] = defaultdict(dict)
    used: dict[str, dict[str, int]] = defaultdict(dict)
    borrowed: dict[str, dict[str, int]] = defaultdict(dict)
    nominal = {fr: quota.nominal for fr, quota in cq.quotas()}
    for (flavor, resource), total in figures.reserved:
        reserved[flavor][resource] = total
        borrowed[flavor][resource] = max(0, total - nominal[flavor, resource])
    for (flavor, resource), value in figures.used:
        used[flavor][resource] = value
    return {
        "pendingWorkloads": figures.pending,
        "reservingWorkloads": figures.reserving,
        "admittedWorkloads": figures.admitted,
        "flavorsReservation": _flavor_list(reserved, borrowed),
        "flavorsUsage": _flavor_list(used, borrowed),
    }


def local_queue_counts(
    state: ClusterState, finished_by_cq: dict[str, int] | None = None
) -> dict[str, dict[str, int]]:
    """pending/reserving/admitted counts per LocalQueue key (namespace/name): its Workloads
    not finished (`state.index.live_in`), of which those holding quota are reserving; the
    finished ones per ClusterQueue go into `finished_by_cq` (`state.index.finished_in`)."""
    if finished_by_cq is not None:
        finished_by_cq.update(state.index.finished_in)
    counts = {
        lq: {"pendingWorkloads": live, "reservingWorkloads": 0, "admittedWorkloads": 0}
        for lq, live in state.index.live_in.items()
    }
    records, live = state.cache.records, state.index.live
    for key in state.cache.holding():
        entry = counts[live[key]]
        entry["pendingWorkloads"] -= 1
        entry["reservingWorkloads"] += 1
        if records[key].phase is Phase.ADMITTED:
            entry["admittedWorkloads"] += 1
    return counts


NO_WORKLOADS: Mapping[str, int] = {
    "pendingWorkloads": 0,
    "reservingWorkloads": 0,
    "admittedWorkloads": 0,
}


def admission_fair_sharing_status(
    usage: LocalQueueUsage, previous: Mapping[str, Any] | None
) -> dict[str, Any]:
    """A sampled LocalQueue's `status.fairSharing`: Kueue's required `weightedShare` (0: a
    LocalQueue has no quota of its own) and its consumed resources as canonical
    quantities, with the time of the sample — or the `previous` time when the consumed
    resources are unchanged, so an idle LocalQueue's status is not written again."""
    consumed = {name: decimal_text(value) for name, value in sorted(usage.consumed.items())}
    sampled = previous.get("admissionFairSharingStatus") if previous else None
    if sampled is not None and sampled["consumedResources"] == consumed:
        last_update = sampled["lastUpdate"]
    else:
        last_update = workload_status.rfc3339(usage.last_update or 0.0)
    return {
        "weightedShare": 0,
        "admissionFairSharingStatus": {"consumedResources": consumed, "lastUpdate": last_update},
    }


def _written_key(resource: Resource, key: str) -> str:
    """`kind/namespace/name`, as WorkloadSync keys objects (unsupported fields, deletions)."""
    return f"{resource.kind}/{key}" if resource.namespaced else f"{resource.kind}//{key}"


def active_condition(inactive: Inactive | None) -> tuple[bool, str, str]:
    """A queue's `Active` condition: True (Ready) or False with the inactive reason."""
    if inactive is None:
        return True, "Ready", "Can admit new workloads"
    return False, inactive.reason, inactive.message


class QueueStatusWriter:
    """Writes ClusterQueue and LocalQueue status while this replica leads."""

    def __init__(self, ctx: Context, unsupported: Mapping[str, str], interval: float = 1.0) -> None:
        self.ctx = ctx
        self.unsupported = unsupported  # kind/key → unsupported Kueue fields (WorkloadSync)
        self.interval = interval
        # kind/namespace/name → the status last written (forgotten when the object goes),
        # and the conditions as written (their transition times)
        self.written: dict[str, dict[str, Any]] = {}
        self.written_conditions: dict[str, list[dict[str, Any]]] = {}
        # The writes due: kind/namespace/name, each once, in the order they fell due, with
        # the latest status wanted for it.
        self.queue: KeyQueue[str] = KeyQueue()
        self.wanted: dict[str, tuple[Resource, str, dict[str, Any]]] = {}
        self.writers = ctx.writes.information_slots
        self.metric_queues: set[str] = set()  # ClusterQueues with gauge series out
        self.metric_cohorts: set[str] = set()  # cohorts with a weighted-share series out
        # Admission fair sharing: per LocalQueue its `status.fairSharing` as last sampled,
        # when the next sample is due, and the usage gauge's series out.
        self.local_queue_fair_sharing: dict[str, dict[str, Any]] = {}
        self.next_sample: float | None = None
        self.usage_series: set[tuple[str, str, str, str]] = set()  # label values with role
        # Per ClusterQueue, what its status and gauges were last made of, and the status:
        # one whose figures, conditions and share are unchanged is not formatted again.
        self.figures: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {}
        self.figures_of: ClusterState | None = None
        self.figures_gauges: tuple[str, int] = ("", 0)
        # Per ClusterQueue, its gauge series (dropped with `figures`).
        self.gauges: dict[str, _Gauges] = {}

    def forget(self, key: str) -> None:
        """The object `kind/namespace/name` was deleted: one created again under its name
        starts with no status, so its status is news again (WorkloadSync calls this)."""
        self.written.pop(key, None)
        self.written_conditions.pop(key, None)
        self.wanted.pop(key, None)

    async def run_forever(self) -> None:
        self.next_sample = None  # a new term samples at once (its history was just read)
        writers = [asyncio.create_task(self._writer()) for _ in range(self.writers)]
        try:
            while True:
                try:
                    self.refresh()
                except Exception:  # a status must never stop admission
                    log.exception("queue status update failed")
                await asyncio.sleep(self.interval)
        finally:
            for writer in writers:
                writer.cancel()

    async def write_changed(self) -> None:
        """Refresh, then write every status that changed and wait for the writes."""
        self.refresh()
        while self.queue:
            await self._write_next()

    async def _writer(self) -> None:
        while True:
            try:
                await self._write_next()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("queue status write failed")

    async def _write_next(self) -> None:
        """Write the status wanted for the next queued object, if it still differs from
        the one written."""
        key = await self.queue.get()
        wanted = self.wanted.pop(key, None)
        if wanted is not None and self.written.get(key) != wanted[2]:
            await self._write(*wanted)

    def update_metrics(
        self, name: str, cq: Any, figures: QueueFigures, inactive: Inactive | None
    ) -> None:
        """Kueue's per-ClusterQueue gauges from the same figures and activity as the status."""
        gauges = self.gauges.get(name)
        if gauges is None or gauges.cq is not cq:
            gauges = self.gauges[name] = self._take_gauges(name, cq)
        active = inactive is None
        values = (
            figures.pending - figures.inadmissible,
            figures.inadmissible,
            figures.reserving,
            figures.admitted,
            figures.finished,
            1 if active else 0,
            0 if active else 1,
        )
        for series, value, was in zip(gauges.scalars, values, gauges.values, strict=True):
            if value != was:
                series.set(value)
        gauges.values = values
        reserved = dict(figures.reserved)
        used = dict(figures.used)
        quota_values = tuple(
            (reserved[fr] / 1000, used.get(fr, 0) / 1000) for fr, _, _ in gauges.quotas
        )
        for (_, reservation, usage), (reserved_now, used_now), (reserved_was, used_was) in zip(
            gauges.quotas, quota_values, gauges.quota_values, strict=True
        ):
            if reserved_now != reserved_was:
                reservation.set(reserved_now)
            if used_now != used_was:
                usage.set(used_now)
        gauges.quota_values = quota_values

    def _take_gauges(self, name: str, cq: Any) -> _Gauges:
        """The ClusterQueue's gauge series, with its quotas' nominal, borrowing and lending
        limits set (they change only with the ClusterQueue object)."""
        metrics = self.ctx.metrics
        role = metrics.role
        scalars = (
            metrics.pending_workloads.labels(name, "active", role),
            metrics.pending_workloads.labels(name, "inadmissible", role),
            metrics.reserving_active_workloads.labels(name, role),
            metrics.admitted_active_workloads.labels(name, role),
            metrics.finished_workloads.labels(name, role),
            metrics.cluster_queue_status.labels(name, "active", role),
            metrics.cluster_queue_status.labels(name, "pending", role),
        )
        cohort = cq.cohort or ""
        quotas = []
        for fr, quota in cq.quotas():
            labels = (cohort, name, *fr, role)
            quotas.append(
                (
                    fr,
                    metrics.resource_reservation.labels(*labels),
                    metrics.resource_usage.labels(*labels),
                )
            )
            metrics.nominal_quota.labels(*labels).set(quota.nominal / 1000)
            if quota.borrowing_limit is not None:
                metrics.borrowing_limit.labels(*labels).set(quota.borrowing_limit / 1000)
            if quota.lending_limit is not None:
                metrics.lending_limit.labels(*labels).set(quota.lending_limit / 1000)
        return _Gauges(
            cq, scalars, tuple(quotas), (None,) * len(scalars), ((None, None),) * len(quotas)
        )

    def sample_if_due(self, now: float) -> None:
        """Admission fair sharing's tick: every `usageSamplingInterval`, fold each
        LocalQueue's admitted usage into its history and take its status and gauge from the
        result. A LocalQueue of an inactive ClusterQueue keeps what it had; one no longer
        under admission fair sharing loses its gauge series."""
        state = self.ctx.state
        settings = state.admission_fair_sharing
        if settings is None or (self.next_sample is not None and now < self.next_sample):
            return
        self.next_sample = now + settings.usage_sampling_interval_seconds
        metrics = self.ctx.metrics
        gauge = metrics.local_queue_admission_fair_sharing_usage
        fair = set(fair_local_queues(state.queues, state.objects))
        for key in set(self.local_queue_fair_sharing) - fair:
            del self.local_queue_fair_sharing[key]
        series: set[tuple[str, str, str, str]] = set()
        for usage in sample(state.queues, state.objects, now):
            key = usage.local_queue
            self.local_queue_fair_sharing[key] = admission_fair_sharing_status(
                usage, self.local_queue_fair_sharing.get(key)
            )
            namespace, name = key.split("/", 1)
            labels = (name, namespace, usage.cluster_queue, metrics.role)
            gauge.labels(*labels).set(usage.usage)
            series.add(labels)
        for old in self.usage_series - series:
            name, namespace, cluster_queue, _ = old
            lq = state.objects.local_queues.get(f"{namespace}/{name}")
            if lq is not None and lq.cluster_queue == cluster_queue and lq.key in fair:
                series.add(old)  # not sampled (its ClusterQueue is inactive): kept
            else:
                with contextlib.suppress(KeyError):  # gone with a role change already
                    gauge.remove(*old)
        self.usage_series = series

    def refresh(self) -> None:
        """Compute every queue's status and gauges; queue a write for each status that
        differs from the one written."""
        state = self.ctx.state
        now = self.ctx.clock()
        self.sample_if_due(now)
        finished: dict[str, int] = {}
        counts = local_queue_counts(state, finished)
        shares = (
            shares_of(state.objects, state.cache.quota) if state.fair_sharing is not None else None
        )
        gauges = (self.ctx.metrics.role, self.ctx.metrics.queue_gauges_cleared)
        if self.figures_of is not state or self.figures_gauges != gauges:
            # A new term's state, or gauges cleared or relabelled by a role change: all anew.
            self.figures, self.gauges = {}, {}
            self.figures_of, self.figures_gauges = state, gauges
        for name, cq in state.objects.cluster_queues.items():
            figures = cluster_queue_figures(state, name, finished.get(name, 0))
            inactive = state.objects.cluster_queue_inactive(name)
            unsupported = self._unsupported(_written_key(CLUSTER_QUEUES, name))
            fair_sharing = self._fair_sharing(shares, name, queue=True)
            facts = (cq, figures, inactive, unsupported, fair_sharing)
            known = self.figures.get(name)
            if known is not None and known[0][0] is cq and known[0][1:] == facts[1:]:
                status = known[1]
            else:
                status = cluster_queue_status(state, name, figures)
                self.update_metrics(name, cq, figures, inactive)
                status["fairSharing"] = fair_sharing
                active, reason, message = active_condition(inactive)
                status["conditions"] = [("Active", active, reason, message), *unsupported]
                self.figures[name] = (facts, status)
            self._want(CLUSTER_QUEUES, name, status)
        for name in self.metric_queues - set(state.objects.cluster_queues):
            self.ctx.metrics.forget_cluster_queue(name)  # deleted: its series go too
            self.figures.pop(name, None)
            self.gauges.pop(name, None)
        self.metric_queues = set(state.objects.cluster_queues)
        self._cohort_metrics(shares)
        for name, cohort in list(state.objects.cohorts.items()):
            conditions = self._unsupported(_written_key(COHORTS, name))
            if cohort.invalid is not None:  # quotagate's, while invalid (Kueue writes none)
                message = (
                    f"Cohort {name} is invalid: {cohort.invalid}; the ClusterQueues of its "
                    "tree admit nothing"
                )
                conditions = [("Active", False, INVALID, message), *conditions]
            cohort_status = {
                "conditions": conditions,
                "fairSharing": self._fair_sharing(shares, name, queue=False),
            }
            self._want(COHORTS, name, cohort_status)
        for key in list(state.objects.local_queues):
            status = dict(counts.get(key) or NO_WORKLOADS)
            fair_sharing = self.local_queue_fair_sharing.get(key)
            if fair_sharing is not None:
                status["fairSharing"] = fair_sharing
            active, reason, message = active_condition(state.objects.local_queue_inactive(key))
            status["conditions"] = [("Active", active, reason, message)]
            status["conditions"] += self._unsupported(_written_key(LOCAL_QUEUES, key))
            self._want(LOCAL_QUEUES, key, status)

    def _want(self, resource: Resource, key: str, status: dict[str, Any]) -> None:
        written_key = _written_key(resource, key)
        written = self.written.get(written_key)
        # An unchanged ClusterQueue's status is the very dict written.
        if written is status or written == status:
            self.wanted.pop(written_key, None)
            return
        self.wanted[written_key] = (resource, key, status)
        self.queue.add(written_key)

    def _fair_sharing(self, shares: Shares | None, name: str, queue: bool) -> Any:
        """`status.fairSharing` of a ClusterQueue or Cohort: its weighted share (and the
        ClusterQueue's gauge) while fair sharing is on; null (removed) while it is off,
        as Kueue writes it."""
        if shares is None:
            return None
        if not queue:
            return {"weightedShare": shares.cohort(name).weighted_share()}
        share = shares.queue(name)
        metrics = self.ctx.metrics
        cohort = self.ctx.state.objects.cluster_queues[name].cohort or ""
        metrics.cluster_queue_weighted_share.labels(name, cohort, metrics.role).set(share.metric())
        return {"weightedShare": share.weighted_share()}

    def _cohort_metrics(self, shares: Shares | None) -> None:
        """`kueue_cohort_weighted_share` for every cohort of every tree (implicit ones too,
        as Kueue's); the series of cohorts that are gone are removed."""
        metrics = self.ctx.metrics
        state = self.ctx.state
        cohorts: set[str] = set()
        if shares is not None:
            for cq in state.objects.cluster_queues.values():
                if cq.cohort:
                    cohorts.update(state.cache.quota.path(cq.name))
            cohorts.update(state.objects.cohorts)
            for name in cohorts:
                metrics.cohort_weighted_share.labels(name, metrics.role).set(
                    shares.cohort(name).metric_cohort()
                )
        for name in self.metric_cohorts - cohorts:
            metrics.forget_cohort(name)
        self.metric_cohorts = cohorts

    def _unsupported(self, key: str) -> list[tuple[str, bool, str, str]]:
        """The `UnsupportedFields` condition of a queue with Kueue fields quotagate does not
        implement yet (controller/core/model/unsupported.py), else none."""
        message = self.unsupported.get(key)
        return [(UNSUPPORTED_CONDITION, True, "NotImplemented", message)] if message else []

    def _conditions(
        self, written_key: str, spec: list[tuple[str, bool, str, str]], now: float
    ) -> list[dict[str, Any]]:
        """The conditions `spec` lists, from those last written: a condition whose status
        is unchanged keeps its transition time; one no longer listed goes."""
        listed = {type_ for type_, *_ in spec}
        conditions = [
            condition
            for condition in self.written_conditions.get(written_key, [])
            if condition.get("type") in listed
        ]
        for type_, status, reason, message in spec:
            conditions = workload_status.set_condition(
                conditions, type_, status, reason, message, now
            )
        return conditions

    async def _write(self, resource: Resource, key: str, status: dict[str, Any]) -> None:
        """Write a ClusterQueue's, LocalQueue's or Cohort's status (`key`: `name` or
        `namespace/name`) and remember it; one deleted meanwhile (404) is let go. A
        Cohort's is its `fairSharing`, its `UnsupportedFields` condition and, while it is
        invalid, `Active=False` (Kueue writes no Cohort conditions); an empty list removes
        them."""
        written_key = _written_key(resource, key)
        conditions = self._conditions(written_key, status["conditions"], self.ctx.clock())
        body = {**status, "conditions": conditions}
        try:
            async with self.ctx.writes.information():
                if resource.namespaced:
                    namespace, name = key.split("/", 1)
                    await self.ctx.api.patch_namespaced_status(resource, namespace, name, body)
                else:
                    await self.ctx.api.patch_cluster_status(resource, key, body)
            self.written[written_key] = status
            self.written_conditions[written_key] = conditions
        except ApiException as exc:
            if exc.status != 404:
                log.info("status of %s %s not written: %s", resource.kind, key, describe(exc))
