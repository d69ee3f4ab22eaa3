"""The live bench's objects for Kueue's TAS scenario (tools/bench/live/tas_nodes.py): the
nodes, Topology and flavor as Kueue's runner makes them, the Workloads' pod sets, the node
ledger's over-use check, and bench-compare starting minimalkueue with `-enableTAS`."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.core.tas.assignment import Assignment
from controller.core.tas.encoding import encode
from tools.bench.compare import CompareError, check_kueue_crds, minimalkueue
from tools.bench.live.cluster import workload_body
from tools.bench.live.tas_nodes import NodeLedger, TASObjects
from tools.bench.scenario import SCENARIOS, load
from tools.bench.simulate import build

HOST = "kubernetes.io/hostname"
RACK = "cloud.provider.com/topology-rack"


def objects() -> TASObjects:
    scenario = load(SCENARIOS / "tas.yaml")
    assert scenario.tas is not None
    return TASObjects(scenario.tas, "r1", {"quotagate.bench/run": "r1"})


def test_the_tas_scenario_makes_kueues_640_nodes_in_10_racks() -> None:
    tas = objects()
    nodes = tas.node_bodies()
    assert len(nodes) == 640
    names = [n["metadata"]["name"] for n in nodes]
    assert len(set(names)) == 640
    assert names[0] == "node-b0-r0-n0-r1" and names[-1] == "node-b0-r9-n63-r1"
    labels = nodes[65]["metadata"]["labels"]
    assert labels == {
        "quotagate.bench/run": "r1",
        "tas-node-group": "tas",
        "cloud.provider.com/topology-block": "block-0",
        RACK: "rack-1",
        HOST: "node-b0-r1-n1-r1",  # the node's name: unique, as in a real cluster
    }
    racks = {n["metadata"]["labels"][RACK] for n in nodes}
    assert racks == {f"rack-{i}" for i in range(10)}
    status = tas.node_status()
    assert status["allocatable"] == {"cpu": "96", "memory": "274877906944", "pods": "110"}
    assert {"type": "Ready", "status": "True"}.items() <= status["conditions"][0].items()
    assert tas.flavor_spec() == {
        "nodeLabels": {"tas-node-group": "tas", "quotagate.bench/run": "r1"},
        "topologyName": "default-topology-r1",
    }
    assert [lv["nodeLabel"] for lv in tas.topology_body()["spec"]["levels"]] == [
        "cloud.provider.com/topology-block",
        RACK,
        HOST,
    ]


def test_a_tas_workload_has_its_pods_and_topology_request_as_kueues_generator_writes() -> None:
    scenario = load(SCENARIOS / "tas.yaml")
    _, jobs, _ = build(scenario)
    by_class = {job.class_name: job for job in jobs}
    bodies = {
        name: workload_body(job, "ns", {})["spec"]["podSets"][0] for name, job in by_class.items()
    }
    large = bodies["large-balanced-rack"]
    assert large["count"] == 8
    container = large["template"]["spec"]["containers"][0]
    assert container["resources"]["requests"] == {"cpu": "2500m"}
    assert large["topologyRequest"] == {"podSetSliceRequiredTopology": RACK, "podSetSliceSize": 4}
    assert bodies["small-required-rack"]["topologyRequest"] == {"required": RACK}
    assert bodies["medium-preferred-rack"]["topologyRequest"] == {"preferred": RACK}
    assert bodies["medium-preferred-rack"]["count"] == 4


def test_a_workload_without_topology_keeps_its_one_pod_body() -> None:
    scenario = load(SCENARIOS / "smoke.yaml")
    _, jobs, _ = build(scenario)
    pod_set = workload_body(jobs[0], "ns", {})["spec"]["podSets"][0]
    assert pod_set["count"] == 1 and "topologyRequest" not in pod_set


def admitted(domains: list[tuple[str, int]]) -> dict[str, object]:
    assignment = Assignment((HOST,), tuple(((host,), count) for host, count in domains))
    return {
        "status": {
            "admission": {
                "podSetAssignments": [{"name": "main", "topologyAssignment": encode(assignment)}]
            }
        }
    }


def test_the_node_ledger_counts_an_admission_past_a_nodes_capacity() -> None:
    ledger = NodeLedger({"cpu": 4000, "pods": 3000})
    ledger.admit("a", admitted([("n1", 2), ("n2", 1)]), {"cpu": 1500})
    assert ledger.overuse == 0
    ledger.admit("b", admitted([("n1", 1)]), {"cpu": 1500})  # n1: 4500m of 4000m
    assert ledger.overuse == 1
    ledger.release("b")
    ledger.release("a")
    assert ledger.used == {"n1": {"cpu": 0, "pods": 0}, "n2": {"cpu": 0, "pods": 0}}
    ledger.admit("c", admitted([("n1", 3)]), {"cpu": 1000})  # pods 3 of 3: fits
    assert ledger.overuse == 1
    ledger.admit("d", admitted([("n2", 1)]), {"cpu": 0})
    ledger.admit("e", admitted([("n1", 1)]), {"cpu": 0})  # a 4th pod on n1
    assert ledger.overuse == 2
    assert ledger.placed == 3 + 1 + 3 + 1 + 1


def test_bench_compare_runs_minimalkueue_with_tas_and_wants_the_topology_crd(
    tmp_path: Path,
) -> None:
    binary = tmp_path / "minimalkueue"
    assert minimalkueue(binary, tmp_path, tas=True).command(Path("k"))[-1] == "-enableTAS"
    assert "-enableTAS" not in minimalkueue(binary, tmp_path).command(Path("k"))
    for plural in ("clusterqueues", "localqueues", "resourceflavors", "workloads"):
        (tmp_path / f"kueue.x-k8s.io_{plural}.yaml").write_text("name: v1beta2\n")
    assert check_kueue_crds(str(tmp_path)) == tmp_path.resolve()
    with pytest.raises(CompareError, match=r"no kueue\.x-k8s\.io_topologies\.yaml"):
        check_kueue_crds(str(tmp_path), tas=True)
