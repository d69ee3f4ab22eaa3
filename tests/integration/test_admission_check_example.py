"""The worked example of docs/admission-checks.md, run as the doc shows it: the test takes
the `budget_check.py` block out of the doc (so the two cannot drift), renders the chart's
`quotagate-admission-checks` ClusterRole with real helm, binds it (and nothing else) to a
ServiceAccount, and runs the block with that ServiceAccount's token against the real API
server, beside quotagate. A Workload of two pods is admitted with the check Ready; one of
twenty is rejected, deactivated and evicted."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from tests.cluster.fixtures import wait_for
from tests.integration.chart_service_account import token_kubeconfig
from tests.integration.kueue import (
    REPO,
    ControllerProcess,
    Kueue,
    condition,
    flavor,
    local_queue,
    wait_admitted,
    workload,
)
from tests.integration.test_admission_checks import checked_queue, checks_of
from tools.chart import render_chart

DOC = REPO / "docs" / "admission-checks.md"
SECTION = re.compile(r"### Worked example.*?(?=\n## )", re.DOTALL)
BLOCK = re.compile(r"```(yaml|python)\n(.*?)```", re.DOTALL)


def example() -> tuple[dict[str, Any], str]:
    """The worked example's AdmissionCheck and its `budget_check.py`, from the doc."""
    section = SECTION.search(DOC.read_text())
    assert section is not None, f"{DOC}: no '### Worked example' section"
    blocks = dict(BLOCK.findall(section.group(0)))
    assert set(blocks) == {"yaml", "python"}, f"{DOC}: the example's yaml and python blocks"
    assert blocks["python"].startswith("# budget_check.py:")
    return yaml.safe_load(blocks["yaml"]), blocks["python"]


def service_account_kubeconfig(
    api_client: client.ApiClient, kubeconfig_path: str, namespace: str, tmp_path: Path
) -> Path:
    """A ServiceAccount bound to the chart's admission-checks ClusterRole only (rendered
    by real helm), as a kubeconfig with its token."""
    release = f"ex{namespace[-6:]}"
    [role] = [
        doc
        for doc in yaml.safe_load_all(render_chart(release=release))
        if doc
        and doc["kind"] == "ClusterRole"
        and doc["metadata"]["name"].endswith("-admission-checks")
    ]
    rbac = client.RbacAuthorizationV1Api(api_client)
    rbac.create_cluster_role(role)
    core = client.CoreV1Api(api_client)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "budget-check"}})
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": f"{release}-budget-check"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role["metadata"]["name"],
            },
            "subjects": [
                {"kind": "ServiceAccount", "name": "budget-check", "namespace": namespace}
            ],
        }
    )
    token = core.create_namespaced_service_account_token(
        "budget-check", namespace, {"spec": {"expirationSeconds": 3600}}
    ).status.token
    return token_kubeconfig(kubeconfig_path, token, tmp_path / "budget-check-kubeconfig")


@contextmanager
def running(script: str, kubeconfig: Path, tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """The script as its own process, with only `kubeconfig` to reach the API server."""
    path = tmp_path / "budget_check.py"
    path.write_text(script)
    output = tmp_path / "budget_check.log"
    with output.open("w") as log:
        process = subprocess.Popen(
            [sys.executable, str(path)],
            env={"KUBECONFIG": str(kubeconfig), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            yield process
        finally:
            process.terminate()
            process.wait(10)
            print(f"\n--- budget_check.py output ---\n{output.read_text()}")


def test_the_docs_budget_check_admits_within_budget_and_rejects_beyond(
    controller: ControllerProcess,
    kueue: Kueue,
    namespace: str,
    api_client: client.ApiClient,
    kubeconfig_path: str,
    tmp_path: Path,
) -> None:
    check, script = example()
    name = check["metadata"]["name"]
    kueue.apply(flavor(f"{namespace}-rf"), check)
    kueue.apply(
        checked_queue(namespace, {f"{namespace}-rf": {"cpu": 4}}, [{"name": name}]),
        local_queue(namespace, "lq", f"{namespace}-cq"),
        workload(namespace, "small", "lq", cpu="100m", count=2),
        workload(namespace, "large", "lq", cpu="100m", count=20),
    )
    sa_kubeconfig = service_account_kubeconfig(api_client, kubeconfig_path, namespace, tmp_path)
    with running(script, sa_kubeconfig, tmp_path) as process:
        small = wait_admitted(kueue, namespace, "small", timeout=60)
        state = checks_of(small)[name]
        assert (state["state"], state["message"]) == ("Ready", "2 pods, budget 8")

        def deactivated() -> dict[str, Any] | None:
            wl = kueue.get_workload(namespace, "large")
            evicted = condition(wl, "Evicted") or {}
            done = wl["spec"].get("active") is False and evicted.get("status") == "True"
            return wl if done else None

        large = wait_for(deactivated, what="large rejected and deactivated", timeout=60)
        evicted = condition(large, "Evicted") or {}
        assert evicted["reason"] == "DeactivatedDueToAdmissionCheck"
        assert evicted["message"].endswith(
            f'due to AdmissionCheck in Rejected state: "{name}" (20 pods, budget 8)'
        )
        assert process.poll() is None, "the example ended (an API refusal?)"
