"""The chart with Kueue's Configuration file taken verbatim (`controller.kueueConfiguration`,
issue 46), rendered by the real helm: the file reaches the controller unchanged, the
chart's own settings go beside it (`--overrides`), ports, integrations and webhook selectors
follow the file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from controller.config import load_config
from controller.config_report import not_implemented
from tools.chart import CHART, helm

DATA = Path(__file__).parents[1] / "unit" / "data" / "kueue_configuration"


def render_with(path: Path) -> list[dict[str, Any]]:
    result = helm(
        "template",
        "qg",
        str(CHART),
        "--namespace",
        "quotagate-system",
        "--kube-version",
        "1.36.3",
        "--set-file",
        f"controller.kueueConfiguration={path}",
    )
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def test_kueues_manager_configuration_is_taken_verbatim(tmp_path: Path) -> None:
    source = DATA / "controller_manager_config.yaml"
    docs = render_with(source)
    config_map = next(d for d in docs if d["kind"] == "ConfigMap")
    assert config_map["data"]["config.yaml"].strip() == source.read_text().strip()
    (tmp_path / "config.yaml").write_text(config_map["data"]["config.yaml"])
    overrides = yaml.safe_load(config_map["data"]["overrides.yaml"])
    # Only what the chart's own objects decide: its webhook, and the visibility API its
    # APIService points at (whose port is the file's, Kueue's default 8082).
    assert set(overrides) == {"webhook", "visibility"}
    assert overrides["visibility"] == {"enabled": True, "serviceName": "qg-quotagate-visibility"}
    deployment = next(
        d
        for d in docs
        if d["kind"] == "Deployment" and d["metadata"]["name"].endswith("controller")
    )
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert "--overrides=/etc/quotagate/overrides.yaml" in container["args"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"metrics": 8443, "health": 8081, "webhook": 9443, "visibility": 8082}
    flat = {
        f"webhook.{k}": v for k, v in overrides["webhook"].items() if not isinstance(v, dict)
    } | {
        f"webhook.internalCertManagement.{k}": v
        for k, v in overrides["webhook"]["internalCertManagement"].items()
    }
    config = load_config(tmp_path / "config.yaml", flat)
    assert config.webhook.internal_cert_management.service_name == "qg-quotagate-webhook"
    assert config.metrics_port == 8443
    assert "integrations.frameworks[4]" in [field for field, _ in not_implemented(config)]
    # RBAC and webhooks for the integrations quotagate has, from the file's list.
    webhook = next(d for d in docs if d["kind"] == "MutatingWebhookConfiguration")
    assert sorted(entry["name"].split(".")[0] for entry in webhook["webhooks"]) == [
        "deployments",
        "jobs",
        "jobsets",
        "leaderworkersets",
        "mpijobs",
        "pods",
        "rayclusters",
        "rayjobs",
        "statefulsets",
        "trainjobs",
    ]


def test_the_namespace_selector_and_unlabelled_pods_follow_the_file(tmp_path: Path) -> None:
    docs = render_with(DATA / "opt_in_namespace_management.yaml")
    webhook = next(d for d in docs if d["kind"] == "MutatingWebhookConfiguration")
    [entry] = webhook["webhooks"]  # batch/job, Kueue's default
    assert entry["namespaceSelector"]["matchLabels"] == {"managed-by-kueue": "true"}
    assert "objectSelector" not in entry
