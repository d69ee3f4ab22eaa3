"""One scheduling cycle with fair sharing as Kueue's scheduler runs it: cases of Kueue's
`pkg/scheduler/scheduler_fs_test.go` (TestScheduleForFairSharing), each as manifests under
tests/unit/data/kueue_fair_schedule/ named after the Kueue case, run through `quotagate plan
--cycles 1` with fair sharing on (as Kueue's enableFairSharing, except where a case turns it
off). Each test states what Kueue's test expects.

Kueue's expectations map to the plan as follows: the Workloads its cycle admits
(wantAssignments less the Workloads admitted before the cycle) are `admitted`, with their
ClusterQueue and flavors; the Workloads it marks Preempted are the victims under
`preempting`, listed with their preemptor; wantLeft is `pending` with the ClusterQueue (a
preemptor left waiting in its queue is under `preempting` instead); the Workloads admitted
before the cycle keep their quota (nothing is evicted).

With fair sharing, each cycle considers one head per ClusterQueue; in a cohort tree they
compete in a tournament: at each Cohort the child whose share would be lowest with its head
admitted wins (Kueue first prefers a child that would not borrow on the head's flavors, then
the lower share, then priority, then the older Workload)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.kueue_cases import plan_case

Admitted = dict[str, tuple[str, list[tuple[str, int, dict[str, str]]]]]
Preempting = dict[str, tuple[str, set[tuple[str, str, str]]]]


def plan(
    case: str,
    capsys: pytest.CaptureFixture[str],
    config: str | None = "fair-sharing.yaml",
    without_api_rules: bool = False,
) -> dict[str, Any]:
    return plan_case(
        "kueue_fair_schedule",
        case,
        capsys,
        config=config,
        cycles=1,
        without_api_rules=without_api_rules,
    )


def check(
    result: dict[str, Any],
    *,
    admitted: Admitted | None = None,
    pending: dict[str, str] | None = None,
    preempting: Preempting | None = None,
) -> None:
    """The cycle's decisions are exactly these (admitted: workload → (ClusterQueue, [(pod
    set, count, flavors)]); pending: workload → ClusterQueue; preempting: preemptor →
    (ClusterQueue, {(victim, its ClusterQueue, reason)})), and nothing is evicted."""
    got_admitted = {
        a["workload"]: (
            a["clusterQueue"],
            [(ps["name"], ps["count"], ps["flavors"]) for ps in a["podSets"]],
        )
        for a in result["admitted"]
    }
    got_preempting = {
        p["workload"]: (
            p["clusterQueue"],
            {(v["workload"], v["clusterQueue"], v["reason"]) for v in p["victims"]},
        )
        for p in result["preempting"]
    }
    got_pending = {p["workload"]: p["clusterQueue"] for p in result["pending"]}
    assert got_admitted == (admitted or {})
    assert got_preempting == (preempting or {})
    assert got_pending == (pending or {})
    assert result["evicted"] == []


def test_with_fair_sharing_schedule_workload_with_lowest_share_first(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "with fair sharing: schedule workload with lowest share first": in cohort eng, eng-alpha
    uses its 50 on-demand cpus and eng-beta 55 (5 of eng-shared's 10); 5 are free. new
    (eng-alpha, 5 cpus) would make eng-alpha borrow 5, older_new (eng-beta, 1 cpu, older)
    eng-beta borrow 6: new has the lower share and is admitted in on-demand; older_new no
    longer fits and stays in eng-beta's queue."""
    result = plan("with-fair-sharing-schedule-workload-with-lowest-share-first", capsys)
    check(
        result,
        admitted={"eng-alpha/new": ("eng-alpha", [("one", 5, {"cpu": "on-demand"})])},
        pending={"eng-beta/older_new": "eng-beta"},
    )


def test_with_fair_sharing_nominal_first_ordering_admits_workload_fitting_within_nominal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "with fair sharing: nominal-first ordering admits workload fitting within nominal despite
    higher CQ DRS": fs-nom-a borrows 30 spot cpus (the higher share), but nom-wl (45) fits
    its on-demand nominal quota (50); borrow-wl (older, 15) would make fs-nom-b borrow
    on-demand. Kueue prefers the head whose queue does not borrow on its own flavors
    (FairSharingPrioritizeNonBorrowing, on by default): nom-wl is admitted in on-demand,
    and borrow-wl no longer fits (10 of the cohort's 60 on-demand cpus left)."""
    # Kueue's case covers cpu in two resource groups, which its API refuses.
    result = plan(
        "with-fair-sharing-nominal-first-ordering-admits-workload-fitting-within-nominal-despite-higher-cq-drs",
        capsys,
        without_api_rules=True,
    )
    check(
        result,
        admitted={"eng-alpha/nom-wl": ("fs-nom-a", [("one", 45, {"cpu": "on-demand"})])},
        pending={"eng-beta/borrow-wl": "fs-nom-b"},
    )


def test_with_fair_sharing_hierarchical_nominal_first_prefers_non_borrowing_subtree(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "with fair sharing: hierarchical nominal-first prefers non-borrowing subtree": with wl-a
    Cohort-A would use 5 of its 10 cpus; with wl-b Cohort-B would use 15 of its 5 (c0
    already borrows 5). At root the subtree that does not borrow wins: wl-a is admitted in
    cq-a; the 15 cpus are then all in use and wl-b stays in cq-b's queue."""
    result = plan(
        "with-fair-sharing-hierarchical-nominal-first-prefers-non-borrowing-subtree", capsys
    )
    check(
        result,
        admitted={"eng-alpha/wl-a": ("cq-a", [("one", 1, {"cpu": "on-demand"})])},
        pending={"eng-alpha/wl-b": "cq-b"},
    )


def test_with_fair_sharing_hierarchical_nominal_first_with_deeper_nesting(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "with fair sharing: hierarchical nominal-first with deeper nesting": as above with the
    10 cpus one level deeper (root ← Cohort-A ← SUB-A ← cq-a): neither SUB-A nor Cohort-A
    would borrow with wl-a, Cohort-B would with wl-b. wl-a is admitted, wl-b stays."""
    result = plan("with-fair-sharing-hierarchical-nominal-first-with-deeper-nesting", capsys)
    check(
        result,
        admitted={"eng-alpha/wl-a": ("cq-a", [("one", 1, {"cpu": "on-demand"})])},
        pending={"eng-alpha/wl-b": "cq-b"},
    )


def test_with_fair_sharing_hierarchical_nominal_first_with_mixed_cq_and_cohort_quotas(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "with fair sharing: hierarchical nominal-first with mixed CQ and cohort quotas": each
    Cohort's subtree holds 18 cpus. With wl-a1 (7) Cohort-A would use 13, within its
    subtree; with wl-b (4) Cohort-B would use 24, borrowing. wl-a1 is admitted in cq-a1;
    3 cpus are left and wl-b stays in cq-b's queue."""
    result = plan(
        "with-fair-sharing-hierarchical-nominal-first-with-mixed-cq-and-cohort-quotas", capsys
    )
    check(
        result,
        admitted={"eng-alpha/wl-a1": ("cq-a1", [("one", 1, {"cpu": "on-demand"})])},
        pending={"eng-alpha/wl-b": "cq-b"},
    )


def test_with_fair_sharing_hierarchical_nominal_first_per_flavor_ignores_cross_flavor_borrowing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "with fair sharing: hierarchical nominal-first per-flavor ignores cross-flavor
    borrowing": Cohort-A borrows spot (cq-a runs 5 spot cpus, Cohort-A has none) but would
    not borrow on-demand with wl-a (4 of its 10); Cohort-B would borrow on-demand with wl-b
    (12 of its 5). Only borrowing on the head's own flavors counts: wl-a is admitted in
    on-demand; 3 on-demand cpus are left and wl-b stays in cq-b's queue."""
    result = plan(
        "with-fair-sharing-hierarchical-nominal-first-per-flavor-ignores-cross-flavor-borrowing",
        capsys,
    )
    check(
        result,
        admitted={"eng-alpha/wl-a": ("cq-a", [("one", 1, {"cpu": "on-demand"})])},
        pending={"eng-alpha/wl-b": "cq-b"},
    )


def test_hierarchical_fair_sharing_schedule_workload_which_wins_tournament(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "hierarchical fair sharing schedule workload which wins tournament": A (200 cpus, 70
    free) ← B ← d (10 in use), e (20); A ← C ← f (0), g (100). Admitted alone, d1 (70) gives
    d 80 and B 100, e1 (61) e 81 and B 91, f1 or g1 (1) C 101. In B, d1 beats e1 (80 < 81);
    at A, B with d1 (100) beats C (101): d1 is admitted, although e1 would have left B
    lower. e1, f1 and g1 no longer fit and stay in their queues."""
    result = plan("hierarchical-fair-sharing-schedule-workload-which-wins-tournament", capsys)
    check(
        result,
        admitted={"eng-alpha/d1": ("d", [("one", 1, {"cpu": "on-demand"})])},
        pending={"eng-alpha/e1": "e", "eng-alpha/f1": "f", "eng-alpha/g1": "g"},
    )


def test_fair_sharing_schedule_workload_with_lowest_drf_after_admission(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "fair sharing schedule workload with lowest drf after admission": A (100 cpus) ← b (b0
    uses 10), c. b with b1 (50) would use 60, c with c1 (75) 75: b1 is admitted; c1 no
    longer fits (40 left) and stays in c's queue."""
    result = plan("fair-sharing-schedule-workload-with-lowest-drf-after-admission", capsys)
    check(
        result,
        admitted={"eng-alpha/b1": ("b", [("one", 1, {"cpu": "on-demand"})])},
        pending={"eng-alpha/c1": "c"},
    )


def test_fair_sharing_two_queues_with_weight_0_schedules_workload_which_borrows_less(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "fair sharing two queues with weight 0 schedules workload which borrows less": A (8
    cpus) ← b, c (weight 0, no quota); b0 uses 4. Both heads borrow on a zero weight (an
    infinite share), so Kueue compares what they borrow: c with c1 4, b with b1 8. c1 is
    admitted although b1 has priority 9001; b1 no longer fits and stays in b's queue."""
    result = plan(
        "fair-sharing-two-queues-with-weight-0-schedules-workload-which-borrows-less", capsys
    )
    check(
        result,
        admitted={"eng-alpha/c1": ("c", [("one", 1, {"cpu": "on-demand"})])},
        pending={"eng-alpha/b1": "b"},
    )


def test_fair_sharing_two_queues_with_high_weight_schedules_workload_which_borrows_less(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "fair sharing two queues with high weight schedules workload which borrows less": as
    above with weights 123456789: the shares are tiny but c's (4 borrowed) is still below
    b's (8): c1 is admitted, b1 (priority 9001) stays in b's queue."""
    result = plan(
        "fair-sharing-two-queues-with-high-weight-schedules-workload-which-borrows-less", capsys
    )
    check(
        result,
        admitted={"eng-alpha/c1": ("c", [("one", 1, {"cpu": "on-demand"})])},
        pending={"eng-alpha/b1": "b"},
    )


def test_fair_sharing_schedule_singleton_cqs_and_cq_without_cohort(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "fair sharing schedule singleton cqs and cq without cohort": a borrows the 10 cpus of
    its Cohort A, b has its own 10 in Cohort B (alone), c has 10 and no cohort. All three
    heads are admitted in the one cycle; nothing is left."""
    result = plan("fair-sharing-schedule-singleton-cqs-and-cq-without-cohort", capsys)
    check(
        result,
        admitted={
            "eng-alpha/a1": ("a", [("one", 1, {"cpu": "on-demand"})]),
            "eng-alpha/b1": ("b", [("one", 1, {"cpu": "on-demand"})]),
            "eng-alpha/c1": ("c", [("one", 1, {"cpu": "on-demand"})]),
        },
    )


def test_fair_sharing_schedule_highest_priority_first(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "fair sharing schedule highest priority first": b1 and c1 would each borrow all 10 cpus
    of A (equal shares); c1 has the higher priority (101 > 99) and is admitted, b1 stays in
    b's queue."""
    result = plan("fair-sharing-schedule-highest-priority-first", capsys)
    check(
        result,
        admitted={"eng-alpha/c1": ("c", [("one", 1, {"cpu": "on-demand"})])},
        pending={"eng-alpha/b1": "b"},
    )


def test_fair_sharing_schedule_earliest_timestamp_first(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "fair sharing schedule earliest timestamp first": as above with equal priorities
    (101); c1 was created a second before b1 and is admitted, b1 stays in b's queue."""
    result = plan("fair-sharing-schedule-earliest-timestamp-first", capsys)
    check(
        result,
        admitted={"eng-alpha/c1": ("c", [("one", 1, {"cpu": "on-demand"})])},
        pending={"eng-alpha/b1": "b"},
    )


def test_with_fair_sharing_preempt_workload_from_cq_with_the_highest_share(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "with fair sharing: preempt workload from CQ with the highest share": the cohort's 150
    on-demand cpus are all used, eng-alpha borrowing 30 (4 × 20) and eng-gamma 20 (10 + 3 ×
    20). eng-beta's preemptor (30 cpus) fits its nominal quota: Kueue reclaims alpha1 from
    eng-alpha (highest share), then gamma1 from eng-gamma (now the highest), both
    InCohortReclamation; the preemptor waits in eng-beta's queue."""
    result = plan("with-fair-sharing-preempt-workload-from-cq-with-the-highest-share", capsys)
    check(
        result,
        preempting={
            "eng-beta/preemptor": (
                "eng-beta",
                {
                    ("eng-alpha/alpha1", "eng-alpha", "InCohortReclamation"),
                    ("eng-gamma/gamma1", "eng-gamma", "InCohortReclamation"),
                },
            )
        },
    )


def test_multiple_preemptions_within_cq_when_fair_sharing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "multiple preemptions within cq when fair sharing": other-alpha, -beta and -gamma (2
    cpus each, withinClusterQueue LowerPriority) each run a 3-cpu Workload at priority 0,
    borrowing resource-bank's cpus; each has a priority-100 preemptor of 3 cpus.

    Kueue's test expects all three to preempt their own queue's Workload. That rests on a
    Go zero value: its ClusterQueues leave `reclaimWithinCohort` as "" (the API server
    would default it to Never), and its flavor assigner lets a request beyond nominal
    preempt under fair sharing when that field is not "Never". On a real API server the
    field is Never: nothing can be preempted for a request beyond the queue's nominal
    quota, and the preemptors stay pending. Kueue's own test, run here with
    `ReclaimWithinCohort: kueue.PreemptionPolicyNever` set on the three queues, fails on
    exactly that (no Evicted/Preempted conditions, no preemption), so the decision below
    is Kueue's on an API server."""
    result = plan("multiple-preemptions-within-cq-when-fair-sharing", capsys)
    check(
        result,
        pending={
            "eng-alpha/preemptor": "other-alpha",
            "eng-beta/preemptor": "other-beta",
            "eng-gamma/preemptor": "other-gamma",
        },
    )


def test_not_enough_resources_with_fair_sharing_enabled(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "not enough resources with fair sharing enabled": new asks 100 cpus of sales, which has
    50 and no cohort: nothing happens and new stays in sales' queue."""
    # Kueue's case gives the cohort-less queue a borrowingLimit, which its API refuses.
    result = plan("not-enough-resources-with-fair-sharing-enabled", capsys, without_api_rules=True)
    check(result, pending={"sales/new": "sales"})


def test_with_fair_sharing_prefer_reclamation_over_cq_priority_based_preemption(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "with fair sharing: prefer reclamation over cq priority based preemption; with
    preemption while borrowing": the preemptor (8 gpus, priority 100) needs, in on-demand,
    to preempt a1 in its own queue by priority, or in spot, to take b1 from other-beta,
    which borrows 2 spot gpus. Reclaiming ranks first: spot; there the preemptor would
    itself borrow 1, so b1 goes by fair sharing: InCohortFairSharing. a1 stays; the
    preemptor waits in other-alpha's queue."""
    result = plan(
        "with-fair-sharing-prefer-reclamation-over-cq-priority-based-preemption-with-preemption-while-borrowing",
        capsys,
    )
    check(
        result,
        preempting={
            "eng-alpha/preemptor": (
                "other-alpha",
                {("eng-beta/b1", "other-beta", "InCohortFairSharing")},
            )
        },
    )


def test_prefer_flavor_with_most_local_capacity(capsys: pytest.CaptureFixture[str]) -> None:
    """ "prefer flavor with most local capacity": a1 (8 on-demand gpus) uses queue1's 3 and
    child-cohort's 5; a2 uses queue1's 3 spot gpus. a3 (1 gpu) can borrow on-demand only
    from root-cohort, or spot from child-cohort (7): Kueue borrows nearer, in spot."""
    result = plan("prefer-flavor-with-most-local-capacity", capsys)
    check(result, admitted={"default/a3": ("queue1", [("main", 1, {"gpu": "spot"})])})


def test_prefer_flavor_with_most_local_capacity_fs_false(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "prefer flavor with most local capacity (FS=false)": the same with fair sharing off
    (no configuration): a3 is admitted in spot."""
    result = plan("prefer-flavor-with-most-local-capacity-fs-false", capsys, config=None)
    check(result, admitted={"default/a3": ("queue1", [("main", 1, {"gpu": "spot"})])})


def test_fair_sharing_in_cq_preemption_for_cq_without_cohort(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "fair sharing: in-CQ preemption for CQ without cohort; repro for nil pointer panic":
    no-cohort-cq (4 cpus, no cohort) is full with nc-low (priority -1); nc-high (priority
    100) preempts it, InClusterQueue, and waits in the queue (Kueue once panicked here)."""
    result = plan(
        "fair-sharing-in-cq-preemption-for-cq-without-cohort-repro-for-nil-pointer-panic", capsys
    )
    check(
        result,
        preempting={
            "default/nc-high": (
                "no-cohort-cq",
                {("default/nc-low", "no-cohort-cq", "InClusterQueue")},
            )
        },
    )


def test_preemption_over_borrowing_with_fair_sharing(capsys: pytest.CaptureFixture[str]) -> None:
    """ "PreemptionOverBorrowing with fair sharing: preempt in first flavor instead of
    borrowing in second": fs-high-pob (5 cpus, priority 0) could borrow fs-pob-lender's
    spot cpus or preempt fs-low-pob (priority -1) in on-demand; with preference
    PreemptionOverBorrowing Kueue preempts fs-low-pob, InClusterQueue, and the preemptor
    waits in its queue."""
    result = plan(
        "preemptionoverborrowing-with-fair-sharing-preempt-in-first-flavor-instead-of-borrowing-in-second",
        capsys,
    )
    check(
        result,
        preempting={
            "default/fs-high-pob": (
                "fs-pob-cq",
                {("default/fs-low-pob", "fs-pob-cq", "InClusterQueue")},
            )
        },
    )
