"""The topology ungater's plan (Kueue's greedy `assignGatedPodsToDomains`): gated pods go to
the assignment's domains in order, as many as each still lacks; pods released before count;
finished pods do not. And what an admission with a topology puts into a pod template."""

from __future__ import annotations

from typing import Any

from api.constants import (
    POD_SET_LABEL,
    POD_SET_UNCONSTRAINED_TOPOLOGY_ANNOTATION,
    TOPOLOGY_SCHEDULING_GATE,
    WORKLOAD_ANNOTATION,
)
from controller.core.tas.assignment import Assignment
from controller.core.tas.encoding import encode
from controller.integrations.framework.podset_info import from_admission
from controller.integrations.pod_units import ungate_patch
from controller.integrations.topology_ungater import ungate_plan

HOST = "kubernetes.io/hostname"
RACK = "rack"


def pod(
    name: str, gated: bool = True, selector: dict[str, str] | None = None, phase: str = "Pending"
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if gated:
        spec["schedulingGates"] = [{"name": TOPOLOGY_SCHEDULING_GATE}]
    if selector:
        spec["nodeSelector"] = selector
    return {
        "metadata": {"name": name, "namespace": "ns", "labels": {POD_SET_LABEL: "main"}},
        "spec": spec,
        "status": {"phase": phase},
    }


def workload(
    *domains: tuple[tuple[str, ...], int], levels: tuple[str, ...] = (HOST,)
) -> dict[str, Any]:
    topology = encode(Assignment(levels, tuple(domains)))
    return {
        "metadata": {"name": "wl", "namespace": "ns"},
        "spec": {"podSets": [{"name": "main", "count": 4, "template": {}}]},
        "status": {
            "admission": {
                "clusterQueue": "cq",
                "podSetAssignments": [
                    {
                        "name": "main",
                        "count": 4,
                        "flavors": {"cpu": "tas"},
                        "topologyAssignment": topology,
                    }
                ],
            }
        },
    }


def names(plan: list[tuple[Any, dict[str, str]]]) -> list[tuple[str, dict[str, str]]]:
    return [(p["metadata"]["name"], selector) for p, selector in plan]


def test_gated_pods_fill_the_domains_in_order() -> None:
    plan = ungate_plan(workload((("h1",), 3), (("h2",), 1)), [pod(f"p{i}") for i in range(4)])
    assert names(plan) == [
        ("p0", {HOST: "h1"}),
        ("p1", {HOST: "h1"}),
        ("p2", {HOST: "h1"}),
        ("p3", {HOST: "h2"}),
    ]


def test_released_pods_count_and_finished_ones_do_not() -> None:
    pods = [
        pod("done", gated=False, selector={HOST: "h1"}, phase="Succeeded"),
        pod("running", gated=False, selector={HOST: "h1"}, phase="Running"),
        pod("a"),
        pod("b"),
    ]
    plan = ungate_plan(workload((("h1",), 2), (("h2",), 2)), pods)
    assert names(plan) == [("a", {HOST: "h1"}), ("b", {HOST: "h2"})]


def test_multi_level_domains_select_every_level() -> None:
    plan = ungate_plan(workload((("b1", "r1"), 1), levels=("block", RACK)), [pod("a")])
    assert names(plan) == [("a", {"block": "b1", RACK: "r1"})]


def test_the_patch_adds_the_selector_and_removes_the_topology_gate() -> None:
    ops = ungate_patch(pod("a"), {HOST: "h1"}, (), gate=TOPOLOGY_SCHEDULING_GATE)
    assert ops == [
        {"op": "add", "path": "/spec/nodeSelector", "value": {HOST: "h1"}},
        {"op": "test", "path": "/spec/schedulingGates/0/name", "value": TOPOLOGY_SCHEDULING_GATE},
        {"op": "remove", "path": "/spec/schedulingGates/0"},
    ]


def test_an_admission_with_a_topology_gates_the_template_and_names_the_workload() -> None:
    [info] = from_admission(workload((("h1",), 4)), lambda name: None)
    assert info.scheduling_gates == [{"name": TOPOLOGY_SCHEDULING_GATE}]
    assert info.annotations[WORKLOAD_ANNOTATION] == "wl"
    # no topologyRequest on the pod set: placed by a TAS-only queue, marked unconstrained
    assert info.annotations[POD_SET_UNCONSTRAINED_TOPOLOGY_ANNOTATION] == "true"


def test_an_admission_without_a_topology_adds_no_gate_but_names_the_workload() -> None:
    """As Kueue's `getPodSetsInfoFromStatus` with TopologyAwareScheduling on (it always is
    here): every pod set's pods carry the Workload's name, placed by topology or not."""
    body = workload((("h1",), 4))
    del body["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]
    [info] = from_admission(body, lambda name: None)
    assert info.scheduling_gates == []
    assert info.annotations[WORKLOAD_ANNOTATION] == "wl"
