"""Kueue preemption policy eligibility (kueue-semantics §6.1–6.2)."""

from __future__ import annotations

import pytest

from api.constants import (
    BorrowWithinCohortPolicy,
    ReclaimWithinCohortPolicy,
    WithinClusterQueuePolicy,
)
from controller.core.model.clusterqueues import PreemptionPolicy
from controller.core.preemption.ordering import Candidate
from controller.core.preemption.policy import (
    CandidateVariant,
    Eligibility,
    PreemptionReason,
    Preemptor,
    PriorityClassPreemptionPolicy,
    eligibility,
)
from controller.core.preemption.preemptibility import Preemptibility

OWN = "team-a"
OTHER = "team-b"
V = CandidateVariant
R = PreemptionReason


def policy(
    within: str = "Never",
    reclaim: str = "Never",
    borrow: str = "Never",
    max_priority: int | None = None,
) -> PreemptionPolicy:
    return PreemptionPolicy(
        reclaim_within_cohort=ReclaimWithinCohortPolicy(reclaim),
        within_cluster_queue=WithinClusterQueuePolicy(within),
        borrow_within_cohort=BorrowWithinCohortPolicy(borrow),
        borrow_within_cohort_max_priority=max_priority,
    )


def preemptor(
    priority: int = 10,
    ts: float = 100.0,
    *,
    never: bool = False,
    needs_borrowing: bool = False,
) -> Preemptor:
    return Preemptor(
        cluster_queue=OWN,
        priority=priority,
        queue_order_timestamp=ts,
        preemption_policy=(
            PriorityClassPreemptionPolicy.NEVER
            if never
            else PriorityClassPreemptionPolicy.PREEMPT_LOWER_PRIORITY
        ),
        needs_borrowing=needs_borrowing,
    )


def cand(
    priority: int = 0,
    ts: float = 200.0,
    *,
    cq: str = OWN,
    preemptibility: Preemptibility = Preemptibility.PREEMPTIBLE,
) -> Candidate:
    return Candidate(
        key="ns/victim",
        uid="u1",
        cluster_queue=cq,
        priority=priority,
        preemptibility=preemptibility,
        queue_order_timestamp=ts,
    )


def check(
    pol: PreemptionPolicy, p: Preemptor, c: Candidate, *, borrowing: bool = True
) -> Eligibility:
    return eligibility(pol, p, c, candidate_cq_borrowing=borrowing)


# --- withinClusterQueue ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("within", "candidate_priority", "candidate_ts", "eligible"),
    [
        ("Never", 0, 200.0, False),
        ("LowerPriority", 9, 200.0, True),
        ("LowerPriority", 10, 200.0, False),  # equal priority, even if newer
        ("LowerPriority", 11, 200.0, False),
        ("LowerOrNewerEqualPriority", 9, 50.0, True),  # lower, even if older
        ("LowerOrNewerEqualPriority", 10, 200.0, True),  # equal and newer
        ("LowerOrNewerEqualPriority", 10, 100.0, False),  # equal, same time: not strictly newer
        ("LowerOrNewerEqualPriority", 10, 50.0, False),  # equal and older
        ("LowerOrNewerEqualPriority", 11, 200.0, False),
    ],
)
def test_within_cluster_queue(
    within: str, candidate_priority: int, candidate_ts: float, eligible: bool
) -> None:
    e = check(policy(within=within), preemptor(10, 100.0), cand(candidate_priority, candidate_ts))
    assert e.eligible is eligible
    if eligible:
        assert (e.variant, e.reason) == (V.WITHIN_CLUSTER_QUEUE, R.IN_CLUSTER_QUEUE)
    else:
        assert (e.variant, e.reason) == (None, None)
        assert e.message


def test_within_cluster_queue_ignores_whether_own_queue_borrows() -> None:
    e = check(policy(within="LowerPriority"), preemptor(), cand(), borrowing=False)
    assert e.reason is R.IN_CLUSTER_QUEUE


def test_same_queue_ignores_reclaim_policy() -> None:
    e = check(policy(within="Never", reclaim="Any"), preemptor(), cand())
    assert not e.eligible


# --- reclaimWithinCohort -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reclaim", "candidate_priority", "eligible"),
    [
        ("Never", 0, False),
        ("LowerPriority", 9, True),
        ("LowerPriority", 10, False),
        ("LowerPriority", 11, False),
        ("Any", 0, True),
        ("Any", 10, True),
        ("Any", 1000, True),
    ],
)
def test_reclaim_within_cohort(reclaim: str, candidate_priority: int, eligible: bool) -> None:
    e = check(policy(reclaim=reclaim), preemptor(10), cand(candidate_priority, cq=OTHER))
    assert e.eligible is eligible
    if eligible:
        assert (e.variant, e.reason) == (V.HIERARCHICAL_RECLAIM, R.IN_COHORT_RECLAMATION)
        assert e.valid_while_borrowing


def test_reclaim_only_from_a_borrowing_cluster_queue() -> None:
    e = check(policy(reclaim="Any"), preemptor(), cand(cq=OTHER), borrowing=False)
    assert not e.eligible
    assert OTHER in e.message and "nominal" in e.message


def test_other_queue_ignores_within_policy() -> None:
    e = check(policy(within="LowerOrNewerEqualPriority"), preemptor(), cand(cq=OTHER))
    assert not e.eligible


def test_reclaim_lower_priority_has_no_newer_equal_rule() -> None:
    e = check(policy(reclaim="LowerPriority"), preemptor(10, 100.0), cand(10, 999.0, cq=OTHER))
    assert not e.eligible


# --- borrowWithinCohort (the preemptor itself must borrow) -----------------------------------


@pytest.mark.parametrize(
    ("reclaim", "borrow", "max_priority", "candidate_priority", "variant"),
    [
        # borrowWithinCohort Never: reclamation only, without borrowing.
        ("Any", "Never", None, 0, V.RECLAIM_WITHOUT_BORROWING),
        ("LowerPriority", "Never", None, 0, V.RECLAIM_WITHOUT_BORROWING),
        # LowerPriority without threshold: any lower priority.
        ("Any", "LowerPriority", None, 9, V.RECLAIM_WHILE_BORROWING),
        ("LowerPriority", "LowerPriority", None, -100, V.RECLAIM_WHILE_BORROWING),
        # Not lower than the preemptor: only without borrowing (reclaim Any lets it in).
        ("Any", "LowerPriority", None, 10, V.RECLAIM_WITHOUT_BORROWING),
        ("Any", "LowerPriority", None, 50, V.RECLAIM_WITHOUT_BORROWING),
        # maxPriorityThreshold: at most the threshold.
        ("Any", "LowerPriority", 5, 5, V.RECLAIM_WHILE_BORROWING),
        ("Any", "LowerPriority", 5, 4, V.RECLAIM_WHILE_BORROWING),
        ("Any", "LowerPriority", 5, 6, V.RECLAIM_WITHOUT_BORROWING),
        ("LowerPriority", "LowerPriority", 5, 6, V.RECLAIM_WITHOUT_BORROWING),
        # Threshold above the preemptor: the preemptor's priority still bounds it.
        ("Any", "LowerPriority", 50, 10, V.RECLAIM_WITHOUT_BORROWING),
    ],
)
def test_borrow_within_cohort(
    reclaim: str,
    borrow: str,
    max_priority: int | None,
    candidate_priority: int,
    variant: CandidateVariant,
) -> None:
    e = check(
        policy(reclaim=reclaim, borrow=borrow, max_priority=max_priority),
        preemptor(10, needs_borrowing=True),
        cand(candidate_priority, cq=OTHER),
    )
    assert e.eligible and e.variant is variant
    if variant is V.RECLAIM_WHILE_BORROWING:
        assert e.reason is R.IN_COHORT_RECLAIM_WHILE_BORROWING
        assert e.valid_while_borrowing
    else:
        assert e.reason is R.IN_COHORT_RECLAMATION
        assert not e.valid_while_borrowing


def test_borrow_within_cohort_does_not_widen_reclaim_policy() -> None:
    e = check(
        policy(reclaim="Never", borrow="LowerPriority"),
        preemptor(10, needs_borrowing=True),
        cand(0, cq=OTHER),
    )
    assert not e.eligible


def test_borrow_within_cohort_needs_the_candidate_queue_to_borrow() -> None:
    e = check(
        policy(reclaim="Any", borrow="LowerPriority"),
        preemptor(10, needs_borrowing=True),
        cand(0, cq=OTHER),
        borrowing=False,
    )
    assert not e.eligible


def test_borrow_within_cohort_does_not_apply_in_the_own_queue() -> None:
    e = check(
        policy(within="LowerPriority", borrow="LowerPriority", max_priority=0),
        preemptor(10, needs_borrowing=True),
        cand(5),
    )
    assert e.variant is V.WITHIN_CLUSTER_QUEUE


def test_preemptor_within_nominal_ignores_borrow_policy() -> None:
    e = check(
        policy(reclaim="Any", borrow="LowerPriority", max_priority=0),
        preemptor(10, needs_borrowing=False),
        cand(50, cq=OTHER),
    )
    assert e.variant is V.HIERARCHICAL_RECLAIM


# --- preemptor and candidate vetoes -------------------------------------------------------

ALL_OPEN = policy(within="LowerOrNewerEqualPriority", reclaim="Any", borrow="LowerPriority")


@pytest.mark.parametrize("cq", [OWN, OTHER])
@pytest.mark.parametrize("needs_borrowing", [False, True])
def test_preemption_policy_never_preempts_nothing(cq: str, needs_borrowing: bool) -> None:
    e = check(ALL_OPEN, preemptor(100, never=True, needs_borrowing=needs_borrowing), cand(cq=cq))
    assert not e.eligible
    assert "Never" in e.message


@pytest.mark.parametrize("cq", [OWN, OTHER])
def test_non_preemptible_candidate_is_never_eligible(cq: str) -> None:
    c = cand(cq=cq, preemptibility=Preemptibility.NON_PREEMPTIBLE)
    e = check(ALL_OPEN, preemptor(100), c)
    assert not e.eligible
    assert "non-preemptible" in e.message


@pytest.mark.parametrize("cq", [OWN, OTHER])
def test_semi_preemptible_candidate_is_eligible(cq: str) -> None:
    c = cand(cq=cq, preemptibility=Preemptibility.SEMI_PREEMPTIBLE)
    assert check(ALL_OPEN, preemptor(100), c).eligible


def test_plain_string_preemption_policy_is_accepted() -> None:
    p = Preemptor(OWN, 10, 0.0, "Never", False)  # type: ignore[arg-type]
    assert not check(ALL_OPEN, p, cand()).eligible
