"""The KubeRay adapters (controller/integrations/kinds/raycluster.py, rayjob.py): Kueue's pod
sets for a RayCluster and a RayJob, admission into each pod set's template and its restore,
what their status means, Kueue's webhook checks, and the webhook's patch."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest

from api.constants import ELASTIC_JOB_ANNOTATION, POD_SET_LABEL, QUEUE_NAME_LABEL
from controller.integrations.framework.patches import merge_patch
from controller.integrations.framework.podset_info import (
    FlavorPlacement,
    PodSetInfoError,
    from_admission,
    from_pod_set,
)
from controller.integrations.framework.registry import by_kind
from controller.integrations.framework.workloads import new_workload
from controller.integrations.kinds.raycluster import RayCluster
from controller.integrations.kinds.rayjob import RayJob
from controller.integrations.webhook import review_response
from tests.unit.integrations.test_jobs import merge

TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}
PLACEMENTS = {
    "a": FlavorPlacement({"zone": "a"}),
    "b": FlavorPlacement({"zone": "b"}, (TOLERATION,)),
}


def pod(cpu: str, image: str = "rayproject/ray:2.9.0") -> dict[str, Any]:
    return {
        "spec": {
            "containers": [{"name": "ray", "image": image, "resources": {"requests": {"cpu": cpu}}}]
        }
    }


def cluster_spec(**extra: Any) -> dict[str, Any]:
    """A head (1 cpu) and two worker groups: `Small` 2 × 1 cpu, `tpu` 2 replicas × 2
    hosts × 2 cpu."""
    return {
        "headGroupSpec": {"rayStartParams": {}, "template": pod("1")},
        "workerGroupSpecs": [
            {
                "groupName": "Small",
                "replicas": 2,
                "minReplicas": 0,
                "maxReplicas": 4,
                "template": pod("1"),
            },
            {"groupName": "tpu", "replicas": 2, "numOfHosts": 2, "template": pod("2")},
        ],
        **extra,
    }


def raycluster(**extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {
            "name": "rc",
            "namespace": "ns",
            "uid": "u1",
            "labels": {QUEUE_NAME_LABEL: "lq"},
        },
        "spec": {"suspend": True, **cluster_spec(**extra)},
    }


def rayjob(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {
            "name": "rj",
            "namespace": "ns",
            "uid": "u2",
            "labels": {QUEUE_NAME_LABEL: "lq"},
        },
        "spec": {
            "suspend": True,
            "entrypoint": "python train.py",
            "shutdownAfterJobFinishes": True,
            "submissionMode": "K8sJobMode",
            "rayClusterSpec": cluster_spec(),
            **spec,
        },
    }


def without_empty(value: Any) -> Any:
    """`value` without empty maps (a restored template keeps a `metadata: {}`)."""
    if isinstance(value, dict):
        return {k: without_empty(v) for k, v in value.items() if v != {} or k != "metadata"}
    if isinstance(value, list):
        return [without_empty(v) for v in value]
    return value


def counts(pod_sets: list[dict[str, Any]]) -> list[tuple[str, int]]:
    return [(ps["name"], ps["count"]) for ps in pod_sets]


def admitted_workload(job: RayCluster | RayJob, flavors: list[str]) -> dict[str, Any]:
    """The job's Workload, each pod set admitted to the flavor of the same position."""
    body = new_workload(type(job)(copy.deepcopy(job.obj)), priority=None)
    body["status"] = {
        "admission": {
            "clusterQueue": "cq",
            "podSetAssignments": [
                {"name": ps["name"], "flavors": {"cpu": flavor}}
                for ps, flavor in zip(body["spec"]["podSets"], flavors, strict=True)
            ],
        }
    }
    return body


def test_a_rayclusters_pod_sets_are_the_head_and_each_worker_group() -> None:
    """Kueue's names (the group name lower-cased) and counts (replicas × numOfHosts; a
    missing replicas counts 1, as Kueue counts it)."""
    assert counts(RayCluster(raycluster()).pod_sets()) == [("head", 1), ("small", 2), ("tpu", 4)]
    obj = raycluster()
    del obj["spec"]["workerGroupSpecs"][0]["replicas"]
    assert counts(RayCluster(obj).pod_sets()) == [("head", 1), ("small", 1), ("tpu", 4)]


def test_the_head_counts_what_kuberay_adds_to_its_pod() -> None:
    """GCS fault tolerance: the Ray container requests at least KubeRay's Redis cleanup
    (200m cpu, 256Mi); in-tree autoscaling: the autoscaler sidecar."""
    obj = raycluster(gcsFaultToleranceOptions={"redisAddress": "redis:6379"})
    obj["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "100m", "memory": "1Gi"}
    }
    head = RayCluster(obj).pod_sets()[0]["template"]["spec"]["containers"]
    assert head[0]["resources"]["requests"] == {"cpu": "200m", "memory": "1Gi"}
    annotated = raycluster()
    annotated["metadata"]["annotations"] = {"ray.io/ft-enabled": "true"}
    head = RayCluster(annotated).pod_sets()[0]["template"]["spec"]["containers"]
    assert head[0]["resources"]["requests"] == {"cpu": "1", "memory": "256Mi"}
    scaling = RayCluster(raycluster(enableInTreeAutoscaling=True)).pod_sets()[0]
    assert scaling["template"]["spec"]["containers"][1] == {
        "name": "autoscaler",
        "resources": {
            "requests": {"cpu": "500m", "memory": "512Mi"},
            "limits": {"cpu": "500m", "memory": "512Mi"},
        },
    }
    # The object itself is never changed by reading its pod sets.
    assert (
        len(
            raycluster(enableInTreeAutoscaling=True)["spec"]["headGroupSpec"]["template"]["spec"][
                "containers"
            ]
        )
        == 1
    )


def test_a_rayjobs_pod_sets_add_the_submitter_in_k8s_job_mode() -> None:
    job = RayJob(rayjob())
    pod_sets = job.pod_sets()
    assert counts(pod_sets) == [("head", 1), ("small", 2), ("tpu", 4), ("submitter", 1)]
    assert pod_sets[-1]["template"] == {
        "spec": {
            "containers": [
                {
                    "name": "ray-job-submitter",
                    "image": "rayproject/ray:2.9.0",
                    "resources": {
                        "limits": {"cpu": "1", "memory": "1Gi"},
                        "requests": {"cpu": "500m", "memory": "200Mi"},
                    },
                }
            ],
            "restartPolicy": "Never",
        }
    }
    own = pod("250m", image="submitter:1")
    assert RayJob(rayjob(submitterPodTemplate=own)).pod_sets()[-1]["template"] == own
    # The CRD's default mode is K8sJobMode.
    default = rayjob()
    del default["spec"]["submissionMode"]
    assert counts(RayJob(default).pod_sets())[-1] == ("submitter", 1)


def test_http_mode_has_no_submitter_and_sidecar_mode_counts_it_in_the_head() -> None:
    assert counts(RayJob(rayjob(submissionMode="HTTPMode")).pod_sets()) == [
        ("head", 1),
        ("small", 2),
        ("tpu", 4),
    ]
    sidecar = RayJob(rayjob(submissionMode="SidecarMode")).pod_sets()
    assert len(sidecar) == 3
    assert sidecar[0]["template"]["spec"]["containers"][1] == {
        "name": "ray-job-submitter",
        "resources": {
            "limits": {"cpu": "1", "memory": "1Gi"},
            "requests": {"cpu": "500m", "memory": "200Mi"},
        },
    }


@pytest.mark.parametrize("kind", ["RayCluster", "RayJob"])
def test_admission_puts_each_flavor_in_its_template_and_eviction_restores_them(kind: str) -> None:
    original = raycluster() if kind == "RayCluster" else rayjob()
    adapter = RayCluster if kind == "RayCluster" else RayJob
    flavors = ["a", "b", "a"] + (["b"] if kind == "RayJob" else [])
    workload = admitted_workload(adapter(copy.deepcopy(original)), flavors)
    running = adapter(copy.deepcopy(original))
    running.run_with_pod_sets_info(from_admission(workload, PLACEMENTS.get))
    admitted = merge(original, merge_patch(original, running.obj))
    assert admitted["spec"]["suspend"] is False
    spec = admitted["spec"] if kind == "RayCluster" else admitted["spec"]["rayClusterSpec"]
    head = spec["headGroupSpec"]["template"]
    small, tpu = (g["template"] for g in spec["workerGroupSpecs"])
    assert head["spec"]["nodeSelector"] == {"zone": "a"}
    assert head["metadata"]["labels"] == {POD_SET_LABEL: "head"}
    assert small["spec"]["nodeSelector"] == {"zone": "b"}
    assert small["spec"]["tolerations"] == [TOLERATION]
    assert small["metadata"]["labels"] == {POD_SET_LABEL: "small"}
    assert tpu["spec"]["nodeSelector"] == {"zone": "a"} and "tolerations" not in tpu["spec"]
    if kind == "RayJob":  # the default submitter, written with its flavor
        submitter = admitted["spec"]["submitterPodTemplate"]
        assert submitter["spec"]["nodeSelector"] == {"zone": "b"}
        assert submitter["spec"]["containers"][0]["name"] == "ray-job-submitter"

    stopping = adapter(copy.deepcopy(admitted))
    stopping.suspend()
    infos = [from_pod_set(ps) for ps in workload["spec"]["podSets"]]
    assert stopping.restore_pod_sets_info(infos)
    restored = merge(admitted, merge_patch(admitted, stopping.obj))
    assert restored["spec"]["suspend"] is True
    if kind == "RayJob":
        # Kueue leaves the submitter template it wrote, restored to the default.
        assert (
            without_empty(restored["spec"].pop("submitterPodTemplate"))
            == workload["spec"]["podSets"][-1]["template"]
        )
    assert without_empty(restored) == original
    assert not adapter(copy.deepcopy(restored)).restore_pod_sets_info(infos)  # nothing left


@pytest.mark.parametrize("kind", ["RayCluster", "RayJob"])
def test_an_admission_of_another_shape_cannot_start_and_is_not_restored(kind: str) -> None:
    adapter = RayCluster if kind == "RayCluster" else RayJob
    job = adapter(raycluster() if kind == "RayCluster" else rayjob())
    infos = from_admission(admitted_workload(job, ["a"] * len(job.pod_sets())), PLACEMENTS.get)
    with pytest.raises(PodSetInfoError, match="pod sets, got 2"):
        adapter(copy.deepcopy(job.obj)).run_with_pod_sets_info(infos[:2])
    assert not adapter(copy.deepcopy(job.obj)).restore_pod_sets_info(infos[:2])


def test_a_conflicting_node_selector_cannot_start() -> None:
    obj = rayjob()
    obj["spec"]["rayClusterSpec"]["workerGroupSpecs"][1]["template"]["spec"]["nodeSelector"] = {
        "zone": "c"
    }
    infos = from_admission(admitted_workload(RayJob(obj), ["a"] * 4), PLACEMENTS.get)
    with pytest.raises(PodSetInfoError, match="nodeSelector: zone"):
        RayJob(obj).run_with_pod_sets_info(infos)


def test_what_a_rayjobs_status_means() -> None:
    def with_status(**status: Any) -> RayJob:
        obj = rayjob()
        obj["status"] = status
        return RayJob(obj)

    assert not with_status().is_active()  # KubeRay's New
    assert not with_status(jobDeploymentStatus="Suspended").is_active()
    assert with_status(jobDeploymentStatus="Suspending").is_active()
    assert with_status(jobDeploymentStatus="Initializing").is_active()
    assert with_status(jobDeploymentStatus="Running").finished() is None
    done = with_status(jobDeploymentStatus="Complete", jobStatus="SUCCEEDED", message="ok")
    assert done.finished() is not None and done.finished().success  # type: ignore[union-attr]
    failed = with_status(jobDeploymentStatus="Failed", jobStatus="FAILED", message="boom")
    assert failed.finished() is not None and not failed.finished().success  # type: ignore[union-attr]
    assert failed.finished().message == "boom"  # type: ignore[union-attr]
    assert with_status(rayClusterStatus={"state": "ready"}).pods_ready()
    assert not with_status(rayClusterStatus={}).pods_ready()
    assert with_status(jobDeploymentStatus="ValidationFailed").is_on_hold()
    assert not with_status(jobDeploymentStatus="Running").is_on_hold()
    assert RayJob(rayjob(clusterSelector={"ray.io/cluster": "c"}, rayClusterSpec=None)).skip()
    assert not RayJob(rayjob()).skip()


def test_a_raycluster_is_active_and_ready_while_ready_and_never_finishes() -> None:
    obj = raycluster()
    assert not RayCluster(obj).is_active() and not RayCluster(obj).pods_ready()
    obj["status"] = {"state": "ready"}
    assert RayCluster(obj).is_active() and RayCluster(obj).pods_ready()
    assert RayCluster(obj).finished() is None
    obj["status"] = {"state": "suspended"}
    assert not RayCluster(obj).is_active()
    assert RayCluster(obj).supports_elastic_job() and RayJob(rayjob()).supports_elastic_job()


def test_kueues_webhook_checks() -> None:
    assert RayJob(rayjob()).validate_on_create() == []
    assert RayJob(rayjob(shutdownAfterJobFinishes=False)).validate_on_create() == [
        "spec.shutdownAfterJobFinishes: Invalid value: false: a kueue managed job should "
        "delete the cluster after finishing"
    ]
    assert RayJob(rayjob(clusterSelector={"k1": "v1"})).validate_on_create() == [
        'spec.clusterSelector: Invalid value: {"k1": "v1"}: a kueue managed job should not '
        "use an existing cluster"
    ]
    assert (
        RayJob(rayjob(clusterSelector={"k1": "v1"}, rayClusterSpec=None)).validate_on_create() == []
    )
    assert RayJob(rayjob(rayClusterSpec=None)).validate_on_create() == [
        "spec.rayClusterSpec: Required value: rayClusterSpec is required for Kueue-managed "
        "jobs that don't use clusterSelector"
    ]
    named_head = raycluster()
    named_head["spec"]["workerGroupSpecs"][0]["groupName"] = "head"
    assert RayCluster(named_head).validate_on_create() == [
        'spec.workerGroupSpecs[0].groupName: Forbidden: "head" is reserved for the head group'
    ]
    scaling = RayJob(rayjob(rayClusterSpec=cluster_spec(enableInTreeAutoscaling=True)))
    [problem] = scaling.validate_on_create()
    assert problem.startswith("spec.rayClusterSpec.enableInTreeAutoscaling: Invalid value: true")
    empty = raycluster()
    empty["spec"]["workerGroupSpecs"][0]["replicas"] = 0
    assert RayCluster(empty).validate_on_create() == []  # a pod set of 0 pods, as in Kueue
    many = raycluster()
    many["spec"]["workerGroupSpecs"] = [
        {"groupName": f"g{i}", "replicas": 1, "template": pod("1")} for i in range(18)
    ]
    assert RayCluster(many).validate_on_create() == [
        "spec.workerGroupSpecs: Too many: 19: must have at most 18 items"
    ]


def review(obj: dict[str, Any]) -> dict[str, Any]:
    return {
        "request": {
            "uid": "r",
            "operation": "CREATE",
            "kind": {"group": "ray.io", "version": "v1", "kind": obj["kind"]},
            "object": obj,
        }
    }


def patch_of(answer: dict[str, Any]) -> list[dict[str, Any]]:
    response = answer["response"]
    assert response["allowed"] is True, response
    if "patch" not in response:
        return []
    patch: list[dict[str, Any]] = json.loads(base64.b64decode(response["patch"]))
    return patch


BOTH = ("ray.io/rayjob", "ray.io/raycluster")


def test_the_webhook_creates_a_queued_ray_object_suspended() -> None:
    job, cluster = rayjob(suspend=False), raycluster()
    cluster["spec"]["suspend"] = False
    suspend = [{"op": "replace", "path": "/spec/suspend", "value": True}]
    assert patch_of(review_response(review(job), by_kind(BOTH))) == suspend
    assert patch_of(review_response(review(cluster), by_kind(BOTH))) == suspend
    del cluster["spec"]["suspend"]
    assert patch_of(review_response(review(cluster), by_kind(BOTH))) == [
        {"op": "add", "path": "/spec/suspend", "value": True}
    ]


def test_the_webhook_leaves_a_rayjob_on_an_existing_cluster_and_a_rayjobs_cluster_alone() -> None:
    on_existing = rayjob(
        suspend=False, clusterSelector={"ray.io/cluster": "c"}, rayClusterSpec=None
    )
    assert patch_of(review_response(review(on_existing), by_kind(BOTH))) == []
    child = raycluster()
    child["spec"]["suspend"] = False
    child["metadata"]["ownerReferences"] = [
        {"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "rj", "uid": "u2", "controller": True}
    ]
    assert patch_of(review_response(review(child), by_kind(BOTH))) == []
    # With the RayJob integration off, the RayJob's cluster is queued on its own.
    assert patch_of(review_response(review(child), by_kind(["ray.io/raycluster"]))) != []


def test_the_webhook_refuses_what_kueue_refuses() -> None:
    answer = review_response(review(rayjob(shutdownAfterJobFinishes=False)), by_kind(BOTH))
    assert answer["response"]["allowed"] is False
    assert "spec.shutdownAfterJobFinishes" in answer["response"]["status"]["message"]
    elastic = raycluster()
    elastic["metadata"]["annotations"] = {ELASTIC_JOB_ANNOTATION: "true"}
    assert review_response(review(elastic), by_kind(BOTH))["response"]["allowed"] is True
