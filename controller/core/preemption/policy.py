"""Which admitted Workloads a preemptor's ClusterQueue policy lets it preempt, and why.

Kueue's classical preemption (kueue-semantics §6.1–6.2):

- same ClusterQueue: `withinClusterQueue` must be satisfied ⇒ `InClusterQueue`;
- another ClusterQueue of the cohort: `reclaimWithinCohort` must be satisfied and that
  ClusterQueue must be borrowing (reclaim only from a ClusterQueue above its nominal
  quota). If the preemptor fits in its own nominal quota the candidate is a plain
  reclamation (`InCohortReclamation`). If the preemptor must borrow, `borrowWithinCohort`
  decides whether the candidate may go while the preemptor borrows
  (`InCohortReclaimWhileBorrowing`: policy LowerPriority, candidate priority below the
  preemptor's and not above `maxPriorityThreshold`); otherwise it remains a reclamation
  usable only in an attempt where the preemptor does not borrow (§6.4).

On top of Kueue: a preemptor whose priority class has `preemptionPolicy: Never`
preempts nothing, and a non-preemptible candidate is never eligible (design §4).
The caller only asks about Workloads that use a (flavor, resource) needing preemption.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from api.constants import (
    BorrowWithinCohortPolicy,
    PreemptionReason,
    PriorityClassPreemptionPolicy,
    ReclaimWithinCohortPolicy,
    WithinClusterQueuePolicy,
)
from controller.core.model.clusterqueues import PreemptionPolicy
from controller.core.preemption.ordering import Candidate
from controller.core.preemption.preemptibility import Preemptibility

__all__ = [
    "BorrowWithinCohortPolicy",
    "CandidateVariant",
    "Eligibility",
    "PreemptionReason",
    "Preemptor",
    "PriorityClassPreemptionPolicy",
    "ReclaimWithinCohortPolicy",
    "WithinClusterQueuePolicy",
    "eligibility",
    "satisfies",
]


class CandidateVariant(StrEnum):
    """Kueue's candidate classification; it decides validity per attempt (§6.4)."""

    WITHIN_CLUSTER_QUEUE = "WithinClusterQueue"
    HIERARCHICAL_RECLAIM = "HierarchicalReclaim"  # the preemptor fits without borrowing
    RECLAIM_WITHOUT_BORROWING = "ReclaimWithoutBorrowing"  # only if the preemptor won't borrow
    RECLAIM_WHILE_BORROWING = "ReclaimWhileBorrowing"
    FAIR_SHARING = "FairSharing"  # fair sharing: taken while the shares allow it


_REASON = {
    CandidateVariant.WITHIN_CLUSTER_QUEUE: PreemptionReason.IN_CLUSTER_QUEUE,
    CandidateVariant.HIERARCHICAL_RECLAIM: PreemptionReason.IN_COHORT_RECLAMATION,
    CandidateVariant.RECLAIM_WITHOUT_BORROWING: PreemptionReason.IN_COHORT_RECLAMATION,
    CandidateVariant.RECLAIM_WHILE_BORROWING: PreemptionReason.IN_COHORT_RECLAIM_WHILE_BORROWING,
    CandidateVariant.FAIR_SHARING: PreemptionReason.IN_COHORT_FAIR_SHARING,
}


@dataclass(frozen=True, slots=True)
class Preemptor:
    """The pending Workload that needs quota."""

    cluster_queue: str
    priority: int
    queue_order_timestamp: float  # normally creation time (kueue-semantics §4.1)
    preemption_policy: PriorityClassPreemptionPolicy = (
        PriorityClassPreemptionPolicy.PREEMPT_LOWER_PRIORITY
    )
    # True when the preemptor's requests do not fit in its own nominal quota. With
    # hierarchical cohorts, pass whether it still must borrow at the level where the
    # candidate was found (kueue-semantics §6.2, `adv`).
    needs_borrowing: bool = False


@dataclass(frozen=True, slots=True)
class Eligibility:
    """Whether a candidate may be preempted; `message` says why (not), for explanations."""

    variant: CandidateVariant | None  # None ⇔ not eligible
    message: str

    @property
    def eligible(self) -> bool:
        return self.variant is not None

    @property
    def reason(self) -> PreemptionReason | None:
        return None if self.variant is None else _REASON[self.variant]

    @property
    def valid_while_borrowing(self) -> bool:
        """Whether the candidate may go in an attempt where the preemptor borrows (§6.4)."""
        return self.variant is not None and (
            self.variant is not CandidateVariant.RECLAIM_WITHOUT_BORROWING
        )


def eligibility(
    policy: PreemptionPolicy,
    preemptor: Preemptor,
    candidate: Candidate,
    *,
    candidate_cq_borrowing: bool,
) -> Eligibility:
    """Whether `preemptor`'s ClusterQueue `policy` lets it preempt `candidate`, and how.

    `candidate_cq_borrowing` is whether the candidate's ClusterQueue is above its nominal
    quota for the resources that need preemption; it only matters for other queues.
    """
    if preemptor.preemption_policy == PriorityClassPreemptionPolicy.NEVER:
        return _no("the preemptor's priority class has preemptionPolicy Never")
    if candidate.preemptibility is Preemptibility.NON_PREEMPTIBLE:
        return _no(f"{candidate.key} is non-preemptible")

    if candidate.cluster_queue == preemptor.cluster_queue:
        within = policy.within_cluster_queue
        if within is WithinClusterQueuePolicy.NEVER:
            return _no("withinClusterQueue is Never")
        if not satisfies(within, preemptor, candidate):
            return _no(f"{candidate.key} does not satisfy withinClusterQueue {within}")
        return Eligibility(
            CandidateVariant.WITHIN_CLUSTER_QUEUE,
            f"{candidate.key} satisfies withinClusterQueue {within}",
        )

    reclaim = policy.reclaim_within_cohort
    if reclaim is ReclaimWithinCohortPolicy.NEVER:
        return _no("reclaimWithinCohort is Never")
    if not candidate_cq_borrowing:
        # Reclaim only from a ClusterQueue that is borrowing (above its nominal quota).
        return _no(f"ClusterQueue {candidate.cluster_queue} is within its nominal quota")
    if not satisfies(reclaim, preemptor, candidate):
        return _no(f"{candidate.key} does not satisfy reclaimWithinCohort {reclaim}")
    if not preemptor.needs_borrowing:
        return Eligibility(
            CandidateVariant.HIERARCHICAL_RECLAIM,
            f"reclaim from {candidate.cluster_queue}; the preemptor fits in its nominal quota",
        )

    borrow = policy.borrow_within_cohort
    threshold = policy.borrow_within_cohort_max_priority
    if borrow is BorrowWithinCohortPolicy.NEVER:
        why = "borrowWithinCohort is Never"
    elif candidate.priority >= preemptor.priority:
        why = f"{candidate.key} priority {candidate.priority} is not below the preemptor's"
    elif threshold is not None and candidate.priority > threshold:
        why = f"{candidate.key} priority {candidate.priority} is above maxPriorityThreshold {threshold}"
    else:
        return Eligibility(
            CandidateVariant.RECLAIM_WHILE_BORROWING,
            f"reclaim from {candidate.cluster_queue} while borrowing (borrowWithinCohort)",
        )
    return Eligibility(
        CandidateVariant.RECLAIM_WITHOUT_BORROWING,
        f"reclaim from {candidate.cluster_queue} only if the preemptor does not borrow: {why}",
    )


def satisfies(
    policy: WithinClusterQueuePolicy | ReclaimWithinCohortPolicy,
    preemptor: Preemptor,
    candidate: Candidate,
) -> bool:
    """Kueue `satisfiesPreemptionPolicy` (kueue-semantics §6.1)."""
    if policy in (
        WithinClusterQueuePolicy.LOWER_PRIORITY,
        ReclaimWithinCohortPolicy.LOWER_PRIORITY,
    ):
        return candidate.priority < preemptor.priority
    if policy is WithinClusterQueuePolicy.LOWER_OR_NEWER_EQUAL_PRIORITY:
        return candidate.priority < preemptor.priority or (
            candidate.priority == preemptor.priority
            and preemptor.queue_order_timestamp < candidate.queue_order_timestamp
        )
    return policy is ReclaimWithinCohortPolicy.ANY


def _no(message: str) -> Eligibility:
    return Eligibility(None, message)
