"""Partial admission (controller/core/scheduler/partial_admission.py and the cycle's use of it):
Kueue's PodSetReducer search, its scheduler's cases, and properties of the search."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.constants import WithinClusterQueuePolicy
from controller.core.model.clusterqueues import PreemptionPolicy
from controller.core.model.workloads import PodSet
from controller.core.pending import why_pending
from controller.core.scheduler.cycle import run_cycle
from controller.core.scheduler.partial_admission import (
    can_be_partially_admitted,
    reduced_counts,
    search,
)
from tests.unit.core.builders import add, cluster, cq, m, settle, wl

WITHIN = PreemptionPolicy(within_cluster_queue=WithinClusterQueuePolicy.LOWER_PRIORITY)


def ps(name: str, count: int, minimum: int | None = None, cpu: str = "1") -> PodSet:
    return PodSet(name, count, {"cpu": m(cpu)}, min_count=minimum)


def total_at_most(limit: int):  # type: ignore[no-untyped-def]
    return lambda counts: sum(counts) if sum(counts) <= limit else None


# Kueue's TestSearch (pkg/scheduler/flavorassigner/podset_reducer_test.go): the fits
# function accepts a total number of pods up to a limit.
KUEUE_SEARCH_CASES = {
    "empty": ([], 10, None),
    "partial not available": ([ps("ps1", 1), ps("ps2", 2, 2)], 2, None),
    "partial available": (
        [ps("ps1", 5, 3), ps("ps2", 5, 4), ps("ps3", 5, 1), ps("ps4", 5, 2)],
        15,
        15,
    ),
    "one partial available": (
        [ps("ps1", 5, 3), ps("ps2", 5), ps("ps3", 5), ps("ps4", 5)],
        19,
        19,
    ),
    "to min": ([ps("ps1", 5, 3), ps("ps2", 5, 4), ps("ps3", 5, 1), ps("ps4", 5, 2)], 10, 10),
    "to max": ([ps("ps1", 5, 3), ps("ps2", 5, 4), ps("ps3", 5, 1), ps("ps4", 5, 2)], 20, 20),
    "no overflow": ([ps(f"ps{i}", 150_000, 1) for i in range(8)], 150_000, 150_000),
    "max pods on 1.27": (
        [ps("ps1", 150_000, 1), *(ps(f"ps{i}", 1) for i in range(2, 9))],
        150_000,
        150_000,
    ),
}


@pytest.mark.parametrize("case", sorted(KUEUE_SEARCH_CASES))
def test_kueues_search_cases(case: str) -> None:
    pod_sets, limit, want = KUEUE_SEARCH_CASES[case]
    assert search(pod_sets, total_at_most(limit)) == want


@given(
    count=st.integers(1, 300),
    data=st.data(),
    limit=st.integers(0, 400),
)
def test_one_variable_pod_set_gets_the_largest_count_that_fits(
    count: int, data: st.DataObject, limit: int
) -> None:
    minimum = data.draw(st.integers(1, count))
    calls: list[tuple[int, ...]] = []

    def fits(counts: tuple[int, ...]) -> int | None:
        calls.append(counts)
        return counts[0] if counts[0] <= limit else None

    found = search([ps("main", count, minimum)], fits)
    if minimum == count:
        assert found is None and not calls  # nothing may be reduced
    elif limit >= minimum:
        assert found == min(count, limit)
    else:
        assert found is None
    assert len(calls) <= math.ceil(math.log2(count - minimum + 2)) + 1


@settings(max_examples=300)
@given(
    shapes=st.lists(st.tuples(st.integers(1, 40), st.integers(0, 40)), min_size=1, max_size=6),
    limit=st.integers(0, 250),
)
def test_the_search_stops_at_the_first_step_of_the_walk_that_fits(
    shapes: list[tuple[int, int]], limit: int
) -> None:
    """Counts stay between each minCount and count, the answer fits, and the step before it
    on the walk does not (the most pods, for a monotone question)."""
    pod_sets = [
        ps(f"p{i}", count, min(count, minimum) or None) for i, (count, minimum) in enumerate(shapes)
    ]
    deltas = [p.count - (p.min_count or p.count) for p in pod_sets]
    total = sum(deltas)
    found = search(pod_sets, lambda counts: counts if sum(counts) <= limit else None)
    walk = [reduced_counts(pod_sets, step) for step in range(total + 1)]
    fitting = [i for i, counts in enumerate(walk) if sum(counts) <= limit]
    if total == 0 or not fitting:
        assert found is None
        return
    assert found == walk[fitting[0]]
    for p, n in zip(pod_sets, found, strict=True):
        assert (p.min_count or p.count) <= n <= p.count


def test_a_workload_without_min_count_is_never_reduced() -> None:
    assert not can_be_partially_admitted(wl("a", count=3, cpu="1"))
    assert not can_be_partially_admitted(wl("a", pod_sets=[ps("main", 3, 3)]))
    assert can_be_partially_admitted(wl("a", pod_sets=[ps("main", 3, 2)]))


# Kueue's scheduler cases (pkg/scheduler/scheduler_test.go, "partial admission ...").


def test_a_single_variable_pod_set_is_admitted_with_the_pods_that_fit() -> None:
    state = add(
        cluster(cq("sales", {"default": {"cpu": "50"}})),
        wl("new", "sales", pod_sets=[ps("one", 50, 20, cpu="2")]),
    )
    [admit] = run_cycle(state, 0).admitted
    [assignment] = admit.pod_sets
    assert (assignment.count, assignment.resource_usage) == (25, {"cpu": m(50)})


def test_multiple_variable_pod_sets_give_up_the_same_fraction() -> None:
    state = add(
        cluster(cq("sales", {"default": {"cpu": "50"}})),
        wl(
            "new",
            "sales",
            pod_sets=[ps("one", 20), ps("two", 30, 10), ps("three", 15, 5)],
        ),
    )
    [admit] = run_cycle(state, 0).admitted
    assert [(a.name, a.count) for a in admit.pod_sets] == [("one", 20), ("two", 20), ("three", 10)]


def test_preemption_for_all_pods_goes_before_partial_admission() -> None:
    state = add(
        cluster(cq("eng", {"default": {"cpu": "20"}}, preemption=WITHIN)),
        wl("old", "eng", count=10, cpu="1", priority=-4),
    )
    settle(state)
    add(state, wl("new", "eng", pod_sets=[ps("one", 20, 10)], priority=4))
    result = run_cycle(state, 1)
    assert not result.admitted  # 10 pods would fit now; Kueue preempts for all 20
    [preempt] = result.preempting
    assert [v.workload_key for v in preempt.victims] == ["ns/old"]
    assert preempt.admit.pod_sets[0].count == 20


def test_partial_admission_may_preempt() -> None:
    state = add(
        cluster(cq("eng", {"default": {"cpu": "20"}}, preemption=WITHIN)),
        wl("old", "eng", count=10, cpu="1", priority=-4),
    )
    settle(state)
    add(state, wl("new", "eng", pod_sets=[ps("one", 30, 10)], priority=4))
    result = run_cycle(state, 1)
    [preempt] = result.preempting
    assert [v.workload_key for v in preempt.victims] == ["ns/old"]
    assert preempt.admit.pod_sets[0].count == 20  # 30 never fit; 20 after preempting


def test_below_min_count_the_workload_waits_with_the_full_reason() -> None:
    state = add(
        cluster(cq("cq", {"default": {"cpu": "2"}})),
        wl("big", pod_sets=[ps("main", 5, 3)]),
    )
    settle(state)
    assert "ns/big" not in state.cache.admitted
    reason = why_pending(state, "ns/big")
    assert "insufficient quota for cpu in flavor default: requested 5" in reason


def test_a_partially_admitted_workload_charges_only_its_admitted_pods() -> None:
    state = add(
        cluster(cq("cq", {"default": {"cpu": "4"}})),
        wl("first", pod_sets=[ps("main", 6, 2)]),
        wl("second", count=1, cpu="1", created=1),
    )
    settle(state)
    assert state.cache.quota.usage("cq", ("default", "cpu")) == m(4)
    assert state.cache.records["ns/first"].admission is not None
    assert state.cache.records["ns/first"].admission.pod_set_assignments[0].count == 4
    assert "ns/second" not in state.cache.admitted
