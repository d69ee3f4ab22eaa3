"""The order in which preemption candidates are taken, first to be preempted first.

Kueue's `CandidatesOrdering` (kueue-semantics §6.3) with KEP-7990's preemption cost and
design §4 step 3:

1. already evicted (Evicted=True) first;
2. a ClusterQueue other than the preemptor's before the preemptor's own;
3. lower priority first;
4. lower preemption cost first (KEP-7990: unset = 0; it follows priority in the key, so
   it only decides between equal priorities; compared exactly in milli-units);
5. single-pod before multi-pod Workloads (a gang loses more when preempted);
6. more recent quota reservation first (no reservation time counts as "now");
7. UID ascending, so the order is total and deterministic.

Kueue's admission-fair-sharing tiebreak (LocalQueue usage) is not implemented.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from api.quantities import Quantity
from controller.core.preemption.preemptibility import Preemptibility

__all__ = ["Candidate", "CandidateSortKey", "candidate_sort_key", "order_candidates"]


@dataclass(frozen=True, slots=True)
class Candidate:
    """An admitted Workload that preemption may consider."""

    key: str  # namespace/name
    uid: str
    cluster_queue: str
    priority: int
    preemption_cost: Quantity | None = None  # status.preemptionCost; unset = 0
    pod_count: int = 1  # pods over all podsets
    quota_reserved_at: float | None = None  # QuotaReserved=True transition; None = now
    evicted: bool = False
    preemptibility: Preemptibility = Preemptibility.PREEMPTIBLE  # resolved
    queue_order_timestamp: float = 0.0  # Kueue's queue-order time (normally creation time)


CandidateSortKey = tuple[bool, bool, int, int, bool, tuple[int, float], str, str]


def candidate_sort_key(candidate: Candidate, preemptor_cq: str) -> CandidateSortKey:
    """Sort key: smaller keys are preempted first (see the module docstring for the order)."""
    cost = 0 if candidate.preemption_cost is None else candidate.preemption_cost.milli
    reserved = (
        (0, 0.0) if candidate.quota_reserved_at is None else (1, -candidate.quota_reserved_at)
    )
    return (
        not candidate.evicted,
        candidate.cluster_queue == preemptor_cq,
        candidate.priority,
        cost,
        candidate.pod_count > 1,
        reserved,
        candidate.uid,
        candidate.key,
    )


def order_candidates(candidates: Iterable[Candidate], preemptor_cq: str) -> list[Candidate]:
    """The candidates in preemption order, first to be preempted first."""
    return sorted(candidates, key=lambda c: candidate_sort_key(c, preemptor_cq))
