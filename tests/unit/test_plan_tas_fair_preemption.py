"""`quotagate plan` with fair sharing on (tests/unit/data/plan_fair_config.yaml) and a TAS
flavor: a preemptor needing one rack gets the victims of one rack, the cheapest, from the
fair-sharing search split by domain (docs/tas.md#topology-aware-preemption).

Two racks of two 2-cpu nodes, each node full with one admitted 2-pod Workload."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from controller.cli import main

RACK = "cloud.com/topology-rack"
HOST = "kubernetes.io/hostname"
DATA = Path(__file__).parent / "data"
# node → (priority, ClusterQueue) of the Workload on it
FILLED = {
    "r1-a": (1, "team-a"),
    "r1-b": (3, "team-a"),
    "r2-a": (2, "team-a"),
    "r2-b": (2, "team-a"),
}


def node(name: str) -> str:
    return f"""
apiVersion: v1
kind: Node
metadata: {{name: {name}, labels: {{{HOST}: {name}, {RACK}: {name[:2]}, pool: tas}}}}
status:
  allocatable: {{cpu: "2", pods: "110"}}
  conditions: [{{type: Ready, status: "True"}}]
"""


def queue(name: str, nominal: int, cohort: str | None) -> str:
    return f"""
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: {name}}}
spec:
  namespaceSelector: {{}}
  {f"cohortName: {cohort}" if cohort else ""}
  preemption: {{withinClusterQueue: LowerPriority, reclaimWithinCohort: Any}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: tas
      resources: [{{name: cpu, nominalQuota: {nominal}}}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {{name: {name}, namespace: ns}}
spec: {{clusterQueue: {name}}}
"""


def admitted(on: str, priority: int, cluster_queue: str) -> str:
    return f"""
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {{name: on-{on}, namespace: ns, creationTimestamp: "2026-01-01T00:00:00Z"}}
spec:
  queueName: {cluster_queue}
  priority: {priority}
  podSets:
  - name: main
    count: 2
    topologyRequest: {{required: {HOST}}}
    template: {{spec: {{containers: [{{name: c, resources: {{requests: {{cpu: "1"}}}}}}]}}}}
status:
  admission:
    clusterQueue: {cluster_queue}
    podSetAssignments:
    - name: main
      count: 2
      flavors: {{cpu: tas}}
      resourceUsage: {{cpu: "2"}}
      topologyAssignment:
        levels: [{HOST}]
        slices: [{{domainCount: 1, podCounts: {{universal: 2}}, valuesPerLevel: [{{universal: {on}}}]}}]
  conditions:
  - {{type: QuotaReserved, status: "True", reason: QuotaReserved, message: x, lastTransitionTime: "2026-01-01T00:00:00Z"}}
  - {{type: Admitted, status: "True", reason: Admitted, message: x, lastTransitionTime: "2026-01-01T00:00:00Z"}}
"""


def preemptor(cluster_queue: str, priority: int) -> str:
    return f"""
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {{name: big, namespace: ns, creationTimestamp: "2026-01-01T00:01:00Z"}}
spec:
  queueName: {cluster_queue}
  priority: {priority}
  podSets:
  - name: main
    count: 4
    topologyRequest: {{required: {RACK}}}
    template: {{spec: {{containers: [{{name: c, resources: {{requests: {{cpu: "1"}}}}}}]}}}}
"""


TOPOLOGY = f"""
apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata: {{name: default}}
spec:
  levels: [{{nodeLabel: {RACK}}}, {{nodeLabel: {HOST}}}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {{name: tas}}
spec: {{nodeLabels: {{pool: tas}}, topologyName: default}}
"""


def plan(tmp_path: Path, capsys: pytest.CaptureFixture[str], objects: list[str]) -> dict[str, Any]:
    path = tmp_path / "state.yaml"
    path.write_text("---".join([TOPOLOGY, *(node(n) for n in FILLED), *objects]))
    args = ["plan", "-f", str(path), "--now", "2026-01-01T01:00:00Z", "--cycles", "1"]
    assert main([*args, "--config", str(DATA / "plan_fair_config.yaml")]) == 0
    result: dict[str, Any] = json.loads(capsys.readouterr().out)
    return result


def victims(result: dict[str, Any]) -> set[str]:
    [preempting] = result["preempting"]
    assert preempting["workload"] == "ns/big"
    return {v["workload"] for v in preempting["victims"]}


def test_quota_fits_and_no_rack_does_the_cheapest_rack_is_freed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The queue has 16 cpus of quota and uses 8: the quota needs no victim, the nodes
    are full. The fair-sharing search goes on until one rack holds the 4 pods: r2, whose
    Workloads' highest priority (2) is below r1's (3)."""
    objects = [queue("team-a", 16, None), preemptor("team-a", 5)]
    objects += [admitted(on, p, q) for on, (p, q) in FILLED.items()]
    assert victims(plan(tmp_path, capsys, objects)) == {"ns/on-r2-a", "ns/on-r2-b"}


def test_reclaim_under_fair_sharing_takes_one_rack_of_the_borrower(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`team-b` (nominal 2) borrows 4 cpus of `team-a`'s 6 (r1-a, r2-a and r2-b are its);
    `team-a`'s own Workload (on r1-b) is of priority 9. A `team-a` preemptor within its
    nominal quota reclaims from `team-b` only the two Workloads of r2 — not r1-a, the
    lowest priority, in a rack it cannot have."""
    owners = {**FILLED, "r1-b": (9, "team-a")}
    owners.update({on: (p, "team-b") for on, (p, _) in FILLED.items() if on != "r1-b"})
    objects = [queue("team-a", 6, "all"), queue("team-b", 2, "all"), preemptor("team-a", 0)]
    objects += [admitted(on, p, q) for on, (p, q) in owners.items()]
    assert victims(plan(tmp_path, capsys, objects)) == {"ns/on-r2-a", "ns/on-r2-b"}
