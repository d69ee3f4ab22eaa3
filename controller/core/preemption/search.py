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
6. A topology-aware preemptor (`nodes`, preemption/nodes.py) fits only when its pod sets
   also find a place on the nodes once the victims are gone. Once the quota fits, only
   candidates that free room where the search looks (its domain) are taken; when that
   walk finds nothing, a second one takes the domain's candidates first. The walk-back
   spares every victim that neither the quota nor the nodes need.

All simulated removals are undone before returning: the state is unchanged.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

from api.constants import BorrowWithinCohortPolicy
from controller.core.cache.quota_tree import QuotaTree
from controller.core.model.clusterqueues import ClusterQueue, FlavorResource
from controller.core.model.workloads import WorkloadKey
from controller.core.preemption.minimum_runtime import RuntimeProtection
from controller.core.preemption.nodes import NodeRoom
from controller.core.preemption.ordering import CandidateSortKey, by_local_queue_usage
from controller.core.preemption.policy import (
    CandidateVariant,
    Eligibility,
    Preemptor,
    PriorityClassPreemptionPolicy,
    eligibility,
)
from controller.core.preemption.preemptibility import Preemptibility
from controller.core.preemption.simulation import (
    Choice,
    Simulation,
    fits,
    simulating,
    spare,
    victims,
)
from controller.core.preemption.types import Contender, Victim

__all__ = ["Ordered", "find_victims"]


def find_victims(
    tree: QuotaTree,
    cq: ClusterQueue,
    usage: Mapping[FlavorResource, int],
    short: frozenset[FlavorResource],
    preemptor: Preemptor,
    may_borrow: bool,
    contenders: Mapping[str, Sequence[Contender]],
    protection: RuntimeProtection | None = None,
    local_queue_usage: Callable[[Contender], float | None] | None = None,
    nodes: NodeRoom | None = None,
    orders: dict[bool, Ordered | None] | None = None,
) -> tuple[Victim, ...] | None:
    """The minimal victim set that lets a Workload needing `usage` in `cq` fit, or None.
    Unless `may_borrow`, only without borrowing (a non-preemptible preemptor, or capacity
    contested by a queue below its nominal quota: `nominations.VictimSearches`).

    `contenders` are the admitted Workloads in reach, per ClusterQueue. `short` are the
    (flavor, resource) pairs the preemptor lacks; only contenders using one of them are
    considered. Contenders still within their ClusterQueue's minimum runtime are passed
    over and counted in `protection` (minimum_runtime.py). With admission fair sharing,
    `local_queue_usage` gives a contender's LocalQueue usage (None when its ClusterQueue
    does not order by it) for the order's LocalQueue step. With `nodes`, the preemptor
    must also fit on the nodes (step 6). `tree` and `nodes` are left exactly as they were.
    `orders` keeps the ordered candidates per `may_borrow` between calls that differ only
    in `nodes` (one topology-aware search per domain).
    """
    ordered: Ordered | None
    if orders is not None and may_borrow in orders:
        ordered = orders[may_borrow]
    else:
        choices = _ordered(
            tree,
            cq,
            usage,
            short,
            preemptor,
            may_borrow,
            contenders,
            protection,
            local_queue_usage,
        )
        ordered = None
        if choices:
            attempts = _attempts(tree, cq, short, choices, may_borrow)
            ordered = Ordered(choices, attempts)
        if orders is not None:
            orders[may_borrow] = ordered
    if ordered is None:
        return None
    return _search(tree, cq, usage, short, ordered, nodes)


@dataclass(slots=True, eq=False)
class Ordered:
    """The eligible candidates of one search, first-to-go first, and Kueue's attempts for
    them; kept between the searches of one topology-aware preemptor's domains (the tree is
    the same for each: every simulation is undone)."""

    choices: list[Choice]
    attempts: list[bool]
    _index: dict[WorkloadKey, int] | None = None

    def positions(self, keys: Iterable[WorkloadKey]) -> list[int]:
        """Where these Workloads are in the order (those not candidates left out)."""
        if self._index is None:
            self._index = {c.contender.key: i for i, c in enumerate(self.choices)}
        index = self._index
        return sorted(index[k] for k in keys if k in index)


def _ordered(
    tree: QuotaTree,
    cq: ClusterQueue,
    usage: Mapping[FlavorResource, int],
    short: frozenset[FlavorResource],
    preemptor: Preemptor,
    may_borrow: bool,
    contenders: Mapping[str, Sequence[Contender]],
    protection: RuntimeProtection | None,
    local_queue_usage: Callable[[Contender], float | None] | None,
) -> list[Choice] | None:
    """Steps 1-2: the eligible candidates, first-to-go first."""
    if preemptor.preemption_policy == PriorityClassPreemptionPolicy.NEVER:
        return None
    # Eligibility depends only on a few facts of a candidate, so it is decided once per
    # combination (10,000 candidates share a handful): same queue, the candidate queue
    # borrowing, priority, newer than the preemptor, preemptibility. Another queue that
    # is not borrowing is skipped whole: nothing is reclaimed from within nominal quota.
    # In a tree of cohorts the facts also include whether the preemptor has hierarchical
    # advantage at the lowest cohort above both queues (Kueue's hierarchical reclaim).
    verdicts: dict[tuple[bool, bool, int, bool, Preemptibility, bool], Eligibility] = {}
    entries: list[tuple[CandidateSortKey, int, Choice]] = []
    index = 0
    # Kueue's hierarchical advantage is judged on the whole request (`QuantitiesFitInQuota`
    # over all of it), not only on what is short: a preemptor that fits its own quota in
    # cpu but must borrow memory has no advantage over another queue's Workloads.
    advantage = tree.advantage_by_level(cq.name, usage)
    own_only = _own_queue_only(tree, cq, short, preemptor, may_borrow, advantage)
    for queue, members in contenders.items():
        same = queue == cq.name
        if own_only and not same:
            continue
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
                entries.append((contender.sort_key(same), index, Choice(contender, verdict, lca)))
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
    return ordered


def _search(
    tree: QuotaTree,
    cq: ClusterQueue,
    usage: Mapping[FlavorResource, int],
    short: frozenset[FlavorResource],
    ordered: Ordered,
    nodes: NodeRoom | None,
) -> tuple[Victim, ...] | None:
    """Steps 3-6 over the ordered candidates: each of Kueue's attempts, on each walk."""
    helpers = None  # where a domain's Workloads are in the order
    if nodes is not None and nodes.inside is not None:
        helpers = ordered.positions(nodes.inside)
    for order, positions in _walks(ordered.choices, helpers):
        for allow_borrowing in ordered.attempts:
            with simulating(tree, nodes) as simulation:
                found = _attempt(
                    tree, cq, usage, short, order, allow_borrowing, simulation, positions
                )
            if found is not None:
                return found
    return None


def _walks(
    order: list[Choice], helpers: list[int] | None
) -> Iterator[tuple[list[Choice], list[int] | None]]:
    """The order; then, for one domain's search when the order alone finds nothing, the
    domain's Workloads first (they free quota and room there) and the others after, which
    only free quota (taken first, those can leave a lender within its quota, and the
    domain's Workloads of that queue may then no longer be reclaimed)."""
    yield order, helpers
    if not helpers:
        return
    inside = [order[i] for i in helpers]
    if inside != order[: len(inside)]:
        chosen = set(helpers)
        first = inside + [c for i, c in enumerate(order) if i not in chosen]
        yield first, list(range(len(inside)))


def _own_queue_only(
    tree: QuotaTree,
    cq: ClusterQueue,
    short: frozenset[FlavorResource],
    preemptor: Preemptor,
    may_borrow: bool,
    advantage: Mapping[str, bool],
) -> bool:
    """Whether no Workload of another queue can ever be a victim here, so those queues
    need not be looked at: the queue is not below its nominal quota of what it lacks and
    `borrowWithinCohort` is Never, so the only attempt is the one where the preemptor
    borrows (`_attempts`), in which another queue's Workload may only go with hierarchical
    advantage — and the preemptor has it at no level of the tree. (A full cohort's heads
    that cannot fit are refused this way without ordering thousands of candidates.)"""
    if not may_borrow or not preemptor.needs_borrowing:
        return False
    if cq.preemption.borrow_within_cohort is not BorrowWithinCohortPolicy.NEVER:
        return False
    if all(tree.usage(cq.name, fr) < tree.quota(cq.name, fr).nominal for fr in short):
        return False
    return not any(advantage.values())


def _attempts(
    tree: QuotaTree,
    cq: ClusterQueue,
    short: frozenset[FlavorResource],
    ordered: list[Choice],
    may_borrow: bool,
) -> list[bool]:
    """Kueue's order of attempts (digest §6.4); only the one without borrowing unless
    `may_borrow`."""
    if not may_borrow:
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


def _valid(
    tree: QuotaTree,
    cq: ClusterQueue,
    short: frozenset[FlavorResource],
    choice: Choice,
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
    ordered: list[Choice],
    allow_borrowing: bool,
    simulation: Simulation,
    helpers: list[int] | None = None,
) -> tuple[Victim, ...] | None:
    """One walk; `helpers` (a domain's search): where the domain's Workloads are in the
    order, the only ones worth taking once the quota fits. Every choice taken is given its
    pods back (`Choice.pods` 0) before returning; the simulation is undone by the caller."""
    nodes = simulation.nodes

    def quota_fits() -> bool:
        return fits(tree, cq, usage, allow_borrowing)

    def preemptor_fits() -> bool:
        return quota_fits() and (nodes is None or nodes.fits())

    taken: list[Choice] = []

    def take(choice: Choice) -> bool:
        simulation.remove(choice, preemptor_fits)
        taken.append(choice)
        return preemptor_fits()

    done = preemptor_fits()
    i = 0
    while not done and i < len(ordered):
        if helpers is not None and quota_fits():
            # the quota is there: only the domain's Workloads can still make room
            for position in helpers[bisect_left(helpers, i) :]:
                choice = ordered[position]
                if _valid(tree, cq, short, choice, allow_borrowing):
                    done = take(choice)
                    if done:
                        break
            break
        choice = ordered[i]
        i += 1
        if not _valid(tree, cq, short, choice, allow_borrowing):
            continue
        if nodes is not None and not nodes.helps(choice.contender) and quota_fits():
            continue  # the quota is there: only room on the nodes is still missing
        done = take(choice)
    found = None
    if done:
        spare(simulation, taken, preemptor_fits)
        found = victims(taken)
    for choice in taken:
        choice.pods = 0
    return found
