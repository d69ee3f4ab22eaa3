"""Topology-aware preemption (controller/core/scheduler/topology_preemption.py): victims
that free the quota AND leave the pod set a domain, searched per domain at the level asked
for, over the ClusterQueue's own Workloads and the cohort's borrowing queues; the cheapest
domain wins.

The cluster: two blocks of two racks of two hosts, 4 cpus each (32 cpus); every host is
filled by one 4-pod Workload unless a test says otherwise."""

from __future__ import annotations

from dataclasses import replace

from api.constants import (
    BorrowWithinCohortPolicy,
    PreemptionReason,
    ReclaimWithinCohortPolicy,
    WithinClusterQueuePolicy,
)
from controller.core.model.clusterqueues import PreemptionPolicy
from controller.core.model.flavors import ResourceFlavor
from controller.core.model.topology import Topology, TopologyRequest
from controller.core.model.workloads import PodSet, Workload
from controller.core.scheduler.cycle import run_cycle
from controller.core.state import ClusterState
from controller.core.tas.encoding import decode
from tests.unit.core.builders import add, cluster, cq, group, m, settle, wl
from tests.unit.core.tas.builders import BLOCK, HOST, RACK, THREE_LEVELS, node

TAS = ResourceFlavor("tas", {"pool": "tas"}, topology_name="default")
HOSTS = [f"{b}-{r}-{h}" for b in ("b1", "b2") for r in ("r1", "r2") for h in ("h1", "h2")]
LOWER = PreemptionPolicy(within_cluster_queue=WithinClusterQueuePolicy.LOWER_PRIORITY)


def nodes(state: ClusterState) -> ClusterState:
    state.set_topology(Topology("default", THREE_LEVELS))
    for name in HOSTS:
        b, r, _ = name.split("-")
        state.set_node(node(name, b, r, name, labels={"pool": "tas"}, cpu="4", pods="110"))
    return state


def tas_wl(
    name: str,
    count: int,
    queue: str = "cq",
    priority: int = 0,
    cost: int = 0,
    **topology: object,
) -> Workload:
    request = TopologyRequest(**topology)  # type: ignore[arg-type]
    pod_set = PodSet("main", count, {"cpu": m("1")}, topology=request)
    return replace(wl(name, queue, pod_sets=[pod_set]), priority=priority, preemption_cost=cost)


def placed(state: ClusterState, key: str) -> dict[str, int]:
    admission = state.cache.records[key].workload.admission
    assert admission is not None
    assignment = admission.pod_set_assignments[0].topology_assignment
    assert assignment is not None
    return {values[-1]: n for values, n in decode(assignment).domains}


def rack(host: str) -> str:
    return host.rsplit("-", 1)[0]


def fill_in_order(state: ClusterState, queue: str, priorities: dict[str, int]) -> None:
    """Fill the hosts in `HOSTS` order (the assignment takes the fullest-fitting host
    first, so Workloads made one at a time land in that order)."""
    for host in HOSTS:
        add(state, tas_wl(host, 4, queue, priorities.get(host, 0), required=HOST))
        settle(state)
    where = {host: next(iter(placed(state, f"ns/{host}"))) for host in HOSTS}
    assert where == {h: h for h in HOSTS}, where


def test_quota_short_victims_are_chosen_where_the_pods_then_fit() -> None:
    """Quota and nodes are full. The two cheapest Workloads (priority 1) sit in different
    racks: freeing them frees 8 cpus of quota but no rack holds the 8-pod preemptor. Kueue's
    quota-first order would take them (then find the pods do not fit); the domain split
    takes a whole rack: b2-r2, whose victims' highest priority (3) is the lowest of any rack
    that can hold the pods."""
    state = nodes(cluster(cq("cq", {"tas": {"cpu": "32"}}, preemption=LOWER), flavors=[TAS]))
    priorities = dict.fromkeys(HOSTS, 5)
    priorities.update({"b1-r1-h1": 1, "b1-r2-h1": 1, "b2-r2-h1": 3, "b2-r2-h2": 3})
    fill_in_order(state, "cq", priorities)
    add(state, tas_wl("big", 8, priority=10, required=RACK))
    [preempt] = run_cycle(state, 0).preempting
    victims = {v.workload_key for v in preempt.victims}
    assert victims == {"ns/b2-r2-h1", "ns/b2-r2-h2"}
    for key in victims:
        state.release(key, requeue=False)
    settle(state)
    assert {rack(h) for h in placed(state, "ns/big")} == {"b2-r2"}


def test_no_quota_is_freed_when_the_pods_fit_no_domain_even_then() -> None:
    """A 9-pod pod set requiring one rack (8 cpus a rack) fits no rack even on empty
    nodes: nothing is preempted, although the quota could be freed."""
    state = nodes(cluster(cq("cq", {"tas": {"cpu": "32"}}, preemption=LOWER), flavors=[TAS]))
    fill_in_order(state, "cq", {})
    add(state, tas_wl("big", 9, priority=10, required=RACK))
    result = run_cycle(state, 0)
    assert result.preempting == ()
    assert "ns/big" not in state.cache.admitted


def test_non_preemptible_workloads_are_never_victims() -> None:
    """b2-r2 is the cheapest rack but one of its Workloads is non-preemptible: the next
    cheapest rack whose victims are all preemptible is freed."""
    state = nodes(cluster(cq("cq", {"tas": {"cpu": "32"}}, preemption=LOWER), flavors=[TAS]))
    priorities = dict.fromkeys(HOSTS, 5)
    priorities.update({"b2-r2-h1": 1, "b2-r2-h2": 1, "b1-r2-h1": 2, "b1-r2-h2": 2})
    for host in HOSTS:
        workload = tas_wl(host, 4, "cq", priorities[host], required=HOST)
        if host == "b2-r2-h2":
            workload = replace(workload, preemptibility="non-preemptible")
        add(state, workload)
        settle(state)
    add(state, tas_wl("big", 8, priority=10, required=RACK))
    [preempt] = run_cycle(state, 0).preempting
    assert {v.workload_key for v in preempt.victims} == {"ns/b1-r2-h1", "ns/b1-r2-h2"}


def test_lower_cost_breaks_a_priority_tie_between_racks() -> None:
    state = nodes(cluster(cq("cq", {"tas": {"cpu": "32"}}, preemption=LOWER), flavors=[TAS]))
    fill_in_order(state, "cq", dict.fromkeys(HOSTS, 1))
    for host in HOSTS:  # every rack costs 10 except b1-r2
        record = state.cache.records[f"ns/{host}"]
        cost = 0 if rack(host) == "b1-r2" else 10
        state.upsert_workload(replace(record.workload, preemption_cost=cost))
    add(state, tas_wl("big", 8, priority=10, required=RACK))
    [preempt] = run_cycle(state, 0).preempting
    assert {v.workload_key for v in preempt.victims} == {"ns/b1-r2-h1", "ns/b1-r2-h2"}


def cohort_cluster(reclaim: str = "Any", borrow: str = "Never") -> ClusterState:
    """`mine` (nominal 8 cpus) and `other` (nominal 24) in one cohort; `other` fills all
    32 cpus of the nodes, borrowing 8 of `mine`'s."""
    policy = PreemptionPolicy(
        within_cluster_queue=WithinClusterQueuePolicy.LOWER_PRIORITY,
        reclaim_within_cohort=ReclaimWithinCohortPolicy(reclaim),
        borrow_within_cohort=BorrowWithinCohortPolicy(borrow),
    )
    mine = cq("mine", {"tas": {"cpu": "8"}}, cohort="all", preemption=policy)
    other = cq("other", {"tas": {"cpu": "24"}}, cohort="all")
    return nodes(cluster(mine, other, flavors=[TAS]))


def test_reclaim_within_cohort_takes_a_borrowers_workload_in_the_right_rack() -> None:
    """`mine` is within its nominal quota but the cohort is used up by `other`, which
    borrows. The preemptor (4 pods in one rack, priority 0: reclamation needs no priority)
    reclaims one Workload of `other`, the cheapest by cost, and lands in its rack."""
    state = cohort_cluster()
    fill_in_order(state, "other", {})
    for host in HOSTS:
        record = state.cache.records[f"ns/{host}"]
        cost = 1 if host == "b2-r1-h2" else 5
        state.upsert_workload(replace(record.workload, preemption_cost=cost))
    add(state, tas_wl("mine-wl", 4, "mine", required=RACK))
    [preempt] = run_cycle(state, 0).preempting
    [victim] = preempt.victims
    assert victim.workload_key == "ns/b2-r1-h2"
    assert victim.cluster_queue == "other"
    assert victim.reason is PreemptionReason.IN_COHORT_RECLAMATION
    state.release(victim.workload_key, requeue=False)
    settle(state)
    assert placed(state, "ns/mine-wl") == {"b2-r1-h2": 4}


def test_reclaim_frees_only_what_the_rack_needs() -> None:
    """An 8-pod preemptor in `mine` (its whole nominal quota) needs a rack: the two
    Workloads of one rack are reclaimed — not the two cheapest anywhere."""
    state = cohort_cluster()
    fill_in_order(state, "other", {})
    for host, cost in {"b1-r1-h1": 1, "b2-r2-h1": 1, "b1-r2-h1": 2, "b1-r2-h2": 2}.items():
        record = state.cache.records[f"ns/{host}"]
        state.upsert_workload(replace(record.workload, preemption_cost=cost))
    for host in HOSTS:
        record = state.cache.records[f"ns/{host}"]
        if record.workload.preemption_cost == 0:
            state.upsert_workload(replace(record.workload, preemption_cost=9))
    add(state, tas_wl("mine-wl", 8, "mine", required=RACK))
    [preempt] = run_cycle(state, 0).preempting
    assert {v.workload_key for v in preempt.victims} == {"ns/b1-r2-h1", "ns/b1-r2-h2"}
    assert {v.cluster_queue for v in preempt.victims} == {"other"}


def test_no_reclaim_from_a_queue_within_its_nominal_quota() -> None:
    """`other` fills only its nominal 24 cpus (six hosts); `mine`'s Workloads fill the
    last rack. A preemptor of `mine` needing a rack where `mine` holds nothing to preempt
    (same priority) may not reclaim from `other`, which is not borrowing."""
    state = cohort_cluster()
    fill_in_order(state, "other", {})
    for host in ("b2-r2-h1", "b2-r2-h2"):  # make room for mine's own two Workloads
        state.release(f"ns/{host}", requeue=False)
        state.remove_workload(f"ns/{host}")
    for host in ("b2-r2-h1", "b2-r2-h2"):
        add(state, tas_wl(f"mine-{host}", 4, "mine", 10, required=HOST))
        settle(state)
    add(state, tas_wl("mine-big", 8, "mine", 10, required=RACK))
    result = run_cycle(state, 0)
    assert result.preempting == ()
    assert "ns/mine-big" not in state.cache.admitted


def test_reclaim_never_leaves_the_cohorts_borrowers_alone() -> None:
    state = cohort_cluster(reclaim="Never")
    fill_in_order(state, "other", {})
    add(state, tas_wl("mine-wl", 4, "mine", 10, required=RACK))
    assert run_cycle(state, 0).preempting == ()


def test_a_block_request_is_split_by_block() -> None:
    """A 16-pod pod set requiring one block frees the four Workloads of the cheaper
    block only."""
    state = nodes(cluster(cq("cq", {"tas": {"cpu": "32"}}, preemption=LOWER), flavors=[TAS]))
    priorities = {h: (2 if h.startswith("b2") else 3) for h in HOSTS}
    priorities["b1-r1-h1"] = 1  # the single cheapest is in the dearer block
    fill_in_order(state, "cq", priorities)
    add(state, tas_wl("big", 16, priority=10, required=BLOCK))
    [preempt] = run_cycle(state, 0).preempting
    assert {v.workload_key for v in preempt.victims} == {f"ns/{h}" for h in HOSTS[4:]}


def test_pod_sets_in_two_tas_flavors_get_victims_in_both() -> None:
    """cpu pods in flavor tas-a, gpu pods in tas-b, each full with 4-pod Workloads: one
    search over both (no domain split across flavors) takes a cpu Workload and the
    priority-1 gpu one, never the priority-5 gpu one."""
    tas_a = ResourceFlavor("tas-a", {"pool": "a"}, topology_name="default")
    tas_b = ResourceFlavor("tas-b", {"pool": "b"}, topology_name="default")
    queue = cq(
        "cq",
        groups=[group({"tas-a": {"cpu": "8"}}), group({"tas-b": {"example.com/gpu": "8"}})],
        preemption=LOWER,
    )
    state = cluster(queue, flavors=[tas_a, tas_b])
    state.set_topology(Topology("default", THREE_LEVELS))
    for pool, resource in (("a", {"cpu": "4"}), ("b", {"gpu": "4"})):
        for h in ("h1", "h2"):
            name = f"{pool}-{h}"
            state.set_node(
                node(name, pool, "r1", name, labels={"pool": pool}, pods="110", **resource)
            )
    host = TopologyRequest(required=HOST)
    cpu, gpu = {"cpu": m("1")}, {"example.com/gpu": m("1")}
    for name, requests, on, priority in (
        ("cpu-1", cpu, "a-h1", 1),
        ("cpu-2", cpu, "a-h2", 1),
        ("gpu-1", gpu, "b-h1", 1),
        ("gpu-5", gpu, "b-h2", 5),
    ):
        pod_set = PodSet("main", 4, requests, {HOST: on}, topology=host)
        add(state, replace(wl(name, pod_sets=[pod_set]), priority=priority))
        settle(state)
    assert len(state.cache.admitted) == 4
    preemptor = wl(
        "both",
        pod_sets=[PodSet("cpu", 4, cpu, topology=host), PodSet("gpu", 4, gpu, topology=host)],
    )
    add(state, replace(preemptor, priority=3, creation_timestamp=1.0))
    [preempt] = run_cycle(state, 0).preempting
    victims = {v.workload_key for v in preempt.victims}
    assert len(victims) == 2 and "ns/gpu-1" in victims and "ns/gpu-5" not in victims
