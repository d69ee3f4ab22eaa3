"""Topology-aware preemption under fair sharing (controller/core/fairsharing/preemption.py
step 6, split by domain in controller/core/scheduler/topology_preemption.py): per domain of
the level asked for, the fair-sharing search goes on until the pod sets fit *there*, its
targets and strategies deciding every victim; the cheapest domain's set wins.

The cluster of test_topology_preemption.py: two blocks of two racks of two 4-cpu hosts,
every host filled by one 4-pod Workload unless a test says otherwise."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from api.constants import PreemptionReason, ReclaimWithinCohortPolicy, WithinClusterQueuePolicy
from controller.core.fairsharing.settings import FairSharing, PreemptionStrategy
from controller.core.model.clusterqueues import PreemptionPolicy
from controller.core.scheduler.cycle import run_cycle
from controller.core.state import ClusterState
from tests.unit.core.builders import add, cluster, cq, settle
from tests.unit.core.scheduler.test_topology_preemption import (
    HOSTS,
    LOWER,
    TAS,
    fill_in_order,
    nodes,
    placed,
    rack,
    tas_wl,
)
from tests.unit.core.tas.builders import BLOCK, HOST, RACK

FAIR = PreemptionPolicy(
    within_cluster_queue=WithinClusterQueuePolicy.LOWER_PRIORITY,
    reclaim_within_cohort=ReclaimWithinCohortPolicy.ANY,
)


def single_queue() -> ClusterState:
    state = nodes(cluster(cq("cq", {"tas": {"cpu": "32"}}, preemption=LOWER), flavors=[TAS]))
    state.fair_sharing = FairSharing()
    return state


def test_victims_are_taken_in_one_rack_not_where_the_quota_order_points() -> None:
    """The two priority-1 Workloads sit in different racks: the quota order frees them
    and no rack holds the 8-pod preemptor (before, nothing was evicted). Split by rack,
    the search goes on in each rack until the pods fit there; b1-r2 (highest victim
    priority 3) is cheaper than b1-r1 (5) and the racks without a priority-1 Workload."""
    state = single_queue()
    priorities = dict.fromkeys(HOSTS, 5)
    priorities.update({"b1-r1-h1": 1, "b1-r2-h1": 1, "b1-r2-h2": 3})
    fill_in_order(state, "cq", priorities)
    add(state, tas_wl("big", 8, priority=10, required=RACK))
    [preempt] = run_cycle(state, 0).preempting
    victims = {v.workload_key for v in preempt.victims}
    assert victims == {"ns/b1-r2-h1", "ns/b1-r2-h2"}
    for key in victims:
        state.release(key, requeue=False)
    settle(state)
    assert {rack(h) for h in placed(state, "ns/big")} == {"b1-r2"}


def test_quota_fits_and_the_nodes_do_not() -> None:
    """The queue has quota left (48 cpus, 32 used) but every host is full: the quota
    alone needs no victim, so the fair search used to find none and nothing was evicted.
    Now it takes Workloads until a rack is free: the cheapest rack by cost."""
    state = nodes(cluster(cq("cq", {"tas": {"cpu": "48"}}, preemption=LOWER), flavors=[TAS]))
    state.fair_sharing = FairSharing()
    fill_in_order(state, "cq", dict.fromkeys(HOSTS, 1))
    for host in HOSTS:
        record = state.cache.records[f"ns/{host}"]
        cost = 1 if rack(host) == "b2-r1" else 4
        state.upsert_workload(replace(record.workload, preemption_cost=cost))
    add(state, tas_wl("big", 8, priority=10, required=RACK))
    [preempt] = run_cycle(state, 0).preempting
    assert {v.workload_key for v in preempt.victims} == {"ns/b2-r1-h1", "ns/b2-r1-h2"}


def frees_one_rack(state: ClusterState, where: str, reason: PreemptionReason) -> None:
    """One cycle preempts the two Workloads of rack `where`, for `reason`; once they are
    gone the preemptor `mine-wl` runs there."""
    [preempt] = run_cycle(state, 0).preempting
    assert {v.workload_key for v in preempt.victims} == {f"ns/{where}-h1", f"ns/{where}-h2"}
    assert {v.reason for v in preempt.victims} == {reason}
    for victim in preempt.victims:
        state.release(victim.workload_key, requeue=False)
    settle(state)
    assert {rack(h) for h in placed(state, "ns/mine-wl")} == {where}


def fair_cohort(
    weight: str = "1", strategies: tuple[PreemptionStrategy, ...] | None = None
) -> ClusterState:
    """`mine` and `other` (nominal 16 cpus each) in one cohort under fair sharing;
    `other` fills all 32 cpus of the nodes, borrowing 16."""
    mine = replace(
        cq("mine", {"tas": {"cpu": "16"}}, cohort="all", preemption=FAIR),
        fair_weight=Fraction(weight),
    )
    other = cq("other", {"tas": {"cpu": "16"}}, cohort="all", preemption=FAIR)
    state = nodes(cluster(mine, other, flavors=[TAS]))
    state.fair_sharing = FairSharing() if strategies is None else FairSharing(strategies)
    fill_in_order(state, "other", {})
    return state


def test_reclaimed_within_nominal_from_one_rack_only() -> None:
    """`mine` stays within its nominal quota with the 8-pod preemptor: it reclaims from
    `other` (borrowing), and only the two Workloads of one rack — the cheapest by cost —
    not the two cheapest anywhere."""
    state = fair_cohort()
    costs = {"b1-r1-h1": 1, "b2-r2-h1": 1, "b1-r2-h1": 2, "b1-r2-h2": 2}
    for host in HOSTS:
        record = state.cache.records[f"ns/{host}"]
        state.upsert_workload(replace(record.workload, preemption_cost=costs.get(host, 9)))
    add(state, tas_wl("mine-wl", 8, "mine", required=RACK))
    frees_one_rack(state, "b1-r2", PreemptionReason.IN_COHORT_RECLAMATION)


def three_queues(
    weight: str, strategies: tuple[PreemptionStrategy, ...] | None = None
) -> ClusterState:
    """`mine` (nominal 4 cpus, fair-sharing weight `weight`), `other` (12) and `lender`
    (16, empty) in one cohort. `other` holds the first block and b2-r1 (24 cpus, borrowing
    12); `mine` holds b2-r2 (8 cpus, priority 9, borrowing 4); a preemptor of `mine` (8
    pods in one rack) would borrow 12, so every victim of `other` must pass the
    fair-sharing strategy (`mine` is not within its nominal quota)."""
    mine = replace(
        cq("mine", {"tas": {"cpu": "4"}}, cohort="all", preemption=FAIR),
        fair_weight=Fraction(weight),
    )
    other = cq("other", {"tas": {"cpu": "12"}}, cohort="all", preemption=FAIR)
    lender = cq("lender", {"tas": {"cpu": "16"}}, cohort="all")
    state = nodes(cluster(mine, other, lender, flavors=[TAS]))
    state.fair_sharing = FairSharing() if strategies is None else FairSharing(strategies)
    for host in HOSTS[:6]:
        cost = 1 if rack(host) == "b1-r2" else 5
        add(state, replace(tas_wl(host, 4, "other", required=HOST), preemption_cost=cost))
        settle(state)
    for host in HOSTS[6:]:
        add(state, tas_wl(host, 4, "mine", 9, required=HOST))
        settle(state)
    assert {h: next(iter(placed(state, f"ns/{h}"))) for h in HOSTS} == {h: h for h in HOSTS}
    add(state, tas_wl("mine-wl", 8, "mine", 5, required=RACK))
    return state


def test_a_borrowing_preemptor_takes_one_rack_that_the_strategy_allows() -> None:
    """With weight 4, `mine` borrowing 12 has a quarter of `other`'s share: the strategy
    lets it take `other`'s Workloads, and it takes one rack's, the cheapest (b1-r2)."""
    state = three_queues("4")
    frees_one_rack(state, "b1-r2", PreemptionReason.IN_COHORT_FAIR_SHARING)


def test_the_strategies_refuse_a_preemptor_that_would_be_as_unfair() -> None:
    """With equal weights `mine` borrowing 12 would have `other`'s share: S2-a (the
    preemptor's share at most `other`'s without the victim, 8) and S2-b (strictly below
    `other`'s, 12) both refuse, whatever room a rack would give: nothing is evicted."""
    state = three_queues("1")
    result = run_cycle(state, 0)
    assert result.preempting == ()
    assert "ns/mine-wl" not in state.cache.admitted


def test_a_queue_within_its_nominal_quota_loses_nothing() -> None:
    """`other` within its nominal quota (the second block's Workloads are `mine`'s, of
    priority 9): nothing is reclaimed from it, wherever its Workloads sit."""
    state = fair_cohort()
    for host in HOSTS[4:]:
        state.release(f"ns/{host}", requeue=False)
        state.remove_workload(f"ns/{host}")
        add(state, tas_wl(f"mine-{host}", 4, "mine", 9, required=HOST))
        settle(state)
    add(state, tas_wl("mine-wl", 4, "mine", 5, required=RACK))
    result = run_cycle(state, 0)
    assert result.preempting == ()
    assert "ns/mine-wl" not in state.cache.admitted


def test_the_domains_workloads_first_when_the_order_leaves_no_share_for_them() -> None:
    """`mine` (nominal 8, weight 2) and `other` (nominal 7) with a lender (17), under
    `LessThanOrEqualToFinalShare` alone. `other` holds 18 cpus (borrowing 11): 4-pod
    Workloads on b1-r1-h1, b1-r1-h2, b1-r2-h1 and b2-r1-h1 and a 2-pod one on b2-r2-h1;
    `mine` 10, of priority 9. The 6-pod preemptor needs one block; with it `mine` borrows
    8 (share 4 once weighted). In `other`'s order the first Workload is in b1: taken, it
    frees the quota and leaves `other` borrowing 7, and then no b2 Workload passes the
    strategy. Walked again with b2's Workloads first, b2-r1-h1's passes (7 ≥ 4) and frees
    both the quota and the block. b1 cannot be freed (its second Workload would leave
    `other` a share of 3)."""
    mine = replace(
        cq("mine", {"tas": {"cpu": "8"}}, cohort="all", preemption=FAIR),
        fair_weight=Fraction(2),
    )
    other = cq("other", {"tas": {"cpu": "7"}}, cohort="all", preemption=FAIR)
    lender = cq("lender", {"tas": {"cpu": "17"}}, cohort="all")
    state = nodes(cluster(mine, other, lender, flavors=[TAS]))
    state.fair_sharing = FairSharing((PreemptionStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,))
    layout = {  # host: (pods, queue, priority)
        "b1-r1-h1": (4, "other", 0),
        "b1-r1-h2": (4, "other", 0),
        "b1-r2-h1": (4, "other", 0),
        "b1-r2-h2": (3, "mine", 9),
        "b2-r1-h1": (4, "other", 0),
        "b2-r1-h2": (4, "mine", 9),
        "b2-r2-h1": (2, "other", 2),
        "b2-r2-h2": (3, "mine", 9),
    }
    for host, (pods, queue, priority) in layout.items():
        workload = tas_wl(host, pods, queue, priority, required=HOST)
        pod_set = replace(workload.pod_sets[0], node_selector={HOST: host})
        add(state, replace(workload, pod_sets=(pod_set,)))
        settle(state)
        assert placed(state, f"ns/{host}") == {host: pods}
    add(state, tas_wl("mine-wl", 6, "mine", 3, required=BLOCK))
    [preempt] = run_cycle(state, 0).preempting
    assert [v.workload_key for v in preempt.victims] == ["ns/b2-r1-h1"]
    assert state.holds.nominated["ns/mine-wl"].domain == ("tas", ("b2",))
