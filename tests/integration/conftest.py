"""Integration fixtures: CRDs installed, quotagate's namespace, a running controller."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.cluster.controlplane import free_port
from tests.integration.kueue import SYSTEM_NAMESPACE, ControllerProcess, Kueue


@pytest.fixture(scope="session")
def system_namespace(api_client: client.ApiClient) -> str:
    try:
        client.CoreV1Api(api_client).create_namespace({"metadata": {"name": SYSTEM_NAMESPACE}})
    except ApiException as exc:
        if exc.status != 409:
            raise
    return SYSTEM_NAMESPACE


@pytest.fixture
def kueue(api_client: client.ApiClient, crds_installed: list[str]) -> Kueue:
    return Kueue(api_client)


@pytest.fixture(scope="module")
def controller(
    kubeconfig_path: str,
    crds_installed: list[str],
    system_namespace: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ControllerProcess]:
    """One `quotagate run` for the whole test module (stopped after it)."""
    log_dir: Path = tmp_path_factory.mktemp("controller")
    port = free_port()
    process = ControllerProcess(
        kubeconfig_path, log_dir, extra=["--metrics-port", str(port)]
    ).start()
    process.metrics_port = port
    try:
        yield process
    finally:
        process.stop()
        print(
            f"\n--- controller log tail ({process.log_path}) ---\n"
            + "\n".join(process.log().splitlines()[-15:])
        )
