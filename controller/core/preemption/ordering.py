"""The order in which preemption candidates are taken, first to be preempted first.

Kueue's `CandidatesOrdering` (kueue-semantics §6.3) with KEP-7990's preemption cost and
design §4 step 3:

1. already evicted (Evicted=True) first;
2. a ClusterQueue other than the preemptor's before the preemptor's own;
3. with admission fair sharing, between Workloads of one ClusterQueue that orders by
   LocalQueue usage: the higher-usage LocalQueue's first (`by_local_queue_usage`);
4. lower priority first;
5. lower preemption cost first (KEP-7990: unset = 0; it follows priority in the key, so
   it only decides between equal priorities; compared exactly in milli-units);
6. single-pod before multi-pod Workloads (a gang loses more when preempted);
7. more recent quota reservation first (no reservation time counts as "now");
8. UID ascending, so the order is total and deterministic.

Step 3 compares only Workloads of the same ClusterQueue (as Kueue's does), so it is not a
component of the sort key: the candidates are sorted by the key, then each ClusterQueue's
candidates are rearranged by usage among the places they hold (`by_local_queue_usage`).
Usage also changes with time, so it is never part of a key cached on a candidate.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from api.quantities import Quantity
from controller.core.preemption.preemptibility import Preemptibility

__all__ = [
    "Candidate",
    "CandidateSortKey",
    "by_local_queue_usage",
    "candidate_sort_key",
    "order_candidates",
]

T = TypeVar("T")


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
    local_queue: str = ""  # namespace/name of its LocalQueue


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


def by_local_queue_usage(
    ordered: Sequence[T],
    group_of: Callable[[T], Hashable],
    usage_of: Callable[[T], float | None],
) -> list[T]:
    """Step 3 on candidates already in key order: within each group — same Evicted state,
    same side of the preemptor's queue, same ClusterQueue (`group_of`) — the candidates
    whose LocalQueue usage is known (`usage_of`, None outside admission fair sharing) are
    rearranged, higher usage first and otherwise as they were, over the places the group
    holds. Kueue compares usage before priority only between two Workloads of one
    ClusterQueue and different LocalQueues: this is that rule as a total order, with
    candidates of different ClusterQueues placed by the key as before."""
    places: dict[Hashable, list[int]] = {}
    for index, item in enumerate(ordered):
        if usage_of(item) is not None:
            places.setdefault(group_of(item), []).append(index)
    out = list(ordered)
    for indexes in places.values():
        members = [ordered[i] for i in indexes]
        members.sort(key=lambda item: -(usage_of(item) or 0.0))  # stable: the key breaks ties
        for index, item in zip(indexes, members, strict=True):
            out[index] = item
    return out


def order_candidates(
    candidates: Iterable[Candidate],
    preemptor_cq: str,
    local_queue_usage: Callable[[Candidate], float | None] | None = None,
) -> list[Candidate]:
    """The candidates in preemption order, first to be preempted first; with
    `local_queue_usage` (admission fair sharing on), step 3 applies."""
    ordered = sorted(candidates, key=lambda c: candidate_sort_key(c, preemptor_cq))
    if local_queue_usage is None:
        return ordered
    return by_local_queue_usage(
        ordered,
        lambda c: (c.evicted, c.cluster_queue == preemptor_cq, c.cluster_queue),
        local_queue_usage,
    )
