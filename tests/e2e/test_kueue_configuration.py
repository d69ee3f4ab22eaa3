"""A Kueue Configuration file, as Kueue reads it, driving quotagate on the full control plane
(issue 46): queue enforcement for unlabelled Jobs (manageJobsWithoutQueueName,
managedJobsNamespaceSelector, the LocalQueue named default), resource transformations in
quota accounting, and the fields not implemented in the metrics."""

from __future__ import annotations

import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.cluster.controlplane import ControlPlane, free_port
from tests.cluster.fixtures import wait_for
from tests.cluster.nodes import RUN_SECONDS, queued_job
from tests.e2e.conftest import webhook_controller_running
from tests.integration.kueue import (
    ControllerProcess,
    Kueue,
    cluster_queue,
    condition,
    flavor,
    local_queue,
)

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
CREDITS = "example.com/credits"

# Written as a Kueue user writes it (Kueue's documented fields only, plus quotagate's own
# section for what a local test run needs: a self-signed webhook certificate).
KUEUE_CONFIGURATION: dict[str, Any] = {
    "apiVersion": "config.kueue.x-k8s.io/v1beta2",
    "kind": "Configuration",
    "manageJobsWithoutQueueName": True,
    "managedJobsNamespaceSelector": {"matchLabels": {"quotagate.test/namespace": "true"}},
    "internalCertManagement": {"enable": False},
    "clientConnection": {"qps": 300, "burst": 500},
    "integrations": {"frameworks": ["batch/job", "ray.io/rayservice"]},
    "featureGates": {"DisableWaitForPodsReady": True},
    "resources": {
        "transformations": [{"input": "cpu", "strategy": "Retain", "outputs": {CREDITS: "2"}}]
    },
    "quotagate": {"webhook": {"certDir": None}},
}


@pytest.fixture(scope="module")
def kueue_configured(
    full_cluster: ControlPlane,
    kubeconfig_path: str,
    crds_installed: list[str],
    api_client: client.ApiClient,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ControllerProcess]:
    port = free_port()
    with webhook_controller_running(
        kubeconfig_path,
        api_client,
        tmp_path_factory.mktemp("kueue-config"),
        "kueue-config",
        KUEUE_CONFIGURATION,
        ("--metrics-port", str(port)),
    ) as process:
        process.metrics_port = port
        yield process


def _queues(kueue: Kueue, namespace: str, local_queue_name: str, cpu: int) -> str:
    cq = f"{namespace}-cq"
    kueue.apply(
        flavor(f"{namespace}-rf"),
        cluster_queue(cq, {f"{namespace}-rf": {"cpu": cpu, CREDITS: 2 * cpu}}),
        local_queue(namespace, local_queue_name, cq),
    )
    # The webhook answers from the controller's view: wait until it has seen the queue.
    wait_for(
        lambda: (
            (condition(kueue.get_local_queue(namespace, local_queue_name), "Active") or {}).get(
                "status"
            )
            == "True"
        ),
        what=f"LocalQueue {local_queue_name} active",
    )
    return cq


def _workload(kueue: Kueue, namespace: str, name: str) -> dict[str, Any] | None:
    """The Workload, or None while it does not exist yet."""
    return next((w for w in kueue.workloads(namespace) if w["metadata"]["name"] == name), None)


def _condition(kueue: Kueue, namespace: str, name: str, type_: str) -> dict[str, Any] | None:
    found = _workload(kueue, namespace, name)
    return condition(found, type_) if found is not None else None


def _unlabelled(name: str, run_seconds: int = 1) -> dict[str, Any]:
    job = queued_job(name)
    del job["metadata"]["labels"]
    job["spec"]["template"]["metadata"]["annotations"][RUN_SECONDS] = str(run_seconds)
    return job


def test_an_unlabelled_job_gets_the_default_local_queue_and_waits_for_quota(
    kueue_configured: ControllerProcess, api_client: client.ApiClient, namespace: str
) -> None:
    kueue = Kueue(api_client)
    batch = client.BatchV1Api(api_client)
    _queues(kueue, namespace, "default", cpu=1)
    first = batch.create_namespaced_job(namespace, _unlabelled("first", run_seconds=300))
    assert first.metadata.labels[QUEUE_LABEL] == "default"  # the webhook labelled it
    assert first.spec.suspend is True
    wait_for(
        lambda: (
            (
                _condition(
                    kueue, namespace, kueue.workload_name(namespace, "Job", "first"), "Admitted"
                )
                or {}
            ).get("status")
            == "True"
        ),
        timeout=60,
        what="the first Job's Workload admitted",
    )
    admitted = kueue.get_workload(namespace, kueue.workload_name(namespace, "Job", "first"))
    # The transformation charges 2 credits per cpu beside the cpu it retains.
    [assignment] = admitted["status"]["admission"]["podSetAssignments"]
    assert assignment["resourceUsage"] == {"cpu": "1", CREDITS: "2"}

    second = batch.create_namespaced_job(namespace, _unlabelled("second"))
    assert second.spec.suspend is True
    pending = wait_for(
        lambda: _condition(
            kueue, namespace, kueue.workload_name(namespace, "Job", "second"), "QuotaReserved"
        ),
        what="the second Job's pending reason",
    )
    assert pending["status"] == "False"
    assert "insufficient quota" in pending["message"]
    assert batch.read_namespaced_job("second", namespace).spec.suspend is True


def test_an_unlabelled_job_without_a_default_queue_stays_suspended_without_a_queue(
    kueue_configured: ControllerProcess, api_client: client.ApiClient, namespace: str
) -> None:
    kueue = Kueue(api_client)
    batch = client.BatchV1Api(api_client)
    _queues(kueue, namespace, "lq", cpu=4)
    created = batch.create_namespaced_job(namespace, _unlabelled("loose"))
    assert QUEUE_LABEL not in (created.metadata.labels or {})
    assert created.spec.suspend is True  # manageJobsWithoutQueueName: managed all the same
    workload = wait_for(
        lambda: next(iter(kueue.workloads(namespace)), None), what="the Job's Workload"
    )
    assert not workload["spec"].get("queueName")
    # Given a queue, it is admitted and runs.
    batch.patch_namespaced_job("loose", namespace, {"metadata": {"labels": {QUEUE_LABEL: "lq"}}})
    wait_for(
        lambda: batch.read_namespaced_job("loose", namespace).status.succeeded == 1,
        timeout=90,
        what="the Job to run once given a queue",
    )


def test_a_job_in_a_namespace_the_selector_does_not_match_is_left_alone(
    kueue_configured: ControllerProcess, api_client: client.ApiClient
) -> None:
    kueue = Kueue(api_client)
    batch = client.BatchV1Api(api_client)
    name = f"system-{uuid.uuid4().hex[:6]}"
    job = queued_job(name, queue="default")  # even labelled: kube-system is never managed
    created = batch.create_namespaced_job("kube-system", job)
    try:
        assert not created.spec.suspend
        wait_for(
            lambda: batch.read_namespaced_job(name, "kube-system").status.succeeded == 1,
            timeout=90,
            what="the kube-system Job to run unqueued",
        )
        uid = created.metadata.uid
        assert not [
            w
            for w in kueue.workloads("kube-system")
            if any(o["uid"] == uid for o in w["metadata"].get("ownerReferences") or ())
        ]
    finally:
        batch.delete_namespaced_job(name, "kube-system", propagation_policy="Background")


def test_the_fields_not_implemented_are_in_the_log_and_the_metrics(
    kueue_configured: ControllerProcess,
) -> None:
    log = kueue_configured.log()
    assert "configuration field not implemented: clientConnection.qps" in log
    assert "integrations.frameworks[1]: ray.io/rayservice" in log
    with urllib.request.urlopen(
        f"http://127.0.0.1:{kueue_configured.metrics_port}/metrics", timeout=10
    ) as response:
        text = response.read().decode()
    for field in ("clientConnection.qps", "clientConnection.burst", "integrations.frameworks[1]"):
        assert f'quotagate_configuration_field_not_implemented{{field="{field}"}} 1.0' in text


def test_kubectl_quotagate_describe_says_why_a_job_is_or_is_not_managed(
    kueue_configured: ControllerProcess,
    api_client: client.ApiClient,
    kubeconfig_path: str,
    namespace: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from controller.kubectl.plugin import main

    kueue = Kueue(api_client)
    batch = client.BatchV1Api(api_client)
    _queues(kueue, namespace, "default", cpu=4)
    batch.create_namespaced_job(namespace, _unlabelled("described"))
    config = tmp_path / "kueue.yaml"
    config.write_text(yaml.safe_dump(KUEUE_CONFIGURATION))
    wait_for(
        lambda: _workload(kueue, namespace, kueue.workload_name(namespace, "Job", "described")),
        what="the Job's Workload",
    )

    def describe(name: str, where: str) -> str:
        argv = ["describe", "job", name, "-n", where, "--kubeconfig", kubeconfig_path]
        assert main([*argv, "--config", str(config)]) == 0
        return capsys.readouterr().out

    out = describe("described", namespace)
    assert "Managed:          yes" in out
    assert f"it has the label {QUEUE_LABEL}=default" in out
    assert "Workload:         job-described" in out
    assert "manageJobsWithoutQueueName=true" in out
    name = f"described-{uuid.uuid4().hex[:6]}"
    batch.create_namespaced_job("kube-system", queued_job(name, queue="default"))
    try:
        out = describe(name, "kube-system")
        assert "Managed:          no" in out
        assert (
            "namespace kube-system does not match managedJobsNamespaceSelector "
            "(quotagate.test/namespace=true)" in out
        )
    finally:
        batch.delete_namespaced_job(name, "kube-system", propagation_policy="Background")
