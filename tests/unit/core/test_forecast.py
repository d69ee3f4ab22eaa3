"""The admission wait-time estimate (controller/core/forecast.py): hand-worked timelines."""

from __future__ import annotations

from dataclasses import replace

from api.constants import EXPECTED_RUNTIME_ANNOTATION, ReclaimWithinCohortPolicy
from api.workload_status import rfc3339
from controller.core.forecast import MAXIMUM_EXECUTION_TIME, expected_runtime, forecast
from controller.core.model.clusterqueues import PreemptionPolicy
from controller.core.model.workloads import Workload
from controller.core.state import ClusterState
from tests.unit.core.builders import add, cluster, cq, settle, wl


def running(state: ClusterState, workload: Workload, reserved_at: float) -> None:
    """Admit `workload` and record its reservation time, as the watch brings it back."""
    add(state, workload)
    settle(state, reserved_at)
    assert workload.key in state.cache.admitted
    record = state.cache.records[workload.key]
    state.upsert_workload(replace(record.workload, quota_reserved_at=reserved_at))


def limited(workload: Workload, seconds: int, accumulated: int = 0) -> Workload:
    return replace(
        workload,
        maximum_execution_time_seconds=seconds,
        accumulated_past_execution_time_seconds=accumulated,
    )


def expecting(workload: Workload, text: str) -> Workload:
    return replace(workload, expected_runtime=text)


def test_fifo_behind_a_running_and_a_pending_workload() -> None:
    """A runs until 100 (maximum execution time), B then runs 50 s (annotation): C at 150."""
    state = cluster(cq("cq", {"default": {"cpu": 4}}))
    running(state, limited(wl("a", cpu=4), 100), reserved_at=0.0)
    add(state, expecting(wl("b", cpu=4, created=1.0), "50"), wl("c", cpu=4, created=2.0))
    answer = forecast(state, "ns/c", now=10.0)
    assert (answer.admitted_at, answer.cluster_queue, answer.reason) == (150.0, "cq", None)
    assert answer.admitted_before == 1
    assert answer.runtime_sources == {MAXIMUM_EXECUTION_TIME: 1, EXPECTED_RUNTIME_ANNOTATION: 1}
    assert answer.unknown == [] and answer.preemptions == 0


def test_time_already_run_before_an_eviction_counts() -> None:
    """100 s allowed, 30 already run before an earlier eviction, reserved again at 0: it
    ends at 70."""
    state = cluster(cq("cq", {"default": {"cpu": 4}}))
    running(state, limited(wl("a", cpu=4), 100, accumulated=30), reserved_at=0.0)
    add(state, wl("c", cpu=4, created=2.0))
    assert forecast(state, "ns/c", now=10.0).admitted_at == 70.0


def test_an_overdue_workload_ends_now() -> None:
    state = cluster(cq("cq", {"default": {"cpu": 4}}))
    running(state, expecting(wl("a", cpu=4), "5"), reserved_at=0.0)
    add(state, wl("c", cpu=4, created=2.0))
    assert forecast(state, "ns/c", now=10.0).admitted_at == 10.0


def test_an_unknown_runtime_in_the_way_means_no_estimate_and_names_it() -> None:
    state = cluster(cq("cq", {"default": {"cpu": 4}}))
    running(state, wl("a", cpu=4), reserved_at=0.0)
    add(state, wl("c", cpu=4, created=2.0))
    answer = forecast(state, "ns/c", now=10.0)
    assert answer.admitted_at is None
    assert answer.unknown == ["ns/a"]
    assert answer.reason == (
        "cannot estimate: it waits for 1 admitted Workload whose runtime is unknown (ns/a); "
        f"set spec.maximumExecutionTimeSeconds or the {EXPECTED_RUNTIME_ANNOTATION} "
        "annotation on them"
    )


def test_an_unknown_runtime_out_of_the_way_is_listed_but_does_not_block() -> None:
    state = cluster(cq("cq", {"default": {"cpu": 8}}))
    running(state, wl("forever", cpu=4), reserved_at=0.0)
    running(state, limited(wl("a", cpu=4), 60), reserved_at=0.0)
    add(state, wl("c", cpu=4, created=2.0))
    answer = forecast(state, "ns/c", now=10.0)
    assert answer.admitted_at == 60.0
    assert answer.unknown == ["ns/forever"]


def test_borrowed_capacity_comes_back_when_the_borrower_ends() -> None:
    state = cluster(
        cq("a", {"default": {"cpu": 2}}, cohort="co"),
        cq("b", {"default": {"cpu": 2}}, cohort="co"),
    )
    running(state, limited(wl("borrower", "b", cpu=4), 40), reserved_at=0.0)
    add(state, wl("mine", "a", cpu=2, created=1.0))
    assert forecast(state, "ns/mine", now=10.0).admitted_at == 40.0


def test_reclaiming_is_modelled_as_the_engine_decides_it() -> None:
    reclaim = PreemptionPolicy(reclaim_within_cohort=ReclaimWithinCohortPolicy.ANY)
    state = cluster(
        cq("a", {"default": {"cpu": 2}}, cohort="co", preemption=reclaim),
        cq("b", {"default": {"cpu": 2}}, cohort="co", preemption=reclaim),
    )
    running(state, limited(wl("borrower", "b", cpu=4), 40), reserved_at=0.0)
    add(state, wl("mine", "a", cpu=2, created=1.0))
    answer = forecast(state, "ns/mine", now=10.0)
    assert (answer.admitted_at, answer.preemptions) == (10.0, 1)


def test_a_workload_that_can_never_fit_says_why() -> None:
    state = cluster(cq("cq", {"default": {"cpu": 4}}))
    add(state, wl("huge", cpu=10))
    answer = forecast(state, "ns/huge", now=0.0)
    assert answer.admitted_at is None
    assert answer.reason is not None
    assert answer.reason.startswith("not admitted as things stand: ")
    assert "insufficient" in answer.reason or "quota" in answer.reason


def test_the_work_is_bounded_and_a_bound_gives_a_lower_bound() -> None:
    """Twenty 10-second Workloads ahead in a 1-CPU queue: the target's turn is at 210."""

    def line() -> ClusterState:
        state = cluster(cq("cq", {"default": {"cpu": 1}}))
        running(state, limited(wl("a", cpu=1), 10), reserved_at=0.0)
        for i in range(20):
            add(state, limited(wl(f"p{i:02}", cpu=1, created=1.0 + i), 10))
        add(state, wl("last", cpu=1, created=100.0))
        return state

    assert forecast(line(), "ns/last", now=0.0).admitted_at == 210.0
    answer = forecast(line(), "ns/last", now=0.0, max_cycles=5)
    assert answer.admitted_at is None and answer.cycles == 5
    assert answer.not_before is not None and 0.0 < answer.not_before < 210.0
    assert answer.reason == (
        "no estimate within 5 simulated admission cycles; under these assumptions not before "
        f"{rfc3339(answer.not_before)}"
    )
    far = forecast(line(), "ns/last", now=0.0, horizon_seconds=50)
    assert (far.admitted_at, far.not_before) == (None, 50.0)
    assert far.reason == "not admitted within 0.000578704 days"


def test_the_expected_runtime_annotation_wins_and_a_bad_one_is_reported() -> None:
    both = expecting(limited(wl("w", cpu=1), 600), "120")
    assert expected_runtime(both).seconds == 120
    assert expected_runtime(both).source == EXPECTED_RUNTIME_ANNOTATION
    bad = expecting(limited(wl("w", cpu=1), 600), "2m")
    runtime = expected_runtime(bad)
    assert (runtime.seconds, runtime.source, runtime.invalid) == (600, MAXIMUM_EXECUTION_TIME, "2m")
    state = cluster(cq("cq", {"default": {"cpu": 1}}))
    running(state, bad, reserved_at=0.0)
    add(state, wl("c", cpu=1, created=2.0))
    answer = forecast(state, "ns/c", now=0.0)
    assert answer.admitted_at == 600.0
    assert answer.invalid == {"ns/w": "2m"}


def test_an_admitted_workload_gets_no_forecast() -> None:
    state = cluster(cq("cq", {"default": {"cpu": 1}}))
    running(state, wl("a", cpu=1), reserved_at=0.0)
    assert forecast(state, "ns/a", now=0.0).reason == "it already holds quota"
