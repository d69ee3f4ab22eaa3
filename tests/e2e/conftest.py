"""e2e fixtures: the controller with its webhook registered on the full control plane,
and the real JobSet and LeaderWorkerSet controllers (built from their Go modules,
tests/cluster/modules.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.cluster.controlplane import ControlPlane, free_port
from tests.cluster.fixtures import wait_for
from tests.cluster.operators import JobSetController, LeaderWorkerSetController
from tests.e2e.custom_jobs import operator_running
from tests.integration.kueue import ControllerProcess, delete_webhook_configurations


@contextlib.contextmanager
def webhook_controller_running(
    kubeconfig: str,
    api_client: client.ApiClient,
    directory: Path,
    name: str,
    config: dict[str, Any],
    extra: tuple[str, ...] = (),
) -> Iterator[ControllerProcess]:
    """`quotagate run --config` (with `config`, in quotagate's format or Kueue's) serving its
    webhook and registering the MutatingWebhookConfiguration `quotagate`, removed
    afterwards; `extra`: more arguments."""
    try:
        client.CoreV1Api(api_client).create_namespace({"metadata": {"name": "quotagate-system"}})
    except ApiException as exc:
        if exc.status != 409:
            raise
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    port = free_port()
    process = ControllerProcess(
        kubeconfig,
        directory,
        name,
        f"{name}-e2e",
        [
            "--config",
            str(path),
            "--webhook-address",
            f"127.0.0.1:{port}",
            "--webhook-manage-config",
            *extra,
        ],
    ).start()
    admission = client.AdmissionregistrationV1Api(api_client)
    try:
        wait_for(
            lambda: _registered(admission), timeout=40, what="the MutatingWebhookConfiguration"
        )
        yield process
    finally:
        process.stop()
        delete_webhook_configurations(api_client)
        print("\n" + "\n".join(process.log().splitlines()[-10:]))


@pytest.fixture(scope="module")
def webhook_controller(
    full_cluster: ControlPlane,
    kubeconfig_path: str,
    crds_installed: list[str],
    api_client: client.ApiClient,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ControllerProcess]:
    """The controller with its webhook, queueing Jobs and pods."""
    with webhook_controller_running(
        kubeconfig_path,
        api_client,
        tmp_path_factory.mktemp("jobs"),
        "jobs",
        {"integrations": {"frameworks": ["batch/job", "pod"]}},
    ) as process:
        yield process


@pytest.fixture(scope="session")
def jobset_controller(
    full_cluster: ControlPlane,
    kubeconfig_path: str,
    api_client: client.ApiClient,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[JobSetController]:
    """The real JobSet controller (sigs.k8s.io/jobset, its CRD and webhooks)."""
    controller = JobSetController(kubeconfig_path, tmp_path_factory.mktemp("jobset"))
    with operator_running(controller, api_client):
        yield controller


@pytest.fixture(scope="session")
def lws_controller(
    full_cluster: ControlPlane,
    kubeconfig_path: str,
    api_client: client.ApiClient,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[LeaderWorkerSetController]:
    """The real LeaderWorkerSet controller (sigs.k8s.io/lws, its CRDs and webhooks)."""
    controller = LeaderWorkerSetController(kubeconfig_path, tmp_path_factory.mktemp("lws"))
    with operator_running(controller, api_client):
        yield controller


def _registered(admission: client.AdmissionregistrationV1Api) -> bool:
    try:
        admission.read_mutating_webhook_configuration("quotagate")
    except ApiException:
        return False
    return True
