"""Victim selection for a preemptor that does not fit (design §4, KEP-5710 adapted to quota).

1. Candidates: admitted Workloads using a (flavor, resource) the preemptor is short of,
   eligible under the preemptor's ClusterQueue policy (`policy.eligibility`), never
   non-preemptible ones; nothing at all for a preemptor whose priority class says
   `preemptionPolicy: Never`.
2. Order them first-to-go first (`ordering.order_candidates`: already evicted, other
   ClusterQueue, with admission fair sharing the higher-usage LocalQueue within one
   ClusterQueue, lower priority, lower preemption cost, single-pod, recently reserved, UID).
3. For each of Kueue's attempts (without / with borrowing, digest §6.4), walk the order
   removing candidates from the quota — skipping those no longer valid (a lender back
   within its nominal quota stops contributing) — until the preemptor fits: that is the
   shortest sufficient prefix (KEP-5710's priority threshold inside one queue; borrowed
   capacity in other queues is reclaimed before the preemptor's own queue is touched).
   If the whole list does not make it fit, it cannot preempt here.
4. Walk the prefix from the most to the least important victim and put back every one the
   preemptor fits without: the result is minimal (no victim can be spared).
5. A victim whose pods above `minCount` may go one by one (`disruptionMode: Pod`, or
   `semi-preemptible`) loses only as many of those pods as needed.

All simulated removals are undone before returning: the state is unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace

from api.constants import BorrowWithinCohortPolicy, Preemptibility, PreemptionReason
from controller.core.clusterqueues import ClusterQueue, FlavorResource
from controller.core.cohorts import QuotaTree
from controller.core.preemption.minimum_runtime import RuntimeProtection
from controller.core.preemption.ordering import CandidateSortKey, by_local_queue_usage
from controller.core.preemption.policy import (
    CandidateVariant,
    Eligibility,
    Preemptor,
    PriorityClassPreemptionPolicy,
    eligibility,
)
from controller.core.preemption.types import Contender, Victim

__all__ = ["find_victims"]


@dataclass(slots=True)
class _Choice:
    contender: Contender
    eligibility: Eligibility
    lca: str | None = None  # the lowest cohort above the candidate's queue and the preemptor's
    pods: int = 0  # pods currently removed in the simulation

    def per_pod(self) -> dict[FlavorResource, int]:
        return {fr: v // self.contender.pod_count for fr, v in self.contender.usage.items()}

    def usage_for(self, pods: int) -> dict[FlavorResource, int]:
        if pods >= self.contender.pod_count:
            return dict(self.contender.usage)
        return {fr: v * pods for fr, v in self.per_pod().items()}


class _Simulation:
    """Removes usage from the quota tree and puts it back exactly."""

    def __init__(self, tree: QuotaTree) -> None:
        self.tree = tree
        self.removed: list[tuple[str, dict[FlavorResource, int]]] = []
        self.versions: dict[tuple[bool, str], int] = {}

    def set_pods(self, choice: _Choice, pods: int) -> None:
        if pods == choice.pods:
            return
        before = choice.usage_for(choice.pods) if choice.pods else {}
        after = choice.usage_for(pods) if pods else {}
        delta = {fr: after.get(fr, 0) - before.get(fr, 0) for fr in {*before, *after}}
        root, version = self.tree.mark(choice.contender.cluster_queue)
        self.versions.setdefault(root, version)
        self.tree.add_usage(choice.contender.cluster_queue, delta, sign=-1)
        self.removed.append((choice.contender.cluster_queue, delta))
        choice.pods = pods

    def undo(self) -> None:
        for cq, delta in reversed(self.removed):
            self.tree.add_usage(cq, delta, sign=1)
        self.removed.clear()
        # Undone exactly: every answer about these cohorts is what it was.
        self.tree.restore(self.versions)
        self.versions.clear()


def _fits(
    tree: QuotaTree, cq: ClusterQueue, usage: Mapping[FlavorResource, int], allow_borrowing: bool
) -> bool:
    for fr, value in usage.items():
        if not value:
            continue
        if not allow_borrowing and tree.borrowing(cq.name, fr, value):
            return False
        if value > tree.available(cq.name, fr):
            return False
    return True


def find_victims(
    tree: QuotaTree,
    cq: ClusterQueue,
    usage: Mapping[FlavorResource, int],
    short: frozenset[FlavorResource],
    preemptor: Preemptor,
    preemptor_preemptibility: Preemptibility,
    contenders: Mapping[str, Sequence[Contender]],
    protection: RuntimeProtection | None = None,
    local_queue_usage: Callable[[Contender], float | None] | None = None,
) -> tuple[Victim, ...] | None:
    """The minimal victim set that lets a Workload needing `usage` in `cq` fit, or None.

    `contenders` are the admitted Workloads in reach, per ClusterQueue. `short` are the
    (flavor, resource) pairs the preemptor lacks; only contenders using one of them are
    considered. Contenders still within their ClusterQueue's minimum runtime are passed
    over and counted in `protection` (minimum_runtime.py). With admission fair sharing,
    `local_queue_usage` gives a contender's LocalQueue usage (None when its ClusterQueue
    does not order by it) for the order's LocalQueue step. `tree` is left exactly as it was.
    """
    if preemptor.preemption_policy == PriorityClassPreemptionPolicy.NEVER:
        return None
    # Eligibility depends only on a few facts of a candidate, so it is decided once per
    # combination (10,000 candidates share a handful): same queue, the candidate queue
    # borrowing, priority, newer than the preemptor, preemptibility. Another queue that
    # is not borrowing is skipped whole: nothing is reclaimed from within nominal quota.
    # In a tree of cohorts the facts also include whether the preemptor has hierarchical
    # advantage at the lowest cohort above both queues (Kueue's hierarchical reclaim).
    verdicts: dict[tuple[bool, bool, int, bool, Preemptibility, bool], Eligibility] = {}
    entries: list[tuple[CandidateSortKey, int, _Choice]] = []
    index = 0
    advantage = tree.advantage_by_level(cq.name, {fr: usage.get(fr, 0) for fr in short})
    for queue, members in contenders.items():
        same = queue == cq.name
        lca = None if same else tree.lowest_common_cohort(queue, cq.name)
        borrowing = same or tree.exceeds_up_to(queue, lca, short)
        if not same and not borrowing:
            continue
        ahead = advantage.get(lca, False) if lca is not None else not preemptor.needs_borrowing
        level = preemptor if same else replace(preemptor, needs_borrowing=not ahead)
        for contender in members:
            index += 1
            if short.isdisjoint(contender.usage):
                continue
            candidate = contender.candidate
            fact = (
                same,
                borrowing,
                contender.priority,
                contender.queue_order_timestamp > preemptor.queue_order_timestamp,
                contender.preemptibility,
                ahead,
            )
            verdict = verdicts.get(fact)
            if verdict is None:
                verdict = verdicts[fact] = eligibility(
                    cq.preemption, level, candidate, candidate_cq_borrowing=borrowing
                )
            if verdict.variant is not None:
                if protection is not None and protection.skips(contender, verdict.variant):
                    continue
                entries.append((contender.sort_key(same), index, _Choice(contender, verdict, lca)))
    if not entries:
        return None
    entries.sort()  # (key, index) are unique: the choices themselves are never compared
    ordered = [choice for _, _, choice in entries]
    if local_queue_usage is not None:
        ordered = by_local_queue_usage(
            ordered,
            lambda c: (
                c.contender.evicted,
                c.contender.cluster_queue == cq.name,
                c.contender.cluster_queue,
            ),
            lambda c: local_queue_usage(c.contender),
        )
    for allow_borrowing in _attempts(tree, cq, short, ordered, preemptor_preemptibility):
        with _simulating(tree) as simulation:
            victims = _attempt(tree, cq, usage, short, ordered, allow_borrowing, simulation)
        for choice in ordered:
            choice.pods = 0
        if victims is not None:
            return victims
    return None


def _attempts(
    tree: QuotaTree,
    cq: ClusterQueue,
    short: frozenset[FlavorResource],
    ordered: list[_Choice],
    preemptibility: Preemptibility,
) -> list[bool]:
    """Kueue's order of attempts (digest §6.4); a non-preemptible preemptor never borrows."""
    if preemptibility is Preemptibility.NON_PREEMPTIBLE:
        return [False]
    others = [c for c in ordered if c.contender.cluster_queue != cq.name]
    forbidden = cq.preemption.borrow_within_cohort is BorrowWithinCohortPolicy.NEVER
    under_nominal = all(tree.usage(cq.name, fr) < tree.quota(cq.name, fr).nominal for fr in short)
    if not others or (forbidden and not under_nominal):
        return [True]
    hierarchical = any(
        c.eligibility.variant is CandidateVariant.HIERARCHICAL_RECLAIM for c in others
    )
    if forbidden and not hierarchical:
        return [False, True]
    return [True, False]


@contextmanager
def _simulating(tree: QuotaTree) -> Iterator[_Simulation]:
    simulation = _Simulation(tree)
    try:
        yield simulation
    finally:
        simulation.undo()


def _valid(
    tree: QuotaTree,
    cq: ClusterQueue,
    short: frozenset[FlavorResource],
    choice: _Choice,
    allow_borrowing: bool,
) -> bool:
    contender = choice.contender
    if contender.cluster_queue == cq.name:
        return True
    if allow_borrowing and not choice.eligibility.valid_while_borrowing:
        return False
    # Reclaim only while the lender (and its side of the tree) is still above its quota.
    return tree.exceeds_up_to(contender.cluster_queue, choice.lca, short)


def _attempt(
    tree: QuotaTree,
    cq: ClusterQueue,
    usage: Mapping[FlavorResource, int],
    short: frozenset[FlavorResource],
    ordered: list[_Choice],
    allow_borrowing: bool,
    simulation: _Simulation,
) -> tuple[Victim, ...] | None:
    taken: list[_Choice] = []
    fits = _fits(tree, cq, usage, allow_borrowing)
    for choice in ordered:
        if fits:
            break
        if not _valid(tree, cq, short, choice, allow_borrowing):
            continue
        partial = choice.contender.removable_pods()
        if partial:
            pods = _fewest_pods(tree, cq, usage, allow_borrowing, simulation, choice, 1, partial)
            simulation.set_pods(choice, pods)
        else:
            simulation.set_pods(choice, choice.contender.pod_count)
        taken.append(choice)
        fits = _fits(tree, cq, usage, allow_borrowing)
    if not fits:
        return None
    # Minimality: from the most to the least important victim, spare what can be spared.
    for choice in reversed(taken):
        removed = choice.pods
        simulation.set_pods(choice, 0)
        if _fits(tree, cq, usage, allow_borrowing):
            continue  # spared entirely
        partial = choice.contender.removable_pods()
        if partial:
            pods = _fewest_pods(
                tree, cq, usage, allow_borrowing, simulation, choice, 1, min(removed, partial)
            )
        else:
            pods = removed
        simulation.set_pods(choice, pods)
    return tuple(
        Victim(
            c.contender.key,
            c.contender.cluster_queue,
            c.eligibility.reason or PreemptionReason.IN_CLUSTER_QUEUE,
            c.pods,
            c.contender.pod_count,
        )
        for c in taken
        if c.pods
    )


def _fewest_pods(
    tree: QuotaTree,
    cq: ClusterQueue,
    usage: Mapping[FlavorResource, int],
    allow_borrowing: bool,
    simulation: _Simulation,
    choice: _Choice,
    low: int,
    high: int,
) -> int:
    """The fewest pods of `choice` (in [low, high]) whose removal makes the preemptor fit,
    or `high` when even that does not (binary search; fitting is monotone in pods)."""
    simulation.set_pods(choice, high)
    if not _fits(tree, cq, usage, allow_borrowing):
        return high
    while low < high:
        middle = (low + high) // 2
        simulation.set_pods(choice, middle)
        if _fits(tree, cq, usage, allow_borrowing):
            high = middle
        else:
            low = middle + 1
    return high
