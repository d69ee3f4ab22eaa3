"""Topology-aware scheduling in the cycle: a TAS flavor's pod sets get domains in the
admission, quota that fits where no domain does leaves the Workload pending with the level
and the largest free domain, TAS usage is held until released, the flavor rules of Kueue's
`checkPodSetAndFlavorMatchForTAS`, and nothing is lost on restart."""

from __future__ import annotations

from dataclasses import replace

from api.constants import WithinClusterQueuePolicy
from api.workload_status import Admission, PodSetShape, admission_from_api, admission_to_api
from controller.core.model.clusterqueues import PreemptionPolicy
from controller.core.model.flavors import ResourceFlavor
from controller.core.model.topology import Topology, TopologyRequest
from controller.core.model.workloads import PodSet, Workload
from controller.core.scheduler.cycle import run_cycle
from controller.core.state import ClusterState
from controller.core.tas.encoding import decode
from tests.unit.core.builders import add, cluster, cq, m, settle, wl
from tests.unit.core.tas.builders import BLOCK, HOST, RACK, THREE_LEVELS, node

TAS = ResourceFlavor("tas", {"pool": "tas"}, topology_name="default")


def tas_cluster(
    quota: str = "100", tas_only: bool = True, within: str = "LowerPriority"
) -> ClusterState:
    flavors: dict[str, dict[str, str]] = {"tas": {"cpu": quota}}
    if not tas_only:
        flavors = {"plain": {"cpu": quota}, **flavors}
    policy = PreemptionPolicy(within_cluster_queue=WithinClusterQueuePolicy(within))
    state = cluster(cq("cq", flavors, preemption=policy), flavors=[TAS, "plain"])
    state.set_topology(Topology("default", THREE_LEVELS))
    for b in ("b1", "b2"):
        for r in ("r1", "r2"):
            for h in ("h1", "h2"):
                name = f"{b}-{r}-{h}"
                state.set_node(node(name, b, r, name, labels={"pool": "tas"}, cpu="4", pods="110"))
    return state


def tas_wl(name: str, count: int, cpu: str = "1", **topology: object) -> Workload:
    request = TopologyRequest(**topology)  # type: ignore[arg-type]
    return wl(name, pod_sets=[PodSet("main", count, {"cpu": m(cpu)}, topology=request)])


def domains(state: ClusterState, key: str) -> dict[str, int]:
    admission = state.cache.records[key].workload.admission  # type: ignore[union-attr]
    assert admission is not None
    assignment = admission.pod_set_assignments[0].topology_assignment
    assert assignment is not None
    return {values[-1]: n for values, n in decode(assignment).domains}


def test_a_required_rack_admits_into_one_rack_with_the_v1beta2_assignment() -> None:
    state = add(tas_cluster(), tas_wl("a", 6, required=RACK))
    [admit] = run_cycle(state, 0).admitted
    topology = admit.pod_sets[0].topology_assignment
    assert topology is not None and topology["levels"] == [HOST]
    placed = domains(state, "ns/a")
    assert sum(placed.values()) == 6
    assert len({host.rsplit("-", 1)[0] for host in placed}) == 1  # one rack


def test_quota_fits_but_no_domain_stays_pending_naming_level_and_largest_domain() -> None:
    state = add(tas_cluster(), tas_wl("big", 9, required=RACK))
    result = run_cycle(state, 0)
    assert result.admitted == ()
    [pending] = result.inadmissible
    assert pending.reason == (
        'pod set main: topology "default" allows to fit only 8 out of 9 pod(s); the largest '
        "free domain at level cloud.com/topology-rack is b1/r1, with room for 8 pod(s)"
    )
    assert pending.condition_reason == "Pending"


def test_admitted_tas_usage_is_held_then_released() -> None:
    state = add(tas_cluster(), tas_wl("a", 16, required=BLOCK), tas_wl("b", 16, required=BLOCK))
    settle(state)
    assert set(state.cache.admitted) == {"ns/a", "ns/b"}
    blocks = {h.split("-")[0] for h in domains(state, "ns/a")}
    assert blocks.isdisjoint({h.split("-")[0] for h in domains(state, "ns/b")})
    add(state, tas_wl("c", 1, required=HOST))
    assert run_cycle(state, 0).admitted == ()  # every node is full
    state.release(state.cache.records["ns/a"].key, requeue=False)
    [admit] = run_cycle(state, 0).admitted
    assert admit.workload_key == "ns/c"


def test_node_changes_retry_a_parked_tas_workload() -> None:
    state = add(tas_cluster(), tas_wl("big", 9, required=RACK))
    settle(state)
    assert "ns/big" not in state.cache.admitted
    state.set_node(
        node("b1-r1-h3", "b1", "r1", "b1-r1-h3", labels={"pool": "tas"}, cpu="4", pods="9")
    )
    [admit] = run_cycle(state, 0).admitted
    assert admit.workload_key == "ns/big"


def test_non_tas_pods_take_node_capacity() -> None:
    state = add(tas_cluster(), tas_wl("a", 8, required=RACK))
    for name in state.tas.nodes:
        state.set_pod(f"kube-system/ds-{name}", name, {"cpu": m("1")})
    result = run_cycle(state, 0)
    assert result.admitted == ()
    assert "room for 6 pod(s)" in result.inadmissible[0].reason


def test_a_tas_flavor_serves_only_tas_pod_sets_unless_the_queue_is_tas_only() -> None:
    state = add(
        tas_cluster(tas_only=False), wl("plain-wl", cpu="1"), tas_wl("tas-wl", 1, required=HOST)
    )
    settle(state)
    flavors = {
        key: state.cache.records[key].workload.admission.pod_set_assignments[0].flavors["cpu"]  # type: ignore[union-attr]
        for key in ("ns/plain-wl", "ns/tas-wl")
    }
    assert flavors == {"ns/plain-wl": "plain", "ns/tas-wl": "tas"}


def test_a_tas_only_queue_places_a_pod_set_without_a_request() -> None:
    state = add(tas_cluster(), wl("implied", cpu="1", count=3))
    [admit] = run_cycle(state, 0).admitted
    assert admit.pod_sets[0].topology_assignment is not None
    assert sum(domains(state, "ns/implied").values()) == 3


def test_a_flavor_without_its_topology_admits_nothing() -> None:
    state = add(tas_cluster(), tas_wl("a", 1, required=HOST))
    state.remove_topology("default")
    result = run_cycle(state, 0)
    assert result.admitted == ()
    assert result.inadmissible[0].reason == 'topology "default" of flavor "tas" not found'


def test_a_restart_restores_tas_usage_from_the_admission() -> None:
    state = add(tas_cluster(), tas_wl("a", 16, required=BLOCK))
    state2 = tas_cluster()
    settle(state)
    admitted = state.cache.records["ns/a"].workload
    assert isinstance(admitted.admission, Admission)
    add(state2, admitted, tas_wl("b", 17, required=BLOCK))
    result = run_cycle(state2, 0)
    assert result.admitted == ()  # one block is full: 16 fit in the other
    assert "allows to fit only 16 out of 17" in result.inadmissible[0].reason
    assert state2.tas.flavor_usage == state.tas.flavor_usage


def test_the_admission_round_trips_through_the_api_with_its_topology_assignment() -> None:
    state = add(tas_cluster(), tas_wl("a", 3, required=RACK))
    [admit] = run_cycle(state, 0).admitted
    raw = admission_to_api(admit.admission)
    assert raw["podSetAssignments"][0]["topologyAssignment"]["levels"] == [HOST]
    shapes = {"main": PodSetShape(3, {"cpu": m("1")})}
    read, problems = admission_from_api(raw, shapes)
    assert problems == []
    assert read == admit.admission


def test_a_preferred_workload_is_not_parked_with_a_required_one_that_fits_no_rack() -> None:
    first = replace(tas_wl("required", 9, required=RACK), creation_timestamp=-1.0)
    state = add(tas_cluster(), first, tas_wl("preferred", 9, preferred=RACK))
    settle(state)
    assert set(state.cache.admitted) == {"ns/preferred"}  # two racks of one block


def _host_wl(name: str, priority: int, cost: int = 0) -> Workload:
    return replace(tas_wl(name, 4, cpu="1", required=HOST), priority=priority, preemption_cost=cost)


def test_tas_preemption_frees_the_cheapest_rack_not_quota_somewhere() -> None:
    """Every host is full (one 4-pod Workload each). A rack-wide Workload of higher priority
    preempts the two Workloads of the rack whose victims are cheapest: lowest priority
    first, then lowest preemption cost."""
    state = tas_cluster()
    priorities = {"b1-r1": 5, "b1-r2": 2, "b2-r1": 5, "b2-r2": 2}
    costs = {"b1-r2": 10, "b2-r2": 0}
    for rack, priority in priorities.items():
        for host in ("h1", "h2"):
            add(state, _host_wl(f"{rack}-{host}", priority, costs.get(rack, 0)))
            settle(state)
    hosts = {key: next(iter(domains(state, key))) for key in state.cache.admitted}
    add(state, replace(tas_wl("big", 8, required=RACK), priority=10))
    result = run_cycle(state, 0)
    [preempt] = result.preempting
    victims = {v.workload_key for v in preempt.victims}
    assert len(victims) == 2
    racks = {hosts[k].rsplit("-", 1)[0] for k in victims}
    assert racks == {"b2-r2"}  # priority 2 and cost 0 beats priority 2 and cost 10
    for key in victims:  # the victims leave; the preemptor lands in that rack
        state.release(key, requeue=False)
    settle(state)
    assert {h.rsplit("-", 1)[0] for h in domains(state, "ns/big")} == {"b2-r2"}


def test_tas_preemption_takes_only_the_victims_the_fit_needs() -> None:
    state = tas_cluster()
    for rack in ("b1-r1", "b1-r2", "b2-r1", "b2-r2"):
        for host in ("h1", "h2"):
            add(state, _host_wl(f"{rack}-{host}", 1))
            settle(state)
    add(state, replace(tas_wl("half", 4, required=RACK), priority=10))
    [preempt] = run_cycle(state, 0).preempting
    assert len(preempt.victims) == 1  # one host of a rack frees 4 cpus


def test_no_tas_preemption_of_equal_or_higher_priority() -> None:
    state = tas_cluster()
    for rack in ("b1-r1", "b1-r2", "b2-r1", "b2-r2"):
        for host in ("h1", "h2"):
            add(state, _host_wl(f"{rack}-{host}", 10))
            settle(state)
    add(state, replace(tas_wl("big", 8, required=RACK), priority=10))
    result = run_cycle(state, 0)
    assert result.preempting == () and result.admitted == ()
    assert "doesn't allow to fit any of 8 pod(s)" in result.inadmissible[0].reason


def test_no_tas_preemption_when_the_queue_never_preempts() -> None:
    state = tas_cluster(within="Never")
    for rack in ("b1-r1", "b1-r2", "b2-r1", "b2-r2"):
        for host in ("h1", "h2"):
            add(state, _host_wl(f"{rack}-{host}", 1))
            settle(state)
    add(state, replace(tas_wl("big", 8, required=RACK), priority=10))
    assert run_cycle(state, 0).preempting == ()
