"""RayJobs and RayClusters behind quota on the full local control plane, with the real
KubeRay operator (github.com/ray-project/kuberay/ray-operator v1.6.2, built from its Go
module with its CRDs: tests/cluster/kuberay.py).

What is real: the API server calling quotagate's webhook (a queued RayJob or RayCluster is
created suspended), quotagate (Workloads with Kueue's pod sets, admission with each pod
set's flavor in its template, eviction, finishing), KubeRay's RayJob and RayCluster
controllers (the RayCluster a RayJob creates, its head Service, head and worker pods, the
submitter Job, suspend and resume, deleting the cluster when the RayJob is suspended or
done, stopping the Ray job when the RayJob is deleted), the Job controller running the
submitter Job, and kube-scheduler placing every pod on its flavor's node.

What stand-ins play: the kubelet (the fake nodes: pods Running and Ready at once, and a
pod ends when the test says: tests/cluster/nodes.py), and Ray itself, which no process here
runs: the Ray head's job API that KubeRay polls over HTTP (`RayDashboard`, reached through
`HTTP_PROXY` under the head Service's DNS name), the submitter pod's `ray job submit`
(the test registers the Ray job with the stand-in dashboard once the submitter pod runs)
and the Ray job's end (the test ends it at the dashboard and completes the submitter pod,
which exits when its job does).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from api.constants import MAX_EXEC_TIME_LABEL, POD_SET_LABEL, QUEUE_NAME_LABEL
from tests.cluster.controlplane import ControlPlane
from tests.cluster.fixtures import wait_for
from tests.cluster.kuberay import KubeRayOperator, RayDashboard
from tests.e2e.conftest import webhook_controller_running
from tests.e2e.custom_jobs import set_quota, set_stop_policy, workload_condition
from tests.e2e.quota_watch import quota_watch
from tests.integration.kueue import (
    ControllerProcess,
    Kueue,
    cluster_queue,
    condition,
    flavor,
    local_queue,
)

RAY = ("ray.io", "v1")
ZONE = "topology.kubernetes.io/zone"
TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "ray", "effect": "NoSchedule"}
IMAGE = "rayproject/ray:2.9.0"


@pytest.fixture(scope="module")
def kuberay(
    full_cluster: ControlPlane,
    kubeconfig_path: str,
    api_client: client.ApiClient,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[KubeRayOperator]:
    """The real KubeRay operator, with the stand-in Ray dashboard it polls."""
    dashboard = RayDashboard().start()
    operator = KubeRayOperator(kubeconfig_path, tmp_path_factory.mktemp("kuberay"), dashboard)
    try:
        yield operator.start(api_client)
    finally:
        operator.stop()
        dashboard.stop()
        print("\n--- KubeRay operator log tail ---\n" + operator.log()[-3000:])


@pytest.fixture(scope="module")
def ray_quotagate(
    full_cluster: ControlPlane,
    kuberay: KubeRayOperator,
    kubeconfig_path: str,
    crds_installed: list[str],
    api_client: client.ApiClient,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ControllerProcess]:
    """quotagate queueing RayJobs and RayClusters, with its webhook, keeping `PodsReady`
    (waitForPodsReady with a timeout no test reaches)."""
    with webhook_controller_running(
        kubeconfig_path,
        api_client,
        tmp_path_factory.mktemp("ray"),
        "ray",
        {
            "waitForPodsReady": {"timeout": "10m"},
            "integrations": {"frameworks": ["batch/job", "ray.io/rayjob", "ray.io/raycluster"]},
        },
    ) as process:
        yield process


def container(name: str, cpu: str) -> dict[str, Any]:
    return {
        "name": name,
        "image": IMAGE,
        "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}},
    }


def cluster_spec(workers: int) -> dict[str, Any]:
    """A head of 1 cpu and a worker group `workers` of `workers` pods of 1 cpu."""
    return {
        "headGroupSpec": {
            "rayStartParams": {},
            "template": {"spec": {"containers": [container("ray-head", "1")]}},
        },
        "workerGroupSpecs": [
            {
                "groupName": "workers",
                "replicas": workers,
                "minReplicas": workers,
                "maxReplicas": workers,
                "rayStartParams": {},
                "template": {"spec": {"containers": [container("ray-worker", "1")]}},
            }
        ],
    }


def rayjob(name: str, workers: int = 2, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": name, "labels": {QUEUE_NAME_LABEL: "lq", **labels}},
        "spec": {
            "entrypoint": "python -c 'import ray; ray.init()'",
            "shutdownAfterJobFinishes": True,
            "rayClusterSpec": cluster_spec(workers),
        },
    }


def raycluster(name: str, workers: int = 2, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name, "labels": {QUEUE_NAME_LABEL: "lq", **labels}},
        "spec": cluster_spec(workers),
    }


class Ray:
    """RayJobs, RayClusters and their pods in one namespace."""

    def __init__(self, api_client: client.ApiClient, namespace: str) -> None:
        self.custom = client.CustomObjectsApi(api_client)
        self.core = client.CoreV1Api(api_client)
        self.batch = client.BatchV1Api(api_client)
        self.namespace = namespace

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        plural = f"{body['kind'].lower()}s"
        created: dict[str, Any] = self.custom.create_namespaced_custom_object(
            *RAY, self.namespace, plural, body
        )
        return created

    def get(self, plural: str, name: str) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = self.custom.get_namespaced_custom_object(
                *RAY, self.namespace, plural, name
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return found

    def job(self, name: str) -> dict[str, Any]:
        found = self.get("rayjobs", name)
        assert found is not None
        return found

    def delete(self, plural: str, name: str) -> None:
        self.custom.delete_namespaced_custom_object(*RAY, self.namespace, plural, name)

    def pods(self, selector: str) -> list[Any]:
        return [
            p
            for p in self.core.list_namespaced_pod(self.namespace, label_selector=selector).items
            if p.metadata.deletion_timestamp is None
        ]

    def running(self, selector: str, count: int, timeout: float = 90) -> list[Any]:
        """Wait until `count` pods of `selector` are Running, and return them."""
        found: list[Any] = wait_for(
            lambda: (
                len(pods := [p for p in self.pods(selector) if p.status.phase == "Running"])
                == count
                and pods
            ),
            timeout=timeout,
            what=f"{count} pods {selector} running",
        )
        return found

    def job_status(self, name: str, wanted: str, timeout: float = 90) -> dict[str, Any]:
        """Wait until the RayJob's jobDeploymentStatus is `wanted`; its status."""
        status: dict[str, Any] = wait_for(
            lambda: (
                (s := self.job(name).get("status") or {}).get("jobDeploymentStatus") == wanted and s
            ),
            timeout=timeout,
            what=f"RayJob {name} {wanted}",
        )
        return status


def wait_condition(
    kueue: Kueue,
    namespace: str,
    workload: str,
    type_: str,
    status: str,
    what: str,
    timeout: float = 30,
) -> dict[str, Any]:
    """Wait until the Workload's condition `type_` has `status`; the condition."""
    found: dict[str, Any] = wait_for(
        lambda: (
            (c := workload_condition(kueue, namespace, workload, type_))
            and c["status"] == status
            and c
        ),
        timeout=timeout,
        what=what,
    )
    return found


def submit_when_the_submitter_runs(ray: Ray, dashboard: RayDashboard, name: str) -> dict[str, Any]:
    """Play the submitter pod's `ray job submit`: once KubeRay's submitter Job has a running
    pod, the Ray job exists on the head the RayJob's dashboard URL names. Returns the
    RayJob's status then."""
    [pod] = ray.running(f"batch.kubernetes.io/job-name={name}", 1)
    status = ray.job(name)["status"]
    dashboard.submit(status["jobId"], status["dashboardURL"])
    return {**status, "submitterNode": pod.spec.node_name}


def test_a_rayjob_is_queued_admitted_per_pod_set_evicted_restored_and_finished(
    ray_quotagate: ControllerProcess,
    kuberay: KubeRayOperator,
    full_cluster: ControlPlane,
    api_client: client.ApiClient,
    namespace: str,
) -> None:
    kueue = Kueue(api_client)
    ray = Ray(api_client, namespace)
    dashboard = kuberay.dashboard
    cq, rf_a, rf_b = f"{namespace}-cq", f"{namespace}-a", f"{namespace}-b"
    kueue.apply(
        flavor(rf_a, {ZONE: "node-a"}),
        flavor(rf_b, {ZONE: "node-b"}, [TOLERATION]),
        cluster_queue(
            cq, {rf_a: {"cpu": "1500m", "memory": "8Gi"}, rf_b: {"cpu": 1, "memory": "8Gi"}}
        ),
        local_queue(namespace, "lq", cq),
    )
    with quota_watch(api_client, namespace) as watch:
        created = ray.create(rayjob("train"))
        assert created["spec"]["suspend"] is True  # quotagate's webhook
        workload = wait_for(
            lambda: next(iter(kueue.workloads(namespace)), None), what="the RayJob's Workload"
        )
        assert workload["metadata"]["name"] == kueue.workload_name(namespace, "RayJob", "train")
        assert workload["metadata"]["ownerReferences"][0]["kind"] == "RayJob"
        # Kueue's pod sets: the head, each worker group, the submitter (K8sJobMode).
        assert [(ps["name"], ps["count"]) for ps in workload["spec"]["podSets"]] == [
            ("head", 1),
            ("workers", 2),
            ("submitter", 1),
        ]
        reason = wait_for(
            lambda: condition(
                kueue.get_workload(namespace, kueue.workload_name(namespace, "RayJob", "train")),
                "QuotaReserved",
            ),
            what="the pending reason",
        )
        assert "podset workers: insufficient quota for cpu" in reason["message"], reason
        assert ray.job("train")["spec"]["suspend"] is True
        assert not ray.pods("ray.io/originated-from-cr-name=train")

        # Quota for all: the head and submitter get flavor a, the workers flavor b.
        set_quota(
            kueue, cq, {rf_a: {"cpu": "1500m", "memory": "8Gi"}, rf_b: {"cpu": 2, "memory": "8Gi"}}
        )
        admitted = wait_for(
            lambda: (j := ray.job("train"))["spec"].get("suspend") is False and j,
            timeout=30,
            what="the RayJob resumed",
        )
        assignments = {
            a["name"]: a["flavors"]["cpu"]
            for a in kueue.get_workload(
                namespace, kueue.workload_name(namespace, "RayJob", "train")
            )["status"]["admission"]["podSetAssignments"]
        }
        assert assignments == {"head": rf_a, "workers": rf_b, "submitter": rf_a}
        spec = admitted["spec"]["rayClusterSpec"]
        head = spec["headGroupSpec"]["template"]
        workers = spec["workerGroupSpecs"][0]["template"]
        assert head["spec"]["nodeSelector"] == {ZONE: "node-a"}
        assert workers["spec"]["nodeSelector"] == {ZONE: "node-b"}
        assert workers["spec"]["tolerations"] == [TOLERATION]
        assert head["metadata"]["labels"][POD_SET_LABEL] == "head"
        assert admitted["spec"]["submitterPodTemplate"]["spec"]["nodeSelector"] == {ZONE: "node-a"}

        # KubeRay makes the RayJob's RayCluster: it carries the queue label (KubeRay copies
        # the RayJob's labels) but is the RayJob's, neither suspended nor a Workload.
        cluster_name = wait_for(
            lambda: (ray.job("train").get("status") or {}).get("rayClusterName"),
            what="the RayJob's cluster",
        )
        cluster = wait_for(lambda: ray.get("rayclusters", cluster_name), what="the RayCluster")
        assert cluster["metadata"]["labels"][QUEUE_NAME_LABEL] == "lq"
        ray.running(f"ray.io/cluster={cluster_name}", 3)
        nodes = {
            p.metadata.labels["ray.io/node-type"]: p.spec.node_name
            for p in ray.pods(f"ray.io/cluster={cluster_name}")
        }
        assert nodes == {"head": "node-a", "worker": "node-b"}
        status = submit_when_the_submitter_runs(ray, dashboard, "train")
        assert status["submitterNode"] == "node-a"
        ray.job_status("train", "Running")
        wait_for(lambda: dashboard.polled(status["jobId"]), what="KubeRay polling the Ray job")
        assert ray.get("rayclusters", cluster_name)["spec"].get("suspend") is not True
        assert [w["metadata"]["name"] for w in kueue.workloads(namespace)] == [
            kueue.workload_name(namespace, "RayJob", "train")
        ]
        wait_condition(
            kueue,
            namespace,
            kueue.workload_name(namespace, "RayJob", "train"),
            "PodsReady",
            "True",
            "PodsReady True once the cluster is ready",
        )

        # Drain the ClusterQueue: evicted, suspended, templates restored; KubeRay deletes
        # the cluster and the submitter Job; once Suspended the reservation is released.
        set_stop_policy(kueue, cq, "HoldAndDrain")
        wait_condition(
            kueue,
            namespace,
            kueue.workload_name(namespace, "RayJob", "train"),
            "QuotaReserved",
            "False",
            "the eviction acknowledged",
            timeout=90,
        )
        stopped = ray.job("train")
        assert stopped["spec"]["suspend"] is True
        assert stopped["status"]["jobDeploymentStatus"] == "Suspended"
        made_from = {
            ps["name"]: ps["template"]
            for ps in kueue.get_workload(
                namespace, kueue.workload_name(namespace, "RayJob", "train")
            )["spec"]["podSets"]
        }
        cluster_spec_now = stopped["spec"]["rayClusterSpec"]
        for name, template in (
            ("head", cluster_spec_now["headGroupSpec"]["template"]),
            ("workers", cluster_spec_now["workerGroupSpecs"][0]["template"]),
            ("submitter", stopped["spec"]["submitterPodTemplate"]),
        ):
            assert "nodeSelector" not in template["spec"], name
            assert "tolerations" not in template["spec"], name
            assert (template.get("metadata") or {}) == (made_from[name].get("metadata") or {})
        # KubeRay reports Suspended once the RayCluster object is gone (deleted in the
        # background): its pods go with garbage collection, after the release (as in Kueue).
        assert ray.get("rayclusters", cluster_name) is None
        wait_for(
            lambda: not ray.pods(f"ray.io/cluster={cluster_name}"),
            what="the cluster's pods gone",
        )
        wait_for(
            lambda: not ray.pods("batch.kubernetes.io/job-name=train"),
            what="the submitter's pod gone",
        )
        evicted = condition(
            kueue.get_workload(namespace, kueue.workload_name(namespace, "RayJob", "train")),
            "Evicted",
        )
        assert evicted is not None and evicted["reason"] == "ClusterQueueStopped"

        # Resume: admitted again; KubeRay makes a new cluster and submitter; the Ray job
        # succeeds, the submitter exits, the RayJob is Complete, the Workload Finished.
        set_stop_policy(kueue, cq, "None")
        status = submit_when_the_submitter_runs(ray, dashboard, "train")
        ray.job_status("train", "Running")
        dashboard.finish(status["jobId"], "SUCCEEDED", "done")
        [submitter] = ray.running("batch.kubernetes.io/job-name=train", 1)
        full_cluster.lifecycle.complete(namespace, submitter.metadata.name)  # type: ignore[attr-defined]
        finished = wait_for(
            lambda: workload_condition(
                kueue, namespace, kueue.workload_name(namespace, "RayJob", "train"), "Finished"
            ),
            timeout=90,
            what="the Workload Finished",
        )
        assert finished["reason"] == "Succeeded"
        done = ray.job("train")
        assert done["status"]["jobDeploymentStatus"] == "Complete"
        assert done["status"]["jobStatus"] == "SUCCEEDED"
        wait_for(
            lambda: kueue.get_cluster_queue(cq).get("status", {}).get("reservingWorkloads") == 0,
            what="the quota returned",
        )
        wait_for(
            lambda: ray.get("rayclusters", done["status"]["rayClusterName"]) is None,
            what="KubeRay deleting the finished RayJob's cluster",
        )
    assert watch.observed(), "the quota sampler never saw quota held"
    assert watch.reserved.get(rf_a, 0) <= 1500 and watch.reserved.get(rf_b, 0) <= 2000
    assert watch.running.get("node-a", 0) <= 1500 and watch.running.get("node-b", 0) <= 2000


def test_a_raycluster_runs_until_its_maximum_execution_time_and_waits_while_a_rayjob_holds_the_quota(
    ray_quotagate: ControllerProcess,
    kuberay: KubeRayOperator,
    full_cluster: ControlPlane,
    api_client: client.ApiClient,
    namespace: str,
) -> None:
    """A RayCluster never finishes: it holds its quota until it is evicted, here by its
    `max-exec-time-seconds`. A RayJob deleted while it runs gives its quota back (KubeRay
    stops the Ray job at the dashboard); the RayCluster waiting for it is admitted."""
    kueue = Kueue(api_client)
    ray = Ray(api_client, namespace)
    dashboard = kuberay.dashboard
    cq, rf = f"{namespace}-cq", f"{namespace}-rf"
    kueue.apply(
        flavor(rf),
        cluster_queue(cq, {rf: {"cpu": 4, "memory": "16Gi"}}),
        local_queue(namespace, "lq", cq),
    )
    with quota_watch(api_client, namespace) as watch:
        ray.create(rayjob("first", workers=2))  # 1 + 2 + 0.5 cpu
        status = submit_when_the_submitter_runs(ray, dashboard, "first")
        ray.job_status("first", "Running")
        created = ray.create(raycluster("serve", workers=2, **{MAX_EXEC_TIME_LABEL: "10"}))
        assert created["spec"]["suspend"] is True
        reason = wait_for(
            lambda: workload_condition(
                kueue,
                namespace,
                kueue.workload_name(namespace, "RayCluster", "serve"),
                "QuotaReserved",
            ),
            what="the RayCluster's pending reason",
        )
        assert reason["status"] == "False"
        workload = kueue.get_workload(
            namespace, kueue.workload_name(namespace, "RayCluster", "serve")
        )
        assert [(ps["name"], ps["count"]) for ps in workload["spec"]["podSets"]] == [
            ("head", 1),
            ("workers", 2),
        ]
        assert workload["spec"]["maximumExecutionTimeSeconds"] == 10
        assert not ray.pods("ray.io/cluster=serve")

        # Deleting the running RayJob: KubeRay stops its Ray job, garbage collection takes
        # its Workload, its cluster and submitter; the RayCluster is admitted.
        first = kueue.workload_name(namespace, "RayJob", "first")
        ray.delete("rayjobs", "first")
        wait_for(
            lambda: (
                ("POST", status["dashboardURL"], f"/api/jobs/{status['jobId']}/stop")
                in dashboard.requests
            ),
            what="KubeRay stopping the deleted RayJob's Ray job",
        )
        wait_for(
            lambda: workload_condition(kueue, namespace, first, "QuotaReserved") is None,
            what="the RayJob's Workload deleted",
        )
        wait_for(
            lambda: (ray.get("rayclusters", "serve") or {}).get("spec", {}).get("suspend") is False,
            timeout=60,
            what="the RayCluster resumed",
        )
        ray.running("ray.io/cluster=serve", 3)
        wait_for(
            lambda: (
                (ray.get("rayclusters", "serve") or {}).get("status", {}).get("state") == "ready"
            ),
            what="the RayCluster ready",
        )
        wait_condition(
            kueue,
            namespace,
            kueue.workload_name(namespace, "RayCluster", "serve"),
            "PodsReady",
            "True",
            "PodsReady True",
        )

        # Its maximum execution time passes: deactivated, suspended, pods gone, released.
        wait_condition(
            kueue,
            namespace,
            kueue.workload_name(namespace, "RayCluster", "serve"),
            "QuotaReserved",
            "False",
            "the RayCluster's eviction acknowledged",
            timeout=60,
        )
        evicted = condition(
            kueue.get_workload(namespace, kueue.workload_name(namespace, "RayCluster", "serve")),
            "Evicted",
        )
        assert evicted is not None
        assert evicted["reason"] == "DeactivatedDueToMaximumExecutionTimeExceeded", evicted
        assert (
            kueue.get_workload(namespace, kueue.workload_name(namespace, "RayCluster", "serve"))[
                "spec"
            ]["active"]
            is False
        )
        stopped = ray.get("rayclusters", "serve")
        assert stopped is not None and stopped["spec"]["suspend"] is True
        assert "nodeSelector" not in stopped["spec"]["headGroupSpec"]["template"]["spec"]
        assert not ray.pods("ray.io/cluster=serve")
        assert (stopped.get("status") or {}).get("state") == "suspended"
        assert (
            condition(
                kueue.get_workload(
                    namespace, kueue.workload_name(namespace, "RayCluster", "serve")
                ),
                "Finished",
            )
            is None
        )

        serve = kueue.workload_name(namespace, "RayCluster", "serve")
        ray.delete("rayclusters", "serve")
        wait_for(
            lambda: workload_condition(kueue, namespace, serve, "QuotaReserved") is None,
            what="the RayCluster's Workload deleted with it",
        )
    assert watch.reserved.get(rf, 0) <= 4000
    assert watch.running_total <= 4000


def test_the_webhook_refuses_what_kueue_refuses_and_leaves_a_rayjob_on_an_existing_cluster(
    ray_quotagate: ControllerProcess, api_client: client.ApiClient, namespace: str
) -> None:
    ray = Ray(api_client, namespace)
    body = rayjob("keep")
    body["spec"]["shutdownAfterJobFinishes"] = False
    with pytest.raises(ApiException) as refused:
        ray.create(body)
    assert refused.value.status == 422
    assert (
        "spec.shutdownAfterJobFinishes: Invalid value: false: a kueue managed job should delete "
        "the cluster after finishing"
    ) in json.loads(refused.value.body)["message"]
    scaling = raycluster("scaling")
    scaling["spec"]["enableInTreeAutoscaling"] = True
    with pytest.raises(ApiException) as refused:
        ray.create(scaling)
    assert "spec.enableInTreeAutoscaling" in json.loads(refused.value.body)["message"]
    on_existing = rayjob("existing")
    del on_existing["spec"]["rayClusterSpec"]
    on_existing["spec"]["clusterSelector"] = {"ray.io/cluster": "somewhere"}
    created = ray.create(on_existing)
    assert created["spec"].get("suspend") is not True
