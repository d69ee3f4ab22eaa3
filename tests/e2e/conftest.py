"""e2e fixtures: the controller with its webhook registered on the full control plane."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.cluster.controlplane import ControlPlane, free_port
from tests.cluster.fixtures import wait_for
from tests.integration.kueue import ControllerProcess, delete_webhook_configurations


@pytest.fixture(scope="module")
def webhook_controller(
    full_cluster: ControlPlane,
    kubeconfig_path: str,
    crds_installed: list[str],
    api_client: client.ApiClient,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ControllerProcess]:
    try:
        client.CoreV1Api(api_client).create_namespace({"metadata": {"name": "quotagate-system"}})
    except ApiException as exc:
        if exc.status != 409:
            raise
    port = free_port()
    process = ControllerProcess(
        kubeconfig_path,
        tmp_path_factory.mktemp("jobs"),
        "jobs",
        "jobs-e2e",
        ["--webhook-address", f"127.0.0.1:{port}", "--webhook-manage-config"],
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


def _registered(admission: client.AdmissionregistrationV1Api) -> bool:
    try:
        admission.read_mutating_webhook_configuration("quotagate")
    except ApiException:
        return False
    return True
