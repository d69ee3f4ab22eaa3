"""The pod integration's pure parts (controller/integrations/pod_units.py): units, Workloads
from pods, the ungating patch."""

from __future__ import annotations

import json
from typing import Any

import jsonpatch  # type: ignore[import-untyped]
import pytest

from api.constants import (
    ADMISSION_GATE,
    OWNER_PREEMPTIBILITY_ANNOTATION,
    POD_GROUP_NAME_LABEL,
    POD_GROUP_SERVING_ANNOTATION,
    POD_GROUP_TOTAL_COUNT_ANNOTATION,
    POD_SUSPENDING_PARENT_ANNOTATION,
    QUEUE_NAME_LABEL,
    ROLE_HASH_ANNOTATION,
    DisruptionMode,
    PreemptibilitySource,
)
from controller.core.model import from_api
from controller.core.state import ClusterState
from controller.integrations.framework.workload_names import workload_name
from controller.integrations.pod_units import (
    PARENT,
    Unit,
    admitted_count,
    admitted_counts,
    group_total,
    managed,
    newest_first,
    owner_references,
    pod_group_settings,
    role_of,
    running,
    serving,
    ungate_patch,
    unit_of,
    workload_for,
)


def pod(
    name: str,
    *,
    group: str | None = None,
    total: str | None = None,
    gates: list[str] | None = None,
    owner: dict[str, Any] | None = None,
    created: str = "2026-01-01T00:00:00Z",
    phase: str = "Pending",
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "ns",
        "uid": f"uid-{name}",
        "creationTimestamp": created,
        "labels": {QUEUE_NAME_LABEL: "lq", **(labels or {})},
    }
    if group:
        meta["labels"][POD_GROUP_NAME_LABEL] = group
    if total is not None:
        meta["annotations"] = {POD_GROUP_TOTAL_COUNT_ANNOTATION: total}
    if owner:
        meta["ownerReferences"] = [owner]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "schedulingGates": [
                {"name": g} for g in (gates if gates is not None else [ADMISSION_GATE])
            ],
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}],
            "priority": 7,
        },
        "status": {"phase": phase},
    }


RS = {
    "apiVersion": "apps/v1",
    "kind": "ReplicaSet",
    "name": "rs",
    "uid": "rs-uid",
    "controller": True,
}


def test_units() -> None:
    assert unit_of(pod("a")) == Unit("pod", "ns", "a", "uid-a")
    # Kueue's names: a pod's after its name and uid, a pod group's the group's name.
    assert Unit("pod", "ns", "a", "uid-a").workload_name == workload_name("Pod", "", "a", "uid-a")
    assert unit_of(pod("a", group="g")) == Unit("group", "ns", "g")
    core = pod("a", group="g")
    core["spec"]["schedulingGroup"] = {"podGroupName": "pg"}
    assert unit_of(core) == Unit("podgroup", "ns", "pg")
    assert Unit("group", "ns", "g").key == "ns/g"


def test_only_queue_labelled_pods_not_run_by_a_job_are_managed() -> None:
    assert managed(pod("a"))
    unlabelled = pod("a")
    del unlabelled["metadata"]["labels"][QUEUE_NAME_LABEL]
    assert not managed(unlabelled)
    job_pod = pod(
        "a", owner={"apiVersion": "batch/v1", "kind": "Job", "name": "j", "controller": True}
    )
    assert not managed(job_pod)


def test_group_total_must_agree_and_be_positive() -> None:
    assert group_total([pod("a", total="3"), pod("b", total="3")]) == (3, None)
    total, problem = group_total([pod("a", total="3"), pod("b", total="4")])
    assert total is None and problem is not None and "'3', '4'" in problem
    assert group_total([pod("a", total="0")])[0] is None
    assert group_total([pod("a", total="many")])[1] == (
        f"{POD_GROUP_TOTAL_COUNT_ANNOTATION} must be a positive integer, not 'many'"
    )


def test_workload_for_a_group_owned_by_the_common_controller() -> None:
    pods = [pod(f"p{i}", group="g", total="4", owner=RS) for i in range(4)]
    body = workload_for(Unit("group", "ns", "g"), pods, 4, priority=7, priority_class="high")
    assert body["metadata"]["name"] == "g"
    assert body["metadata"]["ownerReferences"] == [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs-uid"}
    ]
    podset = body["spec"]["podSets"][0]
    assert podset["count"] == 4 and "minCount" not in podset
    assert "schedulingGates" not in podset["template"]["spec"]
    assert body["spec"]["priority"] == 7
    assert body["spec"]["priorityClassRef"] == {
        "group": "scheduling.k8s.io",
        "kind": "PriorityClass",
        "name": "high",
    }
    # The API server's own conversion accepts it, with the pods' requests.
    workload = from_api.convert(body)
    assert workload.pod_sets[0].count == 4
    assert workload.pod_sets[0].requests["cpu"] == 1000


def test_pods_without_a_common_controller_own_the_workload_together() -> None:
    refs = owner_references([pod("a"), pod("b", owner=RS)])
    assert [(r["kind"], r["name"]) for r in refs] == [("Pod", "a"), ("Pod", "b")]


def test_podgroup_settings_and_disruption_modes() -> None:
    spec = {
        "schedulingPolicy": {"gang": {"minCount": 3}},
        "priority": 50,
        "priorityClassName": "low",
        "disruptionMode": "single",
    }
    assert pod_group_settings({"spec": spec}) == {
        "min_count": 3,
        "priority": 50,
        "priority_class": "low",
        "disruption_mode": "Pod",
    }
    spec["disruptionMode"] = "all"
    assert pod_group_settings({"spec": spec})["disruption_mode"] == "PodGroup"
    spec["disruptionMode"] = "PodGroup"  # the v1alpha2 spelling
    assert pod_group_settings({"spec": spec})["disruption_mode"] == "PodGroup"
    basic = pod_group_settings({"spec": {"schedulingPolicy": {"basic": {}}}})
    assert basic["min_count"] is None and basic["disruption_mode"] is None
    body = workload_for(
        Unit("podgroup", "ns", "pg"),
        [pod("a"), pod("b"), pod("c"), pod("d")],
        4,
        min_count=3,
        disruption_mode=DisruptionMode.POD,
    )
    assert body["spec"]["podSets"][0]["minCount"] == 3
    assert body["spec"]["disruptionMode"] == "Pod"


def test_ungate_patch_adds_selectors_and_tolerations_then_removes_only_our_gate() -> None:
    p = pod("a", gates=["other.example/gate", ADMISSION_GATE])
    p["spec"]["nodeSelector"] = {"disk": "ssd"}
    toleration = {"key": "spot", "operator": "Exists", "effect": "NoSchedule"}
    patch = ungate_patch(p, {"zone": "a", "example.com/pool": "x"}, [toleration])
    assert patch[-2:] == [
        {"op": "test", "path": "/spec/schedulingGates/1/name", "value": ADMISSION_GATE},
        {"op": "remove", "path": "/spec/schedulingGates/1"},
    ]
    assert {"op": "add", "path": "/spec/nodeSelector/example.com~1pool", "value": "x"} in patch
    result = jsonpatch.apply_patch(p, patch)
    assert result["spec"]["schedulingGates"] == [{"name": "other.example/gate"}]
    assert result["spec"]["nodeSelector"] == {"disk": "ssd", "zone": "a", "example.com/pool": "x"}
    assert result["spec"]["tolerations"] == [toleration]
    # Applying it to a pod whose gate list changed meanwhile fails instead of removing
    # another controller's gate.
    moved = pod("a", gates=[ADMISSION_GATE, "other.example/gate"])
    moved["spec"]["nodeSelector"] = {"disk": "ssd"}
    with pytest.raises(jsonpatch.JsonPatchTestFailed):
        jsonpatch.apply_patch(moved, patch)


def test_ungate_patch_without_our_gate_or_with_no_selector() -> None:
    assert ungate_patch(pod("a", gates=["other"]), {"zone": "a"}, []) == []
    patch = ungate_patch(pod("a"), {"zone": "a"}, [])
    assert patch[0] == {"op": "add", "path": "/spec/nodeSelector", "value": {"zone": "a"}}
    assert json.loads(json.dumps(patch))[-1] == {"op": "remove", "path": "/spec/schedulingGates/0"}


def test_running_admitted_count_and_newest_first() -> None:
    assert not running(pod("a"))  # gated
    assert running(pod("a", gates=[]))
    assert not running(pod("a", gates=[], phase="Succeeded"))
    assert admitted_count({"status": {"admission": {"podSetAssignments": [{"count": 3}]}}}) == 3
    pods = [pod("old", created="2026-01-01T00:00:00Z"), pod("new", created="2026-01-02T00:00:00Z")]
    assert [p["metadata"]["name"] for p in newest_first(pods)] == ["new", "old"]


def test_owner_and_pod_labels_reach_the_preemptibility_resolver() -> None:
    body = workload_for(
        Unit("pod", "ns", "a"),
        [pod("a", labels={"kai.scheduler/preemptibility": "preemptible"})],
        1,
        owner_preemptibility=["", "non-preemptible"],
    )
    assert json.loads(body["metadata"]["annotations"][OWNER_PREEMPTIBILITY_ANNOTATION]) == [
        "",
        "non-preemptible",
    ]
    workload = from_api.convert(body)
    state = ClusterState()
    state.upsert_workload(workload)
    resolution = state.cache.resolution(workload.key)
    assert str(resolution.value) == "non-preemptible"  # the top owner wins over the pod
    assert resolution.source is PreemptibilitySource.OWNER_LABEL
    del body["metadata"]["annotations"][OWNER_PREEMPTIBILITY_ANNOTATION]
    state.upsert_workload(from_api.convert(body))
    assert state.cache.resolution(workload.key).source is PreemptibilitySource.POD_LABEL


def test_a_pod_a_parent_kind_marked_belongs_to_the_workload_its_parent_names() -> None:
    parents = {"statefulset": lambda p: f"statefulset-{p['metadata']['name'][:3]}"}
    marked = pod("web-0", group="ignored")
    marked["metadata"]["annotations"] = {POD_SUSPENDING_PARENT_ANNOTATION: "statefulset"}
    unit = unit_of(marked, parents)
    assert unit == Unit(PARENT, "ns", "statefulset-web")
    assert unit.workload_name == "statefulset-web" and unit.key == "ns/statefulset-web"
    # Its parent has not said yet: the pod waits, it is not a unit of its own.
    assert unit_of(marked, {"statefulset": lambda p: None}) == Unit(PARENT, "ns", "")
    # A parent that names no Workload (a Deployment's pods are single pods) is no parent.
    marked["metadata"]["annotations"][POD_SUSPENDING_PARENT_ANNOTATION] = "deployment"
    assert unit_of(marked, parents) == Unit("group", "ns", "ignored")


def test_pod_sets_by_role_and_serving_units() -> None:
    leader, worker = pod("l"), pod("w")
    worker["metadata"]["annotations"] = {ROLE_HASH_ANNOTATION: "worker"}
    assert (role_of(leader), role_of(worker)) == ("main", "worker")
    assert not serving([leader, worker])
    worker["metadata"]["annotations"][POD_GROUP_SERVING_ANNOTATION] = "true"
    assert serving([leader, worker])
    admission = {
        "podSetAssignments": [{"name": "leader", "count": 1}, {"name": "worker", "count": 2}]
    }
    assert admitted_counts({"status": {"admission": admission}}) == {"leader": 1, "worker": 2}
    assert admitted_count({"status": {"admission": admission}}) == 3


def test_a_single_pods_workload_is_controlled_by_the_pod() -> None:
    """Kueue's: a pod its ReplicaSet replaced or scaled away takes its Workload (and quota)
    with it; a group's Workload stays with the group's common controller."""
    body = workload_for(Unit("pod", "ns", "a"), [pod("a", owner=RS)], 1)
    assert body["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": "a", "uid": "uid-a", "controller": True}
    ]
    group = workload_for(Unit("group", "ns", "g"), [pod("a", group="g", owner=RS)], 1)
    assert group["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet"


def test_a_json_patch_that_did_not_apply_is_told_from_a_refused_pod() -> None:
    """Kubernetes 1.36 answers a failed `test` op (the pod ungated meanwhile) with a bare
    422 Invalid; a pod update it refuses names its causes (and is retried)."""
    from kubernetes.client.exceptions import ApiException

    from controller.integrations.pods import patch_did_not_apply

    def refusal(details: dict[str, Any]) -> ApiException:
        exc = ApiException(status=422, reason="Unprocessable Entity")
        exc.body = json.dumps(
            {"kind": "Status", "status": "Failure", "reason": "Invalid", "details": details}
        )
        return exc

    assert patch_did_not_apply(refusal({}))
    causes = {"causes": [{"field": "spec", "message": "Forbidden: pod updates may not change"}]}
    assert not patch_did_not_apply(refusal(causes))
