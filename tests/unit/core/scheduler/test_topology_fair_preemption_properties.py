"""Properties of topology-aware preemption under fair sharing on random clusters (two
blocks of two racks of two 4-cpu hosts, admitted Workloads pinned to hosts; a preemptor
asking for a host, a rack or a block), judged against independent checks: the quota by
arithmetic, the nodes on a fresh view, the shares by their formula.

1. One ClusterQueue: the victims are allowed (lower priority, preemptible), let the
   preemptor fit in the domain their search chose, none can be spared there, and no
   domain could have been freed with victims of a lower highest priority; when nothing
   is preempted and the preemptor waits, no domain could be freed at all.
2. A cohort: every victim of another queue was taken from a queue that borrowed and —
   unless the preemptor's queue stays within its nominal quota — at a share the
   strategy allows: the preemptor's share at most the target's (both strategies imply
   it), and with `LessThanOrEqualToFinalShare` alone at most the target's share without
   that victim. Once the victims are gone the preemptor is admitted and nothing
   over-uses quota or a node."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from fractions import Fraction

from hypothesis import assume, event, given, settings
from hypothesis import strategies as st

from api.constants import ReclaimWithinCohortPolicy, WithinClusterQueuePolicy
from controller.core.fairsharing.settings import FairSharing, PreemptionStrategy
from controller.core.model.clusterqueues import PreemptionPolicy
from controller.core.model.topology import Topology, TopologyRequest
from controller.core.model.workloads import PodSet, Workload
from controller.core.scheduler.cycle import run_cycle
from controller.core.state import ClusterState
from controller.core.tas.assignment import PodSetRequest, add_usage, find_assignments
from controller.core.tas.snapshot import DomainID, TopologySnapshot
from tests.unit.core.builders import add, cluster, cq, settle, wl
from tests.unit.core.scheduler.test_topology_preemption_properties import (
    CPU,
    HOSTS,
    TAS,
    _no_over_use,
    _pinned,
    admitted_st,
    preemptor_st,
)
from tests.unit.core.tas.builders import BLOCK, HOST, RACK, THREE_LEVELS, node

FAIR = PreemptionPolicy(
    within_cluster_queue=WithinClusterQueuePolicy.LOWER_PRIORITY,
    reclaim_within_cohort=ReclaimWithinCohortPolicy.ANY,
)
LEVEL = {BLOCK: 0, RACK: 1, HOST: 2}


def _nodes(state: ClusterState) -> ClusterState:
    state.set_topology(Topology("default", THREE_LEVELS))
    for name in HOSTS:
        b, r, _ = name.split("-")
        state.set_node(node(name, b, r, name, labels={"pool": "tas"}, cpu="4", pods="110"))
    return state


def _admit(state: ClusterState, workloads: list[Workload]) -> None:
    """Admit what fits, the highest priority first (so none preempts another); a case where
    one was preempted all the same (reclaimed in the cohort) is not drawn: a Workload
    already leaving goes first, whatever its priority."""
    for workload in sorted(workloads, key=lambda w: -(w.priority or 0)):
        add(state, workload)
        settle(state)
        if workload.key not in state.cache.admitted:
            state.remove_workload(workload.key)
    assume(not any(record.evicting for record in state.cache.records.values()))


def _used(state: ClusterState, queue: str | None = None, gone: Collection[str] = ()) -> int:
    return sum(
        (state.cache.records[k].usage or {}).get(CPU, 0)
        for k in state.cache.admitted
        if k not in gone and (queue is None or state.cache.records[k].cluster_queue == queue)
    )


def _fits_in(
    state: ClusterState, request: PodSetRequest, gone: Collection[str], domain: DomainID | None
) -> bool:
    """The pods fit on the nodes once `gone` have left (in `domain`, if given), judged on
    a fresh view."""
    usage: dict[DomainID, dict[str, int]] = {}
    for key in state.cache.admitted:
        if key not in gone:
            add_usage(usage, {d: dict(a) for d, a in state.tas.usage_of(key, "tas").items()})
    view = TopologySnapshot(
        "default", THREE_LEVELS, state.tas.nodes.values(), flavor_labels={"pool": "tas"}
    )
    for leaf, amounts in usage.items():
        view.add_usage(leaf, amounts)
    if domain is not None:
        view = view.restricted(domain)
    return find_assignments(view, [request])[1] is None


def _domains(level: str) -> list[DomainID]:
    """The domains of a level: their values from the top (block, rack, hostname)."""
    return sorted({(*h.split("-")[:2], h)[: LEVEL[level] + 1] for h in HOSTS})


@settings(max_examples=400, deadline=None)
@given(st.sampled_from([16, 24, 32, 40]), admitted_st, preemptor_st)
def test_one_queue_victims_fit_the_chosen_domain_minimal_and_of_the_lowest_priority(
    nominal: int,
    admitted: list[tuple[int, int, int, int, bool, bool]],
    preemptor: tuple[int, str, int],
) -> None:
    state = _nodes(
        cluster(cq("cq", {"tas": {"cpu": str(nominal)}}, preemption=FAIR), flavors=[TAS])
    )
    state.fair_sharing = FairSharing()
    _admit(
        state,
        [
            replace(
                _pinned(f"w{i}", "cq", HOSTS[host], pods, priority, cost),
                preemptibility="non-preemptible" if fixed else None,
            )
            for i, (host, pods, priority, cost, fixed, _) in enumerate(admitted)
        ],
    )
    count, level, priority = preemptor
    request = PodSetRequest("main", count, {"cpu": 1000}, TopologyRequest(required=level))
    pod_set = PodSet("main", count, {"cpu": 1000}, topology=TopologyRequest(required=level))
    add(state, replace(wl("p", pod_sets=[pod_set], created=2.0), priority=priority))
    records = state.cache.records
    allowed = {
        k: records[k].workload.priority or 0
        for k in state.cache.admitted
        if (records[k].workload.priority or 0) < priority
        and records[k].workload.preemptibility != "non-preemptible"
    }

    def fits(gone: Collection[str], domain: DomainID | None) -> bool:
        quota = _used(state, gone=gone) + count * 1000 <= nominal * 1000
        return quota and _fits_in(state, request, gone, domain)

    def lowest(domain: DomainID) -> int | None:
        """The lowest highest-priority of a victim set freeing `domain` (None: none)."""
        for threshold in sorted(set(allowed.values())):
            if fits([k for k, p in allowed.items() if p <= threshold], domain):
                return threshold
        return None

    thresholds = [t for d in _domains(level) if (t := lowest(d)) is not None]
    result = run_cycle(state, 0)
    preempts = [p for p in result.preempting if p.preemptor_key == "ns/p"]
    if not preempts:
        event("admitted" if "ns/p" in state.cache.admitted else "waits")
        if "ns/p" not in state.cache.admitted:
            assert thresholds == []  # complete: no domain could have been freed
        return
    event("preempts")
    [preempt] = preempts
    victims = {v.workload_key for v in preempt.victims}
    assert victims <= set(allowed)
    chosen = state.holds.nominated["ns/p"].domain
    domain = chosen[1] if chosen is not None else None
    assert fits(victims, domain)
    for victim in victims:  # minimal where it was chosen
        assert not fits(victims - {victim}, domain)
    assert max(allowed[v] for v in victims) == min(thresholds)
    for key in victims:
        state.release(key, requeue=False)
        state.remove_workload(key)
    settle(state)
    assert "ns/p" in state.cache.admitted
    _no_over_use(state, nominal)


STRATEGIES = (
    FairSharing().preemption_strategies,
    (PreemptionStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,),
    (PreemptionStrategy.LESS_THAN_INITIAL_SHARE,),
)


# One Workload per host (so the nodes are nearly full): (pods, priority, cost,
# non-preemptible, in `other`), mostly `other`'s.
hosts_st = st.lists(
    st.tuples(
        st.integers(2, 4),
        st.integers(0, 3),
        st.integers(0, 3),
        st.integers(0, 4).map(lambda n: n == 0),
        st.integers(0, 3).map(lambda n: n != 0),
    ),
    min_size=8,
    max_size=8,
)


@settings(max_examples=400, deadline=None)
@given(
    st.integers(2, 12),  # mine's nominal quota
    st.integers(2, 12),  # other's nominal quota (lender: the rest of 32)
    st.sampled_from([1, 2, 4]),  # mine's fair-sharing weight
    st.sampled_from(STRATEGIES),
    hosts_st,
    preemptor_st,
)
def test_cohort_victims_are_what_the_fair_sharing_rules_allow(
    mine_nominal: int,
    other_nominal: int,
    weight: int,
    strategies: tuple[PreemptionStrategy, ...],
    admitted: list[tuple[int, int, int, bool, bool]],
    preemptor: tuple[int, str, int],
) -> None:
    """`mine`'s own Workloads have priority 9 (above any preemptor): every victim is
    `other`'s, and the preemptor's share does not change while they are taken."""
    lender_nominal = 32 - mine_nominal - other_nominal
    mine = replace(
        cq("mine", {"tas": {"cpu": str(mine_nominal)}}, cohort="all", preemption=FAIR),
        fair_weight=Fraction(weight),
    )
    other = cq("other", {"tas": {"cpu": str(other_nominal)}}, cohort="all", preemption=FAIR)
    lender = cq("lender", {"tas": {"cpu": str(lender_nominal)}}, cohort="all")
    state = _nodes(cluster(mine, other, lender, flavors=[TAS]))
    state.fair_sharing = FairSharing(strategies)
    _admit(
        state,
        [
            replace(
                _pinned(
                    f"w{host}",
                    "other" if in_other else "mine",
                    HOSTS[host],
                    pods,
                    p if in_other else 9,
                    cost,
                ),
                preemptibility="non-preemptible" if fixed else None,
            )
            for host, (pods, p, cost, fixed, in_other) in enumerate(admitted)
        ],
    )
    count, level, priority = preemptor
    pod_set = PodSet("main", count, {"cpu": 1000}, topology=TopologyRequest(required=level))
    add(state, replace(wl("p", "mine", pod_sets=[pod_set], created=2.0), priority=priority))
    records = state.cache.records
    other_used = _used(state, "other")
    # Shares of one flat cohort over one resource compare as borrowed / weight.
    preemptor_borrows = max(0, _used(state, "mine") + count * 1000 - mine_nominal * 1000)

    def other_share(gone: Collection[str] = ()) -> Fraction:
        return Fraction(max(0, _used(state, "other", gone) - other_nominal * 1000))

    result = run_cycle(state, 0)
    preempts = [p for p in result.preempting if p.preemptor_key == "ns/p"]
    event("preempts" if preempts else "admitted" if "ns/p" in state.cache.admitted else "waits")
    if preempts and preemptor_borrows:
        event("preempts while borrowing")
    _no_over_use(state, 32)
    if not preempts:
        return
    [preempt] = preempts
    for victim in preempt.victims:
        assert victim.cluster_queue == "other"
        assert records[victim.workload_key].workload.preemptibility != "non-preemptible"
        assert other_used > other_nominal * 1000  # it borrowed
        if preemptor_borrows == 0:
            continue  # within nominal quota: plain reclamation
        mine_share = Fraction(preemptor_borrows, weight)
        assert mine_share <= other_share()
        if strategies == (PreemptionStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,):
            assert mine_share <= other_share([victim.workload_key])
    for victim in preempt.victims:
        state.release(victim.workload_key, requeue=False)
        state.remove_workload(victim.workload_key)
    settle(state)
    assert "ns/p" in state.cache.admitted
    _no_over_use(state, 32)
