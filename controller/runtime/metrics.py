"""Prometheus metrics, named as Kueue names them (`kueue_` prefix) where Kueue has the metric.

Dashboards and alerts written for Kueue keep working. Our own additions use the
`quotagate_` prefix. Every metric lives in one registry object so tests and multiple
in-process controllers do not share global state.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from controller.runtime.fatal import FatalError

# Kueue's admission wait buckets (seconds): 1 s … ~4.5 h, doubling.
_WAIT_BUCKETS = tuple(float(2**i) for i in range(15))
_CYCLE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
_WRITE_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Metrics:
    """The controller's metrics, registered in their own registry."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.admission_attempts = Counter(
            "kueue_admission_attempts",
            "Admission attempts, by result (success or inadmissible)",
            ["result"],
            registry=r,
        )
        self.admission_attempt_duration = Histogram(
            "kueue_admission_attempt_duration_seconds",
            "Latency of one admission cycle, by result",
            ["result"],
            buckets=_CYCLE_BUCKETS,
            registry=r,
        )
        self.pending_workloads = Gauge(
            "kueue_pending_workloads",
            "Pending Workloads per ClusterQueue and status (active or inadmissible)",
            ["cluster_queue", "status"],
            registry=r,
        )
        self.quota_reserved_workloads = Counter(
            "kueue_quota_reserved_workloads",
            "Workloads whose quota was reserved",
            ["cluster_queue", "priority_class"],
            registry=r,
        )
        self.quota_reserved_wait_time = Histogram(
            "kueue_quota_reserved_wait_time_seconds",
            "Time from creation (or last requeue) to quota reservation",
            ["cluster_queue", "priority_class"],
            buckets=_WAIT_BUCKETS,
            registry=r,
        )
        self.admitted_workloads = Counter(
            "kueue_admitted_workloads",
            "Workloads admitted",
            ["cluster_queue", "priority_class"],
            registry=r,
        )
        self.admission_wait_time = Histogram(
            "kueue_admission_wait_time_seconds",
            "Time from creation (or last requeue) to admission",
            ["cluster_queue", "priority_class"],
            buckets=_WAIT_BUCKETS,
            registry=r,
        )
        self.reserving_active_workloads = Gauge(
            "kueue_reserving_active_workloads",
            "Workloads holding a quota reservation",
            ["cluster_queue"],
            registry=r,
        )
        self.admitted_active_workloads = Gauge(
            "kueue_admitted_active_workloads",
            "Admitted Workloads that are not finished",
            ["cluster_queue"],
            registry=r,
        )
        self.finished_workloads = Counter(
            "kueue_finished_workloads",
            "Workloads that finished",
            ["cluster_queue", "priority_class"],
            registry=r,
        )
        self.evicted_workloads = Counter(
            "kueue_evicted_workloads",
            "Workloads evicted, by reason",
            ["cluster_queue", "reason", "underlying_cause", "priority_class"],
            registry=r,
        )
        self.preempted_workloads = Counter(
            "kueue_preempted_workloads",
            "Workloads preempted, by the preempting ClusterQueue and reason",
            ["preempting_cluster_queue", "reason"],
            registry=r,
        )
        self.cluster_queue_status = Gauge(
            "kueue_cluster_queue_status",
            "1 for the ClusterQueue's current status (pending, active or terminated)",
            ["cluster_queue", "status"],
            registry=r,
        )
        labels = ["cohort", "cluster_queue", "flavor", "resource"]
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
        self.is_leader = Gauge(
            "quotagate_leader",
            "1 while this replica holds the leader Lease",
            registry=r,
        )

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
