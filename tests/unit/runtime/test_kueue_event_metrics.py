"""Kueue's metrics of cohorts, pending requests, unadmitted Workloads and a Workload's life
(controller/runtime/cohort_metrics.py, unadmitted_metrics.py, workload_metrics.py, and the
queue status refresh that sets the gauges), with the values Kueue's code gives them."""

from __future__ import annotations

from typing import Any

from controller.config import ControllerConfig
from controller.core.model.clusterqueues import LocalQueue
from controller.core.model.cohorts import Cohort
from controller.core.scheduler.cycle import run_cycle
from controller.core.state import ClusterState
from controller.runtime.controller import Controller
from controller.runtime.metrics import FOLLOWER, LEADER
from controller.runtime.queue_status import QueueStatusWriter
from controller.runtime.unadmitted_metrics import unadmitted_status
from controller.runtime.workload_metrics import execution_seconds, pods_ready_to_evicted_seconds
from tests.unit.core.builders import add, cluster, cq, wl

ROLE = {"replica_role": LEADER}


def condition(type_: str, status: str, reason: str, at: str) -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "lastTransitionTime": at}


def body(*conditions: dict[str, Any], **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "ns", "name": "w"},
        "spec": {"queueName": "lq"},
        "status": {"conditions": list(conditions), **status},
    }


def refreshed(state: ClusterState) -> tuple[Controller, QueueStatusWriter]:
    controller = Controller(None, ControllerConfig())  # type: ignore[arg-type]
    controller.ctx.state = state
    controller.metrics.set_role(LEADER)
    writer = QueueStatusWriter(controller.ctx, {})
    writer.refresh()
    return controller, writer


def value(controller: Controller, metric: str, **labels: str) -> float | None:
    return controller.metrics.registry.get_sample_value(metric, {**labels, **ROLE})


def tree() -> ClusterState:
    """Root `org` over cohort `team` (quota of its own), with `a` and `b` under `team`
    and `c` under `org`; `solo` has no cohort."""
    state = cluster(
        cq("a", {"default": {"cpu": "4"}}, cohort="team"),
        cq("b", {"default": {"cpu": "2"}}, cohort="team"),
        cq("c", {"default": {"cpu": "1"}}, cohort="org"),
        cq("solo", {"default": {"cpu": "1"}}),
    )
    state.set_cohort(Cohort("team", parent="org"))
    for name in ("a", "b", "c", "solo"):
        state.set_local_queue(LocalQueue("ns", f"lq-{name}", name))
    return state


def test_cohort_subtree_and_info_metrics_follow_the_tree() -> None:
    state = tree()
    add(state, wl("w1", "lq-a", cpu=3), wl("w2", "lq-c", cpu=1), wl("w3", "lq-a", cpu=9))
    run_cycle(state, 0.0)
    controller, writer = refreshed(state)
    assert (
        value(
            controller,
            "kueue_cohort_subtree_quota",
            cohort="team",
            flavor="default",
            resource="cpu",
        )
        == 6
    )
    assert (
        value(
            controller, "kueue_cohort_subtree_quota", cohort="org", flavor="default", resource="cpu"
        )
        == 7
    )
    reservations = "kueue_cohort_subtree_resource_reservations"
    assert value(controller, reservations, cohort="team", flavor="default", resource="cpu") == 3
    assert value(controller, reservations, cohort="org", flavor="default", resource="cpu") == 4
    active = "kueue_cohort_subtree_admitted_active_workloads"
    assert value(controller, active, cohort="team") == 1
    assert value(controller, active, cohort="org") == 2
    info = "kueue_cohort_info"
    assert value(controller, info, cohort="team", parent_cohort="org", root_cohort="org") == 1
    assert value(controller, info, cohort="org", parent_cohort="", root_cohort="org") == 1
    cq_info = "kueue_cluster_queue_info"
    assert (
        value(controller, cq_info, cluster_queue="a", parent_cohort="team", root_cohort="org") == 1
    )
    assert value(controller, cq_info, cluster_queue="solo", parent_cohort="", root_cohort="") == 1
    # The pending requests per resource: w3 waits in `a` for 9 cpus; `b` has none (0).
    pending = "kueue_cluster_queue_resource_pending"
    assert value(controller, pending, cluster_queue="a", resource="cpu") == 9
    assert value(controller, pending, cluster_queue="b", resource="cpu") == 0
    # `b` leaves the tree: `team`'s quota drops; a reservation at zero has no series.
    state.remove_cluster_queue("b")
    state.remove_workload(next(k for k in state.cache.admitted if k.endswith("w1")))
    writer.refresh()
    assert (
        value(
            controller,
            "kueue_cohort_subtree_quota",
            cohort="team",
            flavor="default",
            resource="cpu",
        )
        == 4
    )
    assert value(controller, reservations, cohort="team", flavor="default", resource="cpu") is None
    assert (
        value(controller, cq_info, cluster_queue="b", parent_cohort="team", root_cohort="org")
        is None
    )
    # Losing leadership removes them; leading again sets them anew.
    controller.metrics.set_role(FOLLOWER)
    assert (
        value(controller, cq_info, cluster_queue="a", parent_cohort="team", root_cohort="org")
        is None
    )
    controller.metrics.set_role(LEADER)
    writer.refresh()
    assert (
        value(controller, cq_info, cluster_queue="a", parent_cohort="team", root_cohort="org") == 1
    )


def test_the_cohort_admitted_counter_counts_every_cohort_above() -> None:
    controller, _ = refreshed(tree())
    controller.metrics.cohort.observe_admitted(controller.ctx.state, "a", "high", LEADER)
    total = "kueue_cohort_subtree_admitted_workloads_total"
    for cohort in ("team", "org"):
        assert value(controller, total, cohort=cohort, priority_class="high") == 1


def test_unadmitted_status_as_kueue() -> None:
    assert unadmitted_status(body()) == ("ns", "lq", "NoReservation", "PendingEvaluation")
    waiting = condition("QuotaReserved", "False", "WaitingForQuota", "2026-01-01T00:00:00Z")
    no_reservation = condition("Admitted", "False", "NoReservation", "2026-01-01T00:00:00Z")
    assert unadmitted_status(body(waiting, no_reservation)) == (
        "ns",
        "lq",
        "NoReservation",
        "WaitingForQuota",
    )
    reserved = condition("QuotaReserved", "True", "QuotaReserved", "2026-01-01T00:00:00Z")
    checks = condition("Admitted", "False", "UnsatisfiedAdmissionChecks", "2026-01-01T00:00:00Z")
    assert unadmitted_status(body(reserved, checks))[2:] == ("UnsatisfiedAdmissionChecks", "")
    admitted = condition("Admitted", "True", "Admitted", "2026-01-01T00:00:00Z")
    assert unadmitted_status(body(reserved, admitted)) is None
    finished = condition("Finished", "True", "Succeeded", "2026-01-01T00:00:00Z")
    assert unadmitted_status(body(finished)) is None
    deleting = body()
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert unadmitted_status(deleting) is None


def test_unadmitted_gauges_count_per_queue_and_go_at_zero() -> None:
    state = tree()
    controller, writer = refreshed(state)
    unadmitted = controller.metrics.unadmitted
    waiting = condition("QuotaReserved", "False", "WaitingForQuota", "2026-01-01T00:00:00Z")
    for name in ("w1", "w2"):
        wl_body = body(waiting)
        wl_body["metadata"]["name"] = name
        wl_body["spec"]["queueName"] = "lq-a"
        unadmitted.update(wl_body)
    orphan = body()  # its LocalQueue `lq` does not exist: counted nowhere
    unadmitted.update(orphan)
    writer.refresh()
    labels = {"reason": "NoReservation", "underlying_cause": "WaitingForQuota"}
    assert value(controller, "kueue_unadmitted_workloads", cluster_queue="a", **labels) == 2
    assert (
        value(
            controller,
            "kueue_local_queue_unadmitted_workloads",
            name="lq-a",
            namespace="ns",
            cluster_queue="a",
            **labels,
        )
        == 2
    )
    unadmitted.forget("ns/w1")
    writer.refresh()
    assert value(controller, "kueue_unadmitted_workloads", cluster_queue="a", **labels) == 1
    unadmitted.forget("ns/w2")
    writer.refresh()
    assert value(controller, "kueue_unadmitted_workloads", cluster_queue="a", **labels) is None


def test_execution_and_pods_ready_to_evicted_times_as_kueue() -> None:
    admitted = condition("Admitted", "True", "Admitted", "2026-01-01T00:00:00Z")
    finished = condition("Finished", "True", "Succeeded", "2026-01-01T00:01:40Z")
    assert execution_seconds(body(admitted, finished)) == 100
    assert (
        execution_seconds(body(admitted, finished, accumulatedPastExecutionTimeSeconds=20)) == 120
    )
    assert execution_seconds(body(finished)) is None
    ready = condition("PodsReady", "True", "PodsReady", "2026-01-01T00:00:10Z")
    evicted = condition("Evicted", "True", "Preempted", "2026-01-01T00:01:10Z")
    assert pods_ready_to_evicted_seconds(body(ready, evicted)) == 60
    not_ready = condition("PodsReady", "False", "WaitForStart", "2026-01-01T00:00:10Z")
    assert pods_ready_to_evicted_seconds(body(not_ready, evicted)) is None


def test_eviction_latency_is_observed_when_the_quota_is_released() -> None:
    controller, _ = refreshed(tree())
    metrics = controller.metrics.workload
    reserved = condition("QuotaReserved", "True", "QuotaReserved", "2026-01-01T00:00:00Z")
    evicted = condition("Evicted", "True", "Preempted", "2026-01-01T00:00:00Z")
    before = body(reserved, evicted, admission={"clusterQueue": "a"})
    released = condition("QuotaReserved", "False", "Pending", "2026-01-01T00:00:05Z")
    after = body(released, evicted)
    now = 1767225607.0  # 2026-01-01T00:00:07Z
    metrics.observe_released(before, before, now, LEADER)  # still holds quota: nothing
    metrics.observe_released(before, after, now, LEADER)
    name = "kueue_workload_eviction_latency_seconds_sum"
    assert value(controller, name, cluster_queue="a", reason="Preempted") == 7


def test_creation_latency_and_gate_removal() -> None:
    controller, _ = refreshed(tree())
    job = {
        "kind": "Job",
        "metadata": {"generation": 1, "creationTimestamp": "2026-01-01T00:00:00Z"},
    }
    workload = {"metadata": {"creationTimestamp": "2026-01-01T00:00:02Z"}}
    controller.workload_created("Job", job, workload)
    assert value(controller, "kueue_workload_creation_latency_seconds_sum", job_kind="Job") == 2
    later = {**job, "metadata": {**job["metadata"], "generation": 2}}
    controller.workload_created("Job", later, workload)  # Kueue records generation 1 only
    assert value(controller, "kueue_workload_creation_latency_seconds_count", job_kind="Job") == 1
    admitted = condition("Admitted", "True", "Admitted", "2026-01-01T00:00:00Z")
    controller.ctx.clock = lambda: 1767225603.0  # 3 s after the admission
    controller.scheduling_gate_removed(
        "kueue.x-k8s.io/admission", body(admitted, admission={"clusterQueue": "a"}), True
    )
    labels = {"name": "kueue.x-k8s.io/admission", "cluster_queue": "a", "is_group": "true"}
    assert value(controller, "kueue_pod_scheduling_gate_removal_seconds_sum", **labels) == 3
