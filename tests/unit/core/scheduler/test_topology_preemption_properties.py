"""Properties of topology-aware preemption on random clusters: two blocks of two racks of
two 4-cpu hosts, admitted Workloads pinned to hosts (random sizes, priorities, costs,
some non-preemptible), and a preemptor asking for a host, a rack or a block.

Judged against an independent check (the quota by arithmetic, the nodes on a fresh view):
the victims are allowed (lower priority, preemptible), they suffice (once gone the
preemptor is admitted, nothing over-uses quota or a node), none can be spared (the set is
minimal), and when no victims are found no set of allowed Workloads would have done."""

from __future__ import annotations

from dataclasses import replace
from itertools import combinations

from hypothesis import event, given, settings
from hypothesis import strategies as st

from api.constants import ReclaimWithinCohortPolicy, WithinClusterQueuePolicy
from controller.core.model.clusterqueues import PreemptionPolicy
from controller.core.model.flavors import ResourceFlavor
from controller.core.model.topology import Topology, TopologyRequest
from controller.core.model.workloads import PodSet, Workload
from controller.core.scheduler.cycle import run_cycle
from controller.core.state import ClusterState
from controller.core.tas.assignment import PodSetRequest, add_usage, find_assignments
from controller.core.tas.snapshot import DomainID, TopologySnapshot
from tests.unit.core.builders import add, cluster, cq, settle, wl
from tests.unit.core.tas.builders import BLOCK, HOST, RACK, THREE_LEVELS, node

TAS = ResourceFlavor("tas", {"pool": "tas"}, topology_name="default")
HOSTS = [f"{b}-{r}-{h}" for b in ("b1", "b2") for r in ("r1", "r2") for h in ("h1", "h2")]
CPU = ("tas", "cpu")

admitted_st = st.lists(
    st.tuples(
        st.integers(0, 7),  # host
        st.integers(1, 4),  # pods (1 cpu each)
        st.integers(0, 3),  # priority
        st.integers(0, 3),  # preemption cost
        st.integers(0, 4).map(lambda n: n == 0),  # non-preemptible (one in five)
        st.booleans(),  # in the other queue (cohort cases)
    ),
    min_size=6,
    max_size=16,
)
preemptor_st = st.tuples(
    st.integers(1, 10), st.sampled_from([HOST, RACK, BLOCK]), st.integers(1, 4)
)


def _state(nominal: int, cohort: bool) -> ClusterState:
    policy = PreemptionPolicy(
        within_cluster_queue=WithinClusterQueuePolicy.LOWER_PRIORITY,
        reclaim_within_cohort=ReclaimWithinCohortPolicy.ANY,
    )
    queues = [cq("cq", {"tas": {"cpu": str(nominal)}}, preemption=policy, cohort="all")]
    if cohort:
        queues.append(cq("other", {"tas": {"cpu": str(32 - nominal)}}, cohort="all"))
    state = cluster(*queues, flavors=[TAS])
    state.set_topology(Topology("default", THREE_LEVELS))
    for name in HOSTS:
        b, r, _ = name.split("-")
        state.set_node(node(name, b, r, name, labels={"pool": "tas"}, cpu="4", pods="110"))
    return state


def _pinned(name: str, queue: str, host: str, pods: int, priority: int, cost: int) -> Workload:
    pod_set = PodSet(
        "main", pods, {"cpu": 1000}, {HOST: host}, topology=TopologyRequest(required=HOST)
    )
    return replace(
        wl(name, queue, pod_sets=[pod_set], created=1.0),
        priority=priority,
        preemption_cost=cost,
    )


def _setup(
    nominal: int, cohort: bool, admitted: list[tuple[int, int, int, int, bool, bool]]
) -> ClusterState:
    state = _state(nominal, cohort)
    for i, (host, pods, priority, cost, fixed, other) in enumerate(admitted):
        queue = "other" if cohort and other else "cq"
        workload = _pinned(f"w{i}", queue, HOSTS[host], pods, priority, cost)
        if fixed:
            workload = replace(workload, preemptibility="non-preemptible")
        add(state, workload)
        settle(state)
        if f"ns/w{i}" not in state.cache.admitted:
            state.remove_workload(f"ns/w{i}")
    return state


def _fits_without(
    state: ClusterState, request: PodSetRequest, nominal: int, gone: frozenset[str]
) -> bool:
    """The preemptor fits in the queue's quota (single queue) and on the nodes once `gone`
    have left, judged from scratch."""
    held = [k for k in state.cache.admitted if k not in gone]
    used = sum((state.cache.records[k].usage or {}).get(CPU, 0) for k in held)
    if used + request.count * 1000 > nominal * 1000:
        return False
    usage: dict[DomainID, dict[str, int]] = {}
    for key in held:
        add_usage(usage, {d: dict(a) for d, a in state.tas.usage_of(key, "tas").items()})
    view = TopologySnapshot(
        "default", THREE_LEVELS, state.tas.nodes.values(), flavor_labels={"pool": "tas"}
    )
    for leaf, amounts in usage.items():
        view.add_usage(leaf, amounts)
    return find_assignments(view, [request])[1] is None


def _no_over_use(state: ClusterState, total: int) -> None:
    used = sum((r.usage or {}).get(CPU, 0) for k, r in state.cache.records.items() if r.holds_quota)
    assert used <= total * 1000
    view = state.tas.view("tas")
    assert not isinstance(view, str)
    for leaf in view.leaves.values():
        assert all(amount >= 0 for amount in leaf.free.values()), (leaf.id, leaf.free)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([16, 24, 32]), admitted_st, preemptor_st)
def test_single_queue_victims_are_allowed_sufficient_minimal_and_complete(
    nominal: int,
    admitted: list[tuple[int, int, int, int, bool, bool]],
    preemptor: tuple[int, str, int],
) -> None:
    state = _setup(nominal, False, admitted)
    count, level, priority = preemptor
    pod_set = PodSet("main", count, {"cpu": 1000}, topology=TopologyRequest(required=level))
    add(state, replace(wl("p", pod_sets=[pod_set], created=2.0), priority=priority))
    request = PodSetRequest("main", count, {"cpu": 1000}, TopologyRequest(required=level))
    before = set(state.cache.admitted)
    fits_now = _fits_without(state, request, nominal, frozenset())
    result = run_cycle(state, 0)
    preempts = [p for p in result.preempting if p.preemptor_key == "ns/p"]
    event("preempts" if preempts else "admitted" if "ns/p" in state.cache.admitted else "waits")
    allowed = [
        k
        for k in before
        if state.cache.records[k].workload.priority is not None
        and (state.cache.records[k].workload.priority or 0) < priority
        and state.cache.records[k].workload.preemptibility != "non-preemptible"
    ]
    if not preempts:
        if "ns/p" in state.cache.admitted:
            assert fits_now
            _no_over_use(state, nominal)
            return
        for size in range(1, len(allowed) + 1):  # complete: nothing would have done
            for subset in combinations(allowed, size):
                assert not _fits_without(state, request, nominal, frozenset(subset)), subset
        return
    [preempt] = preempts
    victims = frozenset(v.workload_key for v in preempt.victims)
    assert victims <= set(allowed)  # lower priority, preemptible
    assert _fits_without(state, request, nominal, victims)
    for victim in victims:  # minimal: none can be spared
        assert not _fits_without(state, request, nominal, victims - {victim})
    for key in victims:
        state.release(key, requeue=False)
        state.remove_workload(key)
    settle(state)
    assert "ns/p" in state.cache.admitted
    _no_over_use(state, nominal)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([8, 16, 24]), admitted_st, preemptor_st)
def test_cohort_victims_are_allowed_and_sufficient(
    nominal: int,
    admitted: list[tuple[int, int, int, int, bool, bool]],
    preemptor: tuple[int, str, int],
) -> None:
    """With a second queue of the cohort: a victim of the preemptor's queue has a lower
    priority, one of the other queue was borrowing; none is non-preemptible; once they are
    gone the preemptor is admitted and nothing over-uses the cohort's quota or a node."""
    state = _setup(nominal, True, admitted)
    count, level, priority = preemptor
    pod_set = PodSet("main", count, {"cpu": 1000}, topology=TopologyRequest(required=level))
    add(state, replace(wl("p", pod_sets=[pod_set], created=2.0), priority=priority))
    other_used = sum(
        (state.cache.records[k].usage or {}).get(CPU, 0)
        for k in state.cache.admitted
        if state.cache.records[k].cluster_queue == "other"
    )
    result = run_cycle(state, 0)
    preempts = [p for p in result.preempting if p.preemptor_key == "ns/p"]
    event("preempts" if preempts else "no preemption")
    _no_over_use(state, 32)
    if not preempts:
        return
    [preempt] = preempts
    for victim in preempt.victims:
        workload = state.cache.records[victim.workload_key].workload
        assert workload.preemptibility != "non-preemptible"
        if victim.cluster_queue == "cq":
            assert (workload.priority or 0) < priority
        else:
            assert other_used > (32 - nominal) * 1000  # reclaimed from a borrower
    for victim in preempt.victims:
        state.release(victim.workload_key, requeue=False)
        state.remove_workload(victim.workload_key)
    settle(state)
    assert "ns/p" in state.cache.admitted
    _no_over_use(state, 32)
