"""A nominated topology-aware preemptor holds its place on the nodes
(controller/core/tas/holds.py): while its victims leave, later heads see the room it will
take as used, and it is admitted where its plan put it once they are gone — re-placed only
when the nodes changed.

The cluster is test_topology_preemption's: two blocks of two racks of two 4-cpu hosts;
quota is ample (64 cpus), so only the nodes are short. Every host but the ones a test
names holds a priority-5 Workload of 4 pods."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from controller.core.model.flavors import Taint
from controller.core.model.topology import TopologyRequest
from controller.core.model.workloads import PodSet, Workload
from controller.core.scheduler.cycle import run_cycle
from controller.core.state import ClusterState
from tests.unit.core.builders import add, cluster, cq, settle, wl
from tests.unit.core.scheduler.test_topology_preemption import (
    HOSTS,
    LOWER,
    TAS,
    nodes,
    placed,
    rack,
    tas_wl,
)
from tests.unit.core.tas.builders import HOST, RACK, node


def pinned(name: str, host: str, priority: int, pods: int = 4) -> Workload:
    pod_set = PodSet(
        "main", pods, {"cpu": 1000}, {HOST: host}, topology=TopologyRequest(required=HOST)
    )
    return replace(wl(name, "cq", pod_sets=[pod_set]), priority=priority)


def full_but(victims: dict[str, int], free: tuple[str, ...] = ()) -> ClusterState:
    """Every host holds a priority-5 Workload named after it, except the `victims` hosts
    (a Workload of the given priority) and the `free` ones (nothing)."""
    state = nodes(cluster(cq("cq", {"tas": {"cpu": "64"}}, preemption=LOWER), flavors=[TAS]))
    for host in HOSTS:
        if host not in free:
            add(state, pinned(host, host, victims.get(host, 5)))
    settle(state)
    assert len(state.cache.admitted) == len(HOSTS) - len(free)
    return state


def preempt_for_big(state: ClusterState) -> set[str]:
    """An 8-pod preemptor (priority 10) asking for one rack: its victims."""
    add(state, tas_wl("big", 8, priority=10, required=RACK))
    [preempt] = run_cycle(state, 0).preempting
    return {v.workload_key for v in preempt.victims}


def test_a_later_lower_priority_workload_does_not_take_the_free_part_of_the_planned_rack() -> None:
    """b1-r1 has one free host and one priority-1 Workload: the preemptor evicts that one
    and plans the rack. A 4-pod Workload arriving while the victim leaves would fit on the
    free host; it is the preemptor's, so it waits, and the preemptor gets the rack."""
    state = full_but({"b1-r1-h1": 1}, free=("b1-r1-h2",))
    assert preempt_for_big(state) == {"ns/b1-r1-h1"}
    add(state, tas_wl("late", 4, priority=0, required=HOST))
    settle(state)
    assert "ns/late" not in state.cache.admitted
    reason = state.cache.records["ns/late"].reason
    assert reason is not None and "room on 1 node(s) is held for preempting" in reason
    assert "ns/big" in state.holds.nominated
    state.release("ns/b1-r1-h1", requeue=False)
    settle(state)
    assert {rack(h) for h in placed(state, "ns/big")} == {"b1-r1"}
    assert "ns/late" not in state.cache.admitted  # no room left anywhere


def test_what_leaving_victims_free_is_held_for_their_preemptor() -> None:
    """Both b1-r1 hosts hold priority-1 victims; one is gone, the other still terminating.
    A 4-pod Workload arriving then would take the freed host, and the preemptor's evictions
    would be wasted; the freed host is held, and the preemptor gets b1-r1."""
    state = full_but({"b1-r1-h1": 1, "b1-r1-h2": 1})
    assert preempt_for_big(state) == {"ns/b1-r1-h1", "ns/b1-r1-h2"}
    state.release("ns/b1-r1-h1", requeue=False)
    add(state, tas_wl("late", 4, priority=0, required=HOST))
    settle(state)
    assert "ns/late" not in state.cache.admitted
    assert "ns/big" in state.holds.nominated
    state.release("ns/b1-r1-h2", requeue=False)
    settle(state)
    assert placed(state, "ns/big") == {"b1-r1-h1": 4, "b1-r1-h2": 4}
    assert "ns/late" not in state.cache.admitted


def test_the_hold_counts_the_leaving_victims_once() -> None:
    """While the victim is there, its host shows as used by it alone (the plan covers the
    same cpus), the free host as the preemptor's; nothing is counted twice."""
    state = full_but({"b1-r1-h1": 1}, free=("b1-r1-h2",))
    preempt_for_big(state)
    view = state.tas.view("tas")
    assert not isinstance(view, str)
    assert view.leaves[("b1-r1-h1",)].free["cpu"] == 0
    assert view.leaves[("b1-r1-h2",)].free["cpu"] == 0
    state.release("ns/b1-r1-h1", requeue=False)
    assert view.leaves[("b1-r1-h1",)].free["cpu"] == 0  # now the preemptor's
    settle(state)
    assert dict(state.tas.held("tas")) == {}


@pytest.mark.parametrize(
    "change",
    [{"unschedulable": True}, {"taints": (Taint("example.com/maintenance"),)}],
    ids=["cordoned", "tainted"],
)
def test_a_plan_the_nodes_no_longer_hold_is_placed_afresh(change: dict[str, Any]) -> None:
    """While the victim leaves, a host of the planned rack is cordoned or tainted (the pods
    do not tolerate it) and another rack empties: the preemptor is placed there instead of
    being dropped, or sent to a node its pods may not go on."""
    state = full_but({"b1-r1-h1": 1}, free=("b1-r1-h2",))
    preempt_for_big(state)
    labels = {"pool": "tas"}
    state.set_node(
        node("b1-r1-h2", "b1", "r1", "b1-r1-h2", labels=labels, cpu="4", pods="110", **change)
    )
    for host in ("b2-r2-h1", "b2-r2-h2"):
        state.release(f"ns/{host}", requeue=False)
    state.release("ns/b1-r1-h1", requeue=False)
    settle(state)
    assert {rack(h) for h in placed(state, "ns/big")} == {"b2-r2"}


def test_a_dropped_nomination_gives_its_hold_back() -> None:
    """The preemptor is deleted while its victim leaves: the free host it held is anyone's
    again, and a waiting Workload takes it."""
    state = full_but({"b1-r1-h1": 1}, free=("b1-r1-h2",))
    preempt_for_big(state)
    add(state, tas_wl("late", 4, priority=0, required=HOST))
    settle(state)
    assert "ns/late" not in state.cache.admitted
    state.remove_workload("ns/big")
    settle(state)
    assert placed(state, "ns/late") == {"b1-r1-h2": 4}
    assert dict(state.tas.held("tas")) == {}


def test_a_victim_already_leaving_frees_a_second_preemptor_only_what_the_first_does_not_hold() -> (
    None
):
    """The priority-1 Workload on b1-r1-h1 leaves for the rack-wide preemptor, whose plan
    covers all it frees. A second preemptor asking for one host may wait for a leaving
    victim (ordered first), but this one frees it nothing: it evicts a priority-5 Workload
    elsewhere, and both end where their plans put them, no host over-used."""
    state = full_but({"b1-r1-h1": 1}, free=("b1-r1-h2",))
    preempt_for_big(state)
    add(state, tas_wl("second", 4, priority=10, required=HOST))
    [preempt] = run_cycle(state, 0).preempting
    victims = {v.workload_key for v in preempt.victims}
    assert "ns/b1-r1-h1" not in victims and len(victims) == 1
    for key in ("ns/b1-r1-h1", *victims):
        state.release(key, requeue=False)
    settle(state)
    assert {rack(h) for h in placed(state, "ns/big")} == {"b1-r1"}
    [host] = placed(state, "ns/second")
    assert rack(host) != "b1-r1"
    view = state.tas.view("tas")
    assert not isinstance(view, str)
    assert all(v >= 0 for leaf in view.leaves.values() for v in leaf.free.values())
