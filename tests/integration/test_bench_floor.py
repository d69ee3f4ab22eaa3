"""`quotagate bench --api-floor` against the real API server, with no controller running."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from kubernetes import client, watch

from tests.cluster.controlplane import ControlPlane
from tools.bench.command import main
from tools.bench.live import RUN_LABEL
from tools.bench.scenario import SCENARIOS

SMOKE = SCENARIOS / "smoke.yaml"


def _namespaces_left(api_client: client.ApiClient, run: str) -> list[str]:
    """The run's namespaces that are neither gone nor being deleted."""
    listing = client.CoreV1Api(api_client).list_namespace(label_selector=f"{RUN_LABEL}={run}")
    return [ns.metadata.name for ns in listing.items if ns.metadata.deletion_timestamp is None]


def test_floor_sends_three_writes_per_workload_and_cleans_up(
    cluster: ControlPlane,
    kubeconfig_path: str,
    crds_installed: list[str],
    api_client: client.ApiClient,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    report_path = tmp_path / "floor.json"
    apiserver = cluster.components["kube-apiserver"].process.pid
    code = main(
        [
            str(SMOKE),
            "--api-floor",
            "--kubeconfig",
            kubeconfig_path,
            "--apiserver-pid",
            str(apiserver),
            "--json",
            str(report_path),
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "scenario smoke (api-floor): 58 Workloads, 174 writes" in captured.out
    assert "ms per write" in captured.out
    assert "finished     58  of 58" in captured.err and "cleaning up run" in captured.err
    report = json.loads(report_path.read_text())
    assert report["mode"] == "api-floor"
    assert report["workloads"] == 58 and report["writes"] == 3 * 58
    # Both watchers saw every write: creation, admission, completion.
    assert report["watch_events"] == [174, 174]
    assert report["wall_s"] > 0 and report["writes_per_s"] > 0
    assert report["apiserver_cpu_s"] > 0 and report["apiserver_ms_per_write"] > 0
    assert report["lower_bound_s"] == pytest.approx(6.3, abs=0.05)
    assert _namespaces_left(api_client, report["run_id"]) == []


def test_floor_fails_when_someone_else_writes_its_workloads(
    kubeconfig_path: str,
    crds_installed: list[str],
    api_client: client.ApiClient,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A writer other than the run (a controller on the cluster) would make the figures
    meaningless: the run stops and names the writer's field manager."""
    custom = client.CustomObjectsApi(api_client)
    watching = threading.Event()
    stream = watch.Watch()

    # Only Workloads created from now on: earlier runs' may still be in deleted namespaces.
    since = custom.list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "workloads", limit=1)[
        "metadata"
    ]["resourceVersion"]

    def intrude() -> None:
        events = stream.stream(
            custom.list_cluster_custom_object,
            "kueue.x-k8s.io",
            "v1beta2",
            "workloads",
            label_selector=RUN_LABEL,
            resource_version=since,
            timeout_seconds=60,
            _request_timeout=70,
        )
        watching.set()
        for event in events:
            if event["type"] != "ADDED":
                continue
            meta = event["object"]["metadata"]
            custom.patch_namespaced_custom_object(
                "kueue.x-k8s.io",
                "v1beta2",
                meta["namespace"],
                "workloads",
                meta["name"],
                {"metadata": {"labels": {"touched": "yes"}}},
                field_manager="intruder",
            )
            break

    intruder = threading.Thread(target=intrude, daemon=True)
    intruder.start()
    assert watching.wait(10)
    code = main([str(SMOKE), "--api-floor", "--kubeconfig", kubeconfig_path])
    stream.stop()
    intruder.join(10)
    err = capsys.readouterr().err
    assert code == 1
    assert "field manager 'intruder'" in err and "no controller acts on Workloads" in err
    assert "Traceback" not in err and "cleaning up run" in err


def test_floor_refuses_an_apiserver_pid_that_is_not_a_process(
    kubeconfig_path: str, crds_installed: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    args = [str(SMOKE), "--api-floor", "--kubeconfig", kubeconfig_path]
    assert main([*args, "--apiserver-pid", "999999999"]) == 1
    err = capsys.readouterr().err
    assert "--apiserver-pid 999999999: no such process on this host" in err
    assert "cleaning up run" in err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--api-floor", "--plot", "x.png"], "--plot has nothing to draw with --api-floor"),
        (["--api-floor", "--controller-pid", "1"], "--controller-pid is for --live"),
        (
            ["--simulate", "--apiserver-pid", "1"],
            "--apiserver-pid is for --live and --api-floor",
        ),
    ],
)
def test_options_of_another_mode_are_refused(
    extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(SMOKE), *extra]) == 2
    assert message in capsys.readouterr().err
