"""Integration fixtures: CRDs installed, quotagate's namespace, a running controller."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
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


StartConfigured = Callable[..., ControllerProcess]


@pytest.fixture
def configured_controller(
    kubeconfig_path: str, crds_installed: list[str], system_namespace: str, tmp_path: Path
) -> Iterator[StartConfigured]:
    """`start(config, namespace)`: `quotagate run --config` with the configuration `config`
    (a mapping), managing only `namespace` (other tests' objects stay behind: there is no
    namespace controller here), with its own Lease and metrics port. Every one started is
    stopped after the test, and must have stopped cleanly: exit status 0 on SIGTERM."""
    started: list[ControllerProcess] = []

    def start(config: dict[str, Any], namespace: str) -> ControllerProcess:
        index = len(started)
        path = tmp_path / f"config-{index}.yaml"
        path.write_text(yaml.safe_dump({**config, "namespaces": [namespace]}))
        port = free_port()
        process = ControllerProcess(
            kubeconfig_path,
            tmp_path,
            name=f"controller-{index}",
            lease_name=f"configured-{namespace}-{index}",  # no wait for an earlier Lease
            extra=["--config", str(path), "--metrics-port", str(port)],
        ).start()
        process.metrics_port = port
        started.append(process)
        return process

    try:
        yield start
    finally:
        for process in started:
            running = process.process is not None and process.process.poll() is None
            process.stop()
            print(f"\n--- {process.log_path.name} tail ---\n{process.log()[-3000:]}")
            if running:
                assert process.process is not None and process.process.returncode == 0
