"""Our metrics as Kueue shapes them (controller/runtime/metrics.py): for every metric both
have, the same name, type, label names and buckets as Kueue's pkg/metrics/metrics.go, so a
Kueue dashboard's queries read ours unchanged; `replica_role` on all of them; queue gauges
gone when leadership is lost or a ClusterQueue is deleted; build_info present."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from controller.runtime.metrics import FOLLOWER, LEADER, Metrics, kueue_buckets

# Kueue's metrics quotagate implements: name → (type, label names), read off
# pkg/metrics/metrics.go (Kueue exposes counters under their _total names).
KUEUE: dict[str, tuple[str, list[str]]] = {
    "kueue_admission_attempts_total": ("counter", ["result", "replica_role"]),
    "kueue_admission_attempt_duration_seconds": ("histogram", ["result", "replica_role"]),
    "kueue_pending_workloads": ("gauge", ["cluster_queue", "status", "replica_role"]),
    "kueue_quota_reserved_workloads_total": (
        "counter",
        ["cluster_queue", "priority_class", "replica_role"],
    ),
    "kueue_quota_reserved_wait_time_seconds": (
        "histogram",
        ["cluster_queue", "priority_class", "replica_role"],
    ),
    "kueue_admitted_workloads_total": (
        "counter",
        ["cluster_queue", "priority_class", "replica_role"],
    ),
    "kueue_admission_wait_time_seconds": (
        "histogram",
        ["cluster_queue", "priority_class", "replica_role"],
    ),
    "kueue_admission_checks_wait_time_seconds": (
        "histogram",
        ["cluster_queue", "priority_class", "replica_role"],
    ),
    "kueue_ready_wait_time_seconds": (
        "histogram",
        ["cluster_queue", "priority_class", "replica_role"],
    ),
    "kueue_admitted_until_ready_wait_time_seconds": (
        "histogram",
        ["cluster_queue", "priority_class", "replica_role"],
    ),
    "kueue_reserving_active_workloads": ("gauge", ["cluster_queue", "replica_role"]),
    "kueue_admitted_active_workloads": ("gauge", ["cluster_queue", "replica_role"]),
    "kueue_finished_workloads": ("gauge", ["cluster_queue", "replica_role"]),
    "kueue_finished_workloads_total": (
        "counter",
        ["cluster_queue", "priority_class", "replica_role"],
    ),
    "kueue_evicted_workloads_total": (
        "counter",
        ["cluster_queue", "reason", "underlying_cause", "priority_class", "replica_role"],
    ),
    "kueue_evicted_workloads_once_total": (
        "counter",
        ["cluster_queue", "reason", "underlying_cause", "priority_class", "replica_role"],
    ),
    "kueue_preempted_workloads_total": (
        "counter",
        ["preempting_cluster_queue", "reason", "replica_role"],
    ),
    "kueue_cluster_queue_status": ("gauge", ["cluster_queue", "status", "replica_role"]),
    **{
        f"kueue_cluster_queue_{name}": (
            "gauge",
            ["cohort", "cluster_queue", "flavor", "resource", "replica_role"],
        )
        for name in (
            "resource_reservation",
            "resource_usage",
            "nominal_quota",
            "borrowing_limit",
            "lending_limit",
        )
    },
    "kueue_cluster_queue_weighted_share": ("gauge", ["cluster_queue", "cohort", "replica_role"]),
    "kueue_cohort_weighted_share": ("gauge", ["cohort", "replica_role"]),
    "kueue_local_queue_admission_fair_sharing_usage": (
        "gauge",
        ["name", "namespace", "cluster_queue", "replica_role"],
    ),
    "kueue_build_info": (
        "gauge",
        ["git_version", "git_commit", "build_date", "go_version", "compiler", "platform"],
    ),
    # Kueue's LocalQueue metrics.
    **{
        f"kueue_local_queue_{name}": (kind, ["name", "namespace", "priority_class", "replica_role"])
        for name, kind in (
            ("quota_reserved_workloads_total", "counter"),
            ("admitted_workloads_total", "counter"),
            ("finished_workloads_total", "counter"),
            ("quota_reserved_wait_time_seconds", "histogram"),
            ("admission_wait_time_seconds", "histogram"),
            ("admission_checks_wait_time_seconds", "histogram"),
            ("ready_wait_time_seconds", "histogram"),
            ("admitted_until_ready_wait_time_seconds", "histogram"),
        )
    },
    "kueue_local_queue_evicted_workloads_total": (
        "counter",
        ["name", "namespace", "reason", "underlying_cause", "priority_class", "replica_role"],
    ),
    "kueue_local_queue_pending_workloads": (
        "gauge",
        ["name", "namespace", "status", "replica_role"],
    ),
    **{
        f"kueue_local_queue_{name}": ("gauge", ["name", "namespace", "replica_role"])
        for name in (
            "reserving_active_workloads",
            "admitted_active_workloads",
            "finished_workloads",
        )
    },
    "kueue_local_queue_status": ("gauge", ["name", "namespace", "active", "replica_role"]),
    "kueue_cluster_queue_resource_pending": (
        "gauge",
        ["cluster_queue", "resource", "replica_role"],
    ),
    "kueue_unadmitted_workloads": (
        "gauge",
        ["cluster_queue", "reason", "underlying_cause", "replica_role"],
    ),
    "kueue_local_queue_unadmitted_workloads": (
        "gauge",
        ["name", "namespace", "cluster_queue", "reason", "underlying_cause", "replica_role"],
    ),
    "kueue_execution_time_seconds": (
        "histogram",
        ["cluster_queue", "priority_class", "replica_role"],
    ),
    "kueue_local_queue_execution_time_seconds": (
        "histogram",
        ["name", "namespace", "priority_class", "replica_role"],
    ),
    "kueue_pods_ready_to_evicted_time_seconds": (
        "histogram",
        ["cluster_queue", "reason", "underlying_cause", "replica_role"],
    ),
    "kueue_workload_eviction_latency_seconds": (
        "histogram",
        ["cluster_queue", "reason", "replica_role"],
    ),
    "kueue_workload_creation_latency_seconds": ("histogram", ["job_kind", "replica_role"]),
    "kueue_pod_scheduling_gate_removal_seconds": (
        "histogram",
        ["name", "cluster_queue", "is_group", "replica_role"],
    ),
    # Kueue's Cohort metrics (MetricsForCohorts).
    **{
        f"kueue_cohort_subtree_{name}": ("gauge", ["cohort", "flavor", "resource", "replica_role"])
        for name in ("quota", "resource_reservations")
    },
    "kueue_cohort_subtree_admitted_workloads_total": (
        "counter",
        ["cohort", "priority_class", "replica_role"],
    ),
    "kueue_cohort_subtree_admitted_active_workloads": ("gauge", ["cohort", "replica_role"]),
    "kueue_cohort_info": ("gauge", ["cohort", "parent_cohort", "root_cohort", "replica_role"]),
    "kueue_cluster_queue_info": (
        "gauge",
        ["cluster_queue", "parent_cohort", "root_cohort", "replica_role"],
    ),
    **{
        f"kueue_local_queue_resource_{name}": (
            "gauge",
            ["name", "namespace", "flavor", "resource", "replica_role"],
        )
        for name in ("reservation", "usage")
    },
}

OMITTED: dict[str, str] = {
    # Concepts quotagate does not implement.
    "kueue_multikueue_workloads_dispatched_total": "MultiKueue is not implemented",
    "kueue_multikueue_workloads_admitted_total": "MultiKueue is not implemented",
    "kueue_replaced_workload_slices_total": "Workload slices (elastic jobs) are not implemented",
    "kueue_pending_scheduling_hashes": "Kueue's scheduling hashes are an internal of its queues",
    "kueue_admission_cycle_preemption_skips": "Kueue's cycle skips; quotagate's cycle differs",
    "kueue_preemption_target_recomputations_total": "Kueue's preemption internals",
}
"""Kueue's metrics quotagate does not expose, with why (the README lists them)."""

# Every metric name in Kueue's pkg/metrics/metrics.go (64).
KUEUE_ALL = {
    f"kueue_{name}"
    for name in [
        "admission_attempts_total",
        "admission_attempt_duration_seconds",
        "multikueue_workloads_dispatched_total",
        "multikueue_workloads_admitted_total",
        "admission_cycle_preemption_skips",
        "preemption_target_recomputations_total",
        "build_info",
        "pending_workloads",
        "pending_scheduling_hashes",
        "local_queue_pending_workloads",
        "finished_workloads",
        "local_queue_finished_workloads",
        "quota_reserved_workloads_total",
        "local_queue_quota_reserved_workloads_total",
        "finished_workloads_total",
        "local_queue_finished_workloads_total",
        "execution_time_seconds",
        "local_queue_execution_time_seconds",
        "quota_reserved_wait_time_seconds",
        "pods_ready_to_evicted_time_seconds",
        "local_queue_quota_reserved_wait_time_seconds",
        "admitted_workloads_total",
        "local_queue_admitted_workloads_total",
        "admission_wait_time_seconds",
        "ready_wait_time_seconds",
        "admitted_until_ready_wait_time_seconds",
        "local_queue_admission_wait_time_seconds",
        "admission_checks_wait_time_seconds",
        "local_queue_admission_checks_wait_time_seconds",
        "local_queue_ready_wait_time_seconds",
        "local_queue_admitted_until_ready_wait_time_seconds",
        "workload_creation_latency_seconds",
        "pod_scheduling_gate_removal_seconds",
        "evicted_workloads_total",
        "replaced_workload_slices_total",
        "local_queue_evicted_workloads_total",
        "evicted_workloads_once_total",
        "preempted_workloads_total",
        "workload_eviction_latency_seconds",
        "reserving_active_workloads",
        "local_queue_reserving_active_workloads",
        "admitted_active_workloads",
        "local_queue_admitted_active_workloads",
        "cluster_queue_status",
        "local_queue_status",
        "unadmitted_workloads",
        "local_queue_unadmitted_workloads",
        "cluster_queue_resource_reservation",
        "cluster_queue_resource_pending",
        "cluster_queue_resource_usage",
        "local_queue_resource_reservation",
        "local_queue_resource_usage",
        "local_queue_admission_fair_sharing_usage",
        "cluster_queue_nominal_quota",
        "cluster_queue_borrowing_limit",
        "cluster_queue_lending_limit",
        "cluster_queue_weighted_share",
        "cohort_weighted_share",
        "cohort_subtree_quota",
        "cohort_subtree_admitted_workloads_total",
        "cohort_subtree_resource_reservations",
        "cohort_subtree_admitted_active_workloads",
        "cohort_info",
        "cluster_queue_info",
    ]
}


def samples(metrics: Metrics) -> dict[str, tuple[str, set[str], set[float]]]:
    """Exposed name → (type, label names, bucket bounds), as a Prometheus scrape sees it."""
    out: dict[str, tuple[str, set[str], set[float]]] = {}
    for family in text_string_to_metric_families(generate_latest(metrics.registry).decode()):
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue
            base = family.name
            name = sample.name if family.type != "histogram" else base
            if family.type == "counter":
                name = f"{base}_total"
            kind = (
                "counter" if family.type == "unknown" and name.endswith("_total") else family.type
            )
            labels = set(sample.labels) - {"le"}
            _, known, bounds = out.get(name, (kind, set(), set()))
            if "le" in sample.labels and sample.labels["le"] != "+Inf":
                bounds.add(float(sample.labels["le"]))
            out[name] = (kind, known | labels, bounds)
    return out


def populated() -> Metrics:
    metrics = Metrics()
    metrics.set_role(LEADER)
    role = metrics.role
    metrics.admission_attempts.labels("success", role).inc()
    metrics.admission_attempt_duration.labels("success", role).observe(0.01)
    metrics.pending_workloads.labels("cq", "active", role).set(1)
    for counter in (metrics.quota_reserved_workloads, metrics.admitted_workloads):
        counter.labels("cq", "", role).inc()
    for histogram in (
        metrics.quota_reserved_wait_time,
        metrics.admission_wait_time,
        metrics.admission_checks_wait_time,
        metrics.ready_wait_time,
        metrics.admitted_until_ready_wait_time,
    ):
        histogram.labels("cq", "", role).observe(3)
    metrics.reserving_active_workloads.labels("cq", role).set(1)
    metrics.admitted_active_workloads.labels("cq", role).set(1)
    metrics.finished_workloads.labels("cq", role).set(1)
    metrics.finished_workloads_total.inc("cq", "", role)
    metrics.evicted_workloads.labels("cq", "Preempted", "", "", role).inc()
    metrics.evicted_workloads_once.labels("cq", "Preempted", "", "", role).inc()
    metrics.preempted_workloads.labels("cq", "InClusterQueue", role).inc()
    metrics.cluster_queue_status.labels("cq", "active", role).set(1)
    metrics.cluster_queue_weighted_share.labels("cq", "co", role).set(0)
    metrics.cohort_weighted_share.labels("co", role).set(0)
    for gauge in (
        metrics.resource_reservation,
        metrics.resource_usage,
        metrics.nominal_quota,
        metrics.borrowing_limit,
        metrics.lending_limit,
    ):
        gauge.labels("co", "cq", "f", "cpu", role).set(1)
    metrics.local_queue_admission_fair_sharing_usage.labels("lq", "ns", "cq", role).set(2.5)
    lq = metrics.local_queue
    body = {"metadata": {"namespace": "ns"}, "spec": {"queueName": "lq"}}
    lq.observe_admitted(body, "", role, 3.0)
    lq.observe_checks_passed(body, "", role, 2.0)
    lq.observe_evicted(body, "Preempted", "", "", role)
    lq.observe_finished(body, "", role)
    lq.observe_ready(body, "", role, 3.0, 1.0)
    counts = {"pendingWorkloads": 2, "reservingWorkloads": 1, "admittedWorkloads": 1}
    lq.set_gauges("ns/lq", role, counts, 1, 1, True, {("f", "cpu"): 1000}, {("f", "cpu"): 1000})
    metrics.resource_pending.labels("cq", "cpu", role).set(2)
    metrics.unadmitted.cluster_queue.labels("cq", "NoReservation", "WaitingForQuota", role).set(1)
    metrics.unadmitted.local_queue.labels(
        "lq", "ns", "cq", "NoReservation", "WaitingForQuota", role
    ).set(1)
    w = metrics.workload
    w.execution_time.labels("cq", "", role).observe(60)
    w.local_queue_execution_time.labels("lq", "ns", "", role).observe(60)
    w.pods_ready_to_evicted_time.labels("cq", "Preempted", "", role).observe(30)
    w.eviction_latency.labels("cq", "Preempted", role).observe(2)
    w.creation_latency.labels("Job", role).observe(0.1)
    w.gate_removal.labels("kueue.x-k8s.io/admission", "cq", "false", role).observe(0.5)
    c = metrics.cohort
    c.subtree_quota.labels("co", "f", "cpu", role).set(4)
    c.subtree_resource_reservations.labels("co", "f", "cpu", role).set(1)
    c.subtree_admitted_active_workloads.labels("co", role).set(1)
    c.subtree_admitted_workloads.labels("co", "", role).inc()
    c.cohort_info.labels("co", "", "co", role).set(1)
    c.cluster_queue_info.labels("cq", "co", "co", role).set(1)
    return metrics


def test_every_kueue_metric_we_have_has_kueues_name_type_and_labels() -> None:
    exposed = samples(populated())
    for name, (kind, labels) in KUEUE.items():
        assert name in exposed, f"{name} is not exposed"
        assert exposed[name][0] == kind, (name, exposed[name][0])
        assert exposed[name][1] == set(labels), (name, exposed[name][1])


def test_every_kueue_metric_is_exposed_or_listed_as_omitted() -> None:
    assert len(KUEUE_ALL) == 64
    assert set(KUEUE) | set(OMITTED) == KUEUE_ALL
    assert not set(KUEUE) & set(OMITTED)
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    for name in OMITTED:
        assert f"`{name}`" in readme, f"README.md does not list the omitted {name}"


def test_local_queue_histograms_use_kueues_buckets() -> None:
    exposed = samples(populated())
    for name in (
        "quota_reserved_wait_time_seconds",
        "admission_wait_time_seconds",
        "admission_checks_wait_time_seconds",
        "ready_wait_time_seconds",
        "admitted_until_ready_wait_time_seconds",
    ):
        assert exposed[f"kueue_local_queue_{name}"][2] == set(kueue_buckets(14)), name


def test_histograms_use_kueues_buckets() -> None:
    exposed = samples(populated())
    assert exposed["kueue_admission_wait_time_seconds"][2] == set(kueue_buckets(16))
    assert exposed["kueue_quota_reserved_wait_time_seconds"][2] == set(kueue_buckets(14))
    assert exposed["kueue_admission_checks_wait_time_seconds"][2] == set(kueue_buckets(14))
    assert exposed["kueue_ready_wait_time_seconds"][2] == set(kueue_buckets(14))
    assert exposed["kueue_admitted_until_ready_wait_time_seconds"][2] == set(kueue_buckets(14))
    assert kueue_buckets(4) == (1.0, 2.5, 5.0, 10.0)
    default = {0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0}
    assert exposed["kueue_admission_attempt_duration_seconds"][2] == default
    assert exposed["kueue_pod_scheduling_gate_removal_seconds"][2] == default
    assert exposed["kueue_execution_time_seconds"][2] == set(kueue_buckets(16))
    assert exposed["kueue_local_queue_execution_time_seconds"][2] == set(kueue_buckets(16))
    assert exposed["kueue_pods_ready_to_evicted_time_seconds"][2] == set(kueue_buckets(14))
    assert exposed["kueue_workload_eviction_latency_seconds"][2] == set(kueue_buckets(14))
    # Kueue's prometheus.ExponentialBuckets(0.01, 2, 11)
    assert exposed["kueue_workload_creation_latency_seconds"][2] == {0.01 * 2**i for i in range(11)}


def test_losing_leadership_removes_the_queue_gauges() -> None:
    metrics = populated()
    metrics.set_role(FOLLOWER)
    exposed = samples(metrics)
    assert "kueue_pending_workloads" not in exposed
    assert "kueue_cluster_queue_nominal_quota" not in exposed
    assert "kueue_local_queue_admission_fair_sharing_usage" not in exposed
    assert "kueue_admitted_workloads_total" in exposed  # counters keep their totals
    assert metrics.is_leader._value.get() == 0


def test_a_deleted_cluster_queue_loses_its_series() -> None:
    metrics = populated()
    role = metrics.role
    metrics.pending_workloads.labels("other", "active", role).set(2)
    metrics.forget_cluster_queue("cq")
    text = generate_latest(metrics.registry).decode()
    assert 'cluster_queue="cq"' not in "".join(
        line for line in text.splitlines() if line.startswith("kueue_pending_workloads")
    )
    assert 'kueue_pending_workloads{cluster_queue="other"' in text


def test_the_controller_observes_the_ready_histograms_for_the_integrations() -> None:
    from controller.config import ControllerConfig
    from controller.runtime.controller import Controller

    config = ControllerConfig.model_validate({"waitForPodsReady": {"enable": True}})
    controller = Controller(None, config)  # type: ignore[arg-type]
    assert controller.wait_for_pods_ready
    assert not Controller(None, ControllerConfig()).wait_for_pods_ready  # type: ignore[arg-type]
    controller.metrics.set_role(LEADER)
    workload = {
        "metadata": {"name": "w", "namespace": "ns"},
        "spec": {"priorityClassRef": {"kind": "WorkloadPriorityClass", "name": "high"}},
        "status": {"admission": {"clusterQueue": "cq"}},
    }
    controller.pods_ready_started(workload, 30.0, 4.0)
    registry = controller.metrics.registry
    labels = {"cluster_queue": "cq", "priority_class": "high", "replica_role": LEADER}
    assert registry.get_sample_value("kueue_ready_wait_time_seconds_sum", labels) == 30.0
    assert (
        registry.get_sample_value("kueue_admitted_until_ready_wait_time_seconds_sum", labels) == 4.0
    )
    assert (
        registry.get_sample_value(
            "kueue_admitted_until_ready_wait_time_seconds_bucket", {**labels, "le": "5.0"}
        )
        == 1.0
    )
