"""Incremental cluster state (controller/core/state.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from api.workload_status import Admission, PodSetAssignment
from controller.core.clusterqueues import LocalQueue
from controller.core.cycle import run_cycle
from controller.core.pending import why_pending
from controller.core.priorities import KUEUE_GROUP, WorkloadPriorityClass
from controller.core.state import UnknownWorkload
from controller.core.workloads import PriorityClassRef
from tests.unit.core.builders import add, cluster, cq, m, settle, usage, wl

CQ = cq("cq", {"default": {"cpu": "10"}}, cohort="co")


def test_workload_before_its_local_queue_waits_then_is_queued() -> None:
    state = cluster(CQ)
    add(state, wl("w", "later", cpu="1"))
    assert why_pending(state, "ns/w") == "LocalQueue later doesn't exist"
    state.set_local_queue(LocalQueue("ns", "later", "cq"))
    assert state.queued_in("ns/w") == "cq"
    assert run_cycle(state, 0).admitted


def test_removing_local_queue_or_cluster_queue_unqueues() -> None:
    state = add(cluster(CQ), wl("w", cpu="1"))
    state.remove_local_queue("ns", "cq")
    assert state.queued_in("ns/w") is None
    state.set_local_queue(LocalQueue("ns", "cq", "cq"))
    state.remove_cluster_queue("cq")
    assert why_pending(state, "ns/w") == "ClusterQueue cq doesn't exist"
    state.set_cluster_queue(CQ)
    assert state.queued_in("ns/w") == "cq"


def test_already_admitted_workload_charges_usage_once() -> None:
    admission = Admission("cq", (PodSetAssignment("main", 2, {"cpu": "default"}, {"cpu": m(4)}),))
    running = replace(wl("r", cpu="2", count=2), admission=admission)
    state = add(cluster(CQ), running, running)
    assert usage(state, "cq") == m(4)
    state.upsert_workload(replace(running, finished=True))
    assert usage(state, "cq") == 0
    assert list(state.pending()) == []


def test_remove_admitted_workload_frees_quota_and_retries_inadmissible() -> None:
    state = add(cluster(CQ), wl("a", cpu="8"), wl("b", cpu="4", created=1))
    settle(state)
    assert state.queues["cq"].is_inadmissible("ns/b")
    state.remove_workload("ns/a")
    assert usage(state, "cq") == 0
    assert not state.queues["cq"].is_inadmissible("ns/b")
    settle(state)
    assert set(state.admitted) == {"ns/b"}


def test_priority_from_class_resolved_when_first_seen() -> None:
    state = cluster(CQ)
    state.set_workload_priority_class(WorkloadPriorityClass("batch", 40))
    ref = PriorityClassRef(KUEUE_GROUP, "WorkloadPriorityClass", "batch")
    add(state, wl("w", cpu="1", priority_class=ref))
    assert state.priority_of("ns/w") == 40
    state.set_workload_priority_class(WorkloadPriorityClass("batch", 99))
    add(state, wl("w", cpu="2", priority_class=ref))
    assert state.priority_of("ns/w") == 40


def test_release_requeues_at_original_place() -> None:
    state = add(cluster(CQ), wl("old", cpu="6", created=0))
    settle(state)
    add(state, wl("young", cpu="6", created=5))
    state.release("ns/old")
    head = state.queues["cq"].peek()
    assert head is not None and head[4] == "ns/old"


def test_release_and_apply_admit_errors_name_the_workload() -> None:
    state = add(cluster(CQ), wl("w", cpu="1"))
    with pytest.raises(UnknownWorkload, match="ns/w"):
        state.release("ns/w")
    [admit] = run_cycle(state, 0).admitted
    with pytest.raises(UnknownWorkload, match="already"):
        state.apply_admit(admit)


def test_simulate_removal_for_preemption() -> None:
    state = add(cluster(CQ), wl("a", cpu="5"), wl("b", cpu="5", created=1))
    settle(state)
    assert not state.quota.fits("cq", {("default", "cpu"): m(6)})
    with state.simulate_removal(["ns/a"]):
        assert state.quota.fits("cq", {("default", "cpu"): m(5)})
        assert not state.quota.fits("cq", {("default", "cpu"): m(6)})
    with state.simulate_removal(["ns/a", "ns/b"]):
        assert state.quota.fits("cq", {("default", "cpu"): m(10)})
    assert usage(state, "cq") == m(10)


def test_backoff_reason_names_the_time() -> None:
    state = add(cluster(CQ), wl("w", cpu="1"))
    settle(state)
    state.release("ns/w")
    state.upsert_workload(replace(state.records["ns/w"].workload, requeue_at=60.0))
    assert why_pending(state, "ns/w") == "waiting for eviction backoff until 1970-01-01T00:01:00Z"


def test_unchanged_queue_objects_leave_parked_workloads_parked() -> None:
    """The watch echoes every queue status write: an identical ClusterQueue, LocalQueue,
    flavor or namespace must not send the parked Workloads back for assessment."""
    state = add(cluster(CQ), wl("a", cpu="8"), wl("b", cpu="4", created=1))
    state.set_namespace("ns", {"team": "a"})
    settle(state)
    assert state.queues["cq"].is_inadmissible("ns/b")
    state.set_cluster_queue(replace(CQ))
    state.set_local_queue(LocalQueue("ns", "cq", "cq"))
    state.set_flavor(state.flavors["default"])
    state.set_namespace("ns", {"team": "a"})
    assert state.queues["cq"].is_inadmissible("ns/b")
    state.set_namespace("ns", {"team": "b"})
    assert not state.queues["cq"].is_inadmissible("ns/b")
    settle(state)
    state.set_cluster_queue(cq("cq", {"default": {"cpu": "12"}}, cohort="co"))
    assert not state.queues["cq"].is_inadmissible("ns/b")
