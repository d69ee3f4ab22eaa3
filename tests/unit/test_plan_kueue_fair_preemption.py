"""Fair-sharing preemption as Kueue decides it: cases of Kueue's
`pkg/scheduler/preemption/preemption_fair_test.go` (TestFairPreemptions, and the decisions
of TestFairPreemptionSkipsUnsatisfiableTournament), each as manifests under
tests/unit/data/kueue_fair_preemption/ named after the Kueue case, run through
`quotagate plan` with fair sharing on. Each test states what Kueue's test expects.

Kueue's test asks its preemptor directly for the targets of one incoming Workload (its whole
request in flavor "default", mode Preempt); here the incoming Workload is pending in its
ClusterQueue and the plan runs until nothing changes. Non-empty expectation: the incoming
Workload preempts, and its victims with their ClusterQueue and reason are exactly Kueue's
targets. Empty expectation: nothing is preempted and the incoming Workload stays pending.

Shares below are Kueue's dominant resource shares: what a node uses above its (subtree)
quota × 1000 / what its parent's tree can lend, divided by its fair-sharing weight. In the
cases with ClusterQueues a, b, c (3 cpus each) and preemptible (0) in cohort "all", the
tree lends 9 cpus: a ClusterQueue borrowing n cpus has share n/9 (written n/9 below)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.kueue_cases import plan_case


def plan(
    case: str, capsys: pytest.CaptureFixture[str], config: str = "fair-sharing.yaml"
) -> dict[str, Any]:
    return plan_case("kueue_fair_preemption", case, capsys, config=config)


def victims(result: dict[str, Any], incoming: str, cluster_queue: str) -> set[tuple[str, str, str]]:
    """The (victim, its ClusterQueue, reason) set of the one preemption, by `incoming`."""
    [preempting] = result["preempting"]
    assert (preempting["workload"], preempting["clusterQueue"]) == (incoming, cluster_queue)
    assert incoming not in [a["workload"] for a in result["admitted"]]
    return {(v["workload"], v["clusterQueue"], v["reason"]) for v in preempting["victims"]}


def assert_nothing_preempted(result: dict[str, Any], incoming: str, cluster_queue: str) -> None:
    """Kueue finds no targets: the incoming Workload neither preempts nor is admitted."""
    assert incoming not in [p["workload"] for p in result["preempting"]]
    assert incoming not in [a["workload"] for a in result["admitted"]]
    assert (incoming, cluster_queue) in [
        (p["workload"], p["clusterQueue"]) for p in result["pending"]
    ]


def test_reclaim_nominal_from_user_using_the_most(capsys: pytest.CaptureFixture[str]) -> None:
    """ "reclaim nominal from user using the most": a uses 3, b 5, c 1 (1 cpu each). The
    incoming 1 cpu keeps c within its nominal quota, so Kueue reclaims from the ClusterQueue
    with the highest share, b, its first candidate b1: InCohortReclamation."""
    result = plan("reclaim-nominal-from-user-using-the-most", capsys)
    assert victims(result, "ns/c_incoming", "c") == {("ns/b1", "b", "InCohortReclamation")}


def test_can_reclaim_from_queue_using_less_if_taking_from_user_using_the_most_isn_t_enough(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "can reclaim from queue using less, if taking the latest workload from user using the
    most isn't enough": a uses 4 (a1 3, a2 1), b 5 (b1 2, b2 3); c's incoming 3 cpus fit its
    nominal quota. Kueue first takes b1 from b (highest share), which frees too little; then
    a1 from a, which is enough, and b1 is given back: only a1, InCohortReclamation."""
    result = plan(
        "can-reclaim-from-queue-using-less-if-taking-the-latest-workload-from-user-using-the-most-isn-t-enough",
        capsys,
    )
    assert victims(result, "ns/c_incoming", "c") == {("ns/a1", "a", "InCohortReclamation")}


def test_reclaim_borrowable_quota_from_user_using_the_most(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "reclaim borrowable quota from user using the most": a uses 3, b 5, c 1; a's incoming
    1 cpu makes a borrow 1 (share 1/9). b's share is 2/9, 1/9 without b1: a's share is at
    most that (LessThanOrEqualToFinalShare), so b1 goes: InCohortFairSharing."""
    result = plan("reclaim-borrowable-quota-from-user-using-the-most", capsys)
    assert victims(result, "ns/a_incoming", "a") == {("ns/b1", "b", "InCohortFairSharing")}


def test_preempt_one_from_each_cq_borrowing(capsys: pytest.CaptureFixture[str]) -> None:
    """ "preempt one from each CQ borrowing": a and b each use 4 (0.5 + 0.5 + 3) and borrow 1;
    c's incoming 2 cpus fit its nominal quota. a and b tie on share; the tie goes to the
    queue whose first candidate comes first (a1 before b1, by UID). After a1 (0.5), a
    borrows less than b, so b1 (0.5) is next: one from each, InCohortReclamation."""
    result = plan("preempt-one-from-each-cq-borrowing", capsys)
    assert victims(result, "ns/c_incoming", "c") == {
        ("ns/a1", "a", "InCohortReclamation"),
        ("ns/b1", "b", "InCohortReclamation"),
    }


def test_can_t_preempt_when_everyone_under_nominal(capsys: pytest.CaptureFixture[str]) -> None:
    """ "can't preempt when everyone under nominal": a, b and c each use their 3 cpus; no
    ClusterQueue borrows, so there is no candidate for c's incoming 1 cpu."""
    result = plan("can-t-preempt-when-everyone-under-nominal", capsys)
    assert_nothing_preempted(result, "ns/c_incoming", "c")


def test_can_t_preempt_when_it_would_switch_the_imbalance(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "can't preempt when it would switch the imbalance": a uses 3, b 5. With its incoming
    2 cpus a would borrow 2 (share 2/9), as much as b borrows now, more than b would
    without a victim (1/9): neither strategy passes, nothing is preempted."""
    result = plan("can-t-preempt-when-it-would-switch-the-imbalance", capsys)
    assert_nothing_preempted(result, "ns/a_incoming", "a")


def test_can_preempt_lower_priority_workloads_from_same_cq(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "can preempt lower priority workloads from same CQ": a uses 4 (a1_low and a2_low at
    priority -1), b 5. With the incoming 2 cpus a has the highest share, so its own
    lower-priority Workloads go first; b's would not pass the strategies. Kueue takes
    a1_low and a2_low, InClusterQueue."""
    result = plan("can-preempt-lower-priority-workloads-from-same-cq", capsys)
    assert victims(result, "ns/a_incoming", "a") == {
        ("ns/a1_low", "a", "InClusterQueue"),
        ("ns/a2_low", "a", "InClusterQueue"),
    }


def test_can_preempt_a_combination_of_same_cq_and_highest_user(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "can preempt a combination of same CQ and highest user": a uses 3 (a_low at priority
    -1), b 6. a's incoming 2 cpus: b1 passes (a's share 2/9 ≤ b's 2/9 without it),
    InCohortFairSharing; b's next would not, and a_low goes, InClusterQueue."""
    result = plan("can-preempt-a-combination-of-same-cq-and-highest-user", capsys)
    assert victims(result, "ns/a_incoming", "a") == {
        ("ns/a_low", "a", "InClusterQueue"),
        ("ns/b1", "b", "InCohortFairSharing"),
    }


def test_preempt_huge_workload_if_there_is_no_other_option(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "preempt huge workload if there is no other option, as long as the target CQ gets a
    lower share": b1 uses all 9 cpus; a's incoming 2 cpus fit a's nominal quota, so b1 is
    reclaimed: InCohortReclamation."""
    result = plan(
        "preempt-huge-workload-if-there-is-no-other-option-as-long-as-the-target-cq-gets-a-lower-share",
        capsys,
    )
    assert victims(result, "ns/a_incoming", "a") == {("ns/b1", "b", "InCohortReclamation")}


def test_can_t_preempt_huge_workload_if_the_incoming_is_also_huge(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "can't preempt huge workload if the incoming is also huge": a uses 2, b1 7 (b borrows
    4). a's incoming 5 cpus would make a borrow 4 too: 4/9 is neither at most b's share
    without b1 (0) nor below b's share now (4/9). Nothing is preempted."""
    result = plan("can-t-preempt-huge-workload-if-the-incoming-is-also-huge", capsys)
    assert_nothing_preempted(result, "ns/a_incoming", "a")


def test_can_t_preempt_2_smaller_workloads_if_the_incoming_is_huge(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "can't preempt 2 smaller workloads if the incoming is huge": b uses 7 (2 + 2 + 3). a's
    incoming 6 cpus would borrow 3 (3/9): no single b Workload passes
    LessThanOrEqualToFinalShare, and LessThanInitialShare takes at most one per
    ClusterQueue (b1), which is not enough. Nothing is preempted."""
    result = plan("can-t-preempt-2-smaller-workloads-if-the-incoming-is-huge", capsys)
    assert_nothing_preempted(result, "ns/a_incoming", "a")


def test_preempt_from_target_and_others_even_if_over_nominal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "preempt from target and others even if over nominal": a uses 3 (a1_low 2, a2_low 1,
    priority -1), b 6. a's incoming 4 cpus: a's own a1_low and a2_low go first (a has the
    highest share), then LessThanInitialShare takes b1, and a2_low is given back. Kueue
    preempts a1_low (InClusterQueue) and b1 (InCohortFairSharing)."""
    result = plan("preempt-from-target-and-others-even-if-over-nominal", capsys)
    assert victims(result, "ns/a_incoming", "a") == {
        ("ns/a1_low", "a", "InClusterQueue"),
        ("ns/b1", "b", "InCohortFairSharing"),
    }


def test_prefer_to_preempt_workloads_that_don_t_make_the_target_cq_have_the_biggest_share(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "prefer to preempt workloads that don't make the target CQ have the biggest share": b
    uses 5 (b1 2, b2 1, b3 2), c 1. a's incoming 3.5 cpus borrow 0.5. Without b1 b would
    not borrow (a would have the larger share); without b2 b still borrows 1 ≥ 0.5: Kueue
    preempts b2 (rule S2-a), InCohortFairSharing, not b1 (which only S2-b allows)."""
    result = plan(
        "prefer-to-preempt-workloads-that-don-t-make-the-target-cq-have-the-biggest-share", capsys
    )
    assert victims(result, "ns/a_incoming", "a") == {("ns/b2", "b", "InCohortFairSharing")}


def test_preempt_from_different_cluster_queues_if_the_end_result_has_a_smaller_max_share(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "preempt from different cluster queues if the end result has a smaller max share": b
    and c each use 4.5 (2 + 2.5) and borrow 1.5; a's incoming 3.5 cpus borrow 0.5. No
    single victim passes S2-a (its queue would stop borrowing); S2-b takes one per queue:
    b1 and c1, InCohortFairSharing."""
    result = plan(
        "preempt-from-different-cluster-queues-if-the-end-result-has-a-smaller-max-share", capsys
    )
    assert victims(result, "ns/a_incoming", "a") == {
        ("ns/b1", "b", "InCohortFairSharing"),
        ("ns/c1", "c", "InCohortFairSharing"),
    }


def test_scenario_above_does_not_flap(capsys: pytest.CaptureFixture[str]) -> None:
    """ "scenario above does not flap": the state after the previous case (a1 3.5, b2 2.5,
    c2 2.5) with b's incoming 2 cpus: b would borrow 1.5, more than a borrows (0.5):
    nothing is preempted."""
    result = plan("scenario-above-does-not-flap", capsys)
    assert_nothing_preempted(result, "ns/b_incoming", "b")


def test_cannot_preempt_if_it_would_make_the_candidate_cq_go_under_nominal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "cannot preempt if it would make the candidate CQ go under nominal after preempting
    one element": b uses 6 (3 + 3), c 3; a's incoming 4 cpus borrow 1. Either b Workload
    would leave b not borrowing (fails S2-a); S2-b allows one (3 cpus), not enough, and c
    does not borrow. Nothing is preempted."""
    result = plan(
        "cannot-preempt-if-it-would-make-the-candidate-cq-go-under-nominal-after-preempting-one-element",
        capsys,
    )
    assert_nothing_preempted(result, "ns/a_incoming", "a")


def test_workloads_under_priority_threshold_not_capriciously_preempted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "workloads under priority threshold not capriciously preempted": a and b use their 3
    cpus, preemptible (no quota) borrows 3 with priority -3 (at borrowWithinCohort's
    maxPriorityThreshold). a's incoming 2 cpus: borrowWithinCohort plays no part in fair
    sharing, and the shares allow only one of preemptible's Workloads, not enough: nothing
    is preempted."""
    result = plan("workloads-under-priority-threshold-not-capriciously-preempted", capsys)
    assert_nothing_preempted(result, "ns/a_incoming", "a")


def test_preempt_lower_priority_first_even_if_big(capsys: pytest.CaptureFixture[str]) -> None:
    """ "preempt lower priority first, even if big" (strategies [LessThanInitialShare]): a uses
    3, b 6 (b_low 5 at priority 0, b_high 1 at priority 1). a's incoming 1 cpu borrows 1,
    below b's share: the first candidate in b by priority, b_low, goes:
    InCohortFairSharing."""
    result = plan(
        "preempt-lower-priority-first-even-if-big", capsys, "less-than-initial-share.yaml"
    )
    assert victims(result, "ns/a_incoming", "a") == {("ns/b_low", "b", "InCohortFairSharing")}


def test_preempt_workload_that_doesn_t_transfer_the_imbalance_even_if_high_priority(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "preempt workload that doesn't transfer the imbalance, even if high priority"
    (strategies [LessThanOrEqualToFinalShare]): as above; without b_low b would not borrow
    (below a's share), without b_high b still borrows 2: b_high goes, InCohortFairSharing."""
    result = plan(
        "preempt-workload-that-doesn-t-transfer-the-imbalance-even-if-high-priority",
        capsys,
        "less-than-or-equal-to-final-share.yaml",
    )
    assert victims(result, "ns/a_incoming", "a") == {("ns/b_high", "b", "InCohortFairSharing")}


def test_cq_with_higher_weight_can_preempt_more(capsys: pytest.CaptureFixture[str]) -> None:
    """ "CQ with higher weight can preempt more": a (weight 2) uses 3, b 6. a's incoming 2
    cpus borrow 2, share (2/9)/2 = 1/9: b1 (b then at 2/9) and b2 (b at 1/9) both pass:
    InCohortFairSharing."""
    result = plan("cq-with-higher-weight-can-preempt-more", capsys)
    assert victims(result, "ns/a_incoming", "a") == {
        ("ns/b1", "b", "InCohortFairSharing"),
        ("ns/b2", "b", "InCohortFairSharing"),
    }


def test_can_preempt_anything_borrowing_from_cq_with_0_weight(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "can preempt anything borrowing from CQ with 0 weight": b (weight 0) uses 6; a borrowing
    ClusterQueue with weight 0 has an infinite share. a's incoming 3 cpus: b1 and b2 pass
    S2-a (b still borrows), b3 passes S2-b: three victims, InCohortFairSharing."""
    result = plan("can-preempt-anything-borrowing-from-cq-with-0-weight", capsys)
    assert victims(result, "ns/a_incoming", "a") == {
        ("ns/b1", "b", "InCohortFairSharing"),
        ("ns/b2", "b", "InCohortFairSharing"),
        ("ns/b3", "b", "InCohortFairSharing"),
    }


def test_can_t_preempt_nominal_from_cq_with_0_weight(capsys: pytest.CaptureFixture[str]) -> None:
    """ "can't preempt nominal from CQ with 0 weight": a and b (weight 0) each use their own 3
    cpus; b does not borrow, so its weight does not matter: nothing is preempted."""
    result = plan("can-t-preempt-nominal-from-cq-with-0-weight", capsys)
    assert_nothing_preempted(result, "ns/a_incoming", "a")


def test_can_t_preempt_nominal_from_cohort_with_0_weight(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "can't preempt nominal from Cohort with 0 weight": right-cq (weight 0, no quota) uses
    the 1 cpu of its Cohort right-cohort (weight 0). right-cohort does not borrow from root,
    so it is pruned, whatever right-cq does inside it: left-1 preempts nothing."""
    result = plan("can-t-preempt-nominal-from-cohort-with-0-weight", capsys)
    assert_nothing_preempted(result, "ns/left-1", "left-cq")


def test_can_preempt_within_cluster_queue_when_no_cohort(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "can preempt within cluster queue when no cohort": a (1 cpu, no cohort) is full with
    a1; the incoming priority-1000 Workload preempts it: InClusterQueue."""
    result = plan("can-preempt-within-cluster-queue-when-no-cohort", capsys)
    assert victims(result, "ns/a_incoming", "a") == {("ns/a1", "a", "InClusterQueue")}


def test_hierarchical_preemption(capsys: pytest.CaptureFixture[str]) -> None:
    """ "hierarchical preemption": ROOT (5) ← LEFT (5, weight 2) ← a (1, weight 2), b (1);
    ROOT ← c (1); ROOT ← RIGHT (5) ← d (1), e (1, weight 0.99). b, c, d, e each run five
    1-cpu Workloads (priorities 1..5), all 20 cpus. a's incoming 5 cpus take the two
    lowest priorities of b and c and the lowest of e (slightly preferred over d by its
    weight): b1, b2, c1, c2, e1, all InCohortFairSharing."""
    result = plan("hierarchical-preemption", capsys)
    assert victims(result, "ns/unit", "a") == {
        ("ns/b1", "b", "InCohortFairSharing"),
        ("ns/b2", "b", "InCohortFairSharing"),
        ("ns/c1", "c", "InCohortFairSharing"),
        ("ns/c2", "c", "InCohortFairSharing"),
        ("ns/e1", "e", "InCohortFairSharing"),
    }


def test_borrowing_cq_in_non_borrowing_cohort_is_protected(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "borrowing cq in non-borrowing cohort is protected": b borrows its Cohort RIGHT's 1 cpu,
    but RIGHT does not borrow from ROOT, so RIGHT is pruned despite its low weight (0.1).
    a (weight 10) must make room for its incoming 5 cpus from its own three priority -1
    Workloads: a1, a2, a3, InClusterQueue."""
    result = plan("borrowing-cq-in-non-borrowing-cohort-is-protected", capsys)
    assert victims(result, "ns/unit", "a") == {
        ("ns/a1", "a", "InClusterQueue"),
        ("ns/a2", "a", "InClusterQueue"),
        ("ns/a3", "a", "InClusterQueue"),
    }


def test_forced_to_preempt_within_clusterqueue_because_borrowing_workload_too_important(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "forced to preempt within clusterqueue because borrowing workload too important": RIGHT
    (3 cpus) borrows 1 for b1 (4 cpus, priority 100), but a reclaims only LowerPriority, so
    b1 is no candidate. The incoming 4 cpus take a's own a1, a2, a3 (priority -1):
    InClusterQueue."""
    result = plan(
        "forced-to-preempt-within-clusterqueue-because-borrowing-workload-too-important", capsys
    )
    assert victims(result, "ns/unit", "a") == {
        ("ns/a1", "a", "InClusterQueue"),
        ("ns/a2", "a", "InClusterQueue"),
        ("ns/a3", "a", "InClusterQueue"),
    }


def test_deep_preemption(capsys: pytest.CaptureFixture[str]) -> None:
    """ "deep preemption": only CCCC, three levels under ROOT, has quota (1 cpu), used by b1
    (b, under B ← BB ← BBB). a (under A ← AA ← AAA) needs it; the shares compared are those
    of A (weight 1.01) and B (weight 0.99), the children of the common ancestor ROOT, and A
    with a1 is below B: b1 goes, InCohortFairSharing."""
    result = plan("deep-preemption", capsys)
    assert victims(result, "ns/a1", "a") == {("ns/b1", "b", "InCohortFairSharing")}


def test_cq_with_zero_weight_can_reclaim_nominal_quota(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "cq with zero weight can reclaim nominal quota": a (1 cpu, weight 0) lends it to b1; a1
    fits a's nominal quota, so b1 is reclaimed whatever a's weight: InCohortReclamation."""
    result = plan("cq-with-zero-weight-can-reclaim-nominal-quota", capsys)
    assert victims(result, "ns/a1", "a") == {("ns/b1", "b", "InCohortReclamation")}


def test_cohort_with_zero_weight_can_reclaim_nominal_quota(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "cohort with zero weight can reclaim nominal quota": Cohort A (1 cpu, weight 0) lends it
    to b1 (b under ROOT); a (no quota, weight 0) under A wants it. a borrows from A, so this
    is not a reclamation by a; A with a1 does not borrow (share 0), b without b1 neither:
    0 ≤ 0, b1 goes, InCohortFairSharing."""
    result = plan("cohort-with-zero-weight-can-reclaim-nominal-quota", capsys)
    assert victims(result, "ns/a1", "a") == {("ns/b1", "b", "InCohortFairSharing")}


def test_nominal_first_workload_fitting_within_nominal_can_preempt_despite_high_drs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "nominal first: workload fitting within nominal can preempt despite high aggregate
    DRS": a holds 3 premium cpus and borrows 5 cheap ones; b borrows 1 premium cpu of a's.
    a's incoming 1 premium cpu fits a's premium nominal quota, so b_prem1 is reclaimed
    although a's share (by cheap) is higher than b's: InCohortReclamation."""
    result = plan(
        "nominal-first-workload-fitting-within-nominal-can-preempt-despite-high-aggregate-drs",
        capsys,
    )
    assert victims(result, "ns/a_incoming", "a") == {("ns/b_prem1", "b", "InCohortReclamation")}


def test_zero_weight_borrowing_preemptor_cannot_preempt_from_non_zero_weight_cq(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "zero weight borrowing preemptor cannot preempt from a borrowing CQ with a non-zero
    weight": a (weight 0) would borrow with its incoming Workload, an infinite share; b
    (weight 1) borrows, a finite one. No candidate can pass: nothing is preempted."""
    result = plan(
        "zero-weight-borrowing-preemptor-cannot-preempt-from-a-borrowing-cq-with-a-non-zero-weight",
        capsys,
    )
    assert_nothing_preempted(result, "ns/a_incoming", "a")


def test_zero_weight_borrowing_preemptor_can_preempt_from_zero_weight_cq(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "zero weight borrowing preemptor can preempt from a borrowing CQ which also has zero
    weight": cohort all (3 cpus) ← a (1, weight 0), b (0, weight 0) using 3. Both shares are
    infinite; Kueue then compares the unweighted ratios (a: 1 of 4 borrowed, b: 2 of 4
    without b1): b1 goes, InCohortFairSharing."""
    result = plan(
        "zero-weight-borrowing-preemptor-can-preempt-from-a-borrowing-cq-which-also-has-zero-weight",
        capsys,
    )
    assert victims(result, "ns/a_incoming", "a") == {("ns/b1", "b", "InCohortFairSharing")}


def test_non_zero_weight_borrowing_preemptor_preempts_from_a_borrowing_cq(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "non-zero weight borrowing preemptor preempts from a borrowing CQ": as above with
    weights 1: a's share 1/4 ≤ b's 2/4 without b1: b1 goes, InCohortFairSharing."""
    result = plan("non-zero-weight-borrowing-preemptor-preempts-from-a-borrowing-cq", capsys)
    assert victims(result, "ns/a_incoming", "a") == {("ns/b1", "b", "InCohortFairSharing")}


def test_candidates_skipped_by_the_first_strategy_are_still_available_to_the_second(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "candidates skipped by the first strategy are still available to the second strategy":
    ROOT ← A (weight 0, 1 cpu) ← p, y (2 cpus each); ROOT ← x (1 cpu). Against x the
    compared share is A's, infinite while A borrows, so x's candidates fail S2-a; y1 is
    preempted inside A (S2-a), A stops borrowing, and S2-b then takes x1 from the kept
    candidates: y1 and x1, InCohortFairSharing."""
    result = plan(
        "candidates-skipped-by-the-first-strategy-are-still-available-to-the-second-strategy",
        capsys,
    )
    assert victims(result, "ns/p_incoming", "p") == {
        ("ns/y1", "y", "InCohortFairSharing"),
        ("ns/x1", "x", "InCohortFairSharing"),
    }


def test_zero_weight_preemptor_share_is_inf_and_the_tournament_is_skipped(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """TestFairPreemptionSkipsUnsatisfiableTournament "zero weight preemptor: share is +Inf
    and the tournament is skipped": a (weight 0) would borrow; b (weight 1) borrows. No
    target. (Kueue also counts its strategy evaluations, which the plan does not show.)"""
    result = plan("zero-weight-preemptor-share-is-inf-and-the-tournament-is-skipped", capsys)
    assert_nothing_preempted(result, "ns/a_incoming", "a")


def test_non_zero_weight_preemptor_share_is_finite_so_the_tournament_runs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """TestFairPreemptionSkipsUnsatisfiableTournament "non-zero weight preemptor: share is
    finite so the tournament runs": as above with a's weight 1. a with its incoming 1 cpu
    borrows as much as b: neither strategy passes, no target (Kueue's evaluation counts are
    not visible in the plan)."""
    result = plan("non-zero-weight-preemptor-share-is-finite-so-the-tournament-runs", capsys)
    assert_nothing_preempted(result, "ns/a_incoming", "a")
