"""Preemption scenarios (issue 5): policies, KEP-7990 cost tie-break, KEP-5710 victim
search and disruption modes, KAI preemptibility, delayed preemption."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.constants import (
    AdmissionMode,
    DisruptionMode,
    QueueingStrategy,
    ReclaimWithinCohortPolicy,
    StopPolicy,
    WithinClusterQueuePolicy,
)
from controller.core.afs.usage import AdmissionFairSharing
from controller.core.decisions import CycleResult, Preempt
from controller.core.fairsharing.settings import FairSharing
from controller.core.model.clusterqueues import LocalQueue, PreemptionPolicy
from controller.core.model.priorities import PriorityClass
from controller.core.model.workloads import PodSet, PriorityClassRef, Workload
from controller.core.pending import why_pending
from controller.core.scheduler.cycle import RECLAIMED_BY, run_cycle
from controller.core.scheduler.memory import SchedulerMemory
from controller.core.state import ClusterState
from tests.unit.core.builders import add, cluster, cq, m, settle, usage, wl

STRICT = QueueingStrategy.STRICT_FIFO
WITHIN = PreemptionPolicy(within_cluster_queue=WithinClusterQueuePolicy.LOWER_PRIORITY)
RECLAIM = PreemptionPolicy(
    within_cluster_queue=WithinClusterQueuePolicy.LOWER_PRIORITY,
    reclaim_within_cohort=ReclaimWithinCohortPolicy.ANY,
)


def _reclaiming(reclaim: ReclaimWithinCohortPolicy) -> PreemptionPolicy:
    """Lower priority within the queue, and `reclaim` within the cohort."""
    return PreemptionPolicy(
        within_cluster_queue=WithinClusterQueuePolicy.LOWER_PRIORITY,
        reclaim_within_cohort=reclaim,
    )


def admit(state: ClusterState, *workloads: Workload, now: float = 0.0) -> None:
    """Add Workloads and run cycles until they are admitted (they must fit)."""
    for workload in workloads:
        add(state, workload)
        settle(state, now)
        assert workload.key in state.cache.admitted, why_pending(state, workload.key)


def preempt_once(
    state: ClusterState, workload: Workload, memory: SchedulerMemory | None = None
) -> Preempt:
    add(state, workload)
    result = run_cycle(state, 1.0, memory=memory)
    assert len(result.preempting) == 1, (result, why_pending(state, workload.key))
    return result.preempting[0]


def victims(preempt: Preempt) -> dict[str, tuple[str, int]]:
    return {v.workload_key: (v.reason, v.pods) for v in preempt.victims}


def release(state: ClusterState, preempt: Preempt) -> CycleResult:
    """The victims' owners acknowledge: whole victims give their quota back."""
    for victim in preempt.victims:
        assert victim.whole
        state.remove_workload(victim.workload_key)
    return run_cycle(state, 2.0)


def test_lower_priority_victim_in_the_same_queue() -> None:
    state = cluster(cq("cq", {"default": {"cpu": 4}}, preemption=WITHIN))
    admit(state, wl("low", cpu=4, priority=1))
    preempt = preempt_once(state, wl("high", cpu=4, priority=10))
    assert victims(preempt) == {"ns/low": ("InClusterQueue", 1)}
    assert (
        "ns/high" not in state.cache.admitted
    )  # delayed: not admitted while the victim holds quota
    result = release(state, preempt)
    assert [a.workload_key for a in result.admitted] == ["ns/high"]
    assert usage(state, "cq") == m(4)


def test_workloads_awaited_by_preemptors_are_listed_per_queue_until_they_leave() -> None:
    """`claimed_in`, which every victim search reads for the queues in reach: a's victims
    of b's reclaiming preemptor are listed under a (not under b) while they hold quota and
    forgotten once the preemptor is admitted."""
    state = cluster(
        cq("a", {"default": {"cpu": 2}}, cohort="co", preemption=RECLAIM),
        cq("b", {"default": {"cpu": 4}}, cohort="co", preemption=RECLAIM),
    )
    admit(state, wl("a-1", "a", cpu=2, priority=1), wl("a-2", "a", cpu=2, priority=1))
    admit(state, wl("a-3", "a", cpu=2, priority=1))
    preempt = preempt_once(state, wl("b-new", "b", cpu=4, priority=1))
    taken = sorted(victims(preempt))
    assert len(taken) == 2 and state.holds.claimed_in("a") == taken
    assert state.holds.claimed_in("b") == []
    state.remove_workload(taken[0])
    assert state.holds.claimed_in("a") == taken[1:]  # the one that left is no longer listed
    release(state, replace(preempt, victims=preempt.victims[1:]))
    assert "ns/b-new" in state.cache.admitted
    assert state.holds.claimed_in("a") == []


@pytest.mark.parametrize(
    ("policy", "victim_priority", "expected"),
    [
        ("Never", 1, False),
        ("LowerPriority", 1, True),
        ("LowerPriority", 10, False),
        ("LowerOrNewerEqualPriority", 10, True),  # the victim is newer
        ("LowerOrNewerEqualPriority", 11, False),
    ],
)
def test_within_cluster_queue_policy(policy: str, victim_priority: int, expected: bool) -> None:
    state = cluster(
        cq(
            "cq",
            {"default": {"cpu": 4}},
            preemption=PreemptionPolicy(within_cluster_queue=WithinClusterQueuePolicy(policy)),
        )
    )
    admit(state, wl("victim", cpu=4, priority=victim_priority, created=5.0))
    add(state, wl("preemptor", cpu=4, priority=10, created=1.0))
    result = run_cycle(state, 1.0)
    assert bool(result.preempting) is expected


def test_reclaim_only_from_a_borrowing_queue() -> None:
    state = cluster(
        cq("a", {"default": {"cpu": 4}}, cohort="co", preemption=RECLAIM),
        cq("b", {"default": {"cpu": 4}}, cohort="co", preemption=RECLAIM),
    )
    admit(state, wl("b-within", "b", cpu=4, priority=100))
    admit(state, wl("a-own", "a", cpu=4, priority=100))
    # b is within its nominal quota: nothing to reclaim; a's own Workload has equal priority.
    add(state, wl("a-new", "a", cpu=2, priority=100))
    assert not run_cycle(state, 1.0).preempting


def test_reclaiming_borrowed_capacity_comes_before_the_own_queue() -> None:
    state = cluster(
        cq("a", {"default": {"cpu": 4}}, cohort="co", preemption=RECLAIM),
        cq("b", {"default": {"cpu": 4}}, cohort="co", preemption=RECLAIM),
    )
    admit(state, wl("a-low", "a", cpu=2, priority=1))
    admit(state, wl("b-borrow", "b", cpu=6, priority=50))  # b borrows 2 of a's
    # a-high fits in a's nominal quota once b gives back what it borrowed; a-low (same
    # queue, lower priority) is spared because reclaiming comes first.
    preempt = preempt_once(state, wl("a-high", "a", cpu=2, priority=100))
    assert victims(preempt) == {"ns/b-borrow": ("InCohortReclamation", 1)}


def test_a_held_preemptor_and_its_leaving_victim_are_counted_once() -> None:
    """While a reclaiming preemptor waits for its victim, the cohort counts the larger of
    the two, not their sum: a third queue takes the capacity that is really free without
    reclaiming anything, and the preemptor is admitted once the victim is gone."""
    state = cluster(
        cq("a", {"default": {"cpu": 4}}, cohort="co", preemption=RECLAIM),
        cq("b", {"default": {"cpu": 4}}, cohort="co", preemption=RECLAIM),
        cq("c", {"default": {"cpu": 2}}, cohort="co", preemption=RECLAIM),
    )
    admit(state, wl("b1", "b", cpu=4, priority=1), wl("b2", "b", cpu=4, priority=1))
    preempt = preempt_once(state, wl("a-new", "a", cpu=4, priority=1))
    (victim,) = victims(preempt)  # one of b's two (equal: decided by UID)
    # Pool 10: b holds 8 until the victim leaves, then a 4 + b 4: counted 8, not 4 + 8.
    assert state.cache.quota.cohort_usage("co", ("default", "cpu")) == m(8)
    assert state.cache.quota.available("c", ("default", "cpu")) == m(2)
    add(state, wl("c-new", "c", cpu=2, priority=1))
    result = run_cycle(state, 2.0)
    assert [a.workload_key for a in result.admitted] == ["ns/c-new"]
    assert not result.preempting
    assert state.cache.quota.cohort_usage("co", ("default", "cpu")) == m(10)
    state.release(victim)  # the job side acknowledges the eviction
    result = run_cycle(state, 3.0)
    assert [a.workload_key for a in result.admitted] == ["ns/a-new"]
    assert (usage(state, "a"), usage(state, "b"), usage(state, "c")) == (m(4), m(4), m(2))
    assert state.cache.quota.cohort_usage("co", ("default", "cpu")) == m(10)


def test_a_preemptor_held_in_its_own_queue_counts_the_larger_of_it_and_its_victims() -> None:
    state = cluster(cq("cq", {"default": {"cpu": 6}}, preemption=WITHIN))
    admit(state, wl("low1", cpu=2, priority=1), wl("low2", cpu=2, priority=1))
    preempt_once(state, wl("high", cpu=5, priority=10))  # 2 free, both victims needed
    assert usage(state, "cq") == m(5)  # max(5, 2 + 2) on top of nothing else
    state.release("ns/low1")
    assert usage(state, "cq") == m(5)  # low2 2 + the hold's uncovered 3
    assert not run_cycle(state, 2.0).admitted
    state.release("ns/low2")
    assert [a.workload_key for a in run_cycle(state, 3.0).admitted] == ["ns/high"]
    assert usage(state, "cq") == m(5)


def test_a_victim_larger_than_its_preemptor_is_counted_in_full_until_it_leaves() -> None:
    state = cluster(cq("cq", {"default": {"cpu": 6}}, preemption=WITHIN))
    admit(state, wl("low1", cpu=3, priority=1), wl("low2", cpu=3, priority=1))
    preempt_once(state, wl("high", cpu=2, priority=10))  # one victim of 3 CPUs
    assert usage(state, "cq") == m(6)  # 3 + max(2, 3): never less than what is reserved


def test_reclaim_and_own_queue_together_when_neither_alone_suffices() -> None:
    """As Kueue: without borrowWithinCohort the preemptor may not borrow, so it needs both
    b's borrowed capacity back and room in its own nominal quota."""
    state = cluster(
        cq("a", {"default": {"cpu": 4}}, cohort="co", preemption=RECLAIM),
        cq("b", {"default": {"cpu": 4}}, cohort="co", preemption=RECLAIM),
    )
    admit(state, wl("a-low", "a", cpu=2, priority=1))
    admit(state, wl("b-borrow", "b", cpu=6, priority=50))
    preempt = preempt_once(state, wl("a-high", "a", cpu=4, priority=100))
    assert victims(preempt) == {
        "ns/b-borrow": ("InCohortReclamation", 1),
        "ns/a-low": ("InClusterQueue", 1),
    }


def test_cost_breaks_ties_between_equal_priorities_only() -> None:
    """KEP-7990: equal priority ⇒ lower cost first; different priority ⇒ cost ignored."""
    state = cluster(cq("cq", {"default": {"cpu": 4}}, preemption=WITHIN))
    admit(
        state, wl("cheap", cpu=2, priority=5, cost=m(1)), wl("dear", cpu=2, priority=5, cost=m(9))
    )
    assert victims(preempt_once(state, wl("p", cpu=2, priority=10))) == {
        "ns/cheap": ("InClusterQueue", 1)
    }

    state = cluster(cq("cq", {"default": {"cpu": 4}}, preemption=WITHIN))
    admit(
        state,
        wl("low-dear", cpu=2, priority=1, cost=m(1000)),
        wl("mid-cheap", cpu=2, priority=5, cost=0),
    )
    assert victims(preempt_once(state, wl("p", cpu=2, priority=10))) == {
        "ns/low-dear": ("InClusterQueue", 1)
    }


def test_cost_decides_where_kueue_would_pick_the_most_recently_admitted() -> None:
    """Kueue orders equal priorities by most recent reservation; we ask the cost first, so
    the Workload whose preemption loses the least work goes, even if it is older."""
    state = cluster(cq("cq", {"default": {"cpu": 4}}, preemption=WITHIN))
    old_cheap = replace(wl("old-cheap", cpu=2, priority=5, cost=0), quota_reserved_at=10.0)
    new_dear = replace(wl("new-dear", cpu=2, priority=5, cost=m(3)), quota_reserved_at=500.0)
    admit(state, old_cheap, new_dear)
    assert victims(preempt_once(state, wl("p", cpu=2, priority=10))) == {
        "ns/old-cheap": ("InClusterQueue", 1)
    }


def test_lower_priority_victims_are_preferred_over_fewer_higher_priority_ones() -> None:
    """KEP-5710's priority threshold: three small low-priority victims rather than one
    bigger medium-priority one."""
    state = cluster(cq("cq", {"default": {"cpu": 6}}, preemption=WITHIN))
    admit(
        state, wl("s1", cpu=1, priority=1), wl("s2", cpu=1, priority=1), wl("s3", cpu=1, priority=1)
    )
    admit(state, wl("medium", cpu=3, priority=5))
    preempt = preempt_once(state, wl("p", cpu=3, priority=10))
    assert set(victims(preempt)) == {"ns/s1", "ns/s2", "ns/s3"}


def test_victim_set_is_minimal() -> None:
    """The scan takes the lowest-priority victims until the preemptor fits; the walk back
    spares those it turned out not to need (here the first small one)."""
    state = cluster(cq("cq", {"default": {"cpu": 6}}, preemption=WITHIN))
    admit(
        state,
        wl("tiny", cpu=1, priority=1),
        wl("mid", cpu=2, priority=2),
        wl("big", cpu=3, priority=3),
    )
    preempt = preempt_once(state, wl("p", cpu=3, priority=10))
    # Removing tiny+mid frees 3 (enough), but big (3) alone is not lower priority than mid;
    # minimal: {tiny, mid} — neither can be spared.
    assert set(victims(preempt)) == {"ns/tiny", "ns/mid"}

    state = cluster(cq("cq", {"default": {"cpu": 6}}, preemption=WITHIN))
    admit(
        state,
        wl("one", cpu=1, priority=1),
        wl("four", cpu=4, priority=2),
        wl("rest", cpu=1, priority=3),
    )
    preempt = preempt_once(state, wl("p", cpu=4, priority=10))
    # The scan takes one (1) then four (4) → fits; walking back, four is needed, one is not.
    assert set(victims(preempt)) == {"ns/four"}


def test_disruption_mode_pod_takes_only_needed_pods_above_min_count() -> None:
    state = cluster(cq("cq", {"default": {"cpu": 8}}, preemption=WITHIN))
    elastic = replace(
        wl("elastic", priority=1, pod_sets=[PodSet("main", 6, {"cpu": m(1)}, min_count=2)]),
        disruption_mode=DisruptionMode.POD,
    )
    admit(state, elastic)
    preempt = preempt_once(state, wl("p", cpu=4, priority=10))
    assert victims(preempt) == {"ns/elastic": ("InClusterQueue", 2)}  # 2 free + 2 pods taken
    assert not preempt.victims[0].whole


def test_disruption_mode_pod_group_evicts_the_whole_workload() -> None:
    state = cluster(cq("cq", {"default": {"cpu": 8}}, preemption=WITHIN))
    gang = wl("gang", priority=1, pod_sets=[PodSet("main", 6, {"cpu": m(1)}, min_count=2)])
    admit(state, gang)
    preempt = preempt_once(state, wl("p", cpu=4, priority=10))
    assert victims(preempt) == {"ns/gang": ("InClusterQueue", 6)}


def test_pod_mode_never_goes_below_min_count() -> None:
    state = cluster(cq("cq", {"default": {"cpu": 6}}, preemption=WITHIN))
    elastic = replace(
        wl("elastic", priority=1, pod_sets=[PodSet("main", 6, {"cpu": m(1)}, min_count=4)]),
        disruption_mode=DisruptionMode.POD,
    )
    admit(state, elastic)
    add(state, wl("p", cpu=3, priority=10))
    assert not run_cycle(state, 1.0).preempting  # only 2 pods may go; 3 are needed


def test_semi_preemptible_protects_min_count_pods() -> None:
    state = cluster(cq("cq", {"default": {"cpu": 6}}, preemption=WITHIN))
    semi = replace(
        wl("semi", priority=1, pod_sets=[PodSet("main", 6, {"cpu": m(1)}, min_count=4)]),
        preemptibility="semi-preemptible",
    )
    admit(state, semi)
    preempt = preempt_once(state, wl("p", cpu=2, priority=10))
    assert victims(preempt) == {"ns/semi": ("InClusterQueue", 2)}


def test_non_preemptible_is_never_a_victim_and_never_borrows() -> None:
    state = cluster(
        cq("a", {"default": {"cpu": 4}}, cohort="co", preemption=RECLAIM),
        cq("b", {"default": {"cpu": 4}}, cohort="co", preemption=RECLAIM),
    )
    admit(state, replace(wl("keep", "a", cpu=4, priority=1), preemptibility="non-preemptible"))
    add(state, wl("p", "a", cpu=4, priority=10))
    # The only candidate is non-preemptible; p may borrow b's idle quota instead.
    result = settle(state)
    assert "ns/p" in state.cache.admitted and not any(r.preempting for r in result)

    fresh = cluster(
        cq("a", {"default": {"cpu": 4}}, cohort="co", preemption=RECLAIM),
        cq("b", {"default": {"cpu": 4}}, cohort="co", preemption=RECLAIM),
    )
    add(fresh, replace(wl("no-borrow", "a", cpu=6, priority=10), preemptibility="non-preemptible"))
    add(fresh, wl("may-borrow", "b", cpu=6, priority=10, created=5.0))
    settle(fresh)
    assert (
        "ns/no-borrow" not in fresh.cache.admitted
    )  # b's idle quota is there, but it may not borrow
    assert "non-preemptible Workloads may not borrow" in why_pending(fresh, "ns/no-borrow")
    assert "ns/may-borrow" in fresh.cache.admitted


@pytest.mark.parametrize(
    ("spec", "threshold", "priority", "expected"),
    [
        ("non-preemptible", None, 1, False),
        ("preemptible", 100, 500, True),
        ("bogus", 100, 500, False),  # invalid ⇒ the threshold decides: 500 ≥ 100 ⇒ non-preemptible
        (None, 100, 50, True),
        (None, None, 500, True),  # default: preemptible (Kueue's behaviour)
    ],
)
def test_preemptibility_precedence_as_seen_by_the_state(
    spec: str | None, threshold: int | None, priority: int, expected: bool
) -> None:
    state = cluster(cq("cq", {"default": {"cpu": 4}}, preemption=WITHIN))
    state.preemptibility_threshold = threshold
    admit(state, replace(wl("victim", cpu=4, priority=priority), preemptibility=spec))
    resolution = state.cache.resolution("ns/victim")
    if spec == "bogus":
        assert resolution.problems and "bogus" in resolution.problems[0]
    add(state, wl("p", cpu=4, priority=1000))
    assert bool(run_cycle(state, 1.0).preempting) is expected


def test_preemption_policy_never_preempts_nothing() -> None:
    state = cluster(cq("cq", {"default": {"cpu": 4}}, preemption=WITHIN))
    state.set_priority_class(PriorityClass("polite", 1000, "Never"))
    admit(state, wl("low", cpu=4, priority=1))
    add(
        state,
        wl(
            "p",
            cpu=4,
            priority_class=PriorityClassRef("scheduling.k8s.io", "PriorityClass", "polite"),
        ),
    )
    assert not run_cycle(state, 1.0).preempting


def test_nominated_capacity_is_not_taken_by_another_workload() -> None:
    state = cluster(cq("cq", {"default": {"cpu": 4}}, preemption=WITHIN))
    admit(state, wl("low", cpu=4, priority=1))
    preempt = preempt_once(state, wl("high", cpu=4, priority=10))
    add(state, wl("sneaky", cpu=4, priority=5, created=9.0))
    for victim in preempt.victims:
        state.remove_workload(victim.workload_key)
    result = run_cycle(state, 2.0)
    assert [a.workload_key for a in result.admitted] == ["ns/high"]
    settle(state, 3.0)
    assert "ns/sneaky" not in state.cache.admitted


def test_no_new_preemption_while_evictions_are_in_flight() -> None:
    state = cluster(cq("cq", {"default": {"cpu": 4}}, preemption=WITHIN))
    admit(state, wl("low", cpu=4, priority=1))
    preempt_once(state, wl("high", cpu=4, priority=10))
    for now in (2.0, 3.0, 4.0):
        result = run_cycle(state, now)
        assert not result.preempting and not result.admitted


def test_infeasible_nomination_is_dropped_and_victims_are_not_evicted_again() -> None:
    state = cluster(cq("cq", {"default": {"cpu": 4}}, preemption=WITHIN))
    admit(state, wl("low", cpu=4, priority=1))
    preempt_once(state, wl("high", cpu=4, priority=10))
    state.remove_workload("ns/high")  # the preemptor is deleted while its victim is evicting
    assert not state.holds.nominated
    assert usage(state, "cq") == m(4)  # only the victim's own usage remains


def test_a_preemptor_processed_later_cannot_use_victims_already_claimed() -> None:
    state = cluster(cq("cq", {"default": {"cpu": 4}}, preemption=WITHIN))
    admit(state, wl("low", cpu=4, priority=1))
    add(
        state,
        wl("first", cpu=4, priority=10, created=1.0),
        wl("second", cpu=4, priority=10, created=2.0),
    )
    result = run_cycle(state, 1.0)
    assert [p.preemptor_key for p in result.preempting] == ["ns/first"]
    assert not run_cycle(state, 2.0).preempting


def _three_reclaiming_queues() -> ClusterState:
    """a, b and c, 4 cpu each in one cohort, each reclaiming from the others."""
    return cluster(
        *(cq(name, {"default": {"cpu": 4}}, cohort="co", preemption=RECLAIM) for name in "abc")
    )


def test_a_victim_already_leaving_is_shared_rather_than_another_evicted() -> None:
    """b borrows 4 with two Workloads. a reclaims 1: b-big (the lower priority) goes.
    c then reclaims 1 too: b-big frees 5 more than a takes, so c waits for it as well
    (Kueue's "preemption ongoing") instead of evicting b-small; b-big is not evicted
    again, and both are admitted once it has left."""
    state = _three_reclaiming_queues()
    admit(state, wl("a-1", "a", cpu=2), wl("c-1", "c", cpu=2))
    admit(state, wl("b-big", "b", cpu=6, priority=1), wl("b-small", "b", cpu=2, priority=5))
    first = preempt_once(state, wl("a-new", "a", cpu=1, priority=10))
    assert victims(first) == {"ns/b-big": ("InCohortReclamation", 1)}
    second = preempt_once(state, wl("c-new", "c", cpu=1, priority=10))
    assert [(v.workload_key, v.leaving) for v in second.victims] == [("ns/b-big", True)]
    assert not first.victims[0].leaving
    # Counted: the larger of now (12) and once b-big has left (2 + 1 + 2 + 1 + 2 = 8).
    assert state.cache.quota.cohort_usage("co", ("default", "cpu")) == m(12)
    state.release("ns/b-big")
    result = run_cycle(state, 3.0)
    assert sorted(a.workload_key for a in result.admitted) == ["ns/a-new", "ns/c-new"]
    assert "ns/b-small" in state.cache.admitted and not state.cache.admitted["ns/b-small"].evicting
    assert state.cache.quota.cohort_usage("co", ("default", "cpu")) == m(8)


def test_a_leaving_victim_too_small_for_the_next_preemptor_is_not_waited_for() -> None:
    """What b-big frees beyond a's hold (1) is less than c needs (3), and b-small alone
    frees enough: c evicts b-small and does not wait for b-big."""
    state = _three_reclaiming_queues()
    admit(state, wl("a-1", "a", cpu=1), wl("c-1", "c", cpu=1))
    admit(state, wl("b-big", "b", cpu=4, priority=1), wl("b-small", "b", cpu=6, priority=5))
    preempt_once(state, wl("a-new", "a", cpu=3, priority=10))
    second = preempt_once(state, wl("c-new", "c", cpu=3, priority=10))
    assert [(v.workload_key, v.leaving) for v in second.victims] == [("ns/b-small", False)]


def _contested_cohort(a_reclaim: ReclaimWithinCohortPolicy) -> ClusterState:
    """a (nominal 6) holds 4 and waits with a Workload larger than the cohort at its head
    and a small one behind it that fits in a's nominal quota. b (nominal 6) is full with a
    medium and two small Workloads; the cohort has 2 free."""
    state = cluster(
        cq("a", {"default": {"cpu": 6}}, cohort="co", preemption=_reclaiming(a_reclaim)),
        cq("b", {"default": {"cpu": 6}}, cohort="co", preemption=RECLAIM),
    )
    admit(state, wl("a-medium", "a", cpu=4, priority=100))
    admit(
        state,
        wl("b-medium", "b", cpu=4, priority=100),
        wl("b-small-1", "b", cpu=1, priority=50),
        wl("b-small-2", "b", cpu=1, priority=50),
    )
    add(
        state,
        wl("a-huge", "a", cpu=20, priority=100, created=5.0),
        wl("a-small", "a", cpu=1, priority=50, created=6.0),
    )
    return state


def test_no_preemption_to_borrow_what_a_queue_below_its_nominal_quota_waits_for() -> None:
    """b's new medium Workload could preempt b's two small ones and borrow a's unused 2.
    But a is below its nominal quota with a pending Workload that fits in it, and would
    reclaim that at once (evicting b's 4-CPU medium for its 1-CPU small one), and b's
    medium would preempt again: Kueue goes round that loop. Here b's medium waits, and
    says why; a's small Workload is admitted next without evicting anything."""
    state = _contested_cohort(ReclaimWithinCohortPolicy.ANY)
    add(state, wl("b-medium-2", "b", cpu=4, priority=100, created=7.0))
    first = run_cycle(state, 1.0)
    assert not first.preempting
    reason = state.cache.records["ns/b-medium-2"].reason or ""
    assert (
        "it may not preempt to borrow: ClusterQueue a would be below its nominal quota "
        "with pending Workloads and reclaim it" in reason
    ), reason
    results = settle(state, 2.0)
    assert not any(r.preempting for r in results)
    assert "ns/a-small" in state.cache.admitted
    assert {"ns/b-small-1", "ns/b-small-2", "ns/b-medium"} <= set(state.cache.admitted)


@pytest.mark.parametrize(
    "a_reclaim", [ReclaimWithinCohortPolicy.NEVER, ReclaimWithinCohortPolicy.LOWER_PRIORITY]
)
def test_preemption_to_borrow_goes_ahead_when_the_queue_below_nominal_could_not_reclaim(
    a_reclaim: ReclaimWithinCohortPolicy,
) -> None:
    """a could not take back what b's medium borrows (reclaimWithinCohort Never, or
    LowerPriority with only a small Workload of lower priority than b's medium waiting):
    preempting to borrow starts no loop, so b's medium preempts b's small Workloads as
    Kueue's would."""
    state = _contested_cohort(a_reclaim)
    preempt = preempt_once(state, wl("b-medium-2", "b", cpu=4, priority=100, created=7.0))
    assert victims(preempt) == {
        "ns/b-small-1": ("InClusterQueue", 1),
        "ns/b-small-2": ("InClusterQueue", 1),
    }


def _taking_back_cohort(
    a_reclaim: ReclaimWithinCohortPolicy = ReclaimWithinCohortPolicy.ANY,
    a_priority: int = 100,
    c_nominal: int = 0,
) -> ClusterState:
    """The baseline's moment when one queue's last large Workload has finished: b (nominal
    20) is full with a large Workload and has a medium one pending, created first; a
    (nominal 20) is empty with four medium Workloads pending; c (nominal `c_nominal`) has
    nothing. The cohort has 20 + `c_nominal` free."""
    state = cluster(
        cq("a", {"default": {"cpu": 20}}, cohort="co", preemption=_reclaiming(a_reclaim)),
        cq("b", {"default": {"cpu": 20}}, cohort="co", preemption=RECLAIM),
        cq("c", {"default": {"cpu": c_nominal}}, cohort="co", preemption=RECLAIM),
    )
    admit(state, wl("b-large", "b", cpu=20, priority=200))
    add(state, wl("b-medium", "b", cpu=5, priority=100, created=1.0))
    for i in range(4):
        add(state, wl(f"a-medium-{i}", "a", cpu=5, priority=a_priority, created=2.0 + i))
    return state


def test_no_borrowing_what_a_queue_admitting_within_its_nominal_quota_takes_back() -> None:
    """a admits its first medium Workload within its nominal quota; b's, older, would fit
    by borrowing a's unused 15, which a's three other pending Workloads fill. Kueue admits
    it and a's next head reclaims it in the next cycle (the baseline's 18 churn evictions
    at stop 30). Here it waits, and says why; a fills its quota and nothing is evicted."""
    state = _taking_back_cohort()
    first = run_cycle(state, 1.0)
    assert [a.workload_key for a in first.admitted] == ["ns/a-medium-0"]
    assert first.requeued == ("ns/b-medium",)
    assert state.cache.records["ns/b-medium"].reason == RECLAIMED_BY.format("a")
    results = settle(state, 1.0)
    assert not any(r.preempting for r in [first, *results])
    assert {f"ns/a-medium-{i}" for i in range(4)} <= set(state.cache.admitted)
    assert "ns/b-medium" not in state.cache.admitted
    assert usage(state, "a") == m(20)


def test_borrowing_beside_a_queue_taking_back_when_the_cohort_has_room_for_both() -> None:
    """c lends 10 it does not use: b's medium Workload borrows 5 of it and a still has room
    for all of its own pending Workloads, so nothing waits."""
    state = _taking_back_cohort(c_nominal=10)
    first = run_cycle(state, 1.0)
    assert sorted(a.workload_key for a in first.admitted) == ["ns/a-medium-0", "ns/b-medium"]
    settle(state, 1.0)
    assert {f"ns/a-medium-{i}" for i in range(4)} <= set(state.cache.admitted)


def test_borrowing_goes_ahead_when_the_queue_below_nominal_could_not_reclaim_it() -> None:
    """a's reclaimWithinCohort is LowerPriority and its pending Workloads (priority 50) are
    below b's medium one (100): a could never take back what it borrows, so it is admitted
    in the same cycle as Kueue's would be."""
    state = _taking_back_cohort(ReclaimWithinCohortPolicy.LOWER_PRIORITY, a_priority=50)
    first = run_cycle(state, 1.0)
    assert sorted(a.workload_key for a in first.admitted) == ["ns/a-medium-0", "ns/b-medium"]


def test_a_queue_that_admitted_nothing_this_cycle_holds_nothing_back() -> None:
    """a is below its nominal quota with a small Workload pending, but its StrictFIFO head
    (larger than the cohort) admits nothing: b's medium Workload borrows, as in Kueue,
    rather than wait for a queue that is not taking anything back."""
    state = cluster(
        cq("a", {"default": {"cpu": 20}}, cohort="co", preemption=RECLAIM, strategy=STRICT),
        cq("b", {"default": {"cpu": 20}}, cohort="co", preemption=RECLAIM),
    )
    admit(state, wl("b-large", "b", cpu=20, priority=200))
    add(
        state,
        wl("a-huge", "a", cpu=60, priority=100, created=1.0),
        wl("a-small", "a", cpu=1, priority=100, created=2.0),
        wl("b-medium", "b", cpu=5, priority=100, created=3.0),
    )
    first = run_cycle(state, 1.0)
    assert [a.workload_key for a in first.admitted] == ["ns/b-medium"]


# -- properties --------------------------------------------------------------------------------


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[Workload], Workload]:
    count = draw(st.integers(min_value=1, max_value=8))
    admitted = []
    for i in range(count):
        admitted.append(
            replace(
                wl(
                    f"w{i}",
                    cpu=draw(st.integers(min_value=1, max_value=3)),
                    priority=draw(st.integers(min_value=0, max_value=5)),
                    cost=draw(st.integers(min_value=0, max_value=3)) * 1000,
                    created=float(i),
                ),
                preemptibility=draw(st.sampled_from([None, "non-preemptible", "preemptible"])),
            )
        )
    preemptor = wl(
        "p",
        cpu=draw(st.integers(min_value=1, max_value=6)),
        priority=draw(st.integers(0, 6)),
        created=99.0,
    )
    return admitted, preemptor


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_victim_properties(scenario: tuple[list[Workload], Workload]) -> None:
    admitted, preemptor = scenario
    state = cluster(cq("cq", {"default": {"cpu": 24}}, preemption=WITHIN))
    for workload in admitted:
        add(state, workload)
    settle(state)
    add(state, preemptor)
    result = run_cycle(state, 1.0)
    for preempt in result.preempting:
        chosen = {v.workload_key for v in preempt.victims}
        for key in chosen:
            assert state.cache.resolution(key).value != "non-preemptible"
            assert state.cache.priority_of(key) < state.cache.priority_of("ns/p")
        # After the evictions the preemptor fits; sparing any single victim does not.
        nominated = state.drop_nomination("ns/p", requeue=False)
        assert nominated is not None
        need = preempt.admit.usage()
        with state.cache.simulate_removal(chosen):
            assert state.cache.quota.fits("cq", need)
        for key in chosen:
            with state.cache.simulate_removal(chosen - {key}):
                assert not state.cache.quota.fits("cq", need)


def test_nomination_whose_eviction_was_abandoned_is_dropped_and_replanned() -> None:
    state = cluster(cq("cq", {"default": {"cpu": 4}}, preemption=WITHIN))
    admit(state, wl("low", cpu=4, priority=1))
    preempt_once(state, wl("high", cpu=4, priority=10))
    # The eviction never reached the API server: the victim is re-read, admitted and not
    # evicting. The preemptor must not wait for it forever.
    held = state.cache.admitted["ns/low"].admission
    state.remove_workload("ns/low")
    add(state, replace(wl("low", cpu=4, priority=1), admission=held))
    assert not state.cache.admitted["ns/low"].evicting
    result = run_cycle(state, 2.0)
    # The stale nomination is dropped and the preemptor plans again: the eviction is
    # issued anew, and the queue counts the victim's 4 CPUs once: they cover the hold.
    assert not result.admitted
    assert [(p.preemptor_key, list(victims(p))) for p in result.preempting] == [
        ("ns/high", ["ns/low"])
    ]
    assert state.cache.admitted["ns/low"].evicting
    assert usage(state, "cq") == m(4)


def test_cancelled_eviction_lets_the_preemptor_plan_again() -> None:
    state = cluster(cq("cq", {"default": {"cpu": 4}}, preemption=WITHIN))
    admit(state, wl("low", cpu=4, priority=1))
    preempt_once(state, wl("high", cpu=4, priority=10))
    state.cancel_eviction("ns/low")  # the eviction write failed
    assert not state.cache.admitted["ns/low"].evicting
    assert not state.cache.workloads["ns/low"].evicted
    # Until the next cycle drops the nomination, its hold counts in full beside the victim.
    assert usage(state, "cq") == m(8)
    result = run_cycle(state, 2.0)
    assert [p.preemptor_key for p in result.preempting] == ["ns/high"]
    assert usage(state, "cq") == m(4)  # planned again: the victim's usage covers the hold


@pytest.mark.parametrize("cohort_fair_sharing", [False, True])
@pytest.mark.parametrize("fair", [True, False])
def test_reclaim_takes_the_busier_local_queues_workload_first_with_admission_fair_sharing(
    fair: bool, cohort_fair_sharing: bool
) -> None:
    """Kueue's 'should preempt a workload from LQ with higher recent usage': cq1 (usage-based
    admission mode) borrows 16 cpus from cq2 with high (lq-a, 20 cpus, priority 10) and low
    (lq-b, 12 cpus, priority 1); lq-a has the higher recent usage. cq2 reclaims 10 cpus:
    with admission fair sharing Kueue preempts high despite its priority; without it, low
    (the lower priority) is enough. The same with (cohort) fair sharing on: Kueue's fair
    preemption orders a queue's candidates as the classical one does."""
    usage_based = AdmissionMode.USAGE_BASED_ADMISSION_FAIR_SHARING
    state = cluster(
        cq("cq1", {"default": {"cpu": 16}}, cohort="all", admission_mode=usage_based),
        cq("cq2", {"default": {"cpu": 16}}, cohort="all", preemption=RECLAIM),
    )
    if fair:
        state.admission_fair_sharing = AdmissionFairSharing(60.0, 1.0)
    if cohort_fair_sharing:
        state.fair_sharing = FairSharing()
    for name in ("lq-a", "lq-b"):
        state.set_local_queue(LocalQueue("ns", name, "cq1"))
    high, low = wl("high", "lq-a", cpu=20, priority=10), wl("low", "lq-b", cpu=12, priority=1)
    admit(state, high, low)
    for workload in (high, low):  # both seen back Admitted: their penalties settle
        state.settle_admission(workload.key, 1.0)
    if fair:
        assert (
            state.queues.local_queue_usage("ns/lq-a")
            > state.queues.local_queue_usage("ns/lq-b")
            > 0
        )
    preempt = preempt_once(state, wl("reclaimer", "cq2", cpu=10))
    expected = "ns/high" if fair else "ns/low"
    assert victims(preempt) == {expected: ("InCohortReclamation", 1)}


def _busy_lq_b() -> ClusterState:
    """cq1 (usage-based) borrows 16 cpus of cq2 with high (lq-a, 20 cpus, priority 10) and
    low (lq-b, 12 cpus, priority 1); lq-b has 100 cpus of history: it is the busier."""
    usage_based = AdmissionMode.USAGE_BASED_ADMISSION_FAIR_SHARING
    state = cluster(
        cq("cq1", {"default": {"cpu": 16}}, cohort="all", admission_mode=usage_based),
        cq("cq2", {"default": {"cpu": 16}}, cohort="all", preemption=RECLAIM),
    )
    state.admission_fair_sharing = AdmissionFairSharing(60.0, 1.0)
    state.set_local_queue(LocalQueue("ns", "lq-a", "cq1"))
    state.set_local_queue(LocalQueue("ns", "lq-b", "cq1", consumed_status={"cpu": 100.0}))
    high, low = wl("high", "lq-a", cpu=20, priority=10), wl("low", "lq-b", cpu=12, priority=1)
    admit(state, high, low)
    for workload in (high, low):
        state.settle_admission(workload.key, 1.0)
    assert state.queues.local_queue_usage("ns/lq-b") > state.queues.local_queue_usage("ns/lq-a")
    return state


def test_candidates_cached_earlier_are_ordered_by_the_usage_of_the_current_cycle() -> None:
    """Contenders and their sort keys are cached until their queue's admitted Workloads
    change; LocalQueue usage moves with time, so it is read per cycle, not cached on them."""
    as_is = _busy_lq_b()
    assert victims(preempt_once(as_is, wl("reclaimer", "cq2", cpu=10))) == {
        "ns/low": ("InCohortReclamation", 1)
    }
    state = _busy_lq_b()
    memory = SchedulerMemory(state)
    cached = memory.contenders.in_reach(state, "cq2", frozenset({("default", "cpu")}))["cq1"]
    keys = {c.key: c.sort_key(False) for c in cached}  # built and kept on the contenders
    # Samples much later: lq-b's 100 cpus of history have decayed towards its 12 in use,
    # lq-a's towards its 20.
    for local_queue in ("ns/lq-a", "ns/lq-b"):
        state.queues.usage_ledger.sample(local_queue, 2000.0, 60.0)
    assert state.queues.local_queue_usage("ns/lq-a") > state.queues.local_queue_usage("ns/lq-b")
    preempt = preempt_once(state, wl("reclaimer", "cq2", cpu=10), memory)
    assert victims(preempt) == {"ns/high": ("InCohortReclamation", 1)}
    assert {c.key: c.sort_key(False) for c in memory.contenders.cached("cq1")} == keys


def test_a_nomination_is_looked_at_again_only_when_something_it_waits_on_changes() -> None:
    """Settling looks at a nominated preemptor again when a victim's quota changes, the
    preemptor changes (deactivated: dropped) or its ClusterQueue does (stopped: dropped);
    otherwise it is left alone, cycle after cycle."""
    state = cluster(cq("cq", {"default": {"cpu": 4}}, preemption=WITHIN))
    admit(state, wl("low", cpu=4, priority=1))
    preempt_once(state, wl("high", cpu=4, priority=10))
    assert state.holds.nominations_to_settle() == {"ns/high"}  # new: looked at once
    run_cycle(state, 2.0)
    assert state.holds.nominations_to_settle() == frozenset()  # nothing changed since
    state.upsert_workload(replace(state.cache.workloads["ns/high"], active=False))
    assert state.holds.nominations_to_settle() == {"ns/high"}
    run_cycle(state, 3.0)
    assert "ns/high" not in state.holds.nominated  # dropped
    state.upsert_workload(replace(state.cache.workloads["ns/high"], active=True))
    run_cycle(state, 4.0)  # plans again: the victim is still leaving, so it is claimed
    assert "ns/high" in state.holds.nominated
    run_cycle(state, 5.0)
    assert state.holds.nominations_to_settle() == frozenset()
    stopped = replace(state.objects.cluster_queues["cq"], stop_policy=StopPolicy.HOLD)
    state.set_cluster_queue(stopped)
    assert state.holds.nominations_to_settle() == {"ns/high"}
    run_cycle(state, 6.0)
    assert "ns/high" not in state.holds.nominated
