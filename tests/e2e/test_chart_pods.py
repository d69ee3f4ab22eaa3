"""The chart's default install really runs (issue 18): its Deployments' containers run as
local processes exactly as rendered (tests/cluster/podrunner.py: command, args, env,
ConfigMap/Secret/emptyDir volumes, only the ServiceAccount's token), on the full control
plane. The controller manages its own webhook certificates; the API server calls the
webhook through the chart's Service over TLS; queue-labelled Jobs and pods are admitted and
run on the fake nodes; the cost controller writes costs; both report ready and stop with 0."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.cluster.chart import CHART, helm
from tests.cluster.controlplane import ControlPlane, free_port
from tests.cluster.fixtures import wait_for
from tests.cluster.nodes import RUN_SECONDS, queued_job
from tests.cluster.podrunner import DeploymentProcess
from tests.integration.kueue import (
    Kueue,
    cluster_queue,
    condition,
    flavor,
    local_queue,
    rbac_refusals,
)


@pytest.fixture
def release(
    full_cluster: ControlPlane,
    kubeconfig_path: str,
    api_client: client.ApiClient,
    crds_installed: list[str],
) -> Iterator[tuple[str, str, list[dict[str, Any]]]]:
    """The chart installed with its defaults (only the ports made free on this host)."""
    name, namespace = f"qg{uuid.uuid4().hex[:6]}", f"qgs-{uuid.uuid4().hex[:6]}"
    installed = helm(
        "install",
        name,
        str(CHART),
        "--namespace",
        namespace,
        "--create-namespace",
        "--skip-crds",  # the session installed the same CRDs already
        "--set",
        f"controller.config.metricsPort={free_port()}",
        "--set",
        f"controller.healthPort={free_port()}",
        "--set",
        f"webhook.port={free_port()}",
        "--set",
        f"costController.healthPort={free_port()}",
        kubeconfig=kubeconfig_path,
    )
    assert installed.returncode == 0, installed.stderr
    manifest = helm("get", "manifest", name, "--namespace", namespace, kubeconfig=kubeconfig_path)
    docs = [d for d in yaml.safe_load_all(manifest.stdout) if d]
    try:
        yield name, namespace, docs
    finally:
        helm("uninstall", name, "--namespace", namespace, kubeconfig=kubeconfig_path)
        client.CoreV1Api(api_client).delete_namespace(namespace)


def test_the_charts_default_install_runs_and_admits_through_its_own_webhook(
    release: tuple[str, str, list[dict[str, Any]]],
    api_client: client.ApiClient,
    namespace: str,
    tmp_path: Path,
) -> None:
    name, system, docs = release
    fullname = f"{name}-quotagate"
    controller = DeploymentProcess(
        api_client, docs, f"{fullname}-controller", tmp_path / "controller"
    )
    cost = DeploymentProcess(api_client, docs, f"{fullname}-cost-controller", tmp_path / "cost")
    (tmp_path / "controller").mkdir()
    (tmp_path / "cost").mkdir()
    controller.start()
    cost.start()
    try:
        wait_for(lambda: controller.probe("/healthz") == 200, timeout=60, what="/healthz")
        wait_for(lambda: controller.probe("/readyz") == 200, timeout=60, what="/readyz")
        wait_for(lambda: cost.probe("/readyz") == 200, timeout=60, what="cost /readyz")

        # Internal certificate management: the Secret holds a CA, the webhook its bundle.
        core = client.CoreV1Api(api_client)
        secret = core.read_namespaced_secret(f"{fullname}-webhook-cert", system)
        ca = base64.b64decode(secret.data["ca.crt"])
        admission = client.AdmissionregistrationV1Api(api_client)
        for config in (
            admission.read_mutating_webhook_configuration(fullname),
            admission.read_validating_webhook_configuration(fullname),
        ):
            for hook in config.webhooks:
                assert base64.b64decode(hook.client_config.ca_bundle) == ca
                assert hook.client_config.service.name == f"{fullname}-webhook"

        # Kueue's kinds go through the validating webhook (Service, TLS): a broken
        # ClusterQueue is refused with Kueue's message, good objects are created.
        kueue = Kueue(api_client)
        cq = f"{namespace}-cq"
        broken = cluster_queue(f"{namespace}-broken", {f"{namespace}-rf": {"cpu": 4}})
        broken["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["lendingLimit"] = "1"
        with pytest.raises(ApiException) as refused:
            _create_through_webhook(lambda: kueue.apply(broken))
        assert refused.value.status == 403
        assert (
            'lendingLimit: Invalid value: "1": must be nil when cohort is empty'
            in (json.loads(refused.value.body)["message"])
        )
        for obj in (
            flavor(f"{namespace}-rf"),
            cluster_queue(cq, {f"{namespace}-rf": {"cpu": 4}}),
            local_queue(namespace, "lq", cq),
        ):
            _create_through_webhook(lambda obj=obj: kueue.apply(obj))
        # A Job: the API server asks the webhook (Service, TLS): created suspended.
        batch = client.BatchV1Api(api_client)
        created = _create_through_webhook(
            lambda: batch.create_namespaced_job(namespace, queued_job("j", parallelism=2))
        )
        assert created.spec.suspend is True
        try:
            job = wait_for(
                lambda: (
                    (j := batch.read_namespaced_job("j", namespace)).status.succeeded == 2 and j
                ),
                timeout=90,
                what="the Job admitted, run on the fake nodes and complete",
            )
        except TimeoutError as exc:
            seen = {
                "workloads": [w.get("status") for w in kueue.workloads(namespace)],
                "job": batch.read_namespaced_job("j", namespace).status.to_dict(),
                "pods": [
                    (p.metadata.name, p.status.phase, p.spec.node_name)
                    for p in core.list_namespaced_pod(namespace).items
                ],
                "controller log": controller.log()[-3000:],
            }
            raise AssertionError(f"{exc}\n{yaml.safe_dump(seen)}") from None
        assert job.spec.suspend is False
        # A plain pod: gated at creation, admitted, ungated, run.
        pod = core.create_namespaced_pod(
            namespace,
            {
                "metadata": {
                    "name": "p",
                    "labels": {"kueue.x-k8s.io/queue-name": "lq"},
                    "annotations": {RUN_SECONDS: "1"},
                },
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
                    ],
                },
            },
        )
        assert [g.name for g in pod.spec.scheduling_gates or []] == ["kueue.x-k8s.io/admission"]
        wait_for(
            lambda: core.read_namespaced_pod("p", namespace).status.phase == "Succeeded",
            timeout=90,
            what="the pod admitted, ungated and run",
        )
        # The cost controller, with only its KEP-7990 RBAC, costed the Workloads. The pod's
        # Workload is marked Finished by its integration after the pod succeeded, so the
        # wait covers that write too (a clean-clone run once read it before it landed).
        workloads = wait_for(
            lambda: (
                all(
                    "preemptionCost" in (w.get("status") or {}) and condition(w, "Finished")
                    for w in ws
                )
                and ws
                if (ws := kueue.workloads(namespace))
                else None
            ),
            timeout=60,
            what="status.preemptionCost and Finished on every Workload",
        )
        assert {w["status"]["preemptionCost"] for w in workloads} == {"0"}
        assert all(condition(w, "Finished") for w in workloads)
        for process in (controller, cost):
            # Other tests share the API server (their policies and terminating namespaces
            # refuse some writes): what must never appear is an RBAC refusal of our
            # ServiceAccount, which the API server words like this.
            refused = rbac_refusals(process.log())
            assert not refused, refused[:5]
    finally:
        assert controller.stop() == 0, controller.log()[-3000:]
        assert cost.stop() == 0, cost.log()[-3000:]


def _create_through_webhook(create: Any) -> Any:
    """Create; while the API server has not yet seen the injected caBundle (its webhook
    configuration cache), it answers 500 "failed calling webhook": try again."""
    result: list[Any] = []

    def attempt() -> bool:
        try:
            result.append(create())
        except ApiException as exc:
            if exc.status == 500 and "failed calling webhook" in str(exc.body):
                return False
            raise
        return True

    wait_for(attempt, timeout=30, what="the webhook reachable through its Service")
    return result[0]
