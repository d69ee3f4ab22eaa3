"""Decisions as Kueue's scheduler makes them: cases of Kueue's
`pkg/scheduler/scheduler_test.go` (TestSchedule), each as manifests under
tests/unit/data/kueue_schedule/ named after the Kueue case, run through `quotagate plan`.
Each test states what Kueue's test expects."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.kueue_cases import plan_case


def plan(case: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    return plan_case("kueue_schedule", case, capsys)


def test_prefer_reclamation_over_cq_priority_based_preemption(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """on-demand needs priority preemption of a1 in the preemptor's own ClusterQueue; spot
    needs only reclamation of b1 from the borrowing other-beta. With whenCanPreempt
    TryNextFlavor (the default) reclamation ranks higher: b1 is preempted, a1 is not."""
    result = plan("prefer-reclamation-over-cq-priority-based-preemption", capsys)
    assert result["admitted"] == []
    [preempting] = result["preempting"]
    assert preempting["workload"] == "eng-alpha/preemptor"
    assert preempting["victims"] == [
        {
            "workload": "eng-beta/b1",
            "clusterQueue": "other-beta",
            "reason": "InCohortReclamation",
            "pods": 1,
        }
    ]


def test_dont_assign_flavor_if_there_are_no_candidates_for_preemption(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """on-demand would need preemption but has no candidate (cq2 is within its nominal
    quota): it is passed over even under MayStopSearch, and spot is assigned by borrowing."""
    result = plan("dont-assign-flavor-if-there-are-no-candidates-for-preemption", capsys)
    assert result["preempting"] == [] and result["pending"] == []
    [admitted] = result["admitted"]
    assert admitted["workload"] == "eng-alpha/new"
    assert admitted["clusterQueue"] == "cq1"
    assert admitted["podSets"] == [{"name": "main", "count": 1, "flavors": {"cpu": "spot"}}]


def test_workload_requiring_reclaimation_prioritized_over_wl_in_another_full_cq(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """WL2 fits CQ2's nominal quota and reclaims from the borrowing CQ3; WL1 (older) would
    borrow and has no candidates. WL2 is processed first (no borrowing), so WL1's held-back
    capacity cannot inflate its victim set: exactly one Workload is evicted, the
    lowest-priority one, and WL1 stays pending."""
    result = plan("workload-requiring-reclaimation-prioritized-over-wl-in-another-full-cq", capsys)
    assert result["admitted"] == []
    [preempting] = result["preempting"]
    assert preempting["workload"] == "eng-beta/WL2"
    assert [v["workload"] for v in preempting["victims"]] == ["eng-gamma/Admitted-Workload-2"]
    assert [p["workload"] for p in result["pending"]] == ["eng-alpha/WL1"]
