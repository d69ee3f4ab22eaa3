"""Kueue's cohort, info, pending-resource, unadmitted and Workload-life metrics from real
events: `quotagate run` against the real API server, Workloads admitted, refused, preempted,
released by their owner and finished, and `/metrics` scraped as Prometheus would."""

from __future__ import annotations

import re
import urllib.request

from tests.cluster.fixtures import wait_for
from tests.integration.kueue import (
    ControllerProcess,
    Kueue,
    cluster_queue,
    condition,
    flavor,
    local_queue,
    wait_admitted,
    workload,
)


def sample(text: str, metric: str, **labels: str) -> float | None:
    """The value of the sample `metric` whose labels include `labels` (None: none)."""
    for line in text.splitlines():
        if not line.startswith(metric + "{"):
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', line[len(metric) : line.rindex("}")]))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


def scrape(controller: ControllerProcess) -> str:
    with urllib.request.urlopen(
        f"http://127.0.0.1:{controller.metrics_port}/metrics", timeout=5
    ) as response:
        return str(response.read().decode())


def wait_sample(controller: ControllerProcess, metric: str, wanted: float, **labels: str) -> str:
    def seen() -> str | None:
        try:
            text = scrape(controller)
        except OSError:
            return None
        return text if sample(text, metric, **labels) == wanted else None

    return wait_for(seen, timeout=30, what=f"{metric} {labels} = {wanted}")


def test_cohort_pending_unadmitted_and_workload_life_metrics(
    controller: ControllerProcess, kueue: Kueue, namespace: str
) -> None:
    rf, cohort = f"{namespace}-rf", f"{namespace}-co"
    a, b = f"{namespace}-a", f"{namespace}-b"
    kueue.apply(
        flavor(rf),
        cluster_queue(
            a, {rf: {"cpu": (2, 0)}}, cohort, preemption={"withinClusterQueue": "LowerPriority"}
        ),
        cluster_queue(b, {rf: {"cpu": 2}}, cohort),
        local_queue(namespace, "lq-a", a),
        local_queue(namespace, "lq-b", b),
        workload(namespace, "low", "lq-a", cpu="2", priority=0),
    )
    wait_admitted(kueue, namespace, "low")
    role = {"replica_role": "leader"}
    quota = {"cohort": cohort, "flavor": rf, "resource": "cpu", **role}
    text = wait_sample(controller, "kueue_cohort_subtree_resource_reservations", 2.0, **quota)
    assert sample(text, "kueue_cohort_subtree_quota", **quota) == 4.0
    text = wait_sample(
        controller, "kueue_cohort_subtree_admitted_active_workloads", 1.0, cohort=cohort, **role
    )
    assert (
        sample(
            text,
            "kueue_cohort_subtree_admitted_workloads_total",
            cohort=cohort,
            priority_class="",
            **role,
        )
        == 1.0
    )
    info = {"parent_cohort": cohort, "root_cohort": cohort, **role}
    assert sample(text, "kueue_cluster_queue_info", cluster_queue=a, **info) == 1.0
    assert (
        sample(text, "kueue_cohort_info", cohort=cohort, parent_cohort="", root_cohort=cohort)
        == 1.0
    )

    # More than the cohort has: pending, its requests counted, unadmitted with its reason.
    kueue.apply(workload(namespace, "big", "lq-b", cpu="10"))
    text = wait_sample(
        controller, "kueue_cluster_queue_resource_pending", 10.0, cluster_queue=b, resource="cpu"
    )
    cause = wait_for(
        lambda: (condition(kueue.get_workload(namespace, "big"), "QuotaReserved") or {}).get(
            "reason"
        ),
        what="big's pending reason",
    )
    wait_sample(
        controller,
        "kueue_unadmitted_workloads",
        1.0,
        cluster_queue=b,
        reason="NoReservation",
        underlying_cause=cause,
    )
    text = wait_sample(
        controller,
        "kueue_local_queue_unadmitted_workloads",
        1.0,
        name="lq-b",
        namespace=namespace,
        cluster_queue=b,
        reason="NoReservation",
        underlying_cause=cause,
    )

    # A higher priority Workload preempts `low` (`a` may not borrow); its owner releases
    # the quota.
    kueue.apply(workload(namespace, "high", "lq-a", cpu="2", priority=10))
    wait_for(
        lambda: (
            (condition(kueue.get_workload(namespace, "low"), "Evicted") or {}).get("status")
            == "True"
        ),
        what="low evicted",
    )
    kueue.acknowledge_eviction(namespace, "low")
    wait_sample(
        controller,
        "kueue_workload_eviction_latency_seconds_count",
        1.0,
        cluster_queue=a,
        reason="Preempted",
    )
    wait_admitted(kueue, namespace, "high")
    kueue.finish(namespace, "high")
    text = wait_sample(
        controller,
        "kueue_execution_time_seconds_count",
        1.0,
        cluster_queue=a,
        priority_class="",
    )
    assert (
        sample(
            text,
            "kueue_local_queue_execution_time_seconds_count",
            name="lq-a",
            namespace=namespace,
            **role,
        )
        == 1.0
    )
    assert 'kueue_execution_time_seconds_bucket{cluster_queue="' in text
