"""config/samples are valid for the real API server and for `quotagate plan`."""

from __future__ import annotations

import subprocess
from pathlib import Path

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from controller.cli import main as quotagate
from tests.cluster.build import bin_dir

SAMPLES = Path(__file__).resolve().parents[2] / "config" / "samples"


def test_samples_pass_server_side_dry_run(
    kubeconfig_path: str, crds_installed: list[str], api_client: client.ApiClient
) -> None:
    core = client.CoreV1Api(api_client)
    for name in (
        "team-a",
        "team-b",
    ):  # a dry run cannot put objects in a namespace it only pretends to create
        # ...and its `default` ServiceAccount, which the ServiceAccount admission plugin
        # requires of a pod and which kube-controller-manager (not always running in this
        # session) would create.
        for create, args in (
            (core.create_namespace, ({"metadata": {"name": name}},)),
            (core.create_namespaced_service_account, (name, {"metadata": {"name": "default"}})),
        ):
            try:
                create(*args)
            except ApiException as exc:
                if exc.status != 409:
                    raise
    result = subprocess.run(
        [
            str(bin_dir() / "kubectl"),
            "--kubeconfig",
            kubeconfig_path,
            "apply",
            "--dry-run=server",
            "-k",
            str(SAMPLES),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    for expected in (
        "clusterqueue.kueue.x-k8s.io/team-a",
        "job.batch/sample-job",
        "pod/gang-0",
        "podgroup.scheduling.k8s.io/trainer",
        "workload.kueue.x-k8s.io/bare",
    ):
        assert expected in result.stdout


def test_quotagate_plan_admits_the_sample_workload(capsys) -> None:  # type: ignore[no-untyped-def]
    files = [*sorted(SAMPLES.glob("0*.yaml")), SAMPLES / "20-workload.yaml"]
    args = ["plan", "-o", "json"]
    for path in files:
        args += ["-f", str(path)]
    assert quotagate(args) == 0
    out = capsys.readouterr().out
    assert '"workload": "team-a/bare"' in out
    assert '"cpu": "on-demand"' in out
