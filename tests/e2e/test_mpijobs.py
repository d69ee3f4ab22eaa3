"""MPIJobs (kubeflow.org/v2beta1) behind quota on the full local control plane, with the
real MPI operator (github.com/kubeflow/mpi-operator v0.8.2, its CRD, built from its Go
module: tests/cluster/operators.py). quotagate's webhook creates a queue-labelled MPIJob
suspended; its Workload has Kueue's pod sets `launcher` and `worker`; admission merges
each pod set's flavor into its replica template and resumes the MPIJob; the MPI operator
creates the workers and the launcher Job, kube-scheduler places their pods and the fake
nodes run them (no MPI program runs: the launcher's pod succeeds when the test says so)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from api.constants import MAX_EXEC_TIME_LABEL, QUEUE_NAME_LABEL
from tests.cluster.controlplane import ControlPlane
from tests.cluster.fixtures import wait_for
from tests.cluster.nodes import RUN_SECONDS
from tests.cluster.operators import MPIOperator
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
    condition,
)

GROUP, VERSION, PLURAL = "kubeflow.org", "v2beta1", "mpijobs"
ROLE = "training.kubeflow.org/job-role"


@pytest.fixture(scope="module")
def mpi_operator(
    full_cluster: ControlPlane,
    kubeconfig_path: str,
    api_client: client.ApiClient,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[MPIOperator]:
    operator = MPIOperator(kubeconfig_path, tmp_path_factory.mktemp("mpi"))
    with operator_running(operator, api_client):
        yield operator


@pytest.fixture(scope="module")
def mpijob_quotagate(
    full_cluster: ControlPlane,
    mpi_operator: MPIOperator,
    kubeconfig_path: str,
    crds_installed: list[str],
    api_client: client.ApiClient,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ControllerProcess]:
    """quotagate queueing MPIJobs, with its webhook and waitForPodsReady."""
    with webhook_controller_running(
        kubeconfig_path,
        api_client,
        tmp_path_factory.mktemp("mpijobs"),
        "mpijobs",
        {
            "integrations": {"frameworks": ["kubeflow.org/mpijob"]},
            "waitForPodsReady": {"enable": True, "timeout": "10m"},
        },
    ) as process:
        yield process


def replica(container: str, replicas: int) -> dict[str, Any]:
    return {
        "replicas": replicas,
        "restartPolicy": "Never",
        "template": {
            "spec": {
                "containers": [
                    {"name": container, "image": "mpi-pi", "resources": {"requests": {"cpu": "1"}}}
                ]
            }
        },
    }


def mpijob(name: str, workers: int = 2) -> dict[str, Any]:
    """A launcher (1 cpu) and `workers` workers (1 cpu each)."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "MPIJob",
        "metadata": {"name": name, "labels": {QUEUE_NAME_LABEL: "lq"}},
        "spec": {
            "slotsPerWorker": 1,
            "sshAuthMountPath": "/root/.ssh",
            "mpiImplementation": "OpenMPI",
            "runPolicy": {"cleanPodPolicy": "Running"},
            "mpiReplicaSpecs": {
                "Launcher": replica("launcher", 1),
                "Worker": replica("worker", workers),
            },
        },
    }


class MPIJobs(CustomJobs):
    group, version, plural, kind = GROUP, VERSION, PLURAL, "MPIJob"
    name_label = "training.kubeflow.org/job-name"

    def is_suspended(self, obj: dict[str, Any]) -> bool:
        return obj["spec"]["runPolicy"].get("suspend") is True

    def complete(self, lifecycle: Any, name: str, count: int, workers: bool = True) -> None:
        """Succeed the launcher's pod once the MPIJob's `count` pods run, and first the
        workers' (else they run until the MPI operator deletes them, after the launcher
        succeeded, beside whatever is admitted next)."""
        pods = self.running(name, count)
        for pod in sorted(pods, key=lambda p: p.metadata.labels[ROLE] == "launcher"):
            if workers or pod.metadata.labels[ROLE] == "launcher":
                lifecycle.complete(self.namespace, pod.metadata.name)


def templates(mpi: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {kind: spec["template"] for kind, spec in mpi["spec"]["mpiReplicaSpecs"].items()}


def test_an_mpijob_is_queued_admitted_per_pod_set_evicted_restored_and_finished(
    mpijob_quotagate: ControllerProcess,
    full_cluster: ControlPlane,
    api_client: client.ApiClient,
    namespace: str,
) -> None:
    kueue = Kueue(api_client)
    jobs = MPIJobs(api_client, namespace)
    cq, rf_a, rf_b = two_flavor_queue(kueue, namespace, cpu_a=1, cpu_b=1)
    with quota_watch(api_client, namespace) as watch:
        body = mpijob("pi")
        body["metadata"]["labels"][MAX_EXEC_TIME_LABEL] = "3600"
        created = jobs.create(body)
        assert created["spec"]["runPolicy"]["suspend"] is True  # quotagate's webhook
        workload = wait_for(
            lambda: next(iter(kueue.workloads(namespace)), None), what="the MPIJob's Workload"
        )
        assert workload["metadata"]["name"] == kueue.workload_name(namespace, "MPIJob", "pi")
        assert workload["metadata"]["ownerReferences"][0]["kind"] == "MPIJob"
        assert workload["spec"]["maximumExecutionTimeSeconds"] == 3600
        pod_sets = workload["spec"]["podSets"]
        assert [(ps["name"], ps["count"]) for ps in pod_sets] == [("launcher", 1), ("worker", 2)]
        assert all("minCount" not in ps for ps in pod_sets)  # no partial admission
        reason = wait_for(
            lambda: workload_condition(
                kueue, namespace, kueue.workload_name(namespace, "MPIJob", "pi"), "QuotaReserved"
            ),
            what="the pending reason",
        )
        assert "podset worker: insufficient quota for cpu" in reason["message"]
        assert not jobs.pods("pi")

        # Quota for both: the launcher gets flavor a, the workers flavor b.
        set_quota(kueue, cq, {rf_a: {"cpu": 1}, rf_b: {"cpu": 2}})
        resumed = wait_for(
            lambda: (mpi := jobs.get("pi"))["spec"]["runPolicy"].get("suspend") is False and mpi,
            timeout=30,
            what="the MPIJob resumed",
        )
        launcher, worker = templates(resumed)["Launcher"], templates(resumed)["Worker"]
        assert launcher["spec"]["nodeSelector"] == {ZONE: "node-a"}
        assert worker["spec"]["nodeSelector"] == {ZONE: "node-b"}
        assert worker["spec"]["tolerations"] == [TOLERATION]
        running = jobs.running("pi", 3)
        assert {(p.metadata.labels[ROLE], p.spec.node_name) for p in running} == {
            ("launcher", "node-a"),
            ("worker", "node-b"),
        }
        ready = wait_for(
            lambda: (
                (
                    c := workload_condition(
                        kueue,
                        namespace,
                        kueue.workload_name(namespace, "MPIJob", "pi"),
                        "PodsReady",
                    )
                )
                and c["status"] == "True"
                and c
            ),
            timeout=60,
            what="PodsReady from the MPIJob's Running condition",
        )
        assert ready["reason"] == "Started"

        # Drain: evicted, suspended with its templates restored, pods gone, released.
        set_stop_policy(kueue, cq, "HoldAndDrain")
        wait_released(kueue, namespace, kueue.workload_name(namespace, "MPIJob", "pi"))
        stopped = jobs.get("pi")
        assert stopped["spec"]["runPolicy"]["suspend"] is True
        made_from = {
            ps["name"]: ps["template"]
            for ps in kueue.get_workload(namespace, kueue.workload_name(namespace, "MPIJob", "pi"))[
                "spec"
            ]["podSets"]
        }
        for kind, template in templates(stopped).items():
            assert "nodeSelector" not in template["spec"]
            assert template["spec"] == made_from[kind.lower()]["spec"]
        wait_for(lambda: not jobs.pods("pi"), timeout=60, what="the MPIJob's pods gone")
        evicted = condition(
            kueue.get_workload(namespace, kueue.workload_name(namespace, "MPIJob", "pi")), "Evicted"
        )
        assert evicted is not None and evicted["reason"] == "ClusterQueueStopped"

        # Resume: admitted again (the MPI operator copies the launcher template's scheduling
        # directives into its suspended Job), the launcher succeeds, the Workload finishes.
        set_stop_policy(kueue, cq, "None")
        running = jobs.running("pi", 3)
        assert {(p.metadata.labels[ROLE], p.spec.node_name) for p in running} == {
            ("launcher", "node-a"),
            ("worker", "node-b"),
        }
        # The launcher alone: the MPI operator deletes the workers (cleanPodPolicy Running).
        jobs.complete(full_cluster.lifecycle, "pi", 3, workers=False)  # type: ignore[attr-defined]
        wait_finished_and_returned(
            kueue, namespace, kueue.workload_name(namespace, "MPIJob", "pi"), cq
        )
        assert condition(jobs.get("pi"), "Succeeded")["status"] == "True"
        wait_for(lambda: not jobs.pods("pi"), timeout=60, what="the workers cleaned up")
        jobs.delete_with_its_workload(kueue, "pi")
    check_never_over_committed(watch, rf_a, rf_b, cpu_b=2)


def test_a_second_mpijob_waits_suspended_while_the_first_holds_the_quota(
    mpijob_quotagate: ControllerProcess,
    full_cluster: ControlPlane,
    api_client: client.ApiClient,
    namespace: str,
) -> None:
    second = mpijob("second", workers=1)  # its launcher succeeds a second after it runs
    second["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["metadata"] = {
        "annotations": {RUN_SECONDS: "1"}
    }
    second_waits_while_the_first_holds_the_quota(
        api_client,
        MPIJobs(api_client, namespace),
        full_cluster.lifecycle,  # type: ignore[attr-defined]
        mpijob("first"),
        second,
        pods=3,
    )
