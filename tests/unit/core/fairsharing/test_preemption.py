"""controller/core/fairsharing/preemption.py: Kueue's fair-sharing preemption, and quotagate's
rules inside it (KEP-7990 cost order, KAI preemptibility, minimal victims, Pod
disruption, minimum runtime). Kueue's own cases are ported as plan manifests in
tests/unit/test_plan_kueue_fair_preemption.py; these are the additions, plus a property
test over random trees."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.constants import (
    DisruptionMode,
    Preemptibility,
    PreemptionReason,
    ReclaimWithinCohortPolicy,
    WithinClusterQueuePolicy,
)
from controller.core.decisions import Preempt
from controller.core.fairsharing.preemption import find_fair_victims
from controller.core.fairsharing.settings import FairSharing, PreemptionStrategy
from controller.core.fairsharing.shares import shares_of
from controller.core.model.clusterqueues import ClusterQueue, PreemptionPolicy
from controller.core.model.cohorts import Cohort
from controller.core.model.workloads import PodSet, Workload
from controller.core.pending import why_pending
from controller.core.preemption.policy import Preemptor
from controller.core.scheduler.contenders import ContenderCache
from controller.core.scheduler.cycle import run_cycle
from controller.core.scheduler.preemption import VictimSearches
from controller.core.state import ClusterState
from tests.unit.core.builders import add, cluster, cq, group, m, settle, wl

FAIR = PreemptionPolicy(
    within_cluster_queue=WithinClusterQueuePolicy.LOWER_PRIORITY,
    reclaim_within_cohort=ReclaimWithinCohortPolicy.ANY,
)


def fair_cluster(*queues: ClusterQueue) -> ClusterState:
    state = cluster(*queues)
    state.fair_sharing = FairSharing()
    return state


def three(nominal: str = "3", **weights: str) -> ClusterState:
    """Kueue's TestFairPreemptions base: a, b, c with `nominal` cpu each in cohort `all`."""
    return fair_cluster(
        *(
            replace(
                cq(name, {"default": {"cpu": nominal}}, cohort="all", preemption=FAIR),
                fair_weight=Fraction(weights.get(name, "1")),
            )
            for name in ("a", "b", "c")
        )
    )


def admit(state: ClusterState, *workloads: Workload) -> None:
    for workload in workloads:
        add(state, workload)
        settle(state)
        assert workload.key in state.cache.admitted, why_pending(state, workload.key)


def preempt(state: ClusterState, workload: Workload) -> Preempt | None:
    add(state, workload)
    result = run_cycle(state, 1.0)
    assert len(result.preempting) <= 1
    return result.preempting[0] if result.preempting else None


def victims(decision: Preempt | None) -> dict[str, tuple[str, int]]:
    assert decision is not None
    return {v.workload_key: (v.reason, v.pods) for v in decision.victims}


def test_cost_decides_between_equal_priorities_in_the_target_queue() -> None:
    """b borrows with equal-priority Workloads; the cheapest goes (KEP-7990), where Kueue
    would take the most recently admitted (b-dear)."""
    state = three()
    admit(state, *(wl(f"b{i}", "b", cpu=1, cost=1000) for i in range(1, 4)))
    admit(state, wl("b-cheap", "b", cpu=1, cost=1, created=1.0))
    admit(state, wl("b-dear", "b", cpu=1, cost=500_000, created=2.0))
    admit(state, *(wl(f"a{i}", "a", cpu=1) for i in range(1, 4)))
    admit(state, wl("c1", "c", cpu=1))
    decision = preempt(state, wl("c-in", "c", cpu=1))
    assert victims(decision) == {"ns/b-cheap": (PreemptionReason.IN_COHORT_RECLAMATION, 1)}


def test_a_non_preemptible_workload_is_never_taken() -> None:
    """KAI: a non-preemptible Workload never borrows, so it is only ever a candidate in its
    own queue, and there it is passed over. b's non-preemptible b-np (priority 0) leaves
    b-high (priority 5) pending; a, reclaiming from b, takes b's preemptible borrower."""
    state = three()
    admit(state, replace(wl("b-np", "b", cpu=3), preemptibility="non-preemptible"))
    admit(state, wl("c-1", "c", cpu=3))
    assert preempt(state, wl("b-high", "b", cpu=3, priority=5)) is None
    state = three()
    admit(state, replace(wl("b-np", "b", cpu=3, priority=-5), preemptibility="non-preemptible"))
    admit(state, wl("b-borrower", "b", cpu=3, priority=9), wl("c-1", "c", cpu=3))
    decision = preempt(state, wl("a-in", "a", cpu=3))
    assert victims(decision) == {"ns/b-borrower": (PreemptionReason.IN_COHORT_RECLAMATION, 1)}


def test_pod_disruption_takes_only_the_pods_needed() -> None:
    """b borrows 6 cpus with one elastic Workload (disruptionMode Pod, minCount 2): a needs
    2 and takes two of its pods, not the Workload."""
    state = three()
    elastic = replace(
        wl("elastic", "b", pod_sets=[PodSet("main", 9, {"cpu": m(1)}, min_count=2)]),
        disruption_mode=DisruptionMode.POD,
    )
    admit(state, elastic)
    decision = preempt(state, wl("a-in", "a", cpu=2))
    assert victims(decision) == {"ns/elastic": (PreemptionReason.IN_COHORT_RECLAMATION, 2)}


def test_victims_are_minimal() -> None:
    """Kueue's fill-back: a victim taken early that turns out not to be needed is spared.
    Kueue's 'can reclaim from queue using less, if taking the latest workload from user
    using the most isn't enough': b1 (2 cpus) goes first by share, is not enough, a1 is
    taken; b1 is then spared."""
    state = three()
    admit(state, wl("a1", "a", cpu=3), wl("a2", "a", cpu=1))
    admit(state, wl("b1", "b", cpu=2), wl("b2", "b", cpu=3))
    decision = preempt(state, wl("c-in", "c", cpu=3))
    assert victims(decision) == {"ns/a1": (PreemptionReason.IN_COHORT_RECLAMATION, 1)}


def test_fair_sharing_victims_respect_a_minimum_runtime_reclamation_does_not() -> None:
    """b borrows and its queue protects Workloads for an hour. A preemptor borrowing too
    (share rules) must wait; one within its nominal quota reclaims at once."""
    state = fair_cluster(
        cq("a", {"default": {"cpu": "3"}}, cohort="all", preemption=FAIR),
        replace(
            cq("b", {"default": {"cpu": "3"}}, cohort="all", preemption=FAIR),
            minimum_runtime_seconds=3600,
        ),
        cq("c", {"default": {"cpu": "3"}}, cohort="all", preemption=FAIR),
    )
    admit(state, *(wl(f"b{i}", "b", cpu=1) for i in range(1, 6)))
    admit(state, *(wl(f"c{i}", "c", cpu=1) for i in range(1, 3)))
    # a asks 3 with 0 used: within nominal ⇒ reclamation, not protected.
    decision = preempt(state, wl("a-in", "a", cpu=3))
    assert decision is not None
    assert {v.reason for v in decision.victims} == {PreemptionReason.IN_COHORT_RECLAMATION}


def test_a_non_preemptible_preemptor_does_not_borrow() -> None:
    """a (nominal 3, nothing used) asks 4 as non-preemptible: it may not borrow, so no
    victim set helps and nothing is evicted."""
    state = three()
    admit(state, *(wl(f"b{i}", "b", cpu=1) for i in range(1, 7)))
    assert preempt(state, replace(wl("a-in", "a", cpu=4), preemptibility="non-preemptible")) is None


def test_preemption_policy_never_preempts_nothing() -> None:
    state = three()
    admit(state, *(wl(f"b{i}", "b", cpu=1) for i in range(1, 7)))
    incoming = wl("a-in", "a", cpu=3)
    add(state, incoming)
    cq_a = state.objects.cluster_queues["a"]
    short = frozenset({("default", "cpu")})
    request = {("default", "cpu"): m(3)}
    preemptor = Preemptor(
        "a", 0, 0.0, state.objects.priority_classes.resolve(incoming).preemption_policy
    )
    found = find_fair_victims(
        shares_of(state.objects, state.cache.quota),
        cq_a,
        request,
        short,
        preemptor,
        True,
        ContenderCache().in_reach(state, "a", short),
        (PreemptionStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,),
    )
    assert found is not None
    never = replace(preemptor, preemption_policy=type(preemptor.preemption_policy)("Never"))
    assert (
        find_fair_victims(
            shares_of(state.objects, state.cache.quota),
            cq_a,
            request,
            short,
            never,
            True,
            ContenderCache().in_reach(state, "a", short),
            (PreemptionStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,),
        )
        is None
    )


def test_the_heavier_queue_keeps_more_when_weights_differ() -> None:
    """b (weight 2) and c (weight 1) borrow 1 cpu each; a reclaims 1 within its nominal
    quota from the queue with the largest share: c's is twice b's. With equal weights the
    tie goes to b (its first candidate sorts first)."""
    for weight_b, target in (("2", "c"), ("1", "b")):
        state = three(b=weight_b)
        admit(state, *(wl(f"b{i}", "b", cpu=1) for i in range(1, 5)))
        admit(state, *(wl(f"c{i}", "c", cpu=1) for i in range(1, 5)))
        admit(state, wl("a1", "a", cpu=1))
        decision = preempt(state, wl("a-in", "a", cpu=1))
        assert decision is not None
        assert {v.cluster_queue for v in decision.victims} == {target}


def test_reclaim_through_a_tree_by_share() -> None:
    """root ← (dept-x: x1, x2) and (dept-y: y1); y1 is within its nominal quota and asks
    for 1 more than is free; dept-x borrows, and within it x2 borrows the most: x2's
    lowest-priority Workload goes, though x1's has the same priority."""
    state = fair_cluster(
        cq("x1", {"default": {"cpu": "2"}}, cohort="dept-x", preemption=FAIR),
        cq("x2", {"default": {"cpu": "2"}}, cohort="dept-x", preemption=FAIR),
        cq("y1", {"default": {"cpu": "6"}}, cohort="dept-y", preemption=FAIR),
    )
    state.set_cohort(Cohort("dept-x", "root"))
    state.set_cohort(Cohort("dept-y", "root"))
    state.set_cohort(Cohort("root", None))
    admit(state, wl("x1-a", "x1", cpu=3))
    admit(state, wl("x2-a", "x2", cpu=2, priority=1), wl("x2-b", "x2", cpu=3))
    decision = preempt(state, wl("y1-in", "y1", cpu=3))
    assert victims(decision) == {"ns/x2-b": (PreemptionReason.IN_COHORT_RECLAMATION, 1)}


# -- property: random trees and Workloads -----------------------------------------------


@st.composite
def scenes(draw: st.DrawFn) -> tuple[ClusterState, Workload]:
    """A random flat cohort or two-level tree, random admitted Workloads (priorities,
    costs, some non-preemptible, some elastic), and a pending preemptor."""
    tiered = draw(st.booleans())
    queues = []
    for i in range(draw(st.integers(2, 5))):
        cohort = f"d{i % 2}" if tiered else "all"
        weight = draw(st.sampled_from(["0", "0.5", "1", "1", "2"]))
        queues.append(
            replace(
                cq(
                    f"q{i}",
                    groups=[group({"default": {"cpu": str(draw(st.integers(0, 6)))}})],
                    cohort=cohort,
                    preemption=FAIR,
                ),
                fair_weight=Fraction(weight),
            )
        )
    state = cluster(*queues)
    strategies = draw(
        st.sampled_from(
            [
                (PreemptionStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,),
                (PreemptionStrategy.LESS_THAN_INITIAL_SHARE,),
                (
                    PreemptionStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
                    PreemptionStrategy.LESS_THAN_INITIAL_SHARE,
                ),
            ]
        )
    )
    state.fair_sharing = FairSharing(strategies)
    if tiered:
        state.set_cohort(Cohort("d0", "root"))
        state.set_cohort(Cohort("d1", "root", (group({"default": {"cpu": "2"}}),)))
        state.set_cohort(Cohort("root", None))
    for j in range(draw(st.integers(0, 12))):
        queue = queues[draw(st.integers(0, len(queues) - 1))].name
        pods = draw(st.integers(1, 3))
        workload = wl(
            f"w{j}",
            queue,
            pod_sets=[PodSet("main", pods, {"cpu": m(draw(st.integers(1, 2)))}, min_count=1)],
            priority=draw(st.integers(0, 3)),
            cost=draw(st.integers(0, 2)) * 1000,
            created=float(j),
        )
        workload = replace(
            workload,
            preemptibility=draw(st.sampled_from([None, None, "non-preemptible"])),
            disruption_mode=draw(st.sampled_from([DisruptionMode.POD_GROUP, DisruptionMode.POD])),
        )
        add(state, workload)
        settle(state)
    target = queues[draw(st.integers(0, len(queues) - 1))].name
    preemptor = wl(
        "incoming", target, cpu=draw(st.integers(1, 6)), priority=draw(st.integers(0, 4))
    )
    return state, preemptor


@settings(max_examples=300, deadline=None)
@given(scenes())
def test_fair_victims_are_allowed_sufficient_minimal_and_leave_the_tree_unchanged(
    scene: tuple[ClusterState, Workload],
) -> None:
    state, incoming = scene
    add(state, incoming)
    tree = state.cache.quota
    name = incoming.queue_name
    cq_obj = state.objects.cluster_queues[name]
    fr = ("default", "cpu")
    request = {fr: incoming.pod_sets[0].requests["cpu"]}
    short = frozenset({fr})
    before = {q: dict(tree.usage_of(q)) for q in state.objects.cluster_queues}
    version = tree.version(name)
    preemptor = Preemptor(name, state.cache.priority_of(incoming.key), incoming.creation_timestamp)
    assert state.fair_sharing is not None
    found = find_fair_victims(
        shares_of(state.objects, state.cache.quota),
        cq_obj,
        request,
        short,
        preemptor,
        state.cache.resolution(incoming.key).value is not Preemptibility.NON_PREEMPTIBLE,
        ContenderCache().in_reach(state, name, short),
        state.fair_sharing.preemption_strategies,
    )
    assert {q: dict(tree.usage_of(q)) for q in state.objects.cluster_queues} == before
    assert tree.version(name) == version
    if not found:
        return
    for victim in found:
        held = state.cache.admitted[victim.workload_key]
        assert (
            state.cache.resolution(victim.workload_key).value is not Preemptibility.NON_PREEMPTIBLE
        )
        if victim.cluster_queue == name:
            assert state.cache.priority_of(victim.workload_key) < preemptor.priority
        assert 0 < victim.pods <= victim.total_pods
        assert (
            victim.pods == victim.total_pods or held.workload.disruption_mode is DisruptionMode.POD
        )

    def removed(pods_back: dict[str, int]) -> dict[str, dict[tuple[str, str], int]]:
        out: dict[str, dict[tuple[str, str], int]] = {}
        for victim in found:
            held = state.cache.admitted[victim.workload_key]
            per_pod = (held.usage or {}).get(fr, 0) // victim.total_pods
            pods = victim.pods - pods_back.get(victim.workload_key, 0)
            bucket = out.setdefault(victim.cluster_queue, {})
            bucket[fr] = bucket.get(fr, 0) + per_pod * pods
        return out

    @contextmanager
    def released(pods_back: dict[str, int]) -> Iterator[None]:
        # A victim already leaving for a nominated preemptor (settle() may have nominated
        # some) frees only what that preemptor's hold does not already count on.
        gone = [
            release
            for victim in found
            if victim.leaving and not pods_back.get(victim.workload_key)
            for release in state.holds.releases(victim.workload_key)
        ]
        for release in gone:
            if release.pool:
                tree.credit_pool(release.name, release.amounts, sign=-1)
            else:
                tree.add_usage(release.name, release.amounts)
        try:
            yield
        finally:
            for release in gone:
                if release.pool:
                    tree.credit_pool(release.name, release.amounts)
                else:
                    tree.add_usage(release.name, release.amounts, sign=-1)

    def fits(pods_back: dict[str, int]) -> bool:
        with tree.simulate(removed(pods_back), sign=-1), released(pods_back):
            return request[fr] <= tree.available(name, fr)

    assert fits({}), "the victims must make room"
    for victim in found:  # no victim, and no pod of a partial victim, can be spared
        assert not fits({victim.workload_key: 1 if not victim.whole else victim.pods})


def test_no_fair_preemption_to_borrow_what_the_victims_queue_would_reclaim(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """a (4 cpu, weight 2), b and c (2 cpu each); c's large Workload uses the whole cohort,
    c's small one waits. a's large Workload could take c's by fair sharing (a's share with
    it, 250, below c's now, 750), but c would then be below its nominal quota with its
    small Workload pending, reclaim from a at once, and c's large Workload would preempt
    that small one again: a loop. a's large Workload waits and says why."""

    def state_() -> ClusterState:
        state = fair_cluster(
            *(
                replace(
                    cq(name, {"default": {"cpu": cpu}}, cohort="all", preemption=FAIR),
                    fair_weight=Fraction(weight),
                )
                for name, cpu, weight in (("a", "4", 2), ("b", "2", 1), ("c", "2", 1))
            )
        )
        admit(state, wl("c-large", "c", cpu=8, priority=200))
        add(state, wl("c-small", "c", cpu=1, priority=50, created=1.0))
        return state

    state = state_()
    assert preempt(state, wl("a-large", "a", cpu=8, priority=200, created=2.0)) is None
    reason = state.cache.records["ns/a-large"].reason or ""
    assert (
        "it may not preempt to borrow: ClusterQueue c would be below its nominal quota "
        "with pending Workloads and reclaim it" in reason
    ), reason
    # Kueue's rules: a takes c's large Workload.
    monkeypatch.setattr(VictimSearches, "_contested_after", lambda *_: None)
    state = state_()
    decision = preempt(state, wl("a-large", "a", cpu=8, priority=200, created=2.0))
    assert victims(decision) == {"ns/c-large": (PreemptionReason.IN_COHORT_FAIR_SHARING, 1)}
