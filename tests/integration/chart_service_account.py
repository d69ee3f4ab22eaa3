"""The chart installed by real helm, and the controller's ServiceAccount as a kubeconfig:
a controller run from this checkout with it has only the chart's RBAC behind it, so a
verb the chart forgot is refused by the API server (and logged: `rbac_refusals`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml
from kubernetes import client

from tests.integration.kueue import ControllerProcess
from tools.chart import CHART, helm


def token_kubeconfig(kubeconfig_path: str, token: str, path: Path) -> Path:
    """`kubeconfig_path`'s cluster with `token` as its only user, written to `path`."""
    kubeconfig = yaml.safe_load(Path(kubeconfig_path).read_text())
    kubeconfig["users"] = [{"name": "token", "user": {"token": token}}]
    kubeconfig["contexts"][0]["context"]["user"] = "token"
    path.write_text(yaml.safe_dump(kubeconfig))
    return path


@dataclass(frozen=True)
class ChartController:
    release: str
    kubeconfig: Path  # the controller ServiceAccount's token, nothing else
    config: Path  # the chart's controller configuration (its ConfigMap)

    def start(self, log_dir: Path, name: str) -> ControllerProcess:
        """`quotagate run` from this checkout as the chart's controller would run."""
        return ControllerProcess(
            str(self.kubeconfig),
            log_dir,
            name,
            self.release,
            ["--config", str(self.config), "--metrics-port", "0"],
        ).start()


@contextmanager
def chart_controller(
    kubeconfig_path: str,
    system_namespace: str,
    api_client: client.ApiClient,
    release: str,
    tmp_path: Path,
) -> Iterator[ChartController]:
    """Install the chart (CRDs and webhook left out: the session has them, or needs none),
    yield the controller ServiceAccount's kubeconfig and configuration; uninstall after."""
    installed = helm(
        "install",
        release,
        str(CHART),
        "--namespace",
        system_namespace,
        "--set",
        "installCRDs=false",
        "--set",
        "webhook.enabled=false",
        "--skip-crds",
        "--set",
        f"controller.config.leaderElection.leaseName={release}",
        kubeconfig=kubeconfig_path,
    )
    assert installed.returncode == 0, installed.stderr
    try:
        core = client.CoreV1Api(api_client)
        token = core.create_namespaced_service_account_token(
            f"{release}-quotagate-controller",
            system_namespace,
            {"spec": {"expirationSeconds": 3600}},
        ).status.token
        sa_kubeconfig = token_kubeconfig(kubeconfig_path, token, tmp_path / "sa-kubeconfig")
        config_map = core.read_namespaced_config_map(
            f"{release}-quotagate-config", system_namespace
        )
        config_path = tmp_path / "config.yaml"
        config_path.write_text(config_map.data["config.yaml"])
        yield ChartController(release, sa_kubeconfig, config_path)
    finally:
        helm("uninstall", release, "--namespace", system_namespace, kubeconfig=kubeconfig_path)
