"""`quotagate plan` with topology-aware scheduling: Nodes, a Topology and a TAS flavor in
the manifests; the plan shows each admitted pod set's domains, and a pod set that fits the
quota and no domain pending with the level and the largest free domain."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from controller.cli import main

RACK = "cloud.com/topology-rack"


def node(name: str, rack: str) -> str:
    return f"""
apiVersion: v1
kind: Node
metadata: {{name: {name}, labels: {{kubernetes.io/hostname: {name}, {RACK}: {rack}, pool: tas}}}}
status:
  allocatable: {{cpu: "2", pods: "110"}}
  conditions: [{{type: Ready, status: "True"}}]
"""


def workload(name: str, count: int) -> str:
    return f"""
kind: Workload
apiVersion: kueue.x-k8s.io/v1beta2
metadata: {{name: {name}, namespace: team-a, creationTimestamp: "2026-01-01T00:00:0{count}Z"}}
spec:
  queueName: main
  podSets:
  - name: main
    count: {count}
    topologyRequest: {{required: {RACK}}}
    template: {{spec: {{containers: [{{resources: {{requests: {{cpu: "1"}}}}}}]}}}}
"""


STATE = "---".join(
    [
        node("r1-a", "r1"),
        node("r1-b", "r1"),
        node("r2-a", "r2"),
        f"""
apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata: {{name: default}}
spec:
  levels: [{{nodeLabel: {RACK}}}, {{nodeLabel: kubernetes.io/hostname}}]
""",
        """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: tas}
spec: {nodeLabels: {pool: tas}, topologyName: default}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-a}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: tas
      resources: [{name: cpu, nominalQuota: 100}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: main, namespace: team-a}
spec: {clusterQueue: team-a}
""",
        workload("fits", 4),
        workload("too-big", 5),
    ]
)


def test_plan_shows_the_domains_and_why_a_pod_set_fits_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "tas.yaml"
    path.write_text(STATE)
    assert main(["plan", "-f", str(path), "--now", "2026-01-01T01:00:00Z"]) == 0
    result = json.loads(capsys.readouterr().out)
    [admitted] = result["admitted"]
    assert admitted["workload"] == "team-a/fits"
    assert admitted["podSets"][0]["topology"] == "kubernetes.io/hostname: r1-a×2, r1-b×2"
    [pending] = result["pending"]
    assert pending["reason"] == (
        'pod set main: topology "default" allows to fit only 2 out of 5 pod(s). Total nodes: 3; '
        'excluded: resource "cpu": 2; the largest free domain at level '
        f"{RACK} is r2, with room for 2 pod(s)"
    )
    assert main(["plan", "-f", str(path), "-o", "table"]) == 0
    assert "[kubernetes.io/hostname: r1-a×2, r1-b×2]" in capsys.readouterr().out


def test_describe_shows_the_topology_domains_of_an_admission() -> None:
    from controller.kubectl.describe import _admission, _admission_lines

    admission = _admission(
        {
            "clusterQueue": "team-a",
            "podSetAssignments": [
                {
                    "name": "main",
                    "count": 3,
                    "flavors": {"cpu": "tas"},
                    "resourceUsage": {"cpu": "3"},
                    "topologyAssignment": {
                        "levels": ["kubernetes.io/hostname"],
                        "slices": [
                            {
                                "domainCount": 2,
                                "podCounts": {"individual": [2, 1]},
                                "valuesPerLevel": [
                                    {"individual": {"prefix": "h", "roots": ["1", "2"]}}
                                ],
                            }
                        ],
                    },
                }
            ],
        }
    )
    lines = _admission_lines(admission)
    assert lines[-2:] == ["Topology domains:", "  main: kubernetes.io/hostname: h1×2, h2×1"]


def test_the_plugins_snapshot_takes_nodes_and_the_pods_bound_to_them() -> None:
    import yaml

    from controller.kubectl.snapshot import Snapshot

    items = [doc for doc in yaml.safe_load_all(STATE) if doc]
    items.append(
        {
            "kind": "Pod",
            "metadata": {"name": "ds", "namespace": "kube-system"},
            "spec": {"nodeName": "r2-a", "containers": [{"resources": {"requests": {"cpu": "1"}}}]},
            "status": {"phase": "Running"},
        }
    )
    snapshot = Snapshot.convert(items)
    assert snapshot.warnings == []
    assert snapshot.pods == [("kube-system/ds", "r2-a", {"cpu": 1000})]
    state = snapshot.state()
    assert set(state.tas.nodes) == {"r1-a", "r1-b", "r2-a"}
    assert state.tas.node_usage == {"r2-a": {"cpu": 1000, "pods": 1000}}
