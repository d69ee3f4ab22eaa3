"""Topology-aware scheduling for plain pods and pod groups (Kueue's pod integration): the
Workload's `topologyRequest` from the pods' annotations, the webhook's topology gate and
pod index label, and the ungating that hands a TAS pod to the topology ungater."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonpatch  # type: ignore[import-untyped]
import pytest

from api.constants import (
    ADMISSION_GATE,
    POD_GROUP_NAME_LABEL,
    POD_GROUP_POD_INDEX_LABEL,
    POD_GROUP_POD_INDEX_LABEL_ANNOTATION,
    POD_GROUP_TOTAL_COUNT_ANNOTATION,
    POD_SET_GROUP_NAME_ANNOTATION,
    POD_SET_LABEL,
    POD_SET_PREFERRED_TOPOLOGY_ANNOTATION,
    POD_SET_REQUIRED_TOPOLOGY_ANNOTATION,
    POD_SET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION,
    POD_SET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS_ANNOTATION,
    POD_SET_SLICE_SIZE_ANNOTATION,
    POD_SET_UNCONSTRAINED_TOPOLOGY_ANNOTATION,
    QUEUE_NAME_LABEL,
    TOPOLOGY_SCHEDULING_GATE,
    WORKLOAD_ANNOTATION,
)
from api.validation.workload import validate_workload
from controller.core.tas.assignment import Assignment
from controller.core.tas.encoding import encode
from controller.integrations.job_management import Decision
from controller.integrations.pod_units import (
    Unit,
    topology_assigned,
    topology_release,
    ungate_patch,
    workload_for,
)
from controller.integrations.topology_ungater import ungate_plan
from controller.integrations.webhook import pod_patch

RACK = "cloud.com/topology-rack"
HOST = "kubernetes.io/hostname"
RANK = "example.com/rank"


def pod(
    name: str,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    gates: tuple[str, ...] = (ADMISSION_GATE,),
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "labels": {QUEUE_NAME_LABEL: "lq", **(labels or {})},
            "annotations": dict(annotations or {}),
        },
        "spec": {
            "schedulingGates": [{"name": g} for g in gates],
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}],
        },
        "status": {"phase": "Pending"},
    }


def group(annotations: dict[str, str], size: int = 4) -> list[dict[str, Any]]:
    common = {POD_GROUP_TOTAL_COUNT_ANNOTATION: str(size), **annotations}
    return [
        pod(f"g-{i}", common, {POD_GROUP_NAME_LABEL: "g", POD_GROUP_POD_INDEX_LABEL: str(i)})
        for i in range(size)
    ]


def request_of(pods: list[dict[str, Any]], kind: str = "group") -> dict[str, Any] | None:
    body = workload_for(Unit(kind, "ns", "g" if kind == "group" else "p"), pods, len(pods))
    assert validate_workload(body) == []
    [pod_set] = body["spec"]["podSets"]
    request: dict[str, Any] | None = pod_set.get("topologyRequest")
    return request


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ({POD_SET_REQUIRED_TOPOLOGY_ANNOTATION: RACK}, {"required": RACK}),
        ({POD_SET_PREFERRED_TOPOLOGY_ANNOTATION: RACK}, {"preferred": RACK}),
        ({POD_SET_UNCONSTRAINED_TOPOLOGY_ANNOTATION: "true"}, {"unconstrained": True}),
        (
            {
                POD_SET_REQUIRED_TOPOLOGY_ANNOTATION: "block",
                POD_SET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION: RACK,
                POD_SET_SLICE_SIZE_ANNOTATION: "2",
            },
            {"required": "block", "podSetSliceRequiredTopology": RACK, "podSetSliceSize": 2},
        ),
        (
            {
                POD_SET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS_ANNOTATION: json.dumps(
                    [{"topology": RACK, "size": 4}, {"topology": HOST, "size": 2}]
                )
            },
            {
                "podsetSliceRequiredTopologyConstraints": [
                    {"topology": RACK, "size": 4},
                    {"topology": HOST, "size": 2},
                ]
            },
        ),
        (
            {POD_SET_REQUIRED_TOPOLOGY_ANNOTATION: RACK, POD_SET_GROUP_NAME_ANNOTATION: "x"},
            {"required": RACK, "podSetGroupName": "x"},
        ),
    ],
)
def test_a_pod_groups_workload_carries_the_topology_its_pods_ask_for(
    annotations: dict[str, str], expected: dict[str, Any]
) -> None:
    # Kueue's constructPodSet: the request from the pod's own annotations, ranked by
    # kueue.x-k8s.io/pod-group-pod-index.
    assert request_of(group(annotations)) == {
        **expected,
        "podIndexLabel": POD_GROUP_POD_INDEX_LABEL,
    }


def test_a_single_pod_carries_it_too_and_a_pod_asking_for_none_gets_none() -> None:
    single = [pod("p", {POD_SET_REQUIRED_TOPOLOGY_ANNOTATION: HOST})]
    assert request_of(single, "pod") == {
        "required": HOST,
        "podIndexLabel": POD_GROUP_POD_INDEX_LABEL,
    }
    assert request_of(group({})) is None
    assert request_of([pod("p")], "pod") is None


def webhook(obj: dict[str, Any], decision: Decision | None = None) -> dict[str, Any]:
    patch = pod_patch(copy.deepcopy(obj), decision=decision)
    result: dict[str, Any] = jsonpatch.apply_patch(obj, patch)
    return result


def gate_names(obj: dict[str, Any]) -> list[str]:
    return [g["name"] for g in obj["spec"].get("schedulingGates") or ()]


def test_the_webhook_holds_every_pod_it_gates_by_the_topology_gate_too() -> None:
    # Kueue's pod webhook (TopologyAwareScheduling on): whether the pod set is placed by
    # topology is known only at admission, so every suspended pod gets both gates.
    asking = pod("p", {POD_SET_REQUIRED_TOPOLOGY_ANNOTATION: RACK}, gates=())
    del asking["spec"]["schedulingGates"]
    assert gate_names(webhook(asking)) == [ADMISSION_GATE, TOPOLOGY_SCHEDULING_GATE]
    other = pod("p", {POD_SET_UNCONSTRAINED_TOPOLOGY_ANNOTATION: "true"}, gates=("x/y",))
    assert gate_names(webhook(other)) == ["x/y", ADMISSION_GATE, TOPOLOGY_SCHEDULING_GATE]
    plain = pod("p", gates=())
    assert gate_names(webhook(plain)) == [ADMISSION_GATE, TOPOLOGY_SCHEDULING_GATE]
    # Already gated (a replayed request): nothing more.
    assert pod_patch(webhook(asking)) == []
    # A gate the pod comes with is not added twice; the missing one is.
    held = pod("p", gates=(ADMISSION_GATE,))
    assert gate_names(webhook(held)) == [ADMISSION_GATE, TOPOLOGY_SCHEDULING_GATE]
    held = pod("p", gates=(TOPOLOGY_SCHEDULING_GATE,))
    assert gate_names(webhook(held)) == [TOPOLOGY_SCHEDULING_GATE, ADMISSION_GATE]
    # A pod the webhook does not manage is not touched.
    unmanaged = pod("p", gates=())
    del unmanaged["metadata"]["labels"][QUEUE_NAME_LABEL]
    assert pod_patch(unmanaged) == []


def test_the_webhook_copies_the_pod_index_label_the_pod_names() -> None:
    for asked in (
        {POD_SET_REQUIRED_TOPOLOGY_ANNOTATION: RACK, POD_GROUP_POD_INDEX_LABEL_ANNOTATION: RANK},
        {POD_GROUP_POD_INDEX_LABEL_ANNOTATION: RANK},  # asking for no topology: copied too
    ):
        result = webhook(pod("p", asked, {RANK: "3"}, gates=()))
        assert result["metadata"]["labels"][POD_GROUP_POD_INDEX_LABEL] == "3"
        # No labels at all, and the default LocalQueue given: both in one labels map.
        bare = pod("p", asked, gates=())
        del bare["metadata"]["labels"]
        decision = Decision(True, "default", "the default LocalQueue", default_queue=True)
        labels = webhook(bare, decision)["metadata"]["labels"]
        assert labels == {QUEUE_NAME_LABEL: "default", POD_GROUP_POD_INDEX_LABEL: ""}


def test_ungating_removes_the_topology_gate_only_when_asked() -> None:
    held = pod("p", gates=("x/y", ADMISSION_GATE, TOPOLOGY_SCHEDULING_GATE))
    kept = jsonpatch.apply_patch(held, ungate_patch(held, {}, []))
    assert gate_names(kept) == ["x/y", TOPOLOGY_SCHEDULING_GATE]
    both = ungate_patch(held, {}, [], also=(TOPOLOGY_SCHEDULING_GATE,))
    assert gate_names(jsonpatch.apply_patch(held, both)) == ["x/y"]
    moved = pod("p", gates=(TOPOLOGY_SCHEDULING_GATE, ADMISSION_GATE, "x/y"))
    with pytest.raises(jsonpatch.JsonPatchTestFailed):
        jsonpatch.apply_patch(moved, both)  # the gate list changed: nothing removed


def admitted(body: dict[str, Any], assignment: Assignment | None) -> dict[str, Any]:
    psa: dict[str, Any] = {"name": "main", "count": 4, "flavors": {"cpu": "tas"}}
    if assignment is not None:
        psa["topologyAssignment"] = encode(assignment)
    body = copy.deepcopy(body)
    body["status"] = {
        "admission": {"clusterQueue": "cq", "podSetAssignments": [psa]},
        "conditions": [{"type": "Admitted", "status": "True"}],
    }
    return body


def test_the_topology_ungater_places_a_groups_pods_by_their_index() -> None:
    pods = group({POD_SET_REQUIRED_TOPOLOGY_ANNOTATION: RACK})
    body = workload_for(Unit("group", "ns", "g"), pods, 4)
    assignment = Assignment((RACK, HOST), ((("r1", "h1"), 2), (("r1", "h2"), 2)))
    workload = admitted(body, assignment)
    assert topology_assigned(workload, "main")
    assert not topology_assigned(admitted(body, None), "main")
    # What the pod integration's release leaves: the admission gate gone, the topology
    # gate kept, the pods named after their Workload and pod set.
    released = []
    for p in reversed(pods):  # whatever order they are seen in
        p["spec"]["schedulingGates"].append({"name": TOPOLOGY_SCHEDULING_GATE})
        patch = ungate_patch(p, {}, [], {POD_SET_LABEL: "main"}, {WORKLOAD_ANNOTATION: "group-g"})
        released.append(jsonpatch.apply_patch(p, patch))
    plan = ungate_plan(workload, released)
    assert sorted((p["metadata"]["name"], s[HOST]) for p, s in plan) == [
        ("g-0", "h1"),
        ("g-1", "h1"),
        ("g-2", "h2"),
        ("g-3", "h2"),
    ]


def release(workload: dict[str, Any], p: dict[str, Any]) -> dict[str, Any]:
    """What the pod integration's release of an admitted pod writes (pods.py)."""
    placed = topology_release(workload, "main", "pod-p")
    labels, annotations = placed if placed is not None else ({}, {})
    also = () if placed is not None else (TOPOLOGY_SCHEDULING_GATE,)
    patch = ungate_patch(p, {}, [], labels, annotations, also=also)
    result: dict[str, Any] = jsonpatch.apply_patch(p, patch)
    return result


def test_a_pod_asking_for_no_topology_is_released_by_the_ungater_when_placed_by_topology() -> None:
    # Kueue's FromAssignment and the pod controller's prepare: a pod set placed as
    # unconstrained by a TAS-only ClusterQueue keeps the topology gate, named for the
    # ungater, and marked unconstrained (so that its pods count as TAS pods on the nodes).
    plain = webhook(pod("p", gates=()))
    body = workload_for(Unit("pod", "ns", "p"), [plain], 1)
    assignment = Assignment((HOST,), ((("h1",), 1),))
    released = release(admitted(body, assignment), plain)
    assert gate_names(released) == [TOPOLOGY_SCHEDULING_GATE]
    assert released["metadata"]["labels"][POD_SET_LABEL] == "main"
    assert released["metadata"]["annotations"] == {
        WORKLOAD_ANNOTATION: "pod-p",
        POD_SET_UNCONSTRAINED_TOPOLOGY_ANNOTATION: "true",
    }
    [(_, selector)] = ungate_plan(admitted(body, assignment), [released])
    assert selector == {HOST: "h1"}


def test_a_pod_asking_for_a_topology_is_not_marked_unconstrained() -> None:
    asking = webhook(pod("p", {POD_SET_REQUIRED_TOPOLOGY_ANNOTATION: HOST}, gates=()))
    body = workload_for(Unit("pod", "ns", "p"), [asking], 1)
    released = release(admitted(body, Assignment((HOST,), ((("h1",), 1),))), asking)
    assert gate_names(released) == [TOPOLOGY_SCHEDULING_GATE]
    assert POD_SET_UNCONSTRAINED_TOPOLOGY_ANNOTATION not in released["metadata"]["annotations"]


def test_a_pod_without_a_topology_assignment_loses_both_gates_in_one_patch() -> None:
    # Kueue's prepare: no topology gate in the pod set info, so the pod's is removed with
    # the admission gate; another controller's gate stays.
    plain = webhook(pod("p", gates=("x/y",)))
    body = workload_for(Unit("pod", "ns", "p"), [plain], 1)
    assert topology_release(admitted(body, None), "main", "pod-p") is None
    released = release(admitted(body, None), plain)
    assert gate_names(released) == ["x/y"]
    assert released["metadata"]["annotations"] == {}
