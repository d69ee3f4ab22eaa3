"""Kueue's TAS scheduler-performance scenario in the simulated bench: the nodes and the
topology Kueue's generator makes, each Workload's pods and topology request, and a small
run where every Workload is admitted inside one rack as it asked."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from controller.core.model.topology import TopologyRequest
from controller.core.tas.encoding import decode
from tools.bench.scenario import SCENARIOS, ScenarioError, load, parse
from tools.bench.simulate import build, simulate

RACK = "cloud.provider.com/topology-rack"


def small(constraint: str, **extra: Any) -> Any:
    return parse(
        {
            "topology": {
                "name": "t",
                "levels": [
                    {"name": "rack", "count": 2, "nodeLabel": RACK},
                    {
                        "name": "node",
                        "count": 2,
                        "nodeLabel": "kubernetes.io/hostname",
                        "capacity": {"cpu": "2"},
                    },
                ],
            },
            "resourceFlavor": {"name": "tas", "nodeLabel": "pool", "topologyName": "t"},
            "cohorts": [
                {
                    "className": "c",
                    "count": 1,
                    "queuesSets": [
                        {
                            "className": "cq",
                            "count": 1,
                            "nominalQuota": 8,
                            "reclaimWithinCohort": "Any",
                            "withinClusterQueue": "LowerPriority",
                            "workloadsSets": [
                                {
                                    "count": 6,
                                    "creationIntervalMs": 10,
                                    "workloads": [
                                        {
                                            "className": "w",
                                            "runtimeMs": 100,
                                            "request": "1",
                                            "podCount": 4,
                                            "tasConstraint": constraint,
                                            "tasLevel": RACK,
                                            **extra,
                                        }
                                    ],
                                }
                            ],
                        }
                    ],
                }
            ],
        },
        "t",
    )


def test_kueues_tas_scenario_builds_its_640_nodes_and_requests() -> None:
    scenario = load(SCENARIOS / "tas.yaml")
    assert scenario.total_workloads() == 15_000
    state, jobs, _ = build(scenario)
    assert len(state.tas.nodes) == 640
    node = state.tas.nodes["block-0-rack-3-node-7"]
    assert node.labels[RACK] == "rack-3" and node.allocatable["cpu"] == 96_000
    balanced = next(j for j in jobs if j.class_name == "medium-balanced-rack")
    assert (balanced.pods, balanced.request) == (4, 5_000)
    assert balanced.topology == TopologyRequest(slice_level=RACK, slice_size=2)


@pytest.mark.parametrize("constraint", ["required", "preferred", "balanced"])
def test_every_workload_is_admitted_in_one_rack(constraint: str) -> None:
    """Two racks of two 2-cpu nodes: a 4-pod Workload fits one rack exactly, so each is
    placed in one rack whatever it asked (balanced: slices of 2 in a rack)."""
    lines = io.StringIO()
    report = simulate(
        small(constraint, **({"sliceSize": 2} if constraint == "balanced" else {})), decisions=lines
    )
    assert report.workloads == 6 and report.overuse_events == 0
    admitted = [a for line in lines.getvalue().splitlines() for a in json.loads(line)["admitted"]]
    assert len(admitted) == 6
    for _, _, _, [[_, count, _, topology]] in admitted:
        placed = decode(topology)
        assert count == placed.pod_count == 4
        assert len({host.split("-node-")[0] for (host,), _ in placed.domains}) == 1


def test_an_unknown_constraint_is_refused_naming_the_key() -> None:
    with pytest.raises(ScenarioError, match=r"tasConstraint: 'spread' is not one of"):
        small("spread")


def test_a_tas_scenario_is_refused_by_the_api_floor_bench_only(capsys: Any) -> None:
    from tools.bench.command import main
    from tools.bench.compare import main as compare

    tas = str(SCENARIOS / "tas.yaml")
    assert main([tas, "--api-floor", "--kubeconfig", "/nonexistent"]) == 2
    assert "the API-floor bench creates no nodes" in capsys.readouterr().err
    # bench-compare takes it: what it refuses here is the missing binary.
    assert compare(["--minimalkueue", "/nonexistent", tas]) == 2
    assert "MINIMALKUEUE=/nonexistent: no such file" in capsys.readouterr().err
