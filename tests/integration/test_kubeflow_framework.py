"""The TrainJob and MPIJob integrations on a real API server with the CRDs of their Go
modules (no Trainer or MPI operator runs here: the objects are created suspended, as the
webhook would): a TrainJob waits for the runtime it is described by, is admitted into its
Kueue runtime patch and restored on eviction; an MPIJob gets each pod set's flavor; the
`integrations.frameworks` switch."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from api.constants import POD_SET_LABEL, QUEUE_NAME_LABEL, WORKLOAD_ANNOTATION
from tests.cluster.fixtures import install_crds, wait_for
from tests.cluster.modules import ensure_module
from tests.integration.conftest import StartConfigured
from tests.integration.kueue import Kueue, cluster_queue, condition, flavor, local_queue
from tests.integration.test_job_framework import suspended_job

TRAINER = ("trainer.kubeflow.org", "v1alpha1")
MPI = ("kubeflow.org", "v2beta1", "mpijobs")
ZONE = "topology.kubernetes.io/zone"


@pytest.fixture(scope="module")
def kubeflow_crds(api_client: client.ApiClient) -> list[str]:
    """The Trainer's CRDs and the MPIJob CRD (tests/cluster/modules.py)."""
    return [
        *install_crds(api_client, ensure_module("trainer").crds),
        *install_crds(api_client, ensure_module("mpi-operator").crds),
    ]


def queue(kueue: Kueue, namespace: str) -> str:
    rf = f"{namespace}-rf"
    kueue.apply(
        flavor(rf, {ZONE: "zone-a"}),
        cluster_queue(f"{namespace}-cq", {rf: {"cpu": 8}}),
        local_queue(namespace, "lq", f"{namespace}-cq"),
    )
    return rf


def training_runtime(name: str) -> dict[str, Any]:
    def job(name: str, step: str | None, parallelism: int) -> dict[str, Any]:
        template: dict[str, Any] = {
            "spec": {
                "parallelism": parallelism,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            {"name": "node", "image": "i", "resources": {"requests": {"cpu": "1"}}}
                        ],
                    }
                },
            }
        }
        if step:
            template["metadata"] = {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": step}}
        return {"name": name, "replicas": 1, "template": template}

    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": name},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "template": {
                "spec": {"replicatedJobs": [job("prep", None, 2), job("node", "trainer", 1)]}
            },
        },
    }


def suspended_trainjob(name: str, runtime: str) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "labels": {QUEUE_NAME_LABEL: "lq"}},
        "spec": {
            "suspend": True,
            "runtimeRef": {"name": runtime, "kind": "TrainingRuntime"},
            "trainer": {"numNodes": 3},
        },
    }


def suspended_mpijob(name: str) -> dict[str, Any]:
    def replica(count: int) -> dict[str, Any]:
        return {
            "replicas": count,
            "template": {
                "spec": {
                    "containers": [
                        {"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}
                    ]
                }
            },
        }

    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name, "labels": {QUEUE_NAME_LABEL: "lq"}},
        "spec": {
            "runPolicy": {"suspend": True},
            "mpiReplicaSpecs": {"Launcher": replica(1), "Worker": replica(3)},
        },
    }


def workload_named(kueue: Kueue, namespace: str, name: str) -> dict[str, Any] | None:
    return next((w for w in kueue.workloads(namespace) if w["metadata"]["name"] == name), None)


def test_a_trainjob_waits_for_its_runtime_runs_in_its_kueue_patch_and_is_restored(
    configured_controller: StartConfigured,
    kueue: Kueue,
    kubeflow_crds: list[str],
    namespace: str,
    api_client: client.ApiClient,
) -> None:
    custom, core = client.CustomObjectsApi(api_client), client.CoreV1Api(api_client)
    configured_controller(
        {"integrations": {"frameworks": ["trainer.kubeflow.org/trainjob"]}}, namespace
    )
    queue(kueue, namespace)
    custom.create_namespaced_custom_object(
        *TRAINER, namespace, "trainjobs", suspended_trainjob("train", "later")
    )
    train = kueue.workload_name(namespace, "TrainJob", "train")

    def warned() -> Any:
        events = core.list_namespaced_event(
            namespace, field_selector="involvedObject.kind=TrainJob,involvedObject.name=train"
        ).items
        return next((e for e in events if e.reason == "ErrWorkloadCompose"), None)

    event = wait_for(warned, what="the missing runtime reported")
    assert event.type == "Warning" and "runtime 'later' not found" in event.message
    assert workload_named(kueue, namespace, train) is None

    # The runtime appears: the TrainJob is described by it and admitted.
    custom.create_namespaced_custom_object(
        *TRAINER, namespace, "trainingruntimes", training_runtime("later")
    )
    created = wait_for(
        lambda: workload_named(kueue, namespace, train), what="the TrainJob's Workload"
    )
    assert [(ps["name"], ps["count"]) for ps in created["spec"]["podSets"]] == [
        ("prep", 2),
        ("node", 3),
    ]

    def trainjob() -> dict[str, Any]:
        found: dict[str, Any] = custom.get_namespaced_custom_object(
            *TRAINER, namespace, "trainjobs", "train"
        )
        return found

    resumed = wait_for(
        lambda: (tj := trainjob())["spec"]["suspend"] is False and tj, what="the TrainJob resumed"
    )
    [patch] = resumed["spec"]["runtimePatches"]
    assert patch["manager"] == "kueue.x-k8s.io/manager"
    assert [
        (rj["name"], rj["template"]["spec"]["template"])
        for rj in patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    ] == [
        (
            name,
            {
                "metadata": {
                    # Kueue names the Workload on every pod set while TAS is on
                    "annotations": {WORKLOAD_ANNOTATION: train},
                    "labels": {POD_SET_LABEL: name},
                },
                "spec": {"nodeSelector": {ZONE: "zone-a"}},
            },
        )
        for name in ("prep", "node")
    ]

    # Deactivated: suspended, the patch emptied (no jobs are active), the quota released.
    kueue.custom.patch_namespaced_custom_object(
        "kueue.x-k8s.io",
        "v1beta2",
        namespace,
        "workloads",
        train,
        {"spec": {"active": False}},
    )
    stopped = wait_for(
        lambda: (
            (tj := trainjob())["spec"]["suspend"] is True
            and not tj["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]
            and tj
        ),
        what="the TrainJob suspended and its patch emptied",
    )
    assert stopped["spec"]["runtimePatches"][0]["manager"] == "kueue.x-k8s.io/manager"
    wait_for(
        lambda: (
            (c := condition(kueue.get_workload(namespace, train), "QuotaReserved"))
            and c["status"] == "False"
        ),
        what="the eviction acknowledged",
    )
    wait_for(
        lambda: (
            kueue.get_cluster_queue(f"{namespace}-cq").get("status", {}).get("reservingWorkloads")
            == 0
        ),
        what="the quota released",
    )


def test_an_mpijob_runs_with_each_pod_sets_flavor(
    configured_controller: StartConfigured,
    kueue: Kueue,
    kubeflow_crds: list[str],
    namespace: str,
    api_client: client.ApiClient,
) -> None:
    custom = client.CustomObjectsApi(api_client)
    configured_controller({"integrations": {"frameworks": ["kubeflow.org/mpijob"]}}, namespace)
    queue(kueue, namespace)
    custom.create_namespaced_custom_object(*MPI[:2], namespace, MPI[2], suspended_mpijob("pi"))
    pi = kueue.workload_name(namespace, "MPIJob", "pi")
    created = wait_for(lambda: workload_named(kueue, namespace, pi), what="the MPIJob's Workload")
    assert [(ps["name"], ps["count"]) for ps in created["spec"]["podSets"]] == [
        ("launcher", 1),
        ("worker", 3),
    ]
    resumed = wait_for(
        lambda: (
            (mpi := custom.get_namespaced_custom_object(*MPI[:2], namespace, MPI[2], "pi"))["spec"][
                "runPolicy"
            ]["suspend"]
            is False
            and mpi
        ),
        what="the MPIJob resumed",
    )
    for kind in ("Launcher", "Worker"):
        template = resumed["spec"]["mpiReplicaSpecs"][kind]["template"]
        assert template["spec"]["nodeSelector"] == {ZONE: "zone-a"}
        assert template["metadata"]["labels"] == {POD_SET_LABEL: kind.lower()}


def test_the_frameworks_list_switches_the_kubeflow_integrations(
    configured_controller: StartConfigured,
    kueue: Kueue,
    kubeflow_crds: list[str],
    namespace: str,
    api_client: client.ApiClient,
) -> None:
    """With only batch/job, queue-labelled TrainJobs and MPIJobs are left alone; with their
    integrations on, they are queued."""
    custom = client.CustomObjectsApi(api_client)
    off = configured_controller({"integrations": {"frameworks": ["batch/job"]}}, namespace)
    queue(kueue, namespace)
    custom.create_namespaced_custom_object(
        *TRAINER, namespace, "trainingruntimes", training_runtime("rt")
    )
    custom.create_namespaced_custom_object(
        *TRAINER, namespace, "trainjobs", suspended_trainjob("left", "rt")
    )
    custom.create_namespaced_custom_object(*MPI[:2], namespace, MPI[2], suspended_mpijob("left"))
    client.BatchV1Api(api_client).create_namespaced_job(namespace, suspended_job("queued"))
    wait_for(lambda: kueue.workloads(namespace), what="the Job's Workload")
    queued = kueue.workload_name(namespace, "Job", "queued")
    assert [w["metadata"]["name"] for w in kueue.workloads(namespace)] == [queued]
    assert "integrations enabled: batch/job" in off.log()
    off.stop()
    on = configured_controller(
        {"integrations": {"frameworks": ["kubeflow.org/mpijob", "trainer.kubeflow.org/trainjob"]}},
        namespace,
    )
    wait_for(
        lambda: (
            {w["metadata"]["name"] for w in kueue.workloads(namespace)}
            == {
                queued,
                kueue.workload_name(namespace, "TrainJob", "left"),
                kueue.workload_name(namespace, "MPIJob", "left"),
            }
        ),
        what="both queued",
    )
    assert "integrations enabled: kubeflow.org/mpijob, trainer.kubeflow.org/trainjob" in on.log()
