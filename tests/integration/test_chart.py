"""The Helm chart, rendered by real helm and applied to the real API server (issue 9)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from controller.config import load_config
from tests.cluster.build import bin_dir
from tests.integration.chart_service_account import chart_controller
from tests.integration.kueue import (
    Kueue,
    cluster_queue,
    flavor,
    local_queue,
    wait_admitted,
    workload,
)
from tools.chart import CHART, default_manifests, helm, render_chart

REPO = Path(__file__).resolve().parents[2]


def render(*sets: str) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(render_chart(*sets, release="qg")) if doc]


def test_helm_lint_is_clean() -> None:
    result = helm("lint", str(CHART), "--strict", "--kube-version", "1.36.3")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout


def test_chart_crds_are_the_generated_ones() -> None:
    generated = {p.name: p.read_text() for p in (REPO / "config" / "crd" / "bases").glob("*.yaml")}
    shipped = {p.name: p.read_text() for p in (CHART / "crds").glob("*.yaml")}
    assert shipped == generated, "run `make crds` to copy the regenerated CRDs into the chart"


@pytest.mark.parametrize("preset", [None, 100])
def test_rendered_config_is_a_valid_controller_config(tmp_path: Path, preset: int | None) -> None:
    sets = (
        [] if preset is None else [f"controller.config.preemptibility.priorityThreshold={preset}"]
    )
    config_map = next(d for d in render(*sets) if d["kind"] == "ConfigMap")
    path = tmp_path / "config.yaml"
    path.write_text(config_map["data"]["config.yaml"])
    config = load_config(path)
    assert config.preemptibility.priority_threshold == preset
    assert config.leader_election.lease_namespace == "quotagate-system"


def test_webhook_never_sees_system_namespaces_or_unlabelled_pods() -> None:
    webhook = next(d for d in render() if d["kind"] == "MutatingWebhookConfiguration")
    for entry in webhook["webhooks"]:
        if entry["name"].startswith("pods."):
            assert entry["objectSelector"]["matchExpressions"] == [
                {"key": "kueue.x-k8s.io/queue-name", "operator": "Exists"}
            ]
        else:  # an unlabelled Job may get the LocalQueue named default
            assert "objectSelector" not in entry
        excluded = entry["namespaceSelector"]["matchExpressions"][0]["values"]
        assert {"kube-system", "quotagate-system"} <= set(excluded)


def test_cost_controller_rbac_is_least_privilege() -> None:
    role = next(
        d
        for d in render()
        if d["kind"] == "ClusterRole" and d["metadata"]["name"].endswith("cost-controller")
    )
    rules = {
        (tuple(r["apiGroups"]), tuple(r["resources"])): sorted(r["verbs"]) for r in role["rules"]
    }
    assert rules[(("kueue.x-k8s.io",), ("workloads",))] == ["get", "list", "watch"]
    assert rules[(("kueue.x-k8s.io",), ("workloads/status",))] == ["patch"]
    assert set(rules) == {
        (("kueue.x-k8s.io",), ("workloads",)),
        (("kueue.x-k8s.io",), ("workloads/status",)),
        (("",), ("events",)),
    }


def _rules(docs: list[dict]) -> set[tuple[tuple[str, ...], tuple[str, ...]]]:
    role = next(
        d
        for d in docs
        if d["kind"] == "ClusterRole" and d["metadata"]["name"].endswith("-controller")
    )
    return {(tuple(r["apiGroups"]), tuple(r["resources"])) for r in role["rules"]}


def _verbs(docs: list[dict], resource: str) -> set[str]:
    role = next(
        d
        for d in docs
        if d["kind"] == "ClusterRole" and d["metadata"]["name"].endswith("-controller")
    )
    return {v for r in role["rules"] if resource in r["resources"] for v in r["verbs"]}


def test_rbac_and_webhook_follow_the_enabled_integrations() -> None:
    """controller.config.integrations.frameworks decides the kinds the controller may
    touch and the webhook sees; a name quotagate does not implement fails the render."""
    defaults = render()
    assert {(("batch",), ("jobs",)), (("",), ("pods",)), (("jobset.x-k8s.io",), ("jobsets",))} <= (
        _rules(defaults)
    )
    webhook = next(d for d in defaults if d["kind"] == "MutatingWebhookConfiguration")
    assert [w["clientConfig"]["service"]["path"] for w in webhook["webhooks"]] == [
        "/mutate-jobs",
        "/mutate-jobsets",
        "/mutate-mpijobs",
        "/mutate-pods",
        "/mutate-trainjobs",
    ]
    only_jobs = render("controller.config.integrations.frameworks={batch/job}")
    rules = _rules(only_jobs)
    assert (("batch",), ("jobs",)) in rules
    assert (("jobset.x-k8s.io",), ("jobsets",)) not in rules
    # Topology-aware scheduling reads nodes and pods and releases TAS pods' gate whatever the
    # integrations; the pod integration's own rule (create, update, delete) is gone.
    assert _verbs(only_jobs, "pods") == {"get", "list", "watch", "patch"}
    assert _verbs(only_jobs, "nodes") == {"get", "list", "watch"}
    assert (("apps",), ("replicasets", "deployments", "statefulsets")) not in rules
    webhook = next(d for d in only_jobs if d["kind"] == "MutatingWebhookConfiguration")
    assert [w["rules"][0]["resources"] for w in webhook["webhooks"]] == [["jobs"]]
    # A Kueue framework quotagate has no integration for gets neither (`quotagate run` lists
    # it as not implemented).
    unimplemented = render(
        "controller.config.integrations.frameworks={batch/job,ray.io/rayservice}"
    )
    webhook = next(d for d in unimplemented if d["kind"] == "MutatingWebhookConfiguration")
    assert [w["rules"][0]["resources"] for w in webhook["webhooks"]] == [["jobs"]]


def test_plain_manifests_are_the_rendered_chart() -> None:
    committed = (REPO / "config" / "default" / "quotagate.yaml").read_text()
    assert committed == default_manifests(), "run `make manifests` after changing the chart"


def test_kustomize_default_passes_server_side_dry_run(
    kubeconfig_path: str, crds_installed: list[str], system_namespace: str
) -> None:
    result = subprocess.run(
        [
            str(bin_dir() / "kubectl"),
            "--kubeconfig",
            kubeconfig_path,
            "apply",
            "--dry-run=server",
            "-k",
            str(REPO / "config" / "default"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "customresourcedefinition.apiextensions.k8s.io/workloads.kueue.x-k8s.io" in result.stdout
    assert "deployment.apps/quotagate-controller" in result.stdout


def test_rendered_manifests_pass_server_side_dry_run(
    kubeconfig_path: str, crds_installed: list[str], system_namespace: str, tmp_path: Path
) -> None:
    manifest = tmp_path / "rendered.yaml"
    manifest.write_text(yaml.safe_dump_all(render()))
    result = subprocess.run(
        [
            str(bin_dir() / "kubectl"),
            "--kubeconfig",
            kubeconfig_path,
            "apply",
            "--dry-run=server",
            "-f",
            str(manifest),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "(server dry run)" in result.stdout
    assert "mutatingwebhookconfiguration" in result.stdout.lower()


def test_helm_install_and_controller_runs_with_the_charts_rbac(
    kubeconfig_path: str,
    crds_installed: list[str],
    system_namespace: str,
    api_client: client.ApiClient,
    namespace: str,
    tmp_path: Path,
) -> None:
    """Install the chart for real; run the controller from this checkout with the token of
    the chart's ServiceAccount, so only the chart's RBAC stands behind it; it admits."""
    release = f"qg{namespace[-6:]}"
    with chart_controller(
        kubeconfig_path, system_namespace, api_client, release, tmp_path
    ) as chart:
        kueue = Kueue(api_client)
        cq = f"{namespace}-cq"
        kueue.apply(
            flavor(f"{namespace}-rf"),
            cluster_queue(cq, {f"{namespace}-rf": {"cpu": 2}}),
            local_queue(namespace, "lq", cq),
            workload(namespace, "w", "lq", cpu="1"),
        )
        process = chart.start(tmp_path, "chart-rbac")
        try:
            wait_admitted(kueue, namespace, "w", timeout=40)
            # RBAC refusals only: earlier tests' namespaces stay Terminating here (no
            # namespace controller), and an Event on their objects is refused for that.
            refused = [
                line
                for line in process.log().splitlines()
                if ("Forbidden" in line or "403" in line) and "NamespaceTerminating" not in line
            ]
            assert not refused, "\n".join(refused)[-2000:]
        finally:
            process.stop()
