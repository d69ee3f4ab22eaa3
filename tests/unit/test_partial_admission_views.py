"""Partial admission through `quotagate plan`, `kubectl quotagate whatif` and `describe`:
the admitted count beside the requested one, `--min-count`, the pod sets' minCount."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from controller.cli import main
from controller.kubectl.describe import describe_workload, render_description
from controller.kubectl.snapshot import Snapshot
from controller.kubectl.whatif import render_answer
from tests.unit.test_kubectl_plugin import (
    NOW,
    _ask,
    cluster_queue,
    flavor,
    local_queue,
    snapshot,
    workload,
)

REPO = Path(__file__).resolve().parents[2]

PLAN_PARTIAL = REPO / "tests" / "unit" / "data" / "plan_partial.yaml"


def test_plan_admits_the_pods_that_fit_and_says_how_many_were_asked_for(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["plan", "-f", str(PLAN_PARTIAL)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["admitted"][0]["podSets"] == [
        {"name": "main", "count": 6, "flavors": {"cpu": "on-demand"}, "requestedCount": 8}
    ]


def test_the_docs_partial_admission_example_is_what_plan_prints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    docs = (REPO / "docs" / "integrations.md").read_text()
    command = "$ quotagate plan -f tests/unit/data/plan_partial.yaml -o table\n"
    shown = docs.split(command, 1)[1].split("```", 1)[0]
    assert main(["plan", "-f", str(PLAN_PARTIAL), "-o", "table"]) == 0
    assert capsys.readouterr().out == shown


def test_whatif_with_a_min_count_is_admitted_with_fewer_pods() -> None:
    answer = _ask(snapshot(), requests={"cpu": "1"}, count=6, min_count=2)
    assert answer == {
        "decision": "admit",
        "clusterQueue": "cq",
        "borrowing": False,
        "podSets": [{"name": "main", "count": 4, "flavors": {"cpu": "rf"}, "requestedCount": 6}],
    }
    text = render_answer(
        {
            **answer,
            "workload": "ns/whatif-1",
            "localQueue": "ns/lq",
            "requests": {"cpu": "1"},
            "count": 6,
            "minCount": 2,
            "priority": 0,
        }
    )
    assert "(6 pods, at least 2 × cpu=1; priority 0)" in text
    assert "  partial admission: 4 of 6 pods" in text
    # Without --min-count the same request waits for all its pods.
    assert _ask(snapshot(), requests={"cpu": "1"}, count=6)["decision"] == "pending"


def test_whatif_partial_admission_after_preempting() -> None:
    objects = Snapshot.convert(
        [
            flavor(),
            cluster_queue(preemption={"withinClusterQueue": "LowerPriority"}),
            local_queue(),
            workload("low", cpu="2", admitted_in="cq", priority=1),
        ]
    )
    answer = _ask(objects, requests={"cpu": "1"}, count=6, min_count=3, priority=10)
    assert answer["decision"] == "preempt"
    assert answer["podSets"] == [{"name": "main", "count": 4, "requestedCount": 6}]


def test_describe_shows_the_min_count_and_the_admitted_count() -> None:
    partial: dict[str, Any] = workload("partial", admitted_in="cq")
    partial["spec"]["podSets"][0].update(count=5, minCount=2)
    partial["status"]["admission"]["podSetAssignments"][0].update(
        count=3, resourceUsage={"cpu": "3"}
    )
    d = describe_workload(partial, snapshot(partial), NOW)
    assert d["podSets"] == [{"name": "main", "count": 5, "minCount": 2, "requests": {"cpu": "1"}}]
    text = render_description(d, NOW)
    assert "  NAME   COUNT   MIN COUNT   REQUESTS PER POD" in text
    assert "  main   5       2           cpu=1" in text
    assert "  main     3       cpu=rf    cpu=3" in text
