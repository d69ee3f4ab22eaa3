"""A failed node under an admitted TAS Workload, as Kueue handles it: the pods on it get a
replacement in the domain the request binds them to (the admission rewritten, the other
pods kept), or the Workload is evicted (`NodeFailures`) and requeued; when a not-ready node
counts as failed, by Kueue's feature gates."""

from __future__ import annotations

from dataclasses import replace

from controller.core.model.flavors import ResourceFlavor
from controller.core.model.topology import Topology, TopologyRequest
from controller.core.model.workloads import PodSet, Workload, WorkloadKey
from controller.core.scheduler.cycle import run_cycle
from controller.core.state import ClusterState
from controller.core.tas.encoding import decode
from controller.core.tas.node_failure import NODE_FAILURE_DELAY, NodeFailureGates
from tests.unit.core.builders import add, cluster, cq, m, settle, wl
from tests.unit.core.tas.builders import RACK, THREE_LEVELS, node

TAS = ResourceFlavor("tas", {"pool": "tas"}, topology_name="default")
A = WorkloadKey("ns/a")


def racks(nodes_per_rack: int = 3) -> ClusterState:
    """Two racks of `nodes_per_rack` nodes of 4 cpus (r1-h1 …)."""
    state = cluster(cq("cq", {"tas": {"cpu": "100"}}), flavors=[TAS])
    state.set_topology(Topology("default", THREE_LEVELS))
    for r in ("r1", "r2"):
        for h in range(1, nodes_per_rack + 1):
            name = f"{r}-h{h}"
            state.set_node(node(name, "b1", r, name, labels={"pool": "tas"}, cpu="4", pods="110"))
    return state


def rack_wl(name: str, pods: int) -> Workload:
    topology = TopologyRequest(required=RACK)
    return wl(name, pod_sets=[PodSet("main", pods, {"cpu": m("1")}, topology=topology)])


def placed(state: ClusterState, key: str = A) -> dict[str, int]:
    admission = state.cache.records[WorkloadKey(key)].workload.admission
    assert admission is not None
    encoded = admission.pod_set_assignments[0].topology_assignment
    assert encoded is not None
    return {values[-1]: count for values, count in decode(encoded).domains}


def rack_of(host: str) -> str:
    return host.split("-")[0]


def admitted_a(pods: int = 6, nodes_per_rack: int = 3) -> tuple[ClusterState, str]:
    """Workload a admitted in one rack over two nodes; its node with the fewest pods."""
    state = add(racks(nodes_per_rack), rack_wl("a", pods))
    settle(state)
    hosts = placed(state)
    assert len(hosts) == 2 and len({rack_of(h) for h in hosts}) == 1, hosts
    return state, min(hosts, key=lambda h: (hosts[h], h))


def not_ready(state: ClusterState, host: str, since: float = 0.0) -> None:
    state.set_node(replace(state.tas.nodes[host], ready=False, not_ready_since=since))


def test_a_deleted_node_is_replaced_in_the_same_rack_and_the_other_pods_stay() -> None:
    state, host = admitted_a()
    before = placed(state)
    state.remove_node(host)
    result = run_cycle(state, 0)
    assert result.evicted == ()
    [replaced] = result.replaced
    assert (replaced.workload_key, replaced.failed_node) == (A, host)
    after = placed(state)
    assert host not in after and sum(after.values()) == 6
    assert {rack_of(h) for h in after} == {rack_of(host)}
    for kept, count in before.items():  # the pods on the other node did not move
        if kept != host:
            assert after[kept] >= count
    # The admission written is the state's: the same quota, the new assignment.
    assert replaced.admission == state.cache.records[A].admission
    assert state.cache.records[A].workload.admission == replaced.admission
    usage = state.tas.usage_of(A, "tas")
    assert (host,) not in usage and sum(u["pods"] for u in usage.values()) == 6000
    assert run_cycle(state, 0).replaced == ()  # judged once


def test_no_room_in_the_rack_evicts_and_requeues_it_then_it_is_placed_again() -> None:
    state, host = admitted_a(pods=6, nodes_per_rack=2)  # the rack's other node is full
    state.remove_node(host)
    result = run_cycle(state, 0)
    assert result.replaced == ()
    [evict] = result.evicted
    assert (evict.workload_key, evict.reason) == (A, "NodeFailures")
    assert evict.message == (
        f"Workload was evicted as there was no replacement for unhealthy node(s): {host}"
    )
    state.release(A)  # the job's pods are gone: its quota comes back, it is requeued
    settle(state)
    again = placed(state)
    assert host not in again and len({rack_of(h) for h in again}) == 1
    assert rack_of(next(iter(again))) != rack_of(host)


def test_a_not_ready_node_fails_once_the_workloads_pods_on_it_are_gone() -> None:
    """TASReplaceNodeOnPodTermination (on): not ready is not enough while a pod of the
    Workload still runs there, however long it lasts."""
    state, host = admitted_a()
    state.set_tas_pod("ns/a-0", host, A)
    state.set_tas_pod("ns/a-1", host, A)
    not_ready(state, host)
    assert run_cycle(state, 1000).replaced == ()
    state.remove_tas_pod("ns/a-0")
    assert run_cycle(state, 1000).replaced == ()
    state.remove_tas_pod("ns/a-1")
    [replaced] = run_cycle(state, 1000).replaced
    assert replaced.failed_node == host and host not in placed(state)


def test_without_pod_termination_a_not_ready_node_fails_after_kueues_delay() -> None:
    state, host = admitted_a()
    state.failed_nodes.gates = NodeFailureGates(on_pod_termination=False)
    not_ready(state, host, since=100.0)
    assert run_cycle(state, 100 + NODE_FAILURE_DELAY - 1).replaced == ()
    assert state.failed_nodes.next_time() == 100 + NODE_FAILURE_DELAY
    [replaced] = run_cycle(state, 100 + NODE_FAILURE_DELAY).replaced
    assert replaced.failed_node == host


def test_the_fixed_time_gate_fails_a_not_ready_node_with_pods_after_the_delay() -> None:
    state, host = admitted_a()
    state.failed_nodes.gates = NodeFailureGates(not_ready_fixed_time=True)
    state.set_tas_pod("ns/a-0", host, A)
    not_ready(state, host, since=0.0)
    assert run_cycle(state, NODE_FAILURE_DELAY - 1).replaced == ()
    [replaced] = run_cycle(state, NODE_FAILURE_DELAY).replaced
    assert replaced.failed_node == host


def test_a_node_ready_again_before_it_failed_changes_nothing() -> None:
    state, host = admitted_a()
    state.failed_nodes.gates = NodeFailureGates(on_pod_termination=False)
    ready = state.tas.nodes[host]
    not_ready(state, host)
    assert run_cycle(state, 1).replaced == ()
    state.set_node(ready)
    assert run_cycle(state, 100).replaced == () and run_cycle(state, 100).evicted == ()
    assert host in placed(state)


def test_without_fail_fast_it_keeps_its_quota_until_a_node_of_the_rack_has_room() -> None:
    state, host = admitted_a(pods=6, nodes_per_rack=2)
    state.failed_nodes.gates = NodeFailureGates(fail_fast=False)
    state.remove_node(host)
    result = run_cycle(state, 0)
    assert result.replaced == () and result.evicted == ()
    assert state.failed_nodes.unhealthy == {A: host}
    assert state.cache.records[A].holds_quota
    rack = rack_of(host)
    state.set_node(
        node(f"{rack}-h9", "b1", rack, f"{rack}-h9", labels={"pool": "tas"}, cpu="4", pods="9")
    )
    [replaced] = run_cycle(state, 1).replaced
    assert replaced.failed_node == host
    assert f"{rack}-h9" in placed(state) and state.failed_nodes.unhealthy == {}


def test_a_second_failed_node_while_waiting_for_a_replacement_evicts() -> None:
    state, host = admitted_a(pods=6, nodes_per_rack=2)
    state.failed_nodes.gates = NodeFailureGates(fail_fast=False)
    state.remove_node(host)
    run_cycle(state, 0)
    [other] = [h for h in placed(state) if h != host]
    state.remove_node(other)
    [evict] = run_cycle(state, 1).evicted
    assert evict.reason == "NodeFailures"
    assert evict.message == (
        "Workload eviction triggered due to multiple TAS assigned node failures, including: "
        f"{host}, {other}"
    )


def test_without_failed_node_replacement_nothing_happens() -> None:
    state, host = admitted_a()
    state.failed_nodes.gates = NodeFailureGates.from_gates({"TASFailedNodeReplacement": False})
    state.remove_node(host)
    result = run_cycle(state, 0)
    assert result.replaced == () and result.evicted == ()
    assert state.cache.records[A].holds_quota


def test_the_gates_default_as_kueues_and_need_failed_node_replacement() -> None:
    assert NodeFailureGates.from_gates({}) == NodeFailureGates(True, True, True, False)
    assert NodeFailureGates.from_gates(
        {"TASFailedNodeReplacement": False, "TASFailedNodeReplacementFailFast": True}
    ) == NodeFailureGates(False, False, False, False)
    assert NodeFailureGates.from_gates(
        {"TASReplaceNodeDueToNotReadyOverFixedTime": True, "TASReplaceNodeOnPodTermination": False}
    ) == NodeFailureGates(True, True, False, True)


def test_an_implied_pod_set_of_a_tas_only_queue_is_replaced_anywhere() -> None:
    """No topology asked for, in a queue whose flavors all have one: placed as
    unconstrained, so its replacement is bound to no domain."""
    state = add(racks(), wl("plain", pod_sets=[PodSet("main", 2, {"cpu": m("1")})]))
    settle(state)
    [host] = placed(state, "ns/plain")
    state.remove_node(host)
    [replaced] = run_cycle(state, 0).replaced
    assert replaced.workload_key == "ns/plain"
    after = placed(state, "ns/plain")
    assert host not in after and sum(after.values()) == 2

