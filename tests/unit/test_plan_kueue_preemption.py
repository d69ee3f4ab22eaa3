"""Preemption as Kueue's classical preemptor decides it: cases of Kueue's
`pkg/scheduler/preemption/preemption_test.go` (TestPreemption), each as manifests under
tests/unit/data/kueue_preemption/ named after the Kueue case, run through `quotagate plan`
for one admission cycle at Kueue's test time. Each test states what Kueue's test expects."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.kueue_cases import plan_case


def victims(case: str, capsys: pytest.CaptureFixture[str]) -> list[tuple[str, str, str]]:
    result: dict[str, Any] = plan_case("kueue_preemption", case, capsys, cycles=1)
    [preempting] = result["preempting"]
    assert preempting["workload"] == "ns/in"
    return [(v["workload"], v["clusterQueue"], v["reason"]) for v in preempting["victims"]]


def test_preempting_locally_and_borrowing_other_resources_in_cohort_with_cohort_candidates(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The incoming Workload (priority 1) fits c1's nominal cpu quota but must borrow
    memory (5Gi against 3Gi), so it has no hierarchical advantage over c2, which borrows
    cpu: Kueue judges the advantage on the whole request (`QuantitiesFitInQuota`), and
    c2's Workloads could only go under borrowWithinCohort, which c1 does not allow. Kueue
    preempts c1's own lower-priority c1-med (wantPreempted 1, InClusterQueue) and leaves
    c2's Workloads alone."""
    assert victims(
        "preempting-locally-and-borrowing-other-resources-in-cohort-with-cohort-candidates",
        capsys,
    ) == [("ns/c1-med", "c1", "InClusterQueue")]
