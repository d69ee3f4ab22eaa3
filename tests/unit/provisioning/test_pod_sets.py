"""controller/provisioning/pod_sets.py: the entries of a ProvisioningRequest (Kueue's
`mergePodSets`: managed resources, zero counts, the two merge policies) and the PodTemplate
of each (Kueue's `createPodTemplate`: the flavors' node labels and tolerations, the
topology gate, limits standing in for missing requests)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from api.provisioningrequestconfig import PodSetMergePolicy
from controller.integrations.framework.podset_info import FlavorPlacement, PodSetInfoError
from controller.provisioning.pod_sets import (
    InconsistentAssignments,
    MergedPodSet,
    can_merge,
    merged_pod_sets,
    pod_template,
)

TEMPLATES = PodSetMergePolicy.IDENTICAL_POD_TEMPLATES
REQUIREMENTS = PodSetMergePolicy.IDENTICAL_WORKLOAD_SCHEDULING_REQUIREMENTS


def pod_set(name: str, count: int = 1, **requests: str) -> dict[str, Any]:
    return {
        "name": name,
        "count": count,
        "template": {
            "spec": {
                "containers": [
                    {"name": "c", "image": "busybox", "resources": {"requests": dict(requests)}}
                ]
            }
        },
    }


def workload(*pod_sets: dict[str, Any], counts: dict[str, int] | None = None) -> dict[str, Any]:
    assignments = []
    for ps in pod_sets:
        assignment: dict[str, Any] = {"name": ps["name"], "flavors": {"cpu": "rf"}}
        if counts and ps["name"] in counts:
            assignment["count"] = counts[ps["name"]]
        assignments.append(assignment)
    return {
        "metadata": {"name": "w", "namespace": "ns"},
        "spec": {"podSets": list(pod_sets)},
        "status": {"admission": {"clusterQueue": "cq", "podSetAssignments": assignments}},
    }


def shape(entries: list[MergedPodSet]) -> list[tuple[str, int]]:
    return [(e.name, e.count) for e in entries]


def test_without_a_policy_each_pod_set_is_its_own_entry() -> None:
    wl = workload(pod_set("a", 2, cpu="1"), pod_set("b", 1, cpu="1"))
    assert shape(merged_pod_sets(wl, (), None)) == [("a", 2), ("b", 1)]


def test_identical_templates_merge_into_the_first_with_the_counts_added() -> None:
    wl = workload(pod_set("a", 2, cpu="1"), pod_set("b", 1, cpu="2"), pod_set("c", 3, cpu="1000m"))
    assert shape(merged_pod_sets(wl, (), TEMPLATES)) == [("a", 5), ("b", 1)]


def test_identical_templates_differ_on_anything_in_the_template() -> None:
    a, b = pod_set("a", cpu="1"), pod_set("b", cpu="1")
    b["template"]["spec"]["containers"][0]["image"] = "other"
    assert not can_merge(a, b, TEMPLATES)
    assert can_merge(a, b, REQUIREMENTS)  # the image is no scheduling requirement


def test_scheduling_requirements_compare_requests_selectors_tolerations_affinity() -> None:
    a = pod_set("a", cpu="1")
    for change in (
        {"nodeSelector": {"pool": "x"}},
        {"tolerations": [{"key": "gpu", "operator": "Exists"}]},
        {"affinity": {"nodeAffinity": {}}},
        {"resources": {"requests": {"cpu": "1"}}},
        {"resourceClaims": [{"name": "gpu"}]},
        {"initContainers": [{"name": "i", "resources": {"requests": {"cpu": "1"}}}]},
    ):
        b = copy.deepcopy(a)
        b["template"]["spec"].update(change)
        assert not can_merge(a, b, REQUIREMENTS), change
    b = copy.deepcopy(a)
    b["template"]["spec"]["containers"][0]["resources"]["limits"] = {"cpu": "4"}
    assert can_merge(a, b, REQUIREMENTS)  # limits are not compared, as in Kueue
    assert not can_merge(a, pod_set("b", cpu="1", memory="1Gi"), REQUIREMENTS)
    b = copy.deepcopy(a)
    b["template"]["spec"]["containers"].append({"name": "d", "resources": {}})
    assert not can_merge(a, b, REQUIREMENTS)


@given(
    st.lists(st.sampled_from(("1", "2", "1000m", "500m")), min_size=1, max_size=6),
    st.sampled_from(list(PodSetMergePolicy)),
)
def test_merging_keeps_every_pod_and_leaves_no_two_mergeable_entries(
    cpus: list[str], policy: PodSetMergePolicy
) -> None:
    sets = [pod_set(f"p{i}", i + 1, cpu=cpu) for i, cpu in enumerate(cpus)]
    entries = merged_pod_sets(workload(*sets), (), policy)
    assert sum(e.count for e in entries) == sum(ps["count"] for ps in sets)
    for i, first in enumerate(entries):
        for second in entries[i + 1 :]:
            assert not can_merge(first.pod_set, second.pod_set, policy)


def test_only_pod_sets_with_managed_resources_and_pods_admitted() -> None:
    wl = workload(
        pod_set("cpu-only", cpu="1"),
        pod_set("gpu", **{"nvidia.com/gpu": "1"}),
        pod_set("gpu-none", **{"nvidia.com/gpu": "1"}),
        counts={"gpu-none": 0},
    )
    assert shape(merged_pod_sets(wl, ("nvidia.com/gpu",), None)) == [("gpu", 1)]
    assert shape(merged_pod_sets(wl, (), None)) == [("cpu-only", 1), ("gpu", 1)]


def test_a_pod_set_without_an_assignment_is_an_error() -> None:
    wl = workload(pod_set("a", cpu="1"))
    wl["spec"]["podSets"].append(pod_set("b", cpu="1"))
    with pytest.raises(InconsistentAssignments, match="'b'"):
        merged_pod_sets(wl, (), None)


def placement(name: str) -> FlavorPlacement | None:
    if name == "rf":
        return FlavorPlacement(
            {"pool": "gpu"}, ({"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},)
        )
    return None


def test_the_template_gets_the_flavors_placement_and_limits_as_requests() -> None:
    ps = pod_set("a", cpu="1")
    container = ps["template"]["spec"]["containers"][0]
    container["resources"]["limits"] = {"cpu": "2", "memory": "1Gi"}
    [entry] = merged_pod_sets(workload(ps), (), None)
    template = pod_template(entry, placement)
    spec = template["spec"]
    assert spec["nodeSelector"] == {"pool": "gpu"}
    assert spec["tolerations"] == [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert spec["containers"][0]["resources"]["requests"] == {"cpu": "1", "memory": "1Gi"}
    assert "schedulingGates" not in spec
    assert ps["template"]["spec"].get("nodeSelector") is None  # the Workload is not changed


def test_a_topology_assignment_gates_the_template() -> None:
    wl = workload(pod_set("a", cpu="1"))
    wl["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"] = {"levels": []}
    [entry] = merged_pod_sets(wl, (), None)
    template = pod_template(entry, placement)
    assert template["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/topology"}]
    annotations = template["metadata"]["annotations"]
    assert annotations == {"kueue.x-k8s.io/podset-unconstrained-topology": "true"}


def test_a_node_selector_against_the_flavors_is_a_conflict() -> None:
    ps = pod_set("a", cpu="1")
    ps["template"]["spec"]["nodeSelector"] = {"pool": "cpu"}
    [entry] = merged_pod_sets(workload(ps), (), None)
    with pytest.raises(PodSetInfoError, match="pool"):
        pod_template(entry, placement)


def test_the_request_and_its_templates_of_one_attempt() -> None:
    from controller.kube.owners import controller_reference
    from controller.provisioning.objects import request_objects

    wl = workload(pod_set("a", 2, cpu="1"), pod_set("b", 1, cpu="1"))
    wl["metadata"] |= {"uid": "u1", "annotations": {"provreq.kueue.x-k8s.io/Extra": "x"}}
    spec = {
        "provisioningClassName": "check-capacity.autoscaling.x-k8s.io",
        "parameters": {"ValidUntilSeconds": "60"},
        "podSetMergePolicy": "IdenticalPodTemplates",
    }
    templates, request = request_objects(wl, "w-prov-1", spec, placement)
    assert [t["metadata"]["name"] for t in templates] == ["ppt-w-prov-1-a"]
    assert templates[0]["template"]["spec"]["nodeSelector"] == {"pool": "gpu"}
    assert request["spec"] == {
        "provisioningClassName": "check-capacity.autoscaling.x-k8s.io",
        "podSets": [{"podTemplateRef": {"name": "ppt-w-prov-1-a"}, "count": 3}],
        "parameters": {"ValidUntilSeconds": "60", "Extra": "x"},
    }
    owner = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "name": "w",
        "uid": "u1",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    for made in (*templates, request):
        assert made["metadata"]["ownerReferences"] == [owner]
        assert made["metadata"]["labels"] == {"kueue.x-k8s.io/managed": "true"}
    created = {**request, "metadata": {**request["metadata"], "uid": "r1"}}
    assert controller_reference(created)["kind"] == "ProvisioningRequest"
