"""ClusterQueue and LocalQueue status as Kueue keeps it (controller/runtime/queue_status.py),
computed from the engine's state: counts, reservation and usage per flavor and resource
(an evicting Workload still reserves but no longer counts as admitted or used), borrowing,
and the Active condition."""

from __future__ import annotations

from dataclasses import replace

from controller.core.pending import Inactive
from controller.runtime.queue_status import (
    active_condition,
    cluster_queue_status,
    local_queue_counts,
)
from tests.unit.core.builders import add, cluster, cq, settle, wl


def test_cluster_queue_status_counts_reservation_usage_and_borrowing() -> None:
    state = add(
        cluster(
            cq("cq", {"default": {"cpu": ("2", "4")}}, cohort="co"),
            cq("lender", {"default": {"cpu": "4"}}, cohort="co"),
        ),
        wl("a", cpu="2"),
        wl("b", cpu="1"),
        wl("c", cpu="1"),
        wl("waits", cpu="4"),
    )
    settle(state)
    assert {"ns/a", "ns/b", "ns/c"} <= set(state.admitted)
    state.admitted["ns/c"].evicting = True

    status = cluster_queue_status(state, "cq")

    assert (status["pendingWorkloads"], status["reservingWorkloads"]) == (1, 3)
    assert status["admittedWorkloads"] == 2  # c is being evicted
    assert status["flavorsReservation"] == [
        {"name": "default", "resources": [{"name": "cpu", "total": "4", "borrowed": "2"}]}
    ]
    assert status["flavorsUsage"] == [
        {"name": "default", "resources": [{"name": "cpu", "total": "3", "borrowed": "2"}]}
    ]


def test_local_queue_counts_and_finished_per_cluster_queue() -> None:
    state = add(cluster(cq("cq", {"default": {"cpu": "2"}})), wl("a", cpu="1"), wl("b", cpu="1"))
    admissions = {a.workload_key: a.admission for r in settle(state) for a in r.admitted}
    add(state, wl("c", cpu="1"))
    b = state.workloads["ns/b"]
    state.upsert_workload(replace(b, finished=True, admission=admissions["ns/b"]))
    finished: dict[str, int] = {}

    counts = local_queue_counts(state, finished)

    assert counts["ns/cq"] == {
        "pendingWorkloads": 1,
        "reservingWorkloads": 1,
        "admittedWorkloads": 1,
    }
    assert finished == {"cq": 1}


def test_active_condition_carries_the_inactive_reason() -> None:
    assert active_condition(None) == (True, "Ready", "Can admit new workloads")
    stopped = Inactive("Stopped", "ClusterQueue cq is inactive: stopped (Hold)")
    assert active_condition(stopped) == (False, "Stopped", stopped.message)
