"""A batch/v1 Job through the job framework on the full local control plane (the webhook
suspends it, the Job controller and kube-scheduler run it, fake nodes play the kubelet):
evicted and restored, admitted again and finished, with the quota never over-committed;
and partial admission end to end (`kueue.x-k8s.io/job-min-parallelism`)."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from api.constants import JOB_MIN_PARALLELISM_ANNOTATION, POD_SET_LABEL
from tests.cluster.controlplane import ControlPlane
from tests.cluster.fixtures import wait_for
from tests.cluster.nodes import RUN_SECONDS, queued_job
from tests.e2e.quota_watch import quota_watch
from tests.integration.kueue import (
    ControllerProcess,
    Kueue,
    cluster_queue,
    condition,
    flavor,
    local_queue,
)

ZONE = "topology.kubernetes.io/zone"
TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}


def live_pods(core: client.CoreV1Api, namespace: str, job: str) -> list[Any]:
    return [
        pod
        for pod in core.list_namespaced_pod(namespace, label_selector=f"job-name={job}").items
        if pod.metadata.deletion_timestamp is None and pod.status.phase in ("Pending", "Running")
    ]


def set_stop_policy(kueue: Kueue, cq: str, policy: str) -> None:
    kueue.custom.patch_cluster_custom_object(
        "kueue.x-k8s.io", "v1beta2", "clusterqueues", cq, {"spec": {"stopPolicy": policy}}
    )


def test_an_evicted_job_is_suspended_restored_and_admitted_again(
    webhook_controller: ControllerProcess,
    full_cluster: ControlPlane,
    api_client: client.ApiClient,
    namespace: str,
) -> None:
    kueue = Kueue(api_client)
    batch, core = client.BatchV1Api(api_client), client.CoreV1Api(api_client)
    lifecycle = full_cluster.lifecycle  # type: ignore[attr-defined]
    cq, rf = f"{namespace}-cq", f"{namespace}-rf"
    kueue.apply(
        flavor(rf, {ZONE: "node-b"}, [TOLERATION]),
        cluster_queue(cq, {rf: {"cpu": 2}}),
        local_queue(namespace, "lq", cq),
    )
    job = queued_job("long", parallelism=2)
    del job["spec"]["template"]["metadata"]["annotations"][RUN_SECONDS]  # runs until told
    original = job["spec"]["template"]
    with quota_watch(api_client, namespace) as watch:
        batch.create_namespaced_job(namespace, job)
        wait_for(lambda: len(live_pods(core, namespace, "long")) == 2, timeout=60, what="2 pods")
        running = batch.read_namespaced_job("long", namespace).spec.template
        assert running.spec.node_selector == {ZONE: "node-b"}
        assert running.metadata.labels[POD_SET_LABEL] == "main"

        set_stop_policy(kueue, cq, "HoldAndDrain")
        released = wait_for(
            lambda: (
                (
                    c := condition(
                        kueue.get_workload(
                            namespace, kueue.workload_name(namespace, "Job", "long")
                        ),
                        "QuotaReserved",
                    )
                )
                and c["status"] == "False"
                and c
            ),
            timeout=60,
            what="the eviction acknowledged",
        )
        assert released["reason"] == "PendingEvaluation"
        stopped = batch.read_namespaced_job("long", namespace)
        assert stopped.spec.suspend is True
        assert not live_pods(core, namespace, "long")
        # The template is the one the Job was created with (the Job controller's own labels
        # aside), as Kueue restores it from the Workload's pod set.
        assert stopped.spec.template.spec.node_selector is None
        assert stopped.spec.template.spec.tolerations is None
        labels = stopped.spec.template.metadata.labels
        assert POD_SET_LABEL not in labels and labels["batch.kubernetes.io/job-name"] == "long"
        assert stopped.spec.template.metadata.annotations == (
            original["metadata"].get("annotations") or None
        )

        set_stop_policy(kueue, cq, "None")
        pods = wait_for(
            lambda: (
                len(p := live_pods(core, namespace, "long")) == 2
                and all(x.status.phase == "Running" for x in p)
                and p
            ),
            timeout=60,
            what="the Job running again",
        )
        assert {p.spec.node_name for p in pods} == {"node-b"}
        for pod in pods:
            lifecycle.complete(namespace, pod.metadata.name)
        finished = wait_for(
            lambda: condition(
                kueue.get_workload(namespace, kueue.workload_name(namespace, "Job", "long")),
                "Finished",
            ),
            timeout=60,
            what="the Workload Finished",
        )
        assert finished["reason"] == "Succeeded"
    history = kueue.get_workload(namespace, kueue.workload_name(namespace, "Job", "long"))[
        "status"
    ]["schedulingStats"]["evictions"]
    assert history == [{"reason": "ClusterQueueStopped", "underlyingCause": "", "count": 1}]
    assert watch.reserved.get(rf, 0) <= 2000 and watch.running.get("node-b", 0) <= 2000


def test_a_job_with_min_parallelism_runs_with_the_pods_that_fit(
    webhook_controller: ControllerProcess,
    full_cluster: ControlPlane,
    api_client: client.ApiClient,
    namespace: str,
) -> None:
    kueue = Kueue(api_client)
    batch, core = client.BatchV1Api(api_client), client.CoreV1Api(api_client)
    cq, rf = f"{namespace}-cq", f"{namespace}-rf"
    kueue.apply(flavor(rf), cluster_queue(cq, {rf: {"cpu": 3}}), local_queue(namespace, "lq", cq))
    job = queued_job("elastic", parallelism=5)
    job["metadata"]["annotations"] = {JOB_MIN_PARALLELISM_ANNOTATION: "2"}
    with quota_watch(api_client, namespace) as watch:
        batch.create_namespaced_job(namespace, job)
        wait_for(
            lambda: batch.read_namespaced_job("elastic", namespace).spec.suspend is False,
            timeout=30,
            what="the Job resumed",
        )
        workload = kueue.get_workload(namespace, kueue.workload_name(namespace, "Job", "elastic"))
        [pod_set] = workload["spec"]["podSets"]
        assert (pod_set["count"], pod_set["minCount"]) == (5, 2)
        [assignment] = workload["status"]["admission"]["podSetAssignments"]
        assert (assignment["count"], assignment["resourceUsage"]["cpu"]) == (3, "3")
        assert batch.read_namespaced_job("elastic", namespace).spec.parallelism == 3
        wait_for(
            lambda: condition(
                kueue.get_workload(namespace, kueue.workload_name(namespace, "Job", "elastic")),
                "Finished",
            ),
            timeout=90,
            what="the Job's 5 completions, 3 at a time",
        )
    job_done = batch.read_namespaced_job("elastic", namespace)
    assert job_done.status.succeeded == 5
    assert watch.reserved.get(rf, 0) <= 3000
    assert watch.running_total <= 3000
    assert not live_pods(core, namespace, "elastic")
