"""Minimum runtime before preemption (controller/core/preemption/minimum_runtime.py): a
Workload reserved less than its ClusterQueue's minimum runtime ago is not a candidate,
except to reclaim borrowed quota; a preemptor refused for that is tried again when the
first protection ends, and says so."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.constants import (
    MINIMUM_RUNTIME_ANNOTATION,
    BorrowWithinCohortPolicy,
    ReclaimWithinCohortPolicy,
    WithinClusterQueuePolicy,
)
from controller.core.model.clusterqueues import ClusterQueue, PreemptionPolicy
from controller.core.model.from_api import InvalidObject, convert
from controller.core.model.workloads import Workload
from controller.core.pending import why_pending
from controller.core.scheduler.cycle import run_cycle
from controller.core.state import ClusterState
from tests.unit.core.builders import add, cluster, cq, settle, wl
from tests.unit.core.model.test_from_api import CQ

WITHIN = PreemptionPolicy(within_cluster_queue=WithinClusterQueuePolicy.LOWER_PRIORITY)
RECLAIM = PreemptionPolicy(
    within_cluster_queue=WithinClusterQueuePolicy.LOWER_PRIORITY,
    reclaim_within_cohort=ReclaimWithinCohortPolicy.ANY,
)


def protected(queue: ClusterQueue, seconds: int) -> ClusterQueue:
    return replace(queue, minimum_runtime_seconds=seconds)


def running(state: ClusterState, workload: Workload, reserved_at: float) -> None:
    """Admit `workload` and record its reservation time, as the watch brings it back."""
    add(state, workload)
    settle(state, reserved_at)
    record = state.cache.records[workload.key]
    assert workload.key in state.cache.admitted, why_pending(state, workload.key)
    state.upsert_workload(replace(record.workload, quota_reserved_at=reserved_at))


def victims_at(state: ClusterState, now: float) -> dict[str, str]:
    return {
        v.workload_key: str(v.reason)
        for preempt in run_cycle(state, now).preempting
        for v in preempt.victims
    }


def test_a_fresh_workload_is_not_a_victim_until_its_minimum_runtime_has_passed() -> None:
    state = cluster(protected(cq("cq", {"default": {"cpu": 4}}, preemption=WITHIN), 60))
    running(state, wl("low", cpu=4, priority=1), reserved_at=100.0)
    add(state, wl("high", cpu=4, priority=10))
    assert victims_at(state, 130.0) == {}
    message = why_pending(state, "ns/high")
    assert "1 preemption candidate within its ClusterQueue's minimum runtime" in message
    assert "the first preemptible at 1970-01-01T00:02:40Z" in message  # 100 + 60 s
    assert victims_at(state, 159.0) == {}  # parked: not tried before the protection ends
    assert victims_at(state, 160.0) == {"ns/low": "InClusterQueue"}


def test_without_the_setting_nothing_is_protected() -> None:
    state = cluster(cq("cq", {"default": {"cpu": 4}}, preemption=WITHIN))
    running(state, wl("low", cpu=4, priority=1), reserved_at=100.0)
    add(state, wl("high", cpu=4, priority=10))
    assert victims_at(state, 100.5) == {"ns/low": "InClusterQueue"}


def test_protection_comes_before_cost_among_equal_candidates() -> None:
    """The cheaper candidate is still running its minimum runtime: the dearer one, which
    has run long enough, goes instead (cost orders only the candidates that may go)."""
    state = cluster(protected(cq("cq", {"default": {"cpu": 4}}, preemption=WITHIN), 60))
    running(state, wl("old-dear", cpu=2, priority=1, cost=900), reserved_at=0.0)
    running(state, wl("new-cheap", cpu=2, priority=1, cost=1), reserved_at=100.0)
    add(state, wl("high", cpu=2, priority=10))
    assert victims_at(state, 120.0) == {"ns/old-dear": "InClusterQueue"}


def test_the_cheaper_candidate_goes_first_once_both_have_run_long_enough() -> None:
    state = cluster(protected(cq("cq", {"default": {"cpu": 4}}, preemption=WITHIN), 60))
    running(state, wl("old-dear", cpu=2, priority=1, cost=900), reserved_at=0.0)
    running(state, wl("new-cheap", cpu=2, priority=1, cost=1), reserved_at=100.0)
    add(state, wl("high", cpu=2, priority=10))
    assert victims_at(state, 200.0) == {"ns/new-cheap": "InClusterQueue"}


def test_reclaiming_borrowed_quota_is_not_held_up_by_the_borrowers_minimum_runtime() -> None:
    state = cluster(
        cq("lender", {"default": {"cpu": 4}}, cohort="co", preemption=RECLAIM),
        protected(cq("borrower", {"default": {"cpu": 4}}, cohort="co", preemption=RECLAIM), 600),
    )
    running(state, wl("borrowing", "borrower", cpu=8, priority=100), reserved_at=10.0)
    add(state, wl("own", "lender", cpu=4, priority=1))
    assert victims_at(state, 11.0) == {"ns/borrowing": "InCohortReclamation"}


def test_a_borrowing_preemptor_respects_the_minimum_runtime() -> None:
    """Reclaim while borrowing (the preemptor itself needs more than its nominal quota)
    is not reclamation of the preemptor's own quota: the protection holds."""
    borrow = PreemptionPolicy(
        within_cluster_queue=WithinClusterQueuePolicy.LOWER_PRIORITY,
        reclaim_within_cohort=ReclaimWithinCohortPolicy.ANY,
        borrow_within_cohort=BorrowWithinCohortPolicy.LOWER_PRIORITY,
    )
    state = cluster(
        cq("a", {"default": {"cpu": 2}}, cohort="co", preemption=borrow),
        protected(cq("b", {"default": {"cpu": 4}}, cohort="co", preemption=borrow), 60),
    )
    running(state, wl("b-borrowing", "b", cpu=6, priority=1), reserved_at=0.0)
    add(state, wl("a-big", "a", cpu=4, priority=10))  # needs 2 beyond a's nominal 2
    assert victims_at(state, 30.0) == {}
    assert victims_at(state, 60.0) == {"ns/b-borrowing": "InCohortReclaimWhileBorrowing"}


def test_an_admission_not_yet_seen_back_counts_as_reserved_now() -> None:
    """Admitted by this engine a moment ago (no QuotaReserved time yet): protected."""
    state = cluster(protected(cq("cq", {"default": {"cpu": 4}}, preemption=WITHIN), 60))
    add(state, wl("low", cpu=4, priority=1))
    settle(state, 0.0)
    assert state.cache.records["ns/low"].workload.quota_reserved_at is None
    add(state, wl("high", cpu=4, priority=10))
    assert victims_at(state, 10_000.0) == {}


def test_a_readmitted_workload_is_protected_again() -> None:
    state = cluster(protected(cq("cq", {"default": {"cpu": 4}}, preemption=WITHIN), 60))
    running(state, wl("low", cpu=4, priority=1), reserved_at=0.0)
    state.release("ns/low")  # evicted earlier and requeued
    settle(state, 500.0)  # admitted again: the old reservation time no longer counts
    add(state, wl("high", cpu=4, priority=10))
    assert victims_at(state, 501.0) == {}


def test_the_annotation_is_read_from_the_cluster_queue() -> None:
    annotated = {
        **CQ,
        "metadata": {"name": "cq", "annotations": {MINIMUM_RUNTIME_ANNOTATION: "300"}},
    }
    queue = convert(annotated)
    assert isinstance(queue, ClusterQueue)
    assert queue.minimum_runtime_seconds == 300
    plain = convert(CQ)
    assert isinstance(plain, ClusterQueue)
    assert plain.minimum_runtime_seconds is None


@pytest.mark.parametrize("value", ["5m", "-1", "1.5", "", " 30"])
def test_a_bad_annotation_names_the_annotation(value: str) -> None:
    bad: dict[str, Any] = {
        **CQ,
        "metadata": {"name": "cq", "annotations": {MINIMUM_RUNTIME_ANNOTATION: value}},
    }
    with pytest.raises(InvalidObject) as raised:
        convert(bad)
    ((field, message),) = raised.value.problems
    assert field == f"metadata.annotations[{MINIMUM_RUNTIME_ANNOTATION}]"
    assert "whole number of seconds" in message and repr(value) in message


@settings(max_examples=200, deadline=None)
@given(
    running_workloads=st.lists(
        st.tuples(st.integers(1, 4), st.integers(0, 3), st.integers(0, 40)),
        min_size=1,
        max_size=6,
    ),
    minimum=st.integers(1, 80),
    elapsed=st.integers(0, 120),
    preemptor=st.tuples(st.integers(1, 8), st.integers(0, 5)),
    borrower=st.booleans(),
)
def test_no_victim_is_younger_than_its_minimum_runtime(
    running_workloads: list[tuple[int, int, int]],
    minimum: int,
    elapsed: int,
    preemptor: tuple[int, int],
    borrower: bool,
) -> None:
    """Whatever runs and whatever arrives: every victim has run its minimum runtime,
    unless it is reclaimed from a queue borrowing the preemptor's quota."""
    state = cluster(
        protected(cq("b", {"default": {"cpu": 8}}, cohort="co", preemption=RECLAIM), minimum),
        cq("a", {"default": {"cpu": 8}}, cohort="co", preemption=RECLAIM),
    )
    reserved: dict[str, float] = {}
    for i, (cpu, priority, at) in enumerate(sorted(running_workloads, key=lambda r: r[2])):
        workload = wl(f"w{i}", "b", cpu=cpu, priority=priority)
        add(state, workload)
        settle(state, float(at))
        if workload.key in state.cache.admitted:
            record = state.cache.records[workload.key]
            state.upsert_workload(replace(record.workload, quota_reserved_at=float(at)))
            reserved[workload.key] = float(at)
    cpu, priority = preemptor
    add(state, wl("p", "b" if borrower else "a", cpu=cpu, priority=priority))
    now = max(reserved.values()) + elapsed
    for preempt in run_cycle(state, now).preempting:
        for victim in preempt.victims:
            if str(victim.reason) != "InCohortReclamation":
                assert now - reserved[victim.workload_key] >= minimum
