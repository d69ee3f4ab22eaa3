"""Kueue's LocalQueue metrics (`kueue_local_queue_*`, Kueue's `LocalQueueMetrics` families
in pkg/metrics/metrics.go): the same names, label names, types and buckets as Kueue's,
each carrying `replica_role`. The counters and histograms are observed where their
ClusterQueue twins are (admission, eviction, finish, pods ready: `observe_*`); the gauges
are set by the queue status refresh (controller/runtime/queue_status.py) through
`set_gauges`, from the counts it computes anyway."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["LocalQueueMetrics", "local_queue_of"]

_LQ = ["name", "namespace"]
_ROLE = "replica_role"


def _buckets(count: int) -> tuple[float, ...]:
    return (1.0, *(2.5 * 2**i for i in range(count - 1)))


def local_queue_of(body: Mapping[str, Any]) -> tuple[str, str]:
    """(name, namespace) of a Workload's LocalQueue: the label values."""
    meta = body.get("metadata") or {}
    return str((body.get("spec") or {}).get("queueName") or ""), str(meta.get("namespace") or "")


class LocalQueueMetrics:
    """The `kueue_local_queue_*` families, in `registry`."""

    def __init__(self, registry: CollectorRegistry, untyped_counter: Callable[..., Any]) -> None:
        """`untyped_counter(name, help, labels)`: a counter exposed untyped, for the one
        whose base name a gauge also has (controller/runtime/metrics.py)."""
        r, pc = registry, "priority_class"
        by_class = [*_LQ, pc, _ROLE]
        self.quota_reserved_workloads = Counter(
            "kueue_local_queue_quota_reserved_workloads",
            "Workloads whose quota was reserved, per LocalQueue",
            by_class,
            registry=r,
        )
        self.admitted_workloads = Counter(
            "kueue_local_queue_admitted_workloads",
            "Workloads admitted, per LocalQueue",
            by_class,
            registry=r,
        )
        self.finished_workloads_total = untyped_counter(
            "kueue_local_queue_finished_workloads_total",
            "Workloads that finished, per LocalQueue",
            by_class,
        )
        r.register(self.finished_workloads_total)
        self.evicted_workloads = Counter(
            "kueue_local_queue_evicted_workloads",
            "Workloads evicted, per LocalQueue, by reason and underlying_cause",
            [*_LQ, "reason", "underlying_cause", pc, _ROLE],
            registry=r,
        )
        self.quota_reserved_wait_time = Histogram(
            "kueue_local_queue_quota_reserved_wait_time_seconds",
            "Time from creation (or last requeue) to quota reservation, per LocalQueue",
            by_class,
            buckets=_buckets(14),
            registry=r,
        )
        self.admission_wait_time = Histogram(
            "kueue_local_queue_admission_wait_time_seconds",
            "Time from creation (or last requeue) to admission, per LocalQueue",
            by_class,
            buckets=_buckets(14),
            registry=r,
        )
        self.admission_checks_wait_time = Histogram(
            "kueue_local_queue_admission_checks_wait_time_seconds",
            "Time from quota reservation until admission (the admission checks), per LocalQueue",
            by_class,
            buckets=_buckets(14),
            registry=r,
        )
        self.ready_wait_time = Histogram(
            "kueue_local_queue_ready_wait_time_seconds",
            "Time from creation (or last requeue) until the pods are ready, per LocalQueue",
            by_class,
            buckets=_buckets(14),
            registry=r,
        )
        self.admitted_until_ready_wait_time = Histogram(
            "kueue_local_queue_admitted_until_ready_wait_time_seconds",
            "Time from admission until the pods are ready, per LocalQueue",
            by_class,
            buckets=_buckets(14),
            registry=r,
        )
        # Gauges (the leader's decisions: cleared with the other queue gauges).
        self.pending_workloads = Gauge(
            "kueue_local_queue_pending_workloads",
            "Pending Workloads per LocalQueue and status (active or inadmissible)",
            [*_LQ, "status", _ROLE],
            registry=r,
        )
        self.reserving_active_workloads = Gauge(
            "kueue_local_queue_reserving_active_workloads",
            "Workloads holding a quota reservation, per LocalQueue",
            [*_LQ, _ROLE],
            registry=r,
        )
        self.admitted_active_workloads = Gauge(
            "kueue_local_queue_admitted_active_workloads",
            "Admitted Workloads that are not finished, per LocalQueue",
            [*_LQ, _ROLE],
            registry=r,
        )
        self.finished_workloads = Gauge(
            "kueue_local_queue_finished_workloads",
            "Finished Workloads that still exist, per LocalQueue",
            [*_LQ, _ROLE],
            registry=r,
        )
        self.status = Gauge(
            "kueue_local_queue_status",
            "1 for the LocalQueue's current Active condition status (True, False or Unknown)",
            [*_LQ, "active", _ROLE],
            registry=r,
        )
        self.resource_reservation = Gauge(
            "kueue_local_queue_resource_reservation",
            "Quota reserved per LocalQueue, flavor and resource",
            [*_LQ, "flavor", "resource", _ROLE],
            registry=r,
        )
        self.resource_usage = Gauge(
            "kueue_local_queue_resource_usage",
            "Quota used by admitted Workloads per LocalQueue, flavor and resource",
            [*_LQ, "flavor", "resource", _ROLE],
            registry=r,
        )

    def gauges(self) -> tuple[Gauge, ...]:
        return (
            self.pending_workloads,
            self.reserving_active_workloads,
            self.admitted_active_workloads,
            self.finished_workloads,
            self.status,
            self.resource_reservation,
            self.resource_usage,
        )

    # -- observed where the ClusterQueue's twins are -----------------------------------------

    def observe_admitted(
        self,
        body: Mapping[str, Any],
        priority_class: str,
        role: str,
        waited: float | None,
        *,
        reserved: bool = True,
    ) -> None:
        """A Workload admitted, `waited` seconds after its creation; `reserved`: its quota
        was reserved by the same write (no admission checks to wait for)."""
        labels = (*local_queue_of(body), priority_class, role)
        if reserved:
            self.observe_reserved(body, priority_class, role, waited)
        self.admitted_workloads.labels(*labels).inc()
        if waited is not None:
            self.admission_wait_time.labels(*labels).observe(waited)

    def observe_checks_passed(
        self, body: Mapping[str, Any], priority_class: str, role: str, waited: float
    ) -> None:
        """A Workload admitted once its admission checks were Ready, `waited` seconds after
        its quota was reserved."""
        labels = (*local_queue_of(body), priority_class, role)
        self.admission_checks_wait_time.labels(*labels).observe(waited)

    def observe_reserved(
        self, body: Mapping[str, Any], priority_class: str, role: str, waited: float | None
    ) -> None:
        """A Workload's quota reserved, `waited` seconds after its creation."""
        labels = (*local_queue_of(body), priority_class, role)
        self.quota_reserved_workloads.labels(*labels).inc()
        if waited is not None:
            self.quota_reserved_wait_time.labels(*labels).observe(waited)

    def observe_evicted(
        self, body: Mapping[str, Any], reason: str, cause: str, priority_class: str, role: str
    ) -> None:
        self.evicted_workloads.labels(
            *local_queue_of(body), reason, cause, priority_class, role
        ).inc()

    def observe_finished(self, body: Mapping[str, Any], priority_class: str, role: str) -> None:
        self.finished_workloads_total.inc(*local_queue_of(body), priority_class, role)

    def observe_ready(
        self,
        body: Mapping[str, Any],
        priority_class: str,
        role: str,
        queued_seconds: float,
        admitted_seconds: float,
    ) -> None:
        labels = (*local_queue_of(body), priority_class, role)
        self.ready_wait_time.labels(*labels).observe(queued_seconds)
        self.admitted_until_ready_wait_time.labels(*labels).observe(admitted_seconds)

    # -- set by the queue status refresh -----------------------------------------------------

    def set_gauges(
        self,
        key: str,
        role: str,
        counts: Mapping[str, int],
        inadmissible: int,
        finished: int,
        active: bool,
        reserved: Mapping[tuple[str, str], int],
        used: Mapping[tuple[str, str], int],
    ) -> None:
        """One LocalQueue's gauges (`key` namespace/name); quantities in milli-units."""
        namespace, name = key.split("/", 1)
        pending = counts.get("pendingWorkloads", 0)
        self.pending_workloads.labels(name, namespace, "active", role).set(pending - inadmissible)
        self.pending_workloads.labels(name, namespace, "inadmissible", role).set(inadmissible)
        self.reserving_active_workloads.labels(name, namespace, role).set(
            counts.get("reservingWorkloads", 0)
        )
        self.admitted_active_workloads.labels(name, namespace, role).set(
            counts.get("admittedWorkloads", 0)
        )
        self.finished_workloads.labels(name, namespace, role).set(finished)
        for value in ("True", "False", "Unknown"):
            wanted = "True" if active else "False"
            self.status.labels(name, namespace, value, role).set(1 if value == wanted else 0)
        for (flavor, resource), milli in reserved.items():
            self.resource_reservation.labels(name, namespace, flavor, resource, role).set(
                milli / 1000
            )
        for (flavor, resource), milli in used.items():
            self.resource_usage.labels(name, namespace, flavor, resource, role).set(milli / 1000)

    def forget(self, key: str) -> None:
        """Remove a deleted LocalQueue's gauge series (Kueue's ClearLocalQueueMetrics)."""
        namespace, name = key.split("/", 1)
        for gauge in self.gauges():
            for values in [v for v in list(gauge._metrics) if v[0] == name and v[1] == namespace]:
                gauge.remove(*values)


def inadmissible_by_local_queue(state: Any, cluster_queue: str) -> dict[str, int]:
    """The parked (inadmissible) pending Workloads of one ClusterQueue, per LocalQueue key."""
    queue = state.queues.get(cluster_queue)
    out: dict[str, int] = {}
    if queue is None or not queue.inadmissible_count():
        return out
    for key in queue.workload_keys():
        if queue.is_inadmissible(key):
            lq = state.cache.local_queue_key(key)
            out[lq] = out.get(lq, 0) + 1
    return out


Usage = dict[str, dict[tuple[str, str], int]]


def local_queue_usage(state: Any) -> tuple[Usage, Usage]:
    """Per LocalQueue key: quota reserved and quota used (milli-units per (flavor,
    resource)), in one pass over the Workloads holding quota."""
    reserved: dict[str, dict[tuple[str, str], int]] = {}
    used: dict[str, dict[tuple[str, str], int]] = {}
    for key in state.cache.holding():
        held = state.cache.admitted[key]
        lq = state.cache.local_queue_key(key)
        into = reserved.setdefault(lq, {})
        for fr, value in (held.usage or {}).items():
            into[fr] = into.get(fr, 0) + value
        if not held.evicting:
            into = used.setdefault(lq, {})
            for fr, value in (held.usage or {}).items():
                into[fr] = into.get(fr, 0) + value
    return reserved, used
