"""`quotagate bench --live` against the real API server with `quotagate run` deciding."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kubernetes import client

from tests.cluster.controlplane import ControlPlane
from tests.integration.kueue import ControllerProcess
from tools.bench.command import LIVE_FAIR_SHARING, main
from tools.bench.live import RUN_LABEL
from tools.bench.scenario import SCENARIOS

SMOKE = SCENARIOS / "smoke.yaml"


def test_live_without_a_controller_fails_with_one_line(
    kubeconfig_path: str, crds_installed: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """No controller marks the ClusterQueues Active: the run stops, says why, cleans up.
    (First in the module: the module's controller is not started yet.)"""
    code = main([str(SMOKE), "--live", "--kubeconfig", kubeconfig_path, "--setup-timeout", "2"])
    err = capsys.readouterr().err
    assert code == 1
    assert "not Active after 2s" in err and "controller running?" in err
    assert "cleaning up run" in err
    assert "Traceback" not in err


def test_smoke_scenario_runs_live_and_cleans_up(
    controller: ControllerProcess,
    cluster: ControlPlane,
    kubeconfig_path: str,
    api_client: client.ApiClient,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert controller.process is not None
    report_path = tmp_path / "live.json"
    code = main(
        [
            str(SMOKE),
            "--live",
            "--kubeconfig",
            kubeconfig_path,
            "--controller-pid",
            str(controller.process.pid),
            "--apiserver-pid",
            str(cluster.components["kube-apiserver"].process.pid),
            "--timeout",
            "120",
            "--json",
            str(report_path),
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "scenario smoke (live)" in captured.out
    assert "created" in captured.err and "cleaning up run" in captured.err
    report = json.loads(report_path.read_text())
    assert report["mode"] == "live"
    assert report["workloads"] == 58
    assert report["overuse_events"] == 0
    for name, figures in report["classes"].items():
        assert figures["admitted"] == figures["count"], name
    # Every Workload ran its runtime after admission, so the run cannot beat the bound.
    assert report["makespan_s"] >= report["lower_bound_s"]
    # Kueue's ClusterQueue usage, from the queues' own status (one class: `cq`), and the
    # quota the Workloads held by their own events.
    usage = report["cluster_queue_usage"]
    assert usage.keys() == {"cq"} and usage["cq"]["queues"] == 2
    assert 0 < usage["cq"]["usage_pct"] <= 100
    assert usage["cq"]["monitored_s"] >= report["makespan_s"] - 1  # to the queues' last status
    assert 0 < report["reserved_quota_pct"] <= 100
    assert report["cpu_s"] > 0  # the controller's CPU, read from /proc
    assert report["apiserver_cpu_s"] > 0
    assert report["apiserver_cpu_ms_per_workload"] == pytest.approx(
        1000 * report["apiserver_cpu_s"] / 58, abs=0.01
    )
    assert "ClusterQueue usage, cq" in captured.out and "kube-apiserver CPU" in captured.out
    # The large class (priority 200) finds the queues full of lower-priority work.
    assert report["preemptions"] > 0
    run = report["run_id"]
    custom = client.CustomObjectsApi(api_client)
    for plural in ("clusterqueues", "resourceflavors"):
        left = custom.list_cluster_custom_object(
            "kueue.x-k8s.io", "v1beta2", plural, label_selector=f"{RUN_LABEL}={run}"
        )
        assert left["items"] == [], plural
    workloads = custom.list_cluster_custom_object(
        "kueue.x-k8s.io", "v1beta2", "workloads", label_selector=f"{RUN_LABEL}={run}"
    )
    assert workloads["items"] == []


TREE = """\
fairSharing: {}
parentCohorts:
  - {name: org, nominalQuota: 4}
cohorts:
  - className: team
    count: 2
    parent: org
    weight: 2
    queuesSets:
      - className: cq
        count: 1
        nominalQuota: 1
        weight: 500m
        workloadsSets:
          - count: 3
            creationIntervalMs: 200
            workloads:
              - {className: big, runtimeMs: 500, priority: 1, request: 3}
"""


def test_a_tree_scenario_runs_live_on_its_cohorts_and_cleans_them_up(
    controller: ControllerProcess,
    kubeconfig_path: str,
    api_client: client.ApiClient,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Each team's queue has 1 cpu and its Workloads ask for 3: only the org Cohort's own
    4 cpu, borrowed through the tree, can admit them. The controller runs with its default
    configuration, so the run says fair sharing is the controller's."""
    scenario = tmp_path / "tree.yaml"
    scenario.write_text(TREE)
    report_path = tmp_path / "tree.json"
    code = main(
        [
            str(scenario),
            "--live",
            "--kubeconfig",
            kubeconfig_path,
            "--timeout",
            "60",
            "--json",
            str(report_path),
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.err.splitlines()[0] == LIVE_FAIR_SHARING
    report = json.loads(report_path.read_text())
    assert report["workloads"] == 6
    assert report["classes"]["big"]["admitted"] == 6
    assert report["overuse_events"] == 0
    assert report["lower_bound_s"] == pytest.approx(1.5)  # 9 cpu·s over the tree's 6 cpu
    assert report["makespan_s"] >= report["lower_bound_s"]
    custom = client.CustomObjectsApi(api_client)
    for plural in ("cohorts", "clusterqueues"):
        left = custom.list_cluster_custom_object(
            "kueue.x-k8s.io", "v1beta2", plural, label_selector=f"{RUN_LABEL}={report['run_id']}"
        )
        assert left["items"] == [], plural


TAS = """\
topology:
  name: t
  levels:
    - {name: block, count: 1, nodeLabel: cloud.provider.com/topology-block}
    - {name: rack, count: 2, nodeLabel: cloud.provider.com/topology-rack}
    - {name: node, count: 2, nodeLabel: kubernetes.io/hostname, capacity: {cpu: "2"}}
resourceFlavor: {name: tas, nodeLabel: tas-node-group, topologyName: t}
cohorts:
  - className: cohort
    count: 1
    queuesSets:
      - className: cq
        count: 2
        nominalQuota: 4
        reclaimWithinCohort: Any
        withinClusterQueue: LowerPriority
        workloadsSets:
          - count: 3
            creationIntervalMs: 100
            workloads:
              - {className: rack, runtimeMs: 300, priority: 1, request: 1, podCount: 4,
                 tasConstraint: required, tasLevel: cloud.provider.com/topology-rack}
              - {className: slices, runtimeMs: 300, priority: 1, request: 500m, podCount: 2,
                 tasConstraint: balanced, tasLevel: cloud.provider.com/topology-rack,
                 sliceSize: 1}
"""


def test_a_tas_scenario_runs_live_on_its_nodes_and_cleans_them_up(
    controller: ControllerProcess,
    kubeconfig_path: str,
    api_client: client.ApiClient,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Four nodes of 2 cpus in two racks, created Ready by the run: each 4-pod Workload
    fills one rack, so at most two run at once whatever the quota (8 cpus) says; every
    Workload is admitted, none past a node's capacity, and the nodes go at cleanup."""
    scenario = tmp_path / "tas.yaml"
    scenario.write_text(TAS)
    report_path = tmp_path / "tas.json"
    code = main(
        [
            *(str(scenario), "--live", "--kubeconfig", kubeconfig_path),
            *("--timeout", "90", "--json", str(report_path)),
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "created 4 Ready nodes and Topology t-" in captured.err
    assert "node over-use events" in captured.out
    report = json.loads(report_path.read_text())
    assert report["workloads"] == 12
    assert report["classes"]["rack"]["admitted"] == 6
    assert report["classes"]["slices"]["admitted"] == 6
    assert report["overuse_events"] == 0 and report["node_overuse_events"] == 0
    assert report["pods_placed"] >= 6 * 4 + 6 * 2  # every admission's topologyAssignment
    selector = f"{RUN_LABEL}={report['run_id']}"
    assert client.CoreV1Api(api_client).list_node(label_selector=selector).items == []
    left = client.CustomObjectsApi(api_client).list_cluster_custom_object(
        "kueue.x-k8s.io", "v1beta2", "topologies", label_selector=selector
    )
    assert left["items"] == []
