"""`kubectl quotagate describe <kind> NAME` for the kinds that run through their pods and
for their pods: managed or not, why, and which Workload (controller/kubectl/managed.py)."""

from __future__ import annotations

from typing import Any

from controller.config import ControllerConfig
from controller.integrations.framework.registry import frameworks
from controller.integrations.framework.workload_names import workload_name
from controller.kubectl.managed import describe_management, render_management

QUEUE = "kueue.x-k8s.io/queue-name"
PARENT = "kueue.x-k8s.io/pod-suspending-parent"
LWS = "leaderworkerset.x-k8s.io/leaderworkerset"
SERVING = ["deployment", "statefulset", LWS]


def config() -> ControllerConfig:
    return ControllerConfig.model_validate({"integrations": {"frameworks": SERVING}})


def describe(
    kind: str, obj: dict[str, Any], workloads: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    return describe_management(obj, frameworks()[kind], config(), "test", None, workloads or [])


def statefulset(marker: str | None) -> dict[str, Any]:
    annotations = {PARENT: marker} if marker else {}
    return {
        "kind": "StatefulSet",
        "metadata": {"name": "web", "namespace": "team", "uid": "u1", "labels": {QUEUE: "lq"}},
        "spec": {"template": {"metadata": {"annotations": annotations}}},
    }


def test_a_statefulset_names_its_workload_and_one_a_leaderworkerset_marked_defers_to_it() -> None:
    workload = {
        "metadata": {"name": "statefulset-web", "ownerReferences": [{"uid": "u1"}]},
    }
    own = describe("statefulset", statefulset("statefulset"), [workload])
    assert own["managed"] and own["workloads"] == ["statefulset-web"]
    assert "Workload:         statefulset-web (kubectl quotagate describe workload" in (
        render_management(own)
    )
    lws = describe("statefulset", statefulset(LWS))
    assert not lws["managed"]
    assert lws["reason"] == (
        "it runs as part of its owner LeaderWorkerSet, which is queued in its place"
    )


def test_a_deployment_has_no_workload_of_its_own() -> None:
    obj = {
        "kind": "Deployment",
        "metadata": {"name": "api", "namespace": "team", "uid": "u2", "labels": {QUEUE: "lq"}},
    }
    described = describe("deployment", obj)
    assert described["managed"] and described["workloads"] == []
    assert "each of its pods is one, pod-<pod name>" in render_management(described)


def test_a_pod_a_statefulset_marked_is_queued_in_its_statefulsets_workload() -> None:
    pod = {
        "kind": "Pod",
        "metadata": {
            "name": "web-0",
            "namespace": "team",
            "uid": "p0",
            "labels": {QUEUE: "lq"},
            "annotations": {PARENT: "statefulset"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "StatefulSet",
                    "name": "web",
                    "uid": "u1",
                    "controller": True,
                }
            ],
        },
    }
    web = workload_name("StatefulSet", "apps", "web", "u1")
    described = describe("pod", pod, [{"metadata": {"name": web}}])
    assert described["managed"]
    assert described["expectedWorkload"] == web
    assert described["workloads"] == [web]
