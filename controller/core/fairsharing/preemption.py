"""Victim selection under fair sharing (Kueue's `fairPreemptions`, KEP-1714 rules S2-a/b),
with quotagate's own rules inside it.

1. Candidates, as Kueue finds them: the preemptor's own ClusterQueue's admitted Workloads
   that `withinClusterQueue` allows, and those of every other ClusterQueue of its tree
   that borrows one of the (flavor, resource) pairs the preemptor is short of and that
   `reclaimWithinCohort` allows; only Workloads using such a pair. On top of Kueue (as in
   the classical search): never a non-preemptible Workload, nothing at all for a
   preemptor whose priority class says `preemptionPolicy: Never`, and candidates within
   their queue's minimum runtime are passed over (except plain reclamation).
2. They are ordered once, first-to-go first (`ordering.py`: already evicted, other queue
   first, lower priority, lower preemption cost — KEP-7990 —, single-pod before gangs,
   newest), and grouped by ClusterQueue keeping that order.
3. With the preemptor's request added to its queue, target queues are visited in Kueue's
   order (`targets.py`): from the root down, at each cohort into the child with the largest
   share (cohorts and queues that no longer borrow are pruned, except on the preemptor's
   own path). From the preemptor's own queue a candidate is simply taken
   (`InClusterQueue`). If the preemptor stays within its nominal quota of what it is
   short of, candidates of other queues are simply taken too (`InCohortReclamation`,
   Kueue's `FairSharingPreemptWithinNominal`, on by default). Otherwise a candidate of
   another queue is taken only if the first configured strategy holds for it
   (`InCohortFairSharing`): S2-a `LessThanOrEqualToFinalShare` — the preemptor's share
   (at the child of the lowest common cohort on its side) is at most the target's share
   without the candidate — or S2-b `LessThanInitialShare` — below the target's share
   now. After each victim the target is chosen again. Candidates that failed are kept.
4. If the preemptor does not fit yet and a second strategy is configured (S2-b), the
   kept candidates are tried again by it, at most one per queue.
5. The preemptor's request is taken back out and the victim set made minimal: a victim
   that may lose pods one by one (`disruptionMode: Pod`, semi-preemptible) loses only as
   many as needed, and from the last taken to the first every victim the preemptor fits
   without is spared (Kueue's `fillBackWorkloads`, KEP-5710's walk-back).
6. A topology-aware preemptor (`nodes`, preemption/nodes.py) fits only when its pod sets
   also find a place on the nodes once the victims are gone — in one domain, for one
   domain's search (KEP-5710's split by domain, controller/core/scheduler/
   topology_preemption.py). The walk goes on past the quota as Kueue's does (its
   `workloadFits` places the pods); once the quota fits, a candidate that frees no room
   where the search looks is passed over (it could only be spared again). Targets and
   strategies are as above for every candidate taken. When that walk finds nothing, a
   second one puts, within each queue, the Workloads with pods in the domain first.

A non-preemptible preemptor never borrows: it must fit within its queue's nominal quota
once its victims are gone. The quota tree and the nodes are left exactly as they were.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from api.constants import (
    Preemptibility,
    PreemptionReason,
    PriorityClassPreemptionPolicy,
    ReclaimWithinCohortPolicy,
    WithinClusterQueuePolicy,
)
from controller.core.cache.quota_tree import QuotaTree
from controller.core.fairsharing.settings import PreemptionStrategy
from controller.core.fairsharing.shares import Share, Shares, compare
from controller.core.fairsharing.targets import Targets
from controller.core.model.clusterqueues import ClusterQueue, FlavorResource
from controller.core.preemption.minimum_runtime import RuntimeProtection
from controller.core.preemption.nodes import NodeRoom
from controller.core.preemption.ordering import by_local_queue_usage
from controller.core.preemption.policy import CandidateVariant, Eligibility, Preemptor, satisfies
from controller.core.preemption.simulation import (
    Choice,
    Simulation,
    fits,
    simulating,
    spare,
    victims,
)
from controller.core.preemption.types import Contender, Victim

__all__ = ["FairOrder", "find_fair_victims"]

_VARIANT_REASON = {
    CandidateVariant.WITHIN_CLUSTER_QUEUE: PreemptionReason.IN_CLUSTER_QUEUE,
    CandidateVariant.HIERARCHICAL_RECLAIM: PreemptionReason.IN_COHORT_RECLAMATION,
    CandidateVariant.FAIR_SHARING: PreemptionReason.IN_COHORT_FAIR_SHARING,
}


@dataclass(slots=True, eq=False)
class FairOrder:
    """The ordered candidates of one preemptor's search, kept between the searches of its
    domains (the tree is the same for each: every simulation is undone)."""

    built: bool = False
    within_nominal: bool = False
    choices: list[Choice] = field(default_factory=list)


def find_fair_victims(
    shares: Shares,
    cq: ClusterQueue,
    usage: Mapping[FlavorResource, int],
    short: frozenset[FlavorResource],
    preemptor: Preemptor,
    may_borrow: bool,
    contenders: Mapping[str, Sequence[Contender]],
    strategies: Sequence[PreemptionStrategy],
    protection: RuntimeProtection | None = None,
    local_queue_usage: Callable[[Contender], float | None] | None = None,
    nodes: NodeRoom | None = None,
    order: FairOrder | None = None,
) -> tuple[Victim, ...] | None:
    """The victims that let a Workload needing `usage` in `cq` fit under fair sharing, or
    None. `contenders` are the admitted Workloads in reach, per ClusterQueue (its own queue
    and the borrowing queues of its tree); `short` the pairs it lacks. With admission fair
    sharing, `local_queue_usage` orders a queue's candidates of different LocalQueues by
    usage, as in the classical search (Kueue's CandidatesOrdering is the same for both).
    Unless `may_borrow`, the preemptor must end up within its nominal quota. With `nodes`,
    its pod sets must also find a place on the nodes (step 6). `order` keeps the ordered
    candidates between calls that differ only in `nodes` (one search per domain)."""
    if preemptor.preemption_policy == PriorityClassPreemptionPolicy.NEVER:
        return None
    tree = shares.tree
    if order is None or not order.built:
        with tree.simulate({cq.name: usage}, sign=1):
            within_nominal = not any(tree.borrowing(cq.name, fr) for fr in short)
        choices = _candidates(
            tree, cq, short, preemptor, contenders, within_nominal, protection, local_queue_usage
        )
        if order is not None:
            order.built, order.within_nominal, order.choices = True, within_nominal, choices
    else:
        within_nominal, choices = order.within_nominal, order.choices
    if not choices:
        return None
    walks = [_grouped(choices)]
    if nodes is not None and nodes.domain is not None:
        inside_first = _grouped(choices, nodes)
        if inside_first != walks[0]:
            walks.append(inside_first)
    for groups in walks:
        found = _walk(shares, cq, usage, may_borrow, groups, strategies, within_nominal, nodes)
        if found is not None:
            return found
    return None


def _walk(
    shares: Shares,
    cq: ClusterQueue,
    usage: Mapping[FlavorResource, int],
    allow_borrowing: bool,
    groups: dict[str, deque[Choice]],
    strategies: Sequence[PreemptionStrategy],
    within_nominal: bool,
    nodes: NodeRoom | None,
) -> tuple[Victim, ...] | None:
    """Steps 3-5 over the candidates grouped by queue. Every choice taken is given its pods
    back (`Choice.pods` 0) before returning: the choices may be walked again."""
    tree = shares.tree
    search: _Search | None = None
    try:
        with simulating(tree, nodes) as simulation:
            search = _Search(shares, cq, usage, allow_borrowing, simulation)
            simulation.charge(cq.name, usage)  # shares are judged with the preemptor admitted
            found, retry = search.first(groups, strategies[0], within_nominal)
            if not found and len(strategies) > 1 and retry:
                found = search.second(retry)
            simulation.charge(cq.name, usage, sign=-1)
            if not found:
                return None

            def preemptor_fits() -> bool:
                return fits(tree, cq, usage, allow_borrowing) and (nodes is None or nodes.fits())

            spare(simulation, search.taken, preemptor_fits)
            return victims(search.taken)
    finally:
        if search is not None:
            for choice in search.taken:
                choice.pods = 0


def _grouped(choices: list[Choice], nodes: NodeRoom | None = None) -> dict[str, deque[Choice]]:
    """The candidates by ClusterQueue, in their order; with `nodes`, within each queue those
    that free room where the search looks first."""
    groups: dict[str, deque[Choice]] = {}
    later: dict[str, list[Choice]] = {}
    for choice in choices:
        queue = choice.contender.cluster_queue
        group = groups.setdefault(queue, deque())
        if nodes is None or nodes.helps(choice.contender):
            group.append(choice)
        else:
            later.setdefault(queue, []).append(choice)
    for queue, rest in later.items():
        groups[queue].extend(rest)
    return groups


def _candidates(
    tree: QuotaTree,
    cq: ClusterQueue,
    short: frozenset[FlavorResource],
    preemptor: Preemptor,
    contenders: Mapping[str, Sequence[Contender]],
    within_nominal: bool,
    protection: RuntimeProtection | None,
    local_queue_usage: Callable[[Contender], float | None] | None,
) -> list[Choice]:
    """Kueue's `findCandidates`, first-to-go first."""
    policy = cq.preemption
    in_cohort = tree.cohort_of(cq.name) is not None
    other_variant = (
        CandidateVariant.HIERARCHICAL_RECLAIM if within_nominal else CandidateVariant.FAIR_SHARING
    )
    entries: list[tuple[object, int, Choice]] = []
    index = 0
    for queue, members in contenders.items():
        same = queue == cq.name
        rule: WithinClusterQueuePolicy | ReclaimWithinCohortPolicy
        if same:
            if policy.within_cluster_queue is WithinClusterQueuePolicy.NEVER:
                continue
            rule, variant = policy.within_cluster_queue, CandidateVariant.WITHIN_CLUSTER_QUEUE
        else:
            if not in_cohort or policy.reclaim_within_cohort is ReclaimWithinCohortPolicy.NEVER:
                continue
            if not any(tree.borrowing(queue, fr) for fr in short):
                continue  # nothing is reclaimed from a queue within its nominal quota
            rule, variant = policy.reclaim_within_cohort, other_variant
        eligibility = Eligibility(variant, f"fair sharing: {variant}")
        for contender in members:
            index += 1
            if short.isdisjoint(contender.usage):
                continue
            if contender.preemptibility is Preemptibility.NON_PREEMPTIBLE:
                continue
            if not satisfies(rule, preemptor, contender.candidate):
                continue
            if protection is not None and protection.skips(contender, variant):
                continue
            choice = Choice(contender, eligibility, reason=_VARIANT_REASON[variant])
            entries.append((contender.sort_key(same), index, choice))
    entries.sort(key=lambda entry: (entry[0], entry[1]))
    ordered = [choice for _, _, choice in entries]
    if local_queue_usage is not None:
        usage_of = local_queue_usage
        ordered = by_local_queue_usage(
            ordered,
            lambda c: (c.contender.evicted, c.contender.cluster_queue),
            lambda c: usage_of(c.contender),
        )
    return ordered


class _Search:
    """The strategies' loops over one simulation in which the preemptor's request is
    charged to its queue."""

    def __init__(
        self,
        shares: Shares,
        cq: ClusterQueue,
        usage: Mapping[FlavorResource, int],
        allow_borrowing: bool,
        simulation: Simulation,
    ) -> None:
        self.shares = shares
        self.tree = shares.tree
        self.cq = cq
        self.usage = usage
        self.allow_borrowing = allow_borrowing
        self.simulation = simulation
        self.taken: list[Choice] = []

    def quota_fits(self) -> bool:
        """Whether the preemptor's quota fits now (its own charge taken off for the check)."""
        tree, name = self.tree, self.cq.name
        tree.add_usage(name, self.usage, sign=-1)
        try:
            return fits(tree, self.cq, self.usage, self.allow_borrowing)
        finally:
            tree.add_usage(name, self.usage)

    def fits(self) -> bool:
        """Whether the preemptor fits now: its quota, and its pods on the nodes."""
        nodes = self.simulation.nodes
        return self.quota_fits() and (nodes is None or nodes.fits())

    def _useless(self, choice: Choice) -> bool:
        """Whether taking `choice` cannot help: the quota fits already and it frees no room
        where a topology-aware search looks."""
        nodes = self.simulation.nodes
        return nodes is not None and not nodes.helps(choice.contender) and self.quota_fits()

    def _next(self, queue: deque[Choice]) -> Choice | None:
        """The queue's first candidate that may help, passing over (and dropping) the
        others."""
        while queue:
            choice = queue.popleft()
            if not self._useless(choice):
                return choice
        return None

    def _take(self, choice: Choice) -> bool:
        self.simulation.remove(choice, self.fits)
        self.taken.append(choice)
        return self.fits()

    def first(
        self,
        groups: dict[str, deque[Choice]],
        strategy: PreemptionStrategy,
        within_nominal: bool,
    ) -> tuple[bool, list[Choice]]:
        """Kueue's `runFirstFsStrategy`: whether the preemptor fits, and the candidates
        the strategy refused (for rule S2-b)."""
        retry: list[Choice] = []
        targets = Targets(self.shares, self.cq.name, groups)
        for target in targets:
            queue = groups[target]
            if target == self.cq.name or within_nominal:
                choice = self._next(queue)
                if choice is not None and self._take(choice):
                    return True, retry
                continue
            preemptor_share, target_share = targets.shares_at_lca(target)
            if preemptor_share.infinite and not target_share.infinite:
                retry.extend(queue)  # no candidate of this queue can pass either strategy
                queue.clear()
                continue
            while (choice := self._next(queue)) is not None:
                after = targets.share_without(target, choice.contender)
                if _passes(strategy, preemptor_share, target_share, after):
                    if self._take(choice):
                        return True, retry
                    break  # shares changed: choose the target again
                retry.append(choice)
        return False, retry

    def second(self, retry: list[Choice]) -> bool:
        """Kueue's `runSecondFsStrategy` (rule S2-b on the refused candidates): at most one
        candidate per queue, the first (that may help: step 6), while the preemptor's
        share is below the target's (the rule does not depend on the candidate)."""
        groups: dict[str, deque[Choice]] = {}
        for refused in retry:
            groups.setdefault(refused.contender.cluster_queue, deque()).append(refused)
        targets = Targets(self.shares, self.cq.name, groups)
        for target in targets:
            preemptor_share, target_share = targets.shares_at_lca(target)
            choice = self._next(groups[target])
            if (
                choice is not None
                and compare(preemptor_share, target_share) < 0
                and self._take(choice)
            ):
                return True
            targets.drop(target)
        return False


def _passes(strategy: PreemptionStrategy, preemptor: Share, before: Share, after: Share) -> bool:
    if strategy is PreemptionStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE:
        return compare(preemptor, after) <= 0
    return compare(preemptor, before) < 0
