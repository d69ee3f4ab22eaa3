"""Prometheus metrics, as Kueue names and shapes them (`kueue_` prefix) where Kueue has the
metric: the same names, types, label names and histogram buckets (Kueue's
`pkg/metrics/metrics.go`), so dashboards and alerts written for Kueue read them unchanged.

- Every `kueue_` metric carries `replica_role`: `leader`, `follower`, or `standalone`
  (leader election disabled), as Kueue's role tracker sets it.
- The per-queue gauges describe what the leader decided: a replica that stops leading
  removes them (and its role-labelled samples move to `follower`), and a deleted
  ClusterQueue's series are removed.
- `kueue_finished_workloads` is a gauge (finished Workloads that still exist) beside the
  counter `kueue_finished_workloads_total`, as in Kueue; the Python client cannot have a
  counter and a gauge share a base name, so that one counter is exposed untyped (PromQL's
  `rate()`/`increase()` work on it the same).
- `kueue_build_info` is 1, labelled with this build's version.

Our own additions use the `quotagate_` prefix. Every metric lives in one registry object, so
tests and several in-process controllers never share global state.
"""

from __future__ import annotations

import platform
import sys
import time
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import Metric, UnknownMetricFamily
from prometheus_client.registry import Collector

from controller.kube.fatal import FatalError
from controller.runtime.cohort_metrics import CohortMetrics
from controller.runtime.local_queue_metrics import LocalQueueMetrics
from controller.runtime.unadmitted_metrics import UnadmittedWorkloads
from controller.runtime.workload_metrics import WorkloadMetrics

__all__ = ["FOLLOWER", "LEADER", "STANDALONE", "Metrics"]

LEADER, FOLLOWER, STANDALONE = "leader", "follower", "standalone"
ROLE = "replica_role"


def kueue_buckets(count: int) -> tuple[float, ...]:
    """Kueue's `generateExponentialBuckets(count)`: 1, then 2.5 doubling (count in all)."""
    return (1.0, *(2.5 * 2**i for i in range(count - 1)))


_CYCLE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
_WRITE_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_WATCH_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class _UntypedCounter(Collector):
    """A counter exposed untyped under its `_total` name (see the module docstring)."""

    def __init__(self, name: str, documentation: str, labels: list[str]) -> None:
        self.name, self.documentation, self.labels = name, documentation, labels
        self.values: dict[tuple[str, ...], float] = {}

    def inc(self, *labels: str, amount: float = 1.0) -> None:
        self.values[labels] = self.values.get(labels, 0.0) + amount

    def collect(self) -> Iterator[Metric]:
        family = UnknownMetricFamily(self.name, self.documentation, labels=self.labels)
        for labels, value in sorted(self.values.items()):
            family.add_metric(list(labels), value)
        yield family


class WatchMetrics:
    """What the controller's informers go through (`controller.kube.informer.WatchObserver`),
    by resource plural: whether the watch is up, when its last event came (bookmarks
    included: the API server sends one at least every minute or so on a live watch), the
    re-lists and how long they took, and the watches that expired (410 Gone)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.up = Gauge(
            "quotagate_watch_up",
            "1 while the informer's last list or watch call answered, 0 after a failure "
            "(it retries, 0.5 s doubling to 4 s apart)",
            ["resource"],
            registry=registry,
        )
        self.last_event = Gauge(
            "quotagate_watch_last_event_timestamp_seconds",
            "When the informer's watch last delivered an event, bookmarks included (Unix time)",
            ["resource"],
            registry=registry,
        )
        self.relist_duration = Histogram(
            "quotagate_watch_relist_duration_seconds",
            "Complete (re-)lists of a resource by its informer, and how long each took",
            ["resource"],
            buckets=_WATCH_BUCKETS,
            registry=registry,
        )
        self.expired = Counter(
            "quotagate_watch_expired",
            "Watches the API server refused to resume (410 Gone: it restarted, or its watch "
            "cache moved on): each is followed by a re-list",
            ["resource"],
            registry=registry,
        )
        self._event_series: dict[str, Any] = {}
        self._down: set[str] = set()

    def watch_up(self, resource: str, up: bool) -> None:
        self.up.labels(resource).set(1 if up else 0)
        if up:
            self._down.discard(resource)
        else:
            self._down.add(resource)

    def watch_event(self, resource: str) -> None:
        series = self._event_series.get(resource)
        if series is None:  # labels() costs more than the set: once per resource
            series = self._event_series[resource] = self.last_event.labels(resource)
        if resource in self._down:
            self.watch_up(resource, True)
        series.set(time.time())

    def relisted(self, resource: str, seconds: float, objects: int) -> None:
        self.relist_duration.labels(resource).observe(seconds)

    def watch_expired(self, resource: str) -> None:
        self.expired.labels(resource).inc()


class Metrics:
    """The controller's metrics, registered in their own registry."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.role = STANDALONE
        self.queue_gauges_cleared = 0  # moves on when a role change clears the queue gauges
        r = self.registry
        cq, pc = "cluster_queue", "priority_class"
        self.admission_attempts = Counter(
            "kueue_admission_attempts",
            "Admission attempts, by result: success (at least one Workload admitted) or "
            "inadmissible",
            ["result", ROLE],
            registry=r,
        )
        self.admission_attempt_duration = Histogram(
            "kueue_admission_attempt_duration_seconds",
            "Latency of one admission attempt (cycle), by result",
            ["result", ROLE],
            registry=r,
        )
        self.pending_workloads = Gauge(
            "kueue_pending_workloads",
            "Pending Workloads per ClusterQueue and status (active or inadmissible)",
            [cq, "status", ROLE],
            registry=r,
        )
        self.quota_reserved_workloads = Counter(
            "kueue_quota_reserved_workloads",
            "Workloads whose quota was reserved",
            [cq, pc, ROLE],
            registry=r,
        )
        self.quota_reserved_wait_time = Histogram(
            "kueue_quota_reserved_wait_time_seconds",
            "Time from creation (or last requeue) to quota reservation",
            [cq, pc, ROLE],
            buckets=kueue_buckets(14),
            registry=r,
        )
        self.admitted_workloads = Counter(
            "kueue_admitted_workloads",
            "Workloads admitted",
            [cq, pc, ROLE],
            registry=r,
        )
        self.admission_wait_time = Histogram(
            "kueue_admission_wait_time_seconds",
            "Time from creation (or last requeue) to admission",
            [cq, pc, ROLE],
            buckets=kueue_buckets(16),
            registry=r,
        )
        self.admission_checks_wait_time = Histogram(
            "kueue_admission_checks_wait_time_seconds",
            "The time from when a workload got the quota reservation until admission",
            [cq, pc, ROLE],
            buckets=kueue_buckets(14),
            registry=r,
        )
        # Observed by the job side when PodsReady first becomes True after an admission.
        self.ready_wait_time = Histogram(
            "kueue_ready_wait_time_seconds",
            "Time from creation (or last requeue) until the Workload's pods are ready",
            [cq, pc, ROLE],
            buckets=kueue_buckets(14),
            registry=r,
        )
        self.admitted_until_ready_wait_time = Histogram(
            "kueue_admitted_until_ready_wait_time_seconds",
            "Time from admission until the Workload's pods are ready",
            [cq, pc, ROLE],
            buckets=kueue_buckets(14),
            registry=r,
        )
        self.reserving_active_workloads = Gauge(
            "kueue_reserving_active_workloads",
            "Workloads holding a quota reservation",
            [cq, ROLE],
            registry=r,
        )
        self.admitted_active_workloads = Gauge(
            "kueue_admitted_active_workloads",
            "Admitted Workloads that are not finished",
            [cq, ROLE],
            registry=r,
        )
        self.finished_workloads = Gauge(
            "kueue_finished_workloads",
            "Finished Workloads that still exist, per ClusterQueue",
            [cq, ROLE],
            registry=r,
        )
        self.finished_workloads_total = _UntypedCounter(
            "kueue_finished_workloads_total", "Workloads that finished", [cq, pc, ROLE]
        )
        r.register(self.finished_workloads_total)
        self.evicted_workloads = Counter(
            "kueue_evicted_workloads",
            "Workloads evicted, by reason (Preempted, PodsReadyTimeout, ClusterQueueStopped, "
            "LocalQueueStopped, Deactivated) and underlying_cause (WaitForStart, "
            "WaitForRecovery, RequeuingLimitExceeded, MaximumExecutionTimeExceeded, or empty)",
            [cq, "reason", "underlying_cause", pc, ROLE],
            registry=r,
        )
        self.evicted_workloads_once = Counter(
            "kueue_evicted_workloads_once",
            "Workloads evicted for the first time with a reason",
            [cq, "reason", "underlying_cause", pc, ROLE],
            registry=r,
        )
        self.preempted_workloads = Counter(
            "kueue_preempted_workloads",
            "Workloads preempted, by the preempting ClusterQueue and reason",
            ["preempting_cluster_queue", "reason", ROLE],
            registry=r,
        )
        self.cluster_queue_status = Gauge(
            "kueue_cluster_queue_status",
            "1 for the ClusterQueue's current status (pending, active or terminated)",
            [cq, "status", ROLE],
            registry=r,
        )
        self.local_queue_admission_fair_sharing_usage = Gauge(
            "kueue_local_queue_admission_fair_sharing_usage",
            "Reports a value representing the LocalQueue's Admission Fair Sharing usage, "
            "calculated from the resource-weighted sum of consumed resources and pending "
            "admission penalties, divided by the LocalQueue's fair sharing weight",
            ["name", "namespace", cq, ROLE],
            registry=r,
        )
        labels = ["cohort", cq, "flavor", "resource", ROLE]
        self.resource_reservation = Gauge(
            "kueue_cluster_queue_resource_reservation",
            "Quota reserved per ClusterQueue, flavor and resource",
            labels,
            registry=r,
        )
        self.resource_usage = Gauge(
            "kueue_cluster_queue_resource_usage",
            "Quota used by admitted Workloads per ClusterQueue, flavor and resource",
            labels,
            registry=r,
        )
        self.nominal_quota = Gauge(
            "kueue_cluster_queue_nominal_quota",
            "Nominal quota per ClusterQueue, flavor and resource",
            labels,
            registry=r,
        )
        self.borrowing_limit = Gauge(
            "kueue_cluster_queue_borrowing_limit",
            "Borrowing limit per ClusterQueue, flavor and resource",
            labels,
            registry=r,
        )
        self.lending_limit = Gauge(
            "kueue_cluster_queue_lending_limit",
            "Lending limit per ClusterQueue, flavor and resource",
            labels,
            registry=r,
        )
        self.cluster_queue_weighted_share = Gauge(
            "kueue_cluster_queue_weighted_share",
            "The ClusterQueue's dominant resource share under fair sharing: its usage above "
            "nominal quota over what its cohort could lend, per mille, divided by its weight "
            "(0 within nominal quota; NaN with weight 0 while borrowing)",
            [cq, "cohort", ROLE],
            registry=r,
        )
        self.cohort_weighted_share = Gauge(
            "kueue_cohort_weighted_share",
            "The Cohort's dominant resource share under fair sharing: its subtree's usage "
            "above its quota over what its parent could lend, per mille, divided by its "
            "weight (0 within its quota; +Inf with weight 0 while borrowing)",
            ["cohort", ROLE],
            registry=r,
        )
        self.build_info = Gauge(
            "kueue_build_info",
            "Build information: 1, labelled by version and runtime",
            ["git_version", "git_commit", "build_date", "go_version", "compiler", "platform"],
            registry=r,
        )
        from controller.version import version

        self.build_info.labels(
            version(),
            "",
            "",
            f"python{sys.version_info.major}.{sys.version_info.minor}.{sys.version_info.micro}",
            platform.python_implementation().lower(),
            f"{sys.platform}/{platform.machine()}",
        ).set(1)
        self.resource_pending = Gauge(
            "kueue_cluster_queue_resource_pending",
            "Reports the cluster_queue's total pending resource requests. Unlike "
            "resource_reservation, pending workloads have not yet been assigned to flavors.",
            [cq, "resource", ROLE],
            registry=r,
        )
        self.local_queue = LocalQueueMetrics(r, _UntypedCounter)
        self.cohort = CohortMetrics(r)
        self.unadmitted = UnadmittedWorkloads(r)
        self.workload = WorkloadMetrics(r)
        # quotagate's own.
        self.cycle_latency = Histogram(
            "quotagate_cycle_duration_seconds",
            "Wall time of one admission cycle (decisions only, no API writes)",
            buckets=_CYCLE_BUCKETS,
            registry=r,
        )
        self.events_dropped = Counter(
            "quotagate_events_dropped",
            "Events not recorded because the event rate limit (eventQPS/eventBurst) was reached",
            registry=r,
        )
        self.api_writes = Counter(
            "quotagate_api_writes",
            "API writes made by the controller, by kind of write and outcome",
            ["write", "outcome"],
            registry=r,
        )
        self.api_write_seconds = Histogram(
            "quotagate_api_write_duration_seconds",
            "Time of the controller's Workload writes: waiting for one of the writeParallelism "
            "slots (phase=wait) and the request itself, retries included (phase=request)",
            ["write", "phase"],
            buckets=_WRITE_BUCKETS,
            registry=r,
        )
        self.watch_delay = Histogram(
            "quotagate_watch_delay_seconds",
            "Time from the API server's answer to one of the controller's decision writes to "
            "the Workload watch event that carries it (or a newer version): how far behind "
            "the cluster the controller's view runs",
            buckets=_WATCH_BUCKETS,
            registry=r,
        )
        self.write_slots = Gauge(
            "quotagate_write_slots",
            "Concurrent decision writes (admissions, evictions) allowed now: writeParallelism, "
            "adapted up to writeParallelismMax while the watch keeps up",
            registry=r,
        )
        self.is_leader = Gauge(
            "quotagate_leader",
            "1 while this replica holds the leader Lease",
            registry=r,
        )
        self.api_write_retries = Counter(
            "quotagate_api_write_retries",
            "Workload writes tried again after a dropped connection, a conflict, throttling or "
            "a server error, by kind of write",
            ["write"],
            registry=r,
        )
        self.lease_renewals = Counter(
            "quotagate_lease_renewals",
            "Attempts of the leader to renew its Lease, by outcome (ok, failed)",
            ["outcome"],
            registry=r,
        )
        self.lease_last_renewal = Gauge(
            "quotagate_lease_last_renewal_timestamp_seconds",
            "When this replica last renewed (or acquired) the leader Lease (Unix time)",
            registry=r,
        )
        self.leader_transitions = Counter(
            "quotagate_leader_transitions",
            "Terms this replica began (acquired) or ended (lost: its Lease could not be "
            "renewed in time)",
            ["transition"],
            registry=r,
        )
        self.watches = WatchMetrics(r)

    # The gauges that describe the leader's decisions about queues.
    def _queue_gauges(self) -> tuple[Gauge, ...]:
        return (
            self.pending_workloads,
            self.reserving_active_workloads,
            self.admitted_active_workloads,
            self.finished_workloads,
            self.cluster_queue_status,
            self.resource_reservation,
            self.resource_usage,
            self.nominal_quota,
            self.borrowing_limit,
            self.lending_limit,
            self.cluster_queue_weighted_share,
            self.cohort_weighted_share,
            self.local_queue_admission_fair_sharing_usage,
            self.resource_pending,
            *self.local_queue.gauges(),
            *self.cohort.gauges(),
            *self.unadmitted.gauges(),
        )

    def set_role(self, role: str) -> None:
        """The replica's role from now on. Losing leadership removes the queue gauges: a
        follower publishes no decisions (its counters keep their leader-labelled totals)."""
        if role == self.role:
            return
        if self.role == LEADER:
            for gauge in self._queue_gauges():
                gauge.clear()
            self.queue_gauges_cleared += 1
        self.role = role
        self.is_leader.set(1 if role == LEADER else 0)

    def forget_cluster_queue(self, name: str) -> None:
        """Remove every queue gauge series of a deleted ClusterQueue (Kueue's
        `ClearClusterQueueMetrics`)."""
        self._forget("cluster_queue", name)

    def forget_cohort(self, name: str) -> None:
        """Remove the weighted-share series of a cohort that no longer exists."""
        self._forget("cohort", name, (self.cohort_weighted_share,))

    def _forget(self, label: str, name: str, gauges: tuple[Gauge, ...] | None = None) -> None:
        for gauge in gauges if gauges is not None else self._queue_gauges():
            if label not in gauge._labelnames:
                continue
            position = list(gauge._labelnames).index(label)
            for values in [v for v in list(gauge._metrics) if v[position] == name]:
                gauge.remove(*values)

    def serve(self, port: int, addr: str = "0.0.0.0") -> None:
        """Expose `/metrics` on `port` (0 = off)."""
        if port:
            try:
                start_http_server(port, addr=addr, registry=self.registry)
            except OSError as exc:
                raise FatalError(
                    f"cannot serve metrics on {addr}:{port}: {exc.strerror or exc} "
                    "(metricsPort, --metrics-port; 0 turns metrics off)"
                ) from None
