"""Decisions as Kueue's scheduler makes them: cases of Kueue's
`pkg/scheduler/scheduler_test.go` (TestSchedule), each as manifests under
tests/unit/data/kueue_schedule/ named after the Kueue case, run through `quotagate plan`.
Each test states what Kueue's test expects.

The cases on trees of Cohorts run one admission cycle (`--cycles 1`), as Kueue's test runs
one scheduling cycle, and are checked with `check`: the Workloads Kueue's cycle admits
(wantAssignments less the Workloads admitted before the cycle) are `admitted`, with their
ClusterQueue and flavors; wantLeft and wantInadmissibleLeft are `pending` with the
ClusterQueue; the Workloads admitted before the cycle keep their quota (nothing is
evicted)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.kueue_cases import plan_case

Admitted = dict[str, tuple[str, list[tuple[str, int, dict[str, str]]]]]


def plan(
    case: str, capsys: pytest.CaptureFixture[str], cycles: int | None = None
) -> dict[str, Any]:
    return plan_case("kueue_schedule", case, capsys, cycles=cycles)


def check(
    result: dict[str, Any],
    *,
    admitted: Admitted | None = None,
    pending: dict[str, str] | None = None,
) -> None:
    """The cycle's decisions are exactly these (admitted: workload → (ClusterQueue, [(pod
    set, count, flavors)]); pending: workload → ClusterQueue): nothing preempts, nothing is
    evicted."""
    got_admitted = {
        a["workload"]: (
            a["clusterQueue"],
            [(ps["name"], ps["count"], ps["flavors"]) for ps in a["podSets"]],
        )
        for a in result["admitted"]
    }
    got_pending = {p["workload"]: p["clusterQueue"] for p in result["pending"]}
    assert got_admitted == (admitted or {})
    assert got_pending == (pending or {})
    assert result["preempting"] == []
    assert result["evicted"] == []


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


def test_hierarchical_cohort_respects_lending_limit_when_borrowing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "hierarchical cohort respects lending limit when borrowing": root ← child ←
    cq-lender (10 cpus, lendingLimit 3) and cq-borrower (5, borrowingLimit 10, all 5 used
    by wl-existing). wl-pending asks 4 cpus, but only the 3 cq-lender lends can be
    borrowed: it is inadmissible and stays in cq-borrower; nothing is admitted."""
    result = plan("hierarchical-cohort-respects-lending-limit-when-borrowing", capsys, cycles=1)
    check(result, pending={"eng-alpha/wl-pending": "cq-borrower"})


def test_hierarchical_cohort_allows_borrowing_up_to_lending_limit(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "hierarchical cohort allows borrowing up to lending limit": as the previous case
    with cq-lender lending at most 5; wl-borrowing asks exactly those 5 cpus and is
    admitted in cq-borrower, flavor on-demand."""
    result = plan("hierarchical-cohort-allows-borrowing-up-to-lending-limit", capsys, cycles=1)
    check(
        result,
        admitted={"eng-alpha/wl-borrowing": ("cq-borrower", [("main", 1, {"cpu": "on-demand"})])},
    )


def test_in_a_hierarchical_cohort_workload_borrowing_less_is_scheduled_first(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "in a hierarchical cohort, workload borrowing less is scheduled first": root ←
    GUARANTEED (4 cpus of its own) ← guaranteed (0), and root ← best-effort (0). Both ask
    4 cpus; guaranteed (priority 0) borrows from its own Cohort, best-effort (priority 3)
    from root, one level higher. Borrowing less comes before priority: guaranteed is
    admitted (flavor default); best-effort no longer fits and stays in its queue."""
    result = plan(
        "in-a-hierarchical-cohort-workload-borrowing-less-is-scheduled-first", capsys, cycles=1
    )
    check(
        result,
        admitted={"eng-alpha/guaranteed": ("guaranteed", [("one", 1, {"cpu": "default"})])},
        pending={"eng-alpha/best-effort": "best-effort"},
    )


def test_preemptionoverborrowing_preference_select_fitting_second_flavor_over_first_flavor_with_no_preemption_candidates(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "PreemptionOverBorrowing preference: select fitting second flavor over first flavor
    with no preemption candidates": nopc-root (spot 5) ← nopc-mid ← nopc-cq (on-demand 5,
    borrowingLimit 0, used by admitted-nopc at the same priority; spot 0) and nopc-sibling
    (on-demand 5, idle). on-demand would need preemption and has no candidate; the idle
    sibling makes on-demand reachable one level lower than spot, but that must not rank
    the unschedulable flavor first: pending-nopc is admitted in spot (borrowing from
    nopc-root). Kueue's nopc-cq leaves reclaimWithinCohort unset ("" in its test, Never
    here): nothing else is in use, so nothing could be reclaimed either way."""
    result = plan(
        "preemptionoverborrowing-preference-select-fitting-second-flavor-over-first-flavor-"
        "with-no-preemption-candidates",
        capsys,
        cycles=1,
    )
    check(result, admitted={"default/pending-nopc": ("nopc-cq", [("main", 1, {"cpu": "spot"})])})
