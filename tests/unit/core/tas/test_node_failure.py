"""The pure parts of failed-node handling: when a node counts as failed (`verdict`, by
Kueue's gates), what the engine follows (`FailedNodes`), and the replacement
(`find_replacement`): the failed node's pods placed again where the request binds them,
the rest kept — checked case by case and, with hypothesis, on random racks."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.model.flavors import Taint
from controller.core.model.topology import Node, TopologyRequest
from controller.core.model.workloads import Toleration, WorkloadKey
from controller.core.tas.assignment import Assignment, PodSetRequest, find_assignment, usage_of
from controller.core.tas.node_failure import (
    FAILED,
    HEALTHY,
    NODE_FAILURE_DELAY,
    WAIT,
    FailedNodes,
    NodeFailureGates,
    find_replacement,
    verdict,
)
from controller.core.tas.snapshot import ONE_POD, TopologySnapshot, count_in
from tests.unit.core.tas.builders import RACK, THREE_LEVELS, milli, node

DEFAULT = NodeFailureGates()
CPU = {"cpu": 1000}


def test_the_verdict_of_each_gate() -> None:
    ready = node("n", "b", "r", "n", cpu="1")
    down = replace(ready, ready=False, not_ready_since=100.0)
    assert verdict(None, 0, True, DEFAULT) == FAILED  # deleted
    assert verdict(ready, 0, False, DEFAULT) == HEALTHY
    assert verdict(replace(down, not_ready_since=None), 0, True, DEFAULT) == FAILED
    # TASReplaceNodeOnPodTermination: failed once no pod of the Workload runs there.
    assert verdict(down, 1000, True, DEFAULT) == HEALTHY
    assert verdict(down, 100, False, DEFAULT) == FAILED
    timed = NodeFailureGates(on_pod_termination=False)
    assert verdict(down, 129, False, timed) == 100 + NODE_FAILURE_DELAY
    assert verdict(down, 130, True, timed) == FAILED
    fixed = NodeFailureGates(not_ready_fixed_time=True)
    assert verdict(down, 129, True, fixed) == 130
    assert verdict(down, 130, True, fixed) == FAILED
    assert verdict(down, 1, False, fixed) == FAILED


def test_the_verdict_on_a_ready_tainted_node() -> None:
    """TASReplaceNodeOnNodeTaints (on): a NoSchedule/NoExecute taint a pod set does not
    tolerate fails the node once no pod of the Workload runs there (at once without
    TASReplaceNodeOnPodTermination); one tolerated only for tolerationSeconds, once no pod
    runs there, whatever the other gate; tolerated for ever, or the gate off: healthy."""
    broken = Taint("example.com/broken", "", "NoExecute")
    tainted = node("n", "b", "r", "n", cpu="1", taints=(broken,))
    timed = Toleration("example.com/broken", "Exists", "", "NoExecute", seconds=60)
    forever = Toleration("example.com/broken", "Exists")
    assert verdict(tainted, 0, True, DEFAULT, [()]) == HEALTHY  # its pods still run
    assert verdict(tainted, 0, False, DEFAULT, [()]) == FAILED
    no_termination = NodeFailureGates(on_pod_termination=False)
    assert verdict(tainted, 0, True, no_termination, [()]) == FAILED
    assert verdict(tainted, 0, True, no_termination, [(timed,)]) == HEALTHY
    assert verdict(tainted, 0, False, no_termination, [(timed,)]) == FAILED
    assert verdict(tainted, 0, False, DEFAULT, [(forever,)]) == HEALTHY
    assert verdict(tainted, 0, False, NodeFailureGates(node_taints=False), [()]) == HEALTHY
    soft = replace(tainted, taints=(Taint("example.com/broken", "", "PreferNoSchedule"),))
    assert verdict(soft, 0, False, DEFAULT, [()]) == HEALTHY


def test_a_tainted_node_stays_a_suspect_and_a_waiting_workload_is_remembered() -> None:
    """A Ready node with a taint that counts is looked at (per Workload, by tolerations);
    untainted, it is not, and the Workloads waiting for its replacement are taken off
    `status.unhealthyNodes` (`written`). What a status lists is read back only for a node
    the assignment names."""
    failed = FailedNodes()
    a, b = WorkloadKey("ns/a"), WorkloadKey("ns/b")
    tainted = node("n1", cpu="1", taints=(Taint("k", "", "NoSchedule"),))
    failed.node_changed(tainted, "n1")
    assert failed.suspects == {"n1"}
    failed.wait_for_replacement(a, "n1")
    assert failed.written == {a: ("n1",)}
    failed.written.clear()
    failed.node_changed(replace(tainted, taints=()), "n1")
    assert failed.suspects == set() and failed.unhealthy == {} and failed.written == {a: ()}
    failed.gates = NodeFailureGates(node_taints=False)
    failed.node_changed(tainted, "n1")
    assert failed.suspects == set()
    failed.recover(b, ("gone", "n2"), {"n2", "n3"})
    assert failed.unhealthy == {b: "n2"}
    failed.recover(a, ("n1",), {"n1"})  # its clearing not written yet: not read back
    failed.recover(WorkloadKey("ns/c"), ("n9",), {"n1"})
    assert failed.unhealthy == {b: "n2"}


def test_failed_nodes_follow_running_pods_and_readiness() -> None:
    failed = FailedNodes()
    a = WorkloadKey("ns/a")
    failed.set_pod("ns/p1", "n1", a)
    failed.set_pod("ns/p2", "n1", a)
    failed.set_pod("ns/p2", "n1", a)  # the same pod again
    failed.node_changed(replace(node("n1", cpu="1"), ready=False), "n1")
    failed.look_at["n1"] = WAIT
    assert failed.progressing("n1", a) and failed.due(0) == []
    failed.remove_pod("ns/p1")
    assert failed.progressing("n1", a)
    failed.remove_pod("ns/p2")
    assert not failed.progressing("n1", a) and failed.due(0) == ["n1"]  # look now
    failed.unhealthy[a] = "n1"
    failed.node_changed(node("n1", cpu="1"), "n1")  # ready again
    assert failed.suspects == set() and failed.unhealthy == {}
    assert failed.next_time() is None


def rack_nodes(per_rack: list[list[int]]) -> list[Node]:
    """Racks r0, r1, … of nodes r<i>-h<j> with the given cpus, in block b."""
    return [
        node(f"r{i}-h{j}", "b", f"r{i}", f"r{i}-h{j}", cpu=str(cpu), pods="110")
        for i, cpus in enumerate(per_rack)
        for j, cpu in enumerate(cpus)
    ]


def view(nodes: list[Node], held: Assignment | None = None, skip: str = "") -> TopologySnapshot:
    """The flavor's view: `skip` gone, the Workload's pods of `held` counted."""
    usage = usage_of(held, CPU) if held is not None else {}
    return TopologySnapshot(
        "t", THREE_LEVELS, [n for n in nodes if n.name != skip], tas_usage=usage
    )


def required(count: int) -> PodSetRequest:
    return PodSetRequest("main", count, CPU, TopologyRequest(required=RACK))


def test_the_failed_nodes_pods_go_to_the_rack_the_others_are_in() -> None:
    nodes = rack_nodes([[2, 2, 2], [8]])
    current = Assignment(("kubernetes.io/hostname",), ((("r0-h0",), 2), (("r0-h1",), 2)))
    found = find_replacement(view(nodes, current, "r0-h1"), required(4), current, "r0-h1")
    assert found == Assignment(("kubernetes.io/hostname",), ((("r0-h0",), 2), (("r0-h2",), 2)))


def test_no_room_in_the_rack_names_the_reason() -> None:
    nodes = rack_nodes([[2, 2, 1], [8]])
    current = Assignment(("kubernetes.io/hostname",), ((("r0-h0",), 2), (("r0-h1",), 2)))
    found = find_replacement(view(nodes, current, "r0-h1"), required(4), current, "r0-h1")
    assert isinstance(found, str) and "allows to fit only 1 out of 2 pod(s)" in found


def test_a_stale_domain_in_the_kept_pods_refuses_the_replacement() -> None:
    nodes = rack_nodes([[2, 2, 2]])
    current = Assignment(("kubernetes.io/hostname",), ((("r0-h0",), 2), (("r0-h1",), 2)))
    gone = [n for n in nodes if n.name != "r0-h0"]
    found = find_replacement(view(gone, current, "r0-h1"), required(4), current, "r0-h1")
    assert found == (
        "Cannot replace the node, because the existing topologyAssignment is invalid, as it "
        "contains the stale domain r0-h0"
    )


def test_a_broken_slice_is_mended_inside_its_domain() -> None:
    """Slices of 2 pods per rack: the failed node held one pod of a slice, which must come
    back in that slice's rack, even though the other rack has more room."""
    nodes = rack_nodes([[1, 1, 1], [8]])
    request = PodSetRequest("main", 2, CPU, TopologyRequest(slice_level=RACK, slice_size=2))
    current = Assignment(("kubernetes.io/hostname",), ((("r0-h0",), 1), (("r0-h1",), 1)))
    found = find_replacement(view(nodes, current, "r0-h1"), request, current, "r0-h1")
    assert found == Assignment(("kubernetes.io/hostname",), ((("r0-h0",), 1), (("r0-h2",), 1)))


def test_a_preferred_request_may_move_anywhere() -> None:
    nodes = rack_nodes([[2, 2], [8]])
    request = PodSetRequest("main", 4, CPU, TopologyRequest(preferred=RACK))
    current = Assignment(("kubernetes.io/hostname",), ((("r0-h0",), 2), (("r0-h1",), 2)))
    found = find_replacement(view(nodes, current, "r0-h1"), request, current, "r0-h1")
    assert found == Assignment(("kubernetes.io/hostname",), ((("r0-h0",), 2), (("r1-h0",), 2)))


@st.composite
def scenes(draw: st.DrawFn) -> tuple[list[list[int]], int, int]:
    per_rack = draw(
        st.lists(st.lists(st.integers(0, 4), min_size=1, max_size=4), min_size=1, max_size=3)
    )
    count = draw(st.integers(1, 10))
    return per_rack, count, draw(st.integers(0, 100))


@settings(max_examples=300, deadline=None)
@given(scenes())
def test_a_replacement_keeps_the_pods_the_rack_and_the_capacity(
    scene: tuple[list[list[int]], int, int],
) -> None:
    """Whatever the racks: a Workload placed in one rack, one of its nodes failed. The
    replacement, when found, has every pod, none on the failed node, the kept pods where
    they were, all in the one rack, and no node past its capacity; when none is found
    while other pods stay, the rack's other nodes truly lack room for the failed node's."""
    per_rack, count, pick = scene
    nodes = rack_nodes(per_rack)
    placed = find_assignment(view(nodes), required(count))
    if isinstance(placed, str):
        return
    current = placed["main"]
    failed = current.domains[pick % len(current.domains)][0][-1]
    affected = dict((k[-1], c) for k, c in current.domains)[failed]
    rack = failed.split("-")[0]
    found = find_replacement(view(nodes, current, failed), required(count), current, failed)
    if isinstance(found, str):
        others = view(nodes, current, failed)
        room = sum(
            count_in({**CPU, "pods": ONE_POD}, leaf.free)
            for leaf in others.leaves.values()
            if leaf.id[1] == rack
        )
        assert room < affected or affected == count, found
        return
    hosts = dict((k[-1], c) for k, c in found.domains)
    assert found.pod_count == count and failed not in hosts
    new_racks = {h.split("-")[0] for h in hosts}
    # All in one rack: the failed node's when other pods stay there, else any (Kueue:
    # with no pod left, there is no domain to comply with).
    assert new_racks == {rack} if affected < count else len(new_racks) == 1
    for key, c in current.domains:
        if key[-1] != failed:
            assert hosts[key[-1]] >= c
    capacity = {n.name: n.allocatable["cpu"] for n in nodes}
    for host, c in hosts.items():
        assert c * CPU["cpu"] <= capacity[host]
    assert milli({"cpu": "1"}) == CPU
