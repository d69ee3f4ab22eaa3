"""A failed node under an admitted TAS Workload, as Kueue handles it: the pods on it get a
replacement in the domain the request binds them to (the admission rewritten, the other
pods kept), or the Workload is evicted (`NodeFailures`) and requeued; when a not-ready node
counts as failed, by Kueue's feature gates."""

from __future__ import annotations

from dataclasses import replace

from api.constants import CheckState
from controller.core.decisions import UnhealthyNodes
from controller.core.model.admission_checks import CheckStatus
from controller.core.model.flavors import ResourceFlavor, Taint
from controller.core.model.topology import Topology, TopologyRequest
from controller.core.model.workloads import PodSet, Toleration, Workload, WorkloadKey
from controller.core.scheduler.cycle import run_cycle
from controller.core.scheduler.node_failures import pinned_pods_termination
from controller.core.state import ClusterState
from controller.core.tas.encoding import decode
from controller.core.tas.node_failure import NODE_FAILURE_DELAY, NodeFailureGates
from tests.unit.core.builders import add, cluster, cq, m, settle, wl
from tests.unit.core.tas.builders import HOST, RACK, THREE_LEVELS, TWO_LEVELS, node

TAS = ResourceFlavor("tas", {"pool": "tas"}, topology_name="default")
A = WorkloadKey("ns/a")


def racks(
    nodes_per_rack: int = 3, levels: tuple[str, ...] = THREE_LEVELS, prefix: str = ""
) -> ClusterState:
    """Two racks of `nodes_per_rack` nodes of 4 cpus, hostnames r1-h1 …, named `prefix` and
    the hostname; `levels` without the hostname: no hostname label."""
    state = cluster(cq("cq", {"tas": {"cpu": "100"}}), flavors=[TAS])
    state.set_topology(Topology("default", levels))
    for r in ("r1", "r2"):
        for h in range(1, nodes_per_rack + 1):
            host = f"{r}-h{h}" if HOST in levels else None
            name = prefix + f"{r}-h{h}"
            state.set_node(node(name, "b1", r, host, labels={"pool": "tas"}, cpu="4", pods="110"))
    state.mark_nodes_listed()  # as the node informer says after its list
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


def seen_admitted(state: ClusterState, key: str = A) -> None:
    """The watch brings the Workload back Admitted (quota reserved, no admission check
    left): only then is a failed node under it handled (Kueue's `IsAdmitted`)."""
    written = state.cache.records[WorkloadKey(key)].workload
    state.upsert_workload(replace(written, admitted=True))


def admitted_a(pods: int = 6, nodes_per_rack: int = 3) -> tuple[ClusterState, str]:
    """Workload a admitted in one rack over two nodes; its node with the fewest pods."""
    state = add(racks(nodes_per_rack), rack_wl("a", pods))
    settle(state)
    seen_admitted(state)
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
    assert NodeFailureGates.from_gates({}) == NodeFailureGates(True, True, True, False, True)
    assert NodeFailureGates.from_gates(
        {"TASFailedNodeReplacement": False, "TASFailedNodeReplacementFailFast": True}
    ) == NodeFailureGates(False, False, False, False, False)
    assert NodeFailureGates.from_gates(
        {"TASReplaceNodeDueToNotReadyOverFixedTime": True, "TASReplaceNodeOnPodTermination": False}
    ) == NodeFailureGates(True, True, False, True, True)


def test_an_implied_pod_set_of_a_tas_only_queue_is_replaced_anywhere() -> None:
    """No topology asked for, in a queue whose flavors all have one: placed as
    unconstrained, so its replacement is bound to no domain."""
    state = add(racks(), wl("plain", pod_sets=[PodSet("main", 2, {"cpu": m("1")})]))
    settle(state)
    seen_admitted(state, "ns/plain")
    [host] = placed(state, "ns/plain")
    state.remove_node(host)
    [replaced] = run_cycle(state, 0).replaced
    assert replaced.workload_key == "ns/plain"
    after = placed(state, "ns/plain")
    assert host not in after and sum(after.values()) == 2


# -- status.unhealthyNodes: written while waiting, cleared, read back after a restart -------


def waiting_a() -> tuple[ClusterState, str]:
    """Workload a waiting for a replacement of its deleted node (fail-fast off, its rack
    full)."""
    state, host = admitted_a(pods=6, nodes_per_rack=2)
    state.failed_nodes.gates = NodeFailureGates(fail_fast=False)
    state.remove_node(host)
    result = run_cycle(state, 0)
    assert result.replaced == () and result.evicted == ()
    assert result.unhealthy_nodes == (UnhealthyNodes(A, (host,)),)
    return state, host


def test_waiting_for_a_replacement_is_written_once_and_the_replacement_clears_it() -> None:
    """Kueue's node controller writes `[{name: NODE}]`; its scheduler's admission with the
    replacement clears it (here: the replacement's own write, ReplaceNode)."""
    state, host = waiting_a()
    assert run_cycle(state, 1).unhealthy_nodes == ()  # written once
    rack = rack_of(host)
    spare = f"{rack}-h9"
    state.set_node(node(spare, "b1", rack, spare, labels={"pool": "tas"}, cpu="4", pods="9"))
    result = run_cycle(state, 2)
    assert [r.failed_node for r in result.replaced] == [host]
    assert result.unhealthy_nodes == ()  # the replacement's write clears the field


def test_the_waiting_state_is_read_back_after_a_restart() -> None:
    """A new engine (a restart) sees the admitted Workload with `status.unhealthyNodes`
    and no event of the deleted node: it waits for the replacement again, and replaces
    the node once its rack has room; with fail-fast it is evicted."""
    state, host = waiting_a()
    written = replace(state.cache.records[A].workload, unhealthy_nodes=(host,))
    for fail_fast in (False, True):
        restarted = racks(nodes_per_rack=2)
        restarted.failed_nodes.gates = NodeFailureGates(fail_fast=fail_fast)
        restarted.tas.remove_node(host)  # gone before the restart: no event for it
        restarted.upsert_workload(written)
        assert restarted.failed_nodes.unhealthy == {A: host}
        result = run_cycle(restarted, 0)
        if fail_fast:
            [evict] = result.evicted
            assert evict.message.endswith(f"unhealthy node(s): {host}")
            continue
        assert result.evicted == () and result.unhealthy_nodes == ()  # already written
        rack = rack_of(host)
        spare = f"{rack}-h9"
        restarted.set_node(
            node(spare, "b1", rack, spare, labels={"pool": "tas"}, cpu="4", pods="9")
        )
        [replaced] = run_cycle(restarted, 1).replaced
        assert replaced.failed_node == host and spare in placed(restarted)


def test_an_admitted_workload_seen_before_its_flavor_is_counted_on_the_nodes() -> None:
    """A new leader may get a Workload's event before it has listed the flavors: once the
    flavor comes, the Workload's pods count on its nodes (else a replacement, or another
    Workload, would be placed onto them)."""
    state, host = admitted_a(pods=6, nodes_per_rack=2)
    admitted = state.cache.records[A].workload
    restarted = cluster(cq("cq", {"tas": {"cpu": "100"}}), flavors=[])
    restarted.upsert_workload(admitted)
    assert restarted.tas.flavor_usage == {}
    restarted.set_flavor(TAS)
    assert restarted.tas.flavor_usage == state.tas.flavor_usage
    restarted.remove_flavor("tas")
    assert not any(restarted.tas.flavor_usage.get("tas", {}).get((host,), {}).values())


def test_a_status_naming_a_node_the_assignment_does_not_hold_is_not_read_back() -> None:
    state, host = admitted_a()
    stale = replace(state.cache.records[A].workload, unhealthy_nodes=("elsewhere",))
    state.upsert_workload(stale)
    assert state.failed_nodes.unhealthy == {}
    result = run_cycle(state, 0)
    assert result.evicted == () and result.replaced == () and host in placed(state)


def test_a_node_healthy_again_takes_the_waiting_workload_off_unhealthy_nodes() -> None:
    """Kueue's handleHealthyNode: the node Ready again (or, read back from a status, found
    Ready) removes it from `status.unhealthyNodes`; the Workload keeps its assignment."""
    state, host = admitted_a(pods=6, nodes_per_rack=2)
    state.failed_nodes.gates = NodeFailureGates(fail_fast=False)
    ready = state.tas.nodes[host]
    not_ready(state, host)
    assert run_cycle(state, 0).unhealthy_nodes == (UnhealthyNodes(A, (host,)),)
    state.set_node(ready)
    result = run_cycle(state, 1)
    assert result.unhealthy_nodes == (UnhealthyNodes(A, ()),) and result.evicted == ()
    assert host in placed(state) and state.failed_nodes.unhealthy == {}
    # Read back from a status after a restart while the node is Ready: cleared as well.
    state.upsert_workload(replace(state.cache.records[A].workload, unhealthy_nodes=(host,)))
    assert run_cycle(state, 2).unhealthy_nodes == (UnhealthyNodes(A, ()),)


# -- TASReplaceNodeOnNodeTaints -------------------------------------------------------------

BROKEN = Taint("example.com/broken", "", "NoExecute")


def taint(state: ClusterState, host: str, *taints: Taint) -> None:
    state.set_node(replace(state.tas.nodes[host], taints=taints))


def test_an_untolerated_taint_fails_the_node_once_the_pods_there_are_gone() -> None:
    state, host = admitted_a()
    state.set_tas_pod("ns/a-0", host, A)
    taint(state, host, BROKEN)
    assert run_cycle(state, 0).replaced == ()  # its pod still runs there
    state.remove_tas_pod("ns/a-0")  # evicted by the NoExecute taint
    [replaced] = run_cycle(state, 1).replaced
    assert replaced.failed_node == host and host not in placed(state)


def test_a_taint_the_flavor_tolerates_for_ever_or_the_gate_off_changes_nothing() -> None:
    state, host = admitted_a()
    tolerant = replace(TAS, tolerations=(Toleration("example.com/broken", "Exists"),))
    state.set_flavor(tolerant)
    taint(state, host, BROKEN)
    assert run_cycle(state, 0).replaced == () and host in placed(state)
    state.set_flavor(TAS)
    state.failed_nodes.gates = NodeFailureGates(node_taints=False)
    taint(state, host, BROKEN, Taint("example.com/other", "", "NoSchedule"))
    result = run_cycle(state, 1)
    assert result.replaced == () and result.evicted == () and host in placed(state)


def test_a_timed_toleration_waits_for_the_pods_even_without_pod_termination() -> None:
    """tolerationSeconds: the pods stay until their time runs out; the node fails once
    none is left (Kueue's checkPodsOnNode), TASReplaceNodeOnPodTermination or not. A
    toleration an admission check adds (podSetUpdates) counts."""
    state, host = admitted_a()
    state.failed_nodes.gates = NodeFailureGates(on_pod_termination=False)
    timed = Toleration("example.com/broken", "Exists", "", "NoExecute", seconds=60)
    record = state.cache.records[A]
    check = CheckStatus("prov", CheckState.READY, pod_set_tolerations=(("main", (timed,)),))
    state.upsert_workload(replace(record.workload, admission_checks=(check,)))
    state.set_tas_pod("ns/a-0", host, A)
    taint(state, host, BROKEN)
    assert run_cycle(state, 0).replaced == ()
    state.remove_tas_pod("ns/a-0")
    [replaced] = run_cycle(state, 100).replaced
    assert replaced.failed_node == host


def test_waiting_for_a_tainted_node_ends_when_the_taint_goes() -> None:
    state, host = admitted_a(pods=6, nodes_per_rack=2)
    state.failed_nodes.gates = NodeFailureGates(fail_fast=False)
    taint(state, host, BROKEN)
    assert run_cycle(state, 0).unhealthy_nodes == (UnhealthyNodes(A, (host,)),)
    taint(state, host)
    assert run_cycle(state, 1).unhealthy_nodes == (UnhealthyNodes(A, ()),)
    assert host in placed(state)


# -- only Admitted Workloads; nodes deleted while no controller watched ---------------------


def test_a_workload_holding_quota_with_a_check_pending_is_left_alone_until_admitted() -> None:
    """Kueue's node controller finds the Workloads on a node among the Admitted ones
    (`TASAssignedNodeNames`: `IsAdmittedByTAS`), its scheduler replaces only Admitted ones
    (`HasTopologyAssignmentWithUnhealthyNode`): quota reserved with a check still Pending
    is not enough. Once Admitted, the node that failed meanwhile is judged for it."""
    state = add(racks(), rack_wl("a", 6))
    settle(state)
    pending = CheckStatus("prov", CheckState.PENDING)
    written = state.cache.records[A].workload
    state.upsert_workload(replace(written, admission_checks=(pending,)))
    hosts = placed(state)
    deleted, down = sorted(hosts)
    state.remove_node(deleted)
    not_ready(state, down)  # no pod of a runs there (its pods are still gated)
    for now in (0, NODE_FAILURE_DELAY + 1):
        result = run_cycle(state, now)
        assert (result.replaced, result.evicted, result.unhealthy_nodes) == ((), (), ())
    assert placed(state) == hosts and state.failed_nodes.unhealthy == {}
    ready = CheckStatus("prov", CheckState.READY)
    state.upsert_workload(replace(written, admission_checks=(ready,), admitted=True))
    result = run_cycle(state, NODE_FAILURE_DELAY + 2)
    # Two failed nodes under one Workload: the second evicts it (Kueue's node controller).
    [evict] = result.evicted
    assert (evict.workload_key, evict.reason) == (A, "NodeFailures")
    assert deleted in evict.message and down in evict.message


def restarted_without(host: str, written: Workload, listed_first: bool) -> ClusterState:
    """A new engine after a restart during which `host` was deleted: no event of it ever
    comes; the node informer's list completes before or after the Workload is read."""
    restarted = racks(nodes_per_rack=2)
    restarted.failed_nodes = type(restarted.failed_nodes)()  # nothing listed yet
    restarted.failed_nodes.gates = NodeFailureGates(fail_fast=False)
    restarted.tas.remove_node(host)  # never seen
    if listed_first:
        restarted.mark_nodes_listed()
    restarted.upsert_workload(written)
    return restarted


def test_a_node_deleted_while_no_controller_watched_counts_as_failed_once_nodes_are_listed() -> (
    None
):
    """After a restart, an Admitted Workload whose assignment names a node that no longer
    exists and whose status lists no unhealthy node: the node counts as deleted once the
    node view is complete (Kueue queues the node from the pods pinned to or bound there
    and finds it NotFound), never from a view still being listed."""
    state, host = admitted_a(pods=6, nodes_per_rack=2)
    written = state.cache.records[A].workload
    assert written.admitted and written.unhealthy_nodes == ()
    restarted = restarted_without(host, written, listed_first=False)
    result = run_cycle(restarted, 0)  # the node list has not completed: no verdict
    assert (result.replaced, result.evicted, result.unhealthy_nodes) == ((), (), ())
    restarted.mark_nodes_listed()
    result = run_cycle(restarted, 1)
    assert result.unhealthy_nodes == (UnhealthyNodes(A, (host,)),)  # its rack is full
    assert restarted.failed_nodes.unhealthy == {A: host}
    assert run_cycle(restarted, 2).unhealthy_nodes == ()  # written once, as before
    again = restarted_without(host, written, listed_first=True)
    result = run_cycle(again, 0)
    assert result.unhealthy_nodes == (UnhealthyNodes(A, (host,)),)


def test_a_restart_with_every_assigned_node_present_fails_nothing() -> None:
    state, host = admitted_a()
    written = state.cache.records[A].workload
    restarted = racks()
    restarted.upsert_workload(written)
    result = run_cycle(restarted, 0)
    assert (result.replaced, result.evicted, result.unhealthy_nodes) == ((), (), ())
    assert host in placed(restarted)
    assert restarted.failed_nodes.suspects == set()


def test_a_waiting_workload_no_longer_admitted_is_replaced_only_once_admitted_again() -> None:
    """Kueue's scheduler replaces only an Admitted Workload
    (`HasTopologyAssignmentWithUnhealthyNode`); the node stays in `status.unhealthyNodes`."""
    state, host = waiting_a()
    written = state.cache.records[A].workload
    state.upsert_workload(replace(written, admitted=False))
    rack = rack_of(host)
    spare = f"{rack}-h9"
    state.set_node(node(spare, "b1", rack, spare, labels={"pool": "tas"}, cpu="4", pods="9"))
    result = run_cycle(state, 1)
    assert (result.replaced, result.evicted, result.unhealthy_nodes) == ((), (), ())
    assert state.failed_nodes.unhealthy == {A: host}
    state.upsert_workload(replace(written, admitted=True))
    [replaced] = run_cycle(state, 2).replaced
    assert replaced.failed_node == host and spare in placed(state)


def test_nodes_named_apart_from_their_hostname_label_are_not_taken_for_deleted() -> None:
    """An assignment writes the `kubernetes.io/hostname` value, which a kubelet's
    `--hostname-override` (or Kueue's perf runner, `node-<i>` in every rack) sets apart from
    the node's name: after a restart those nodes are present, none fails, nothing moves."""
    state = add(racks(prefix="node-"), rack_wl("a", 6))
    settle(state)
    seen_admitted(state)
    hosts = placed(state)
    assert all(not h.startswith("node-") for h in hosts)
    restarted = racks(prefix="node-")
    restarted.upsert_workload(state.cache.records[A].workload)
    for now in (0, 1):
        result = run_cycle(restarted, now)
        assert (result.replaced, result.evicted, result.unhealthy_nodes) == ((), (), ())
    assert restarted.failed_nodes.suspects == set() and placed(restarted) == hosts


def test_an_assignment_whose_lowest_level_is_a_rack_names_no_node() -> None:
    """Without the hostname level an assignment names racks, not nodes (Kueue's
    `TASAssignedNodeNames` reads only hostname-level assignments): a restart with every node
    listed fails nothing."""
    state = add(racks(levels=TWO_LEVELS), rack_wl("a", 6))
    settle(state)
    seen_admitted(state)
    racks_placed = placed(state)
    assert set(racks_placed) <= {"r1", "r2"}
    restarted = racks(levels=TWO_LEVELS)
    restarted.upsert_workload(state.cache.records[A].workload)
    result = run_cycle(restarted, 0)
    assert (result.replaced, result.evicted, result.unhealthy_nodes) == ((), (), ())
    assert restarted.failed_nodes.suspects == set() and placed(restarted) == racks_placed


# -- released pods pinned to a failing node (Kueue's getPodsToTerminate) --------------------


def test_pods_pinned_to_a_not_ready_node_fail_while_the_workloads_pods_still_run_there() -> None:
    """The node does not count as failed while a pod of the Workload runs there, but the
    pods released to it and still pending are failed (TASReplaceNodeOnPodTermination)."""
    state, host = admitted_a()
    state.set_tas_pod("ns/a-0", host, A)
    assert pinned_pods_termination(state, A, host) is None  # Ready, untainted
    not_ready(state, host)
    assert pinned_pods_termination(state, A, host) == f"its node {host} is not Ready"
    assert run_cycle(state, 1000).replaced == ()  # not failed: a pod still runs there
    state.failed_nodes.gates = NodeFailureGates(on_pod_termination=False)
    assert pinned_pods_termination(state, A, host) is None
    state.failed_nodes.gates = NodeFailureGates(replacement=False)
    assert pinned_pods_termination(state, A, host) is None


def test_pods_pinned_to_a_tainted_node_fail_by_the_workloads_tolerations_there() -> None:
    """The flavor's tolerations and those an admission check adds count, as for the
    node's verdict."""
    state, host = admitted_a()
    taint(state, host, BROKEN)
    untolerated = f"its node {host} has a taint the pod does not tolerate"
    assert pinned_pods_termination(state, A, host) == untolerated
    state.set_flavor(replace(TAS, tolerations=(Toleration("example.com/broken", "Exists"),)))
    assert pinned_pods_termination(state, A, host) is None
    state.set_flavor(TAS)
    timed = Toleration("example.com/broken", "Exists", "", "NoExecute", seconds=60)
    check = CheckStatus("prov", CheckState.READY, pod_set_tolerations=(("main", (timed,)),))
    state.upsert_workload(replace(state.cache.records[A].workload, admission_checks=(check,)))
    assert pinned_pods_termination(state, A, host) == (
        f"its node {host} has a taint the pod tolerates only for a while"
    )


def test_pinned_pods_fail_only_for_an_admitted_workload_on_its_assigned_nodes() -> None:
    """Kueue's node controller looks at the Admitted Workloads whose assignment names the
    node; a pod pinned to another node is the stray check's."""
    state, host = admitted_a()
    other = next(n for n in state.tas.nodes if n not in placed(state))
    not_ready(state, host)
    not_ready(state, other)
    assert pinned_pods_termination(state, A, other) is None
    assert pinned_pods_termination(state, WorkloadKey("ns/unknown"), host) is None
    pending = CheckStatus("prov", CheckState.PENDING)
    written = state.cache.records[A].workload
    state.upsert_workload(replace(written, admission_checks=(pending,), admitted=False))
    assert pinned_pods_termination(state, A, host) is None
