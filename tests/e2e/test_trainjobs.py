"""Kubeflow Trainer TrainJobs behind quota on the full local control plane, with the real
Trainer controller manager (github.com/kubeflow/trainer/v2 v2.3.0, its CRDs and webhooks)
over the real JobSet controller (v0.12.0), both built from their Go modules
(tests/cluster/operators.py). quotagate's webhook creates a queue-labelled TrainJob
suspended; its Workload has the pod sets of the JobSet the Trainer runs for it (one per
replicatedJob of its TrainingRuntime); admission writes each pod set's flavor into the
TrainJob's Kueue runtime patch and resumes it; the Trainer merges the patch into the
JobSet, the JobSet controller creates the Jobs, kube-scheduler places their pods and the
fake nodes run them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from api.constants import MAX_EXEC_TIME_LABEL, POD_SET_LABEL, QUEUE_NAME_LABEL
from tests.cluster.controlplane import ControlPlane
from tests.cluster.fixtures import wait_for
from tests.cluster.nodes import RUN_SECONDS
from tests.cluster.operators import JobSetController, TrainerController
from tests.e2e.conftest import webhook_controller_running
from tests.e2e.custom_jobs import (
    TOLERATION,
    ZONE,
    CustomJobs,
    check_never_over_committed,
    operator_running,
    second_waits_while_the_first_holds_the_quota,
    set_quota,
    set_stop_policy,
    two_flavor_queue,
    wait_finished_and_returned,
    wait_released,
    workload_condition,
)
from tests.e2e.quota_watch import quota_watch
from tests.integration.kueue import (
    ControllerProcess,
    Kueue,
    cluster_queue,
    condition,
    flavor,
    local_queue,
)

GROUP, VERSION = "trainer.kubeflow.org", "v1alpha1"
JOBSET = ("jobset.x-k8s.io", "v1alpha2", "jobsets")
KUEUE_MANAGER = "kueue.x-k8s.io/manager"
ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"


@pytest.fixture(scope="module")
def trainer_controller(
    jobset_controller: JobSetController,
    kubeconfig_path: str,
    api_client: client.ApiClient,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[TrainerController]:
    controller = TrainerController(kubeconfig_path, tmp_path_factory.mktemp("trainer"))
    with operator_running(controller, api_client):
        yield controller


@pytest.fixture(scope="module")
def trainjob_quotagate(
    full_cluster: ControlPlane,
    trainer_controller: TrainerController,
    kubeconfig_path: str,
    crds_installed: list[str],
    api_client: client.ApiClient,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ControllerProcess]:
    """quotagate queueing TrainJobs, with its webhook and waitForPodsReady."""
    with webhook_controller_running(
        kubeconfig_path,
        api_client,
        tmp_path_factory.mktemp("trainjobs"),
        "trainjobs",
        {
            "integrations": {"frameworks": ["trainer.kubeflow.org/trainjob"]},
            "waitForPodsReady": {"enable": True, "timeout": "10m"},
        },
    ) as process:
        yield process


def replicated_job(name: str, step: str | None, seconds: int | None) -> dict[str, Any]:
    """A replicatedJob of a runtime: one container (`node` for the trainer step) of 1 cpu
    the fake nodes run for `seconds`, or until the test completes it (None). Its pods are
    annotated, as runtimes' pods often are: the Trainer (v2.3.0) cannot put the templates
    of a runtime whose pods have no labels or annotations back into a suspended JobSet once
    Kueue's runtime patch is emptied (docs/integrations.md)."""
    annotations = {"example.com/team": "ml"}
    if seconds is not None:
        annotations[RUN_SECONDS] = str(seconds)
    pod_meta = {"annotations": annotations}
    template: dict[str, Any] = {
        "spec": {
            "template": {
                "metadata": pod_meta,
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "node" if step == "trainer" else name,
                            "image": "busybox",
                            "resources": {"requests": {"cpu": "1"}},
                        }
                    ],
                },
            }
        }
    }
    if step is not None:
        template["metadata"] = {"labels": {ANCESTOR: step}}
    return {"name": name, "replicas": 1, "template": template}


def runtime(kind: str, name: str, seconds: int | None) -> dict[str, Any]:
    """A torch runtime: `prep` (1 pod) beside the trainer step `node` (numNodes pods)."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": kind,
        "metadata": {"name": name},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        replicated_job("prep", None, seconds),
                        replicated_job("node", "trainer", seconds),
                    ]
                }
            },
        },
    }


def trainjob(
    name: str, runtime_name: str, kind: str = "TrainingRuntime", nodes: int = 2
) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "TrainJob",
        "metadata": {"name": name, "labels": {QUEUE_NAME_LABEL: "lq"}},
        "spec": {
            "runtimeRef": {"name": runtime_name, "kind": kind},
            "trainer": {"numNodes": nodes, "resourcesPerNode": {"requests": {"cpu": "1"}}},
        },
    }


class TrainJobs(CustomJobs):
    group, version, plural, kind = GROUP, VERSION, "trainjobs", "TrainJob"
    name_label = "jobset.sigs.k8s.io/jobset-name"  # the Trainer's JobSet has its name

    def create_runtime(self, body: dict[str, Any]) -> None:
        if body["kind"] == "ClusterTrainingRuntime":
            self.custom.create_cluster_custom_object(
                GROUP, VERSION, "clustertrainingruntimes", body
            )
        else:
            self.custom.create_namespaced_custom_object(
                GROUP, VERSION, self.namespace, "trainingruntimes", body
            )

    def jobset(self, name: str) -> dict[str, Any] | None:
        """The JobSet the Trainer runs for the TrainJob `name`."""
        try:
            found: dict[str, Any] = self.custom.get_namespaced_custom_object(
                *JOBSET[:2], self.namespace, JOBSET[2], name
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return found


def kueue_patch(trainjob: dict[str, Any]) -> dict[str, Any]:
    """The replicatedJob patches of the TrainJob's Kueue runtime patch, by name."""
    patch = next(p for p in trainjob["spec"]["runtimePatches"] if p["manager"] == KUEUE_MANAGER)
    jobs = patch["trainingRuntimeSpec"]["template"]["spec"].get("replicatedJobs") or []
    return {rj["name"]: rj["template"]["spec"]["template"] for rj in jobs}


def pod_templates(jobset: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        rj["name"]: rj["template"]["spec"]["template"] for rj in jobset["spec"]["replicatedJobs"]
    }


def test_a_trainjob_is_queued_admitted_per_pod_set_evicted_restored_and_finished(
    trainjob_quotagate: ControllerProcess,
    full_cluster: ControlPlane,
    api_client: client.ApiClient,
    namespace: str,
) -> None:
    kueue = Kueue(api_client)
    jobs = TrainJobs(api_client, namespace)
    cq, rf_a, rf_b = two_flavor_queue(kueue, namespace, cpu_a=1, cpu_b=1)
    jobs.create_runtime(runtime("TrainingRuntime", "torch", seconds=None))
    with quota_watch(api_client, namespace) as watch:
        created = jobs.create(trainjob("train", "torch"))
        assert created["spec"]["suspend"] is True  # quotagate's webhook
        workload = wait_for(
            lambda: next(iter(kueue.workloads(namespace)), None), what="the TrainJob's Workload"
        )
        assert workload["metadata"]["name"] == kueue.workload_name(namespace, "TrainJob", "train")
        assert workload["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"
        # Kueue's pod sets: the runtime's replicatedJobs; the trainer step runs numNodes pods
        # with resourcesPerNode; no partial admission for TrainJobs.
        pod_sets = workload["spec"]["podSets"]
        assert [(ps["name"], ps["count"]) for ps in pod_sets] == [("prep", 1), ("node", 2)]
        assert all("minCount" not in ps for ps in pod_sets)
        reason = wait_for(
            lambda: workload_condition(
                kueue,
                namespace,
                kueue.workload_name(namespace, "TrainJob", "train"),
                "QuotaReserved",
            ),
            what="the pending reason",
        )
        assert "podset node: insufficient quota for cpu" in reason["message"]
        assert jobs.get("train")["spec"]["suspend"] is True
        assert not jobs.pods("train")

        # Quota for both: prep gets flavor a, the trainer's nodes flavor b.
        set_quota(kueue, cq, {rf_a: {"cpu": 1}, rf_b: {"cpu": 2}})
        resumed = wait_for(
            lambda: (tj := jobs.get("train"))["spec"].get("suspend") is False and tj,
            timeout=30,
            what="the TrainJob resumed",
        )
        admitted = kueue_patch(resumed)
        assert admitted["prep"]["spec"] == {"nodeSelector": {ZONE: "node-a"}}
        assert admitted["node"]["spec"] == {
            "nodeSelector": {ZONE: "node-b"},
            "tolerations": [TOLERATION],
        }
        assert admitted["node"]["metadata"]["labels"] == {POD_SET_LABEL: "node"}
        # The Trainer merged the patch into the JobSet it runs; the pods land on each flavor.
        running = jobs.running("train", 3)
        nodes = {
            p.metadata.labels["jobset.sigs.k8s.io/replicatedjob-name"]: p.spec.node_name
            for p in running
        }
        assert nodes == {"prep": "node-a", "node": "node-b"}
        child = jobs.jobset("train")
        assert child is not None
        assert pod_templates(child)["node"]["spec"]["tolerations"] == [TOLERATION]
        ready = wait_for(
            lambda: (
                (
                    c := workload_condition(
                        kueue,
                        namespace,
                        kueue.workload_name(namespace, "TrainJob", "train"),
                        "PodsReady",
                    )
                )
                and c["status"] == "True"
                and c
            ),
            timeout=60,
            what="PodsReady from the TrainJob's jobsStatus",
        )
        assert ready["reason"] == "Started"

        # Drain: evicted, suspended, Kueue's patch emptied once its jobs are not active.
        set_stop_policy(kueue, cq, "HoldAndDrain")
        wait_released(kueue, namespace, kueue.workload_name(namespace, "TrainJob", "train"))
        stopped = jobs.get("train")
        assert stopped["spec"]["suspend"] is True
        assert kueue_patch(stopped) == {}
        wait_for(lambda: not jobs.pods("train"), timeout=60, what="the TrainJob's pods gone")
        evicted = condition(
            kueue.get_workload(namespace, kueue.workload_name(namespace, "TrainJob", "train")),
            "Evicted",
        )
        assert evicted is not None and evicted["reason"] == "ClusterQueueStopped"
        # The Trainer puts the runtime's own templates back into the suspended JobSet.
        wait_for(
            lambda: (
                (js := jobs.jobset("train")) is not None
                and js["spec"].get("suspend") is True
                and all("nodeSelector" not in t["spec"] for t in pod_templates(js).values())
            ),
            timeout=60,
            what="the JobSet suspended with the runtime's templates",
        )

        # Resume: admitted again, runs to completion, the Workload finishes, quota returns.
        set_stop_policy(kueue, cq, "None")
        jobs.complete(full_cluster.lifecycle, "train", 3)  # type: ignore[attr-defined]
        wait_finished_and_returned(
            kueue, namespace, kueue.workload_name(namespace, "TrainJob", "train"), cq
        )
        assert condition(jobs.get("train"), "Complete")["status"] == "True"
    check_never_over_committed(watch, rf_a, rf_b, cpu_b=2)


def test_a_second_trainjob_waits_suspended_while_the_first_holds_the_quota(
    trainjob_quotagate: ControllerProcess,
    full_cluster: ControlPlane,
    api_client: client.ApiClient,
    namespace: str,
) -> None:
    jobs = TrainJobs(api_client, namespace)
    held, quick = f"{namespace}-held", f"{namespace}-quick"  # cluster-scoped: unique names
    jobs.create_runtime(runtime("ClusterTrainingRuntime", held, seconds=None))
    jobs.create_runtime(runtime("ClusterTrainingRuntime", quick, seconds=1))
    second_waits_while_the_first_holds_the_quota(
        api_client,
        jobs,
        full_cluster.lifecycle,  # type: ignore[attr-defined]
        trainjob("first", held, "ClusterTrainingRuntime"),
        trainjob("second", quick, "ClusterTrainingRuntime"),
        pods=3,
    )


def test_a_trainjob_past_its_maximum_execution_time_is_stopped(
    trainjob_quotagate: ControllerProcess,
    api_client: client.ApiClient,
    namespace: str,
) -> None:
    """`kueue.x-k8s.io/max-exec-time-seconds`: the Workload is deactivated once admitted
    that long, and the TrainJob is suspended and its Kueue runtime patch emptied."""
    kueue = Kueue(api_client)
    jobs = TrainJobs(api_client, namespace)
    cq, rf = f"{namespace}-cq", f"{namespace}-rf"
    kueue.apply(flavor(rf), cluster_queue(cq, {rf: {"cpu": 3}}), local_queue(namespace, "lq", cq))
    jobs.create_runtime(runtime("TrainingRuntime", "torch", seconds=None))
    body = trainjob("limited", "torch")
    body["metadata"]["labels"][MAX_EXEC_TIME_LABEL] = "3"
    jobs.create(body)
    workload = wait_for(
        lambda: next(iter(kueue.workloads(namespace)), None), what="the TrainJob's Workload"
    )
    assert workload["spec"]["maximumExecutionTimeSeconds"] == 3
    jobs.running("limited", 3)
    evicted = wait_for(
        lambda: (
            (
                c := workload_condition(
                    kueue,
                    namespace,
                    kueue.workload_name(namespace, "TrainJob", "limited"),
                    "Evicted",
                )
            )
            and c["status"] == "True"
            and c
        ),
        timeout=60,
        what="the Workload deactivated",
    )
    assert evicted["reason"] == "DeactivatedDueToMaximumExecutionTimeExceeded"
    assert (
        kueue.get_workload(namespace, kueue.workload_name(namespace, "TrainJob", "limited"))[
            "spec"
        ]["active"]
        is False
    )
    wait_for(lambda: not jobs.pods("limited"), timeout=60, what="the TrainJob's pods gone")
    stopped = wait_for(
        lambda: (
            (tj := jobs.get("limited"))["spec"]["suspend"] is True and not kueue_patch(tj) and tj
        ),
        timeout=60,
        what="the TrainJob suspended and restored",
    )
    assert condition(stopped, "Complete") is None
    jobs.delete_with_its_workload(kueue, "limited")
