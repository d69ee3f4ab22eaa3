"""Reclaim through a tree of Cohorts as Kueue decides it: cases of Kueue's
`pkg/scheduler/preemption/preemption_hierarchical_test.go` (TestHierarchicalPreemptions),
each as manifests under tests/unit/data/kueue_hierarchical/ named after the Kueue case, run
through `quotagate plan`. Each test states what Kueue's test expects."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.kueue_cases import plan_case


def plan(case: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    return plan_case("kueue_hierarchical", case, capsys)


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


def test_preempt_multiple_with_hierarchical_advantage(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """q_borrowing holds C's 2 cpus with admitted1 (priority 1) and admitted2 (priority 2);
    the incoming 2 cpus (priority 0) fit in C: Kueue reclaims both, InCohortReclamation."""
    result = plan("preempt-multiple-with-hierarchical-advantage", capsys)
    assert victims(result) == [
        ("ns/admitted1", "q_borrowing", "InCohortReclamation"),
        ("ns/admitted2", "q_borrowing", "InCohortReclamation"),
    ]


def test_prefer_to_preempt_hierarchical_candidate(capsys: pytest.CaptureFixture[str]) -> None:
    """One cpu is needed; q's own admitted_same_queue has priority -2, q_borrowing's
    admitted_borrowing priority 1: Kueue reclaims admitted_borrowing (hierarchical
    candidates come before the preemptor's own queue)."""
    result = plan("prefer-to-preempt-hierarchical-candidate", capsys)
    assert victims(result) == [("ns/admitted_borrowing", "q_borrowing", "InCohortReclamation")]


def test_forced_to_preempt_priority_candidate(capsys: pytest.CaptureFixture[str]) -> None:
    """q_nominal (priority -10) is within its quota and is left alone; the incoming 2 cpus
    do not fit in C without borrowing, so Kueue takes admitted_same_cohort (priority -1)
    under borrowWithinCohort: InCohortReclaimWhileBorrowing."""
    result = plan("forced-to-preempt-priority-candidate", capsys)
    assert victims(result) == [
        ("ns/admitted_same_cohort", "q_same_cohort", "InCohortReclaimWhileBorrowing")
    ]


def test_incoming_workload_fits_in_cq_nominal_quota(capsys: pytest.CaptureFixture[str]) -> None:
    """q owns 4 cpus that q_borrowing and q_same_cohort (priority 10 each) use; the
    incoming 4 cpus fit in q's nominal quota: Kueue reclaims both, InCohortReclamation,
    whatever their priority."""
    result = plan("incoming-workload-fits-in-cq-nominal-quota", capsys)
    assert victims(result) == [
        ("ns/admitted_borrowing", "q_borrowing", "InCohortReclamation"),
        ("ns/admitted_same_cohort", "q_same_cohort", "InCohortReclamation"),
    ]


def test_preempt_hierarchical_and_priority_candidates(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """R holds 1 cpu, C 4. Kueue reclaims admitted_borrowing (from outside C:
    InCohortReclamation) and admitted_same_cohort_preemptible (inside C, lower priority:
    InCohortReclaimWhileBorrowing), and spares admitted_borrowing_not_preemptible."""
    result = plan("preempt-hierarchical-and-priority-candidates", capsys)
    assert victims(result) == [
        ("ns/admitted_borrowing", "q_borrowing", "InCohortReclamation"),
        (
            "ns/admitted_same_cohort_preemptible",
            "q_same_cohort",
            "InCohortReclaimWhileBorrowing",
        ),
    ]


def test_preempt_hierarchical_candidates_and_inside_cq(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """As the previous case, with q's own admitted_same_queue_preemptible (priority -1)
    instead of one in q_same_cohort, and reclaimWithinCohort LowerPriority: Kueue takes
    admitted_borrowing (InCohortReclamation) and admitted_same_queue_preemptible
    (InClusterQueue)."""
    result = plan("preempt-hierarchical-candidates-and-inside-cq", capsys)
    assert victims(result) == [
        ("ns/admitted_borrowing", "q_borrowing", "InCohortReclamation"),
        ("ns/admitted_same_queue_preemptible", "q", "InClusterQueue"),
    ]


def test_reclaim_nominal_quota_from_lowest_priority_workload_excluding_non_borrowing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """q_nominal's admitted_nominal (priority -2) is within its quota and is not a
    candidate; of q_borrowing's three, Kueue reclaims the lowest priority (8)."""
    result = plan(
        "reclaim-nominal-quota-from-lowest-priority-workload-excluding-non-borrowing", capsys
    )
    assert victims(result) == [
        ("ns/admitted_borrowing_prio_8", "q_borrowing", "InCohortReclamation")
    ]


def test_infeasible_preemption_all_available_workloads_in_pruned_subtrees(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """q_other borrows, but within C_other, whose subtree keeps to its own 2 cpus: it is
    pruned, whatever its priority (-10). admitted_same_cohort (priority 0) could only go
    if q did not borrow afterwards, and q has no quota: Kueue preempts nothing."""
    result = plan("infeasible-preemption-all-available-workloads-in-pruned-subtrees", capsys)
    assert result["preempting"] == [] and result["admitted"] == []
    [pending] = result["pending"]
    assert pending["workload"] == "ns/in"


def test_hiearchical_preemption_with_multiple_resources(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """(Kueue's spelling.) cpu and memory: C holds 4 cpus and 4Gi, R 3 more cpus.
    admitted_borrowing (q_borrowing, 3 cpus, 1Gi) borrows C's cpus; admitted_same_cohort
    (priority -2) uses C's memory. The incoming 2 cpus and 1Gi (priority -2) fit in C:
    Kueue reclaims admitted_borrowing only."""
    result = plan("hiearchical-preemption-with-multiple-resources", capsys)
    assert victims(result) == [("ns/admitted_borrowing", "q_borrowing", "InCohortReclamation")]


def test_prefer_to_preempt_evicted_workloads(capsys: pytest.CaptureFixture[str]) -> None:
    """evicted_same_cohort is already evicted and still holds its cpu: Kueue counts it as
    the preemption in progress and evicts nobody else (admitted_borrowing, priority -10,
    stays). quotagate waits for it too; its eviction is not written again."""
    result = plan("prefer-to-preempt-evicted-workloads", capsys)
    assert [v for v, _, _ in victims(result)] == ["ns/evicted_same_cohort"]


def test_reclaim_in_complex_hierarchy(capsys: pytest.CaptureFixture[str]) -> None:
    """Four levels; the incoming 7 cpus in q5 (priority -2). Kueue preempts
    admitted_borrowing_4 (q2, priority -10; once it goes, c23 is back within its quota, so
    admitted_borrowing_3 is spared) and admitted_borrowing_1 (q1), both InCohortReclamation;
    q3's and q4's Workloads stay (their subtrees are within quota, or higher priority)."""
    result = plan("reclaim-in-complex-hierarchy", capsys)
    assert sorted(victims(result)) == [
        ("ns/admitted_borrowing_1", "q1", "InCohortReclamation"),
        ("ns/admitted_borrowing_4", "q2", "InCohortReclamation"),
    ]


def test_preempt_in_cohort_and_own_cq(capsys: pytest.CaptureFixture[str]) -> None:
    """C holds 3 cpus and is over-admitted (4 in use: admitted_preemptible holds 2). The
    incoming 2 cpus (priority 1) take q's own admitted_own_queue (InClusterQueue) and
    q_same_cohort's admitted_preemptible (priority 0, InCohortReclaimWhileBorrowing);
    admitted_not_preemptible (priority 1) stays, as in Kueue."""
    result = plan("preempt-in-cohort-and-own-cq", capsys)
    assert sorted(victims(result)) == [
        ("ns/admitted_own_queue", "q", "InClusterQueue"),
        ("ns/admitted_preemptible", "q_same_cohort", "InCohortReclaimWhileBorrowing"),
    ]
