"""Reclaim through a tree of Cohorts as Kueue decides it: cases of Kueue's
`pkg/scheduler/preemption/preemption_hierarchical_test.go` (TestHierarchicalPreemptions),
each as manifests under tests/unit/data/kueue_hierarchical/ named after the Kueue case, run
through `quotagate plan`. Each test states what Kueue's test expects."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from controller.cli import main

DATA = Path(__file__).parent / "data" / "kueue_hierarchical"


def plan(case: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    code = main(["plan", "-f", str(DATA / f"{case}.yaml"), "--now", "2026-01-01T00:02:00Z"])
    out = capsys.readouterr().out
    assert code == 0, out
    result: dict[str, Any] = json.loads(out)
    return result


def victims(result: dict[str, Any]) -> list[tuple[str, str, str]]:
    [preempting] = result["preempting"]
    assert preempting["workload"] == "ns/in"
    return [(v["workload"], v["clusterQueue"], v["reason"]) for v in preempting["victims"]]


def test_preempt_with_hierarchical_advantage(capsys: pytest.CaptureFixture[str]) -> None:
    """q (no quota) sits under C, which holds 2 cpus that q_borrowing (under R) uses. The
    incoming 2 cpus fit within C's subtree: Kueue preempts admitted2 with
    InCohortReclamation (hierarchical advantage), although both have priority 0."""
    result = plan("preempt-with-hierarchical-advantage", capsys)
    assert victims(result) == [("ns/admitted2", "q_borrowing", "InCohortReclamation")]


def test_avoid_queues_within_nominal_quota(capsys: pytest.CaptureFixture[str]) -> None:
    """As above, with q_nominal using its own 2 cpus at priority -10: Kueue leaves it alone
    (its queue is within its nominal quota) and preempts admitted2 of q_borrowing."""
    result = plan("avoid-queues-within-nominal-quota", capsys)
    assert victims(result) == [("ns/admitted2", "q_borrowing", "InCohortReclamation")]


def test_respect_lending_limits(capsys: pytest.CaptureFixture[str]) -> None:
    """q has 3 cpus and lends at most 2; C adds 2. q_borrowing (no quota) uses all 4 that
    reach R. The incoming 5 cpus (priority -2) fit in C's subtree (1 kept by q + 4): Kueue
    reclaims admitted_borrowing (priority 0) with InCohortReclamation."""
    result = plan("respect-lending-limits", capsys)
    assert victims(result) == [("ns/admitted_borrowing", "q_borrowing", "InCohortReclamation")]
