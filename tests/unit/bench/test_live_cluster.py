"""The live run's objects for a scenario with a tree and weights (no API server)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tools.bench.command import LIVE_FAIR_SHARING, main
from tools.bench.live.cluster import cluster_queue_body, cohort_bodies
from tools.bench.scenario import SCENARIOS, load, parse

SCENARIOS = SCENARIOS

LABELS = {"quotagate.bench/run": "r1"}

TREE: dict[str, Any] = {
    "fairSharing": {},
    "parentCohorts": [
        {"name": "org", "nominalQuota": 8},
        {"name": "eng", "parent": "org", "weight": "1.5", "borrowingLimit": 4},
        {"name": "ops", "parent": "org", "weight": "1n"},
    ],
    "cohorts": [
        {
            "className": "team",
            "count": 2,
            "parent": "eng",
            "queuesSets": [
                {
                    "className": "cq",
                    "count": 1,
                    "nominalQuota": 2,
                    "weight": "250m",
                    "workloadsSets": [
                        {
                            "count": 1,
                            "creationIntervalMs": 1,
                            "workloads": [{"className": "a", "runtimeMs": 1, "request": 1}],
                        }
                    ],
                }
            ],
        },
        {
            "className": "solo",
            "count": 1,
            "queuesSets": [
                {
                    "className": "cq",
                    "count": 1,
                    "nominalQuota": 1,
                    "workloadsSets": [
                        {
                            "count": 1,
                            "creationIntervalMs": 1,
                            "workloads": [{"className": "a", "runtimeMs": 1, "request": 1}],
                        }
                    ],
                }
            ],
        },
    ],
}


def _name(cohort: str) -> str:
    return f"{cohort}-r1"


def _cpu(quota: dict[str, str]) -> list[dict[str, Any]]:
    return [
        {
            "coveredResources": ["cpu"],
            "flavors": [{"name": "rf-r1", "resources": [{"name": "cpu", **quota}]}],
        }
    ]


def test_cohorts_of_the_tree_with_parents_quota_limits_and_weights() -> None:
    bodies = cohort_bodies(parse(TREE), _name, "rf-r1", LABELS)
    assert {body["kind"] for body in bodies} == {"Cohort"}
    assert {body["apiVersion"] for body in bodies} == {"kueue.x-k8s.io/v1beta2"}
    assert all(body["metadata"]["labels"] == LABELS for body in bodies)
    specs = {body["metadata"]["name"]: body["spec"] for body in bodies}
    # The generated cohort `solo-0` has neither parent nor weight: it stays implicit.
    assert specs == {
        "org-r1": {"resourceGroups": _cpu({"nominalQuota": "8"})},
        "eng-r1": {
            "parentName": "org-r1",
            "resourceGroups": _cpu({"nominalQuota": "0", "borrowingLimit": "4"}),
            "fairSharing": {"weight": "1500m"},
        },
        "ops-r1": {"parentName": "org-r1", "fairSharing": {"weight": "1E-9"}},
        "team-0-r1": {"parentName": "eng-r1"},
        "team-1-r1": {"parentName": "eng-r1"},
    }


def test_a_scenario_without_a_tree_has_no_cohort_objects() -> None:
    assert cohort_bodies(load(SCENARIOS / "baseline.yaml"), _name, "rf-r1", LABELS) == []


def test_cluster_queues_carry_their_weight_and_kueues_generator_fields() -> None:
    queues = parse(TREE).queues()
    bodies = [
        cluster_queue_body(_name(name), _name(cohort), qs, "rf-r1", LABELS)
        for name, cohort, qs in queues
    ]
    assert [body["metadata"]["name"] for body in bodies] == [
        "cq-0-0-team-0-r1",
        "cq-0-0-team-1-r1",
        "cq-0-0-solo-0-r1",
    ]
    weighted, _, plain = bodies
    assert weighted["spec"] == {
        "cohortName": "team-0-r1",
        "namespaceSelector": {},
        "resourceGroups": _cpu({"nominalQuota": "2"}),
        "preemption": {"reclaimWithinCohort": "Never", "withinClusterQueue": "Never"},
        "fairSharing": {"weight": "250m"},
    }
    assert "fairSharing" not in plain["spec"]
    assert plain["metadata"]["labels"] == {
        **LABELS,
        "kueue.x-k8s.io/performance-scheduler-class": "cq",
    }


def test_a_live_run_says_fair_sharing_is_the_controllers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Said first, once, even with -q; here the run then fails without a cluster."""
    scenario = tmp_path / "tree.yaml"
    scenario.write_text(json.dumps(TREE))
    missing = str(tmp_path / "no-kubeconfig")
    assert main([str(scenario), "--live", "--kubeconfig", missing, "-q"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == LIVE_FAIR_SHARING
    assert err.count(LIVE_FAIR_SHARING) == 1
    without = {key: value for key, value in TREE.items() if key != "fairSharing"}
    scenario.write_text(json.dumps(without))
    assert main([str(scenario), "--live", "--kubeconfig", missing, "-q"]) == 1
    assert LIVE_FAIR_SHARING not in capsys.readouterr().err
