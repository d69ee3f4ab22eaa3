"""Preemption inside the cycle: run the victim search on the state's contenders
(controller/core/scheduler/contenders.py), nominate the preemptor's capacity, and admit it
once its victims have released their quota (KEP-5710 §Delayed preemption).

A nominated preemptor holds its usage in the quota tree while the victims still hold
theirs, so nothing else — later heads in the same cycle or later cycles — can take what
the victims free; where their usage covers its hold, the two are counted once
(controller/core/preemption/holds.py). Its evictions are issued once; it starts no new preemption
while they are in flight, unless the nomination became infeasible (then it is dropped and
the preemptor is scheduled from scratch). No victim is ever evicted for a preemptor that the
cycle has not decided to admit once they are gone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from api.constants import Preemptibility, ReclaimWithinCohortPolicy
from controller.core.decisions import Admit, Nomination, Preempt
from controller.core.fairsharing.preemption import FairOrder, find_fair_victims
from controller.core.fairsharing.shares import shares_of
from controller.core.model.clusterqueues import ClusterQueue, FlavorResource
from controller.core.model.workloads import Workload, WorkloadKey
from controller.core.preemption.minimum_runtime import RuntimeProtection
from controller.core.preemption.nodes import NodeRoom
from controller.core.preemption.policy import Preemptor
from controller.core.preemption.search import Ordered, find_victims
from controller.core.preemption.types import Contender, Victim
from controller.core.scheduler.contenders import ContenderCache
from controller.core.scheduler.flavor_assignment import (
    FlavorAssignment,
    Mode,
    Preemptible,
    PreemptionOracle,
)
from controller.core.scheduler.topology import place_topology, tas_requests
from controller.core.state import ClusterState
from controller.core.tas.holds import plan_fits

__all__ = [
    "DomainOrders",
    "VictimSearches",
    "may_preempt",
    "nominate_victims",
    "plan_preemption",
    "preemption_oracle",
    "preemption_victims",
    "settle_action",
    "settle_nominations",
]


def may_preempt(state: ClusterState, cq: ClusterQueue) -> bool:
    """Cheap gate: may the queue preempt, and is there anything admitted in reach at all?"""
    if not cq.preemption.may_preempt():
        return False
    return any(state.cache.admitted_in(name) for name in state.cache.quota.reach(cq.name))


def _freed_by(
    state: ClusterState, victims: tuple[Victim, ...]
) -> dict[str, dict[FlavorResource, int]]:
    """The usage the victims give back, per ClusterQueue (a partial victim its pods' share)."""
    freed: dict[str, dict[FlavorResource, int]] = {}
    for victim in victims:
        record = state.cache.records[victim.workload_key]
        for pair, used in (record.usage or {}).items():
            bucket = freed.setdefault(victim.cluster_queue, {})
            amount = used * victim.pods // max(1, victim.total_pods)
            bucket[pair] = bucket.get(pair, 0) + amount
    return freed


@dataclass(slots=True, eq=False)
class DomainOrders:
    """The ordered candidates kept between the victim searches of one topology-aware
    preemptor's domains: the classical search's per `may_borrow`, the fair-sharing one's."""

    classical: dict[bool, Ordered | None] = field(default_factory=dict)
    fair: FairOrder = field(default_factory=FairOrder)


class VictimSearches:
    """The victim searches of one cycle. Flavor assignment's oracle and the preemption plan
    of the same head ask the same question (with a single resource short, always); the
    answer holds while the cohort's quota version is unchanged: every admission, nomination
    and eviction in the cohort changes it."""

    def __init__(
        self, state: ClusterState, now: float, contenders: ContenderCache | None = None
    ) -> None:
        self.state = state
        self.now = now
        self.contenders = contenders if contenders is not None else ContenderCache()
        self._minimum_runtimes = {
            name: cq.minimum_runtime_seconds
            for name, cq in state.objects.cluster_queues.items()
            if cq.minimum_runtime_seconds
        }
        self._answers: dict[
            tuple[
                WorkloadKey, str, frozenset[FlavorResource], frozenset[tuple[FlavorResource, int]]
            ],
            tuple[int, tuple[Victim, ...] | None, tuple[int, float] | None, str | None],
        ] = {}
        # Per preemptor whose last search found no victims because candidates were within
        # their minimum runtime: how many were passed over, and when the first is free.
        self.protected: dict[WorkloadKey, tuple[int, float]] = {}
        # Per preemptor kept from borrowing by its last search: the queue below its
        # nominal quota that would reclaim what it borrowed (`_contested`).
        self.contested: dict[WorkloadKey, str] = {}
        self._pending: dict[tuple[str, str], list[tuple[int, int]]] = {}
        self._reclaiming: dict[
            tuple[str, FlavorResource],
            tuple[int, list[tuple[str, int, ReclaimWithinCohortPolicy]]],
        ] = {}
        # Under fair sharing, the victim search judges shares (quota does not change
        # during a cycle, so what each cohort could lend is computed once).
        self.shares = (
            shares_of(state.objects, state.cache.quota) if state.fair_sharing is not None else None
        )
        # Admission fair sharing: each LocalQueue's usage as the cycle's searches first
        # see it (usage changes between cycles, so it is read once per cycle).
        self._local_queue_usage: dict[str, float] = {}

    def local_queue_usage(self, contender: Contender) -> float | None:
        """The usage of a contender's LocalQueue when its ClusterQueue orders Workloads by
        it (admission fair sharing), else None."""
        if not self.state.queues.uses_admission_fair_sharing(contender.cluster_queue):
            return None
        usage = self._local_queue_usage.get(contender.local_queue)
        if usage is None:
            usage = self._local_queue_usage[contender.local_queue] = (
                self.state.queues.local_queue_usage(contender.local_queue)
            )
        return usage

    def victims(
        self,
        cq: ClusterQueue,
        workload: Workload,
        usage: dict[FlavorResource, int],
        short: frozenset[FlavorResource],
    ) -> tuple[Victim, ...] | None:
        question = (workload.key, cq.name, short, frozenset(usage.items()))
        version = self.state.cache.quota.version(cq.name)
        answer = self._answers.get(question)
        if answer is None or answer[0] != version:
            protection = RuntimeProtection(self.now, self._minimum_runtimes)
            victims, contested = self._search(cq, workload, usage, short, protection)
            skipped = None
            if protection.earliest is not None:
                skipped = (protection.skipped, protection.earliest)
            answer = self._answers[question] = (version, victims, skipped, contested)
        _, victims, skipped, contested = answer
        if not victims and skipped is not None:
            self.protected[workload.key] = skipped
        else:
            self.protected.pop(workload.key, None)
        if not victims and contested is not None:
            self.contested[workload.key] = contested
        else:
            self.contested.pop(workload.key, None)
        return victims

    def topology_victims(
        self,
        cq: ClusterQueue,
        workload: Workload,
        usage: dict[FlavorResource, int],
        short: frozenset[FlavorResource],
        nodes: NodeRoom,
        orders: DomainOrders | None = None,
    ) -> tuple[Victim, ...] | None:
        """The minimal victim set that lets a topology-aware `workload` use `usage` in `cq`
        and place its pods on the nodes as `nodes` sees them (one domain's search). Not kept:
        the answer depends on the nodes as well as on the quota; `orders` keeps the ordered
        candidates between the searches of one preemptor's domains."""
        protection = RuntimeProtection(self.now, self._minimum_runtimes)
        return self._search(cq, workload, usage, short, protection, nodes, orders)[0]

    def _search(
        self,
        cq: ClusterQueue,
        workload: Workload,
        usage: dict[FlavorResource, int],
        short: frozenset[FlavorResource],
        protection: RuntimeProtection,
        nodes: NodeRoom | None = None,
        orders: DomainOrders | None = None,
    ) -> tuple[tuple[Victim, ...] | None, str | None]:
        """The minimal victim set that lets `workload` use `usage` in `cq`, lacking `short`
        (under fair sharing when the state has it); and the queue that kept the preemptor
        from borrowing, if one did (`_contested`)."""
        state = self.state
        key = workload.key
        resolved = state.objects.priority_classes.resolve(workload)
        preemptor = Preemptor(
            cluster_queue=cq.name,
            priority=state.cache.priority_of(key),
            queue_order_timestamp=state.queue_order_time(workload),
            preemption_policy=resolved.preemption_policy,
            needs_borrowing=any(
                state.cache.quota.usage(cq.name, fr) + usage.get(fr, 0)
                > state.cache.quota.quota(cq.name, fr).nominal
                for fr in short
            ),
        )
        contested = None
        may_borrow = state.cache.resolution(key).value is not Preemptibility.NON_PREEMPTIBLE
        if may_borrow and preemptor.needs_borrowing:
            contested = self._contested(cq, preemptor, short)
            may_borrow = contested is None
        in_reach = self.contenders.in_reach(state, cq.name, short)
        found = self._find(
            cq, usage, short, preemptor, may_borrow, in_reach, protection, nodes, orders
        )
        if found and may_borrow and preemptor.needs_borrowing:
            contested = self._contested_after(cq, usage, short, preemptor, found)
            if contested is not None:
                found = self._find(
                    cq, usage, short, preemptor, False, in_reach, protection, nodes, orders
                )
        return found, contested

    def _find(
        self,
        cq: ClusterQueue,
        usage: dict[FlavorResource, int],
        short: frozenset[FlavorResource],
        preemptor: Preemptor,
        may_borrow: bool,
        in_reach: dict[str, list[Contender]],
        protection: RuntimeProtection,
        nodes: NodeRoom | None = None,
        orders: DomainOrders | None = None,
    ) -> tuple[Victim, ...] | None:
        state = self.state
        usage_of = self.local_queue_usage if state.admission_fair_sharing is not None else None
        if self.shares is not None and state.fair_sharing is not None:
            return find_fair_victims(
                self.shares,
                cq,
                usage,
                short,
                preemptor,
                may_borrow,
                in_reach,
                state.fair_sharing.preemption_strategies,
                protection,
                usage_of,
                nodes,
                orders.fair if orders is not None else None,
            )
        return find_victims(
            state.cache.quota,
            cq,
            usage,
            short,
            preemptor,
            may_borrow,
            in_reach,
            protection,
            usage_of,
            nodes,
            orders.classical if orders is not None else None,
        )

    def _contested_after(
        self,
        cq: ClusterQueue,
        usage: dict[FlavorResource, int],
        short: frozenset[FlavorResource],
        preemptor: Preemptor,
        victims: tuple[Victim, ...],
    ) -> str | None:
        """`_contested` once the victims have gone, if the preemptor still borrows then: a
        victim's queue may fall below its nominal quota, and its pending Workloads (the
        victims among them, requeued) would reclaim what the preemptor borrows — as when
        fair sharing lets a borrowing preemptor take a queue's only Workload."""
        state = self.state
        tree = state.cache.quota
        requeued: dict[tuple[str, str], list[tuple[int, int]]] = {}
        for victim in victims:
            held = state.cache.records[victim.workload_key]
            assert held.usage is not None  # a victim holds quota
            if victim.whole and victim.cluster_queue != cq.name:
                for fr in short:
                    requeued.setdefault((victim.cluster_queue, fr[1]), []).append(
                        (held.usage.get(fr, 0), state.cache.priority_of(victim.workload_key))
                    )
        with tree.simulate(_freed_by(state, victims), sign=-1):
            if not any(
                tree.usage(cq.name, fr) + usage.get(fr, 0) > tree.quota(cq.name, fr).nominal
                for fr in short
            ):
                return None
            return self._contested(cq, preemptor, short, requeued)

    def _contested(
        self,
        cq: ClusterQueue,
        preemptor: Preemptor,
        short: frozenset[FlavorResource],
        requeued: Mapping[tuple[str, str], list[tuple[int, int]]] | None = None,
    ) -> str | None:
        """Another queue of the tree that would reclaim what the preemptor borrows, if any:
        below its nominal quota of a pair the preemptor lacks, with a pending Workload that
        fits in the rest of that nominal quota and that its `reclaimWithinCohort` lets
        reclaim from the preemptor. Preempting to borrow there starts a loop: the victims
        go, the preemptor borrows, that queue reclaims it, it preempts again. Kueue goes
        round; quotagate searches only for victims that let it fit without borrowing."""
        found: str | None = None
        for fr in short:
            for name, strongest, reclaim in self._reclaimers(cq.name, fr, requeued):
                if found is not None and name >= found:
                    break
                if name == cq.name:
                    continue
                if reclaim is ReclaimWithinCohortPolicy.ANY or strongest > preemptor.priority:
                    found = name
        return found

    def _reclaimers(
        self,
        cluster_queue: str,
        fr: FlavorResource,
        requeued: Mapping[tuple[str, str], list[tuple[int, int]]] | None,
    ) -> list[tuple[str, int, ReclaimWithinCohortPolicy]]:
        """The queues of `cluster_queue`'s tree that may reclaim, are below their nominal
        quota of `fr` and have a pending Workload (or a `requeued` one) that fits in the
        rest of it: by name, with the highest priority among those. Kept while the tree's
        usage is unchanged (a cycle's refused heads all ask it); not with `requeued`,
        asked inside a simulation, whose version numbers are given back afterwards."""
        tree = self.state.cache.quota
        cohort = tree.cohort_of(cluster_queue)
        key = (tree.root_of(cohort) if cohort else cluster_queue, fr)
        version = tree.version(cluster_queue)
        cached = self._reclaiming.get(key) if requeued is None else None
        if cached is not None and cached[0] == version:
            return cached[1]
        out: list[tuple[str, int, ReclaimWithinCohortPolicy]] = []
        for name in sorted(tree.reach(cluster_queue)):
            other = self.state.objects.cluster_queues.get(name)
            if other is None:
                continue
            reclaim = other.preemption.reclaim_within_cohort
            if reclaim is ReclaimWithinCohortPolicy.NEVER:
                continue
            free = tree.quota(name, fr).nominal - tree.usage(name, fr)
            if free <= 0:
                continue
            pending = self._pending_requests(name, fr[1])
            if requeued and (name, fr[1]) in requeued:
                pending = sorted([*pending, *requeued[name, fr[1]]])
            strongest: int | None = None
            for request, priority in pending:  # smallest request first
                if request > free:
                    break
                strongest = priority if strongest is None else max(strongest, priority)
            if strongest is not None:
                out.append((name, strongest, reclaim))
        if requeued is None:
            self._reclaiming[key] = (version, out)
        return out

    def _pending_requests(self, cluster_queue: str, resource: str) -> list[tuple[int, int]]:
        """(request of `resource`, priority) of the queue's pending Workloads that request
        it, smallest request first; read once per cycle."""
        cached = self._pending.get((cluster_queue, resource))
        if cached is None:
            state = self.state
            queue = state.queues.get(cluster_queue)
            cached = []
            for key in queue.workload_keys() if queue is not None else ():
                workload = state.cache.records[key].workload
                request = workload.total_request(resource)
                if request:
                    cached.append((request, state.cache.priority_of(key)))
            cached.sort()
            self._pending[(cluster_queue, resource)] = cached
        return cached


def preemption_oracle(state: ClusterState, searches: VictimSearches) -> PreemptionOracle:
    """Kueue's preemption oracle for flavor assignment: for one (flavor, resource) a head
    lacks, run the real victim search for that pair alone and say what it found — no
    candidates, victims in the queue itself (preempt) or only in other queues (reclaim) —
    and the borrowing level once they are all gone (Kueue's `SimulatePreemption`)."""

    def oracle(
        cq_name: str, workload: Workload, fr: FlavorResource, requested: int
    ) -> tuple[Preemptible, int]:
        cq = state.objects.cluster_queues[cq_name]
        tree = state.cache.quota
        if not cq.preemption.may_preempt():
            return Preemptible.NO_CANDIDATES, tree.lowest_fitting_subtree(cq_name, fr, requested)[0]
        victims = searches.victims(cq, workload, {fr: requested}, frozenset({fr}))
        if not victims:
            return Preemptible.NO_CANDIDATES, tree.lowest_fitting_subtree(cq_name, fr, requested)[0]
        with tree.simulate(_freed_by(state, victims), sign=-1):
            level = tree.lowest_fitting_subtree(cq_name, fr, requested)[0]
        own = any(v.cluster_queue == cq_name for v in victims)
        return (Preemptible.PREEMPT if own else Preemptible.RECLAIM), level

    return oracle


def preemption_victims(
    cq: ClusterQueue,
    workload: Workload,
    assignment: FlavorAssignment,
    searches: VictimSearches,
) -> tuple[Victim, ...] | None:
    """The minimal victims that let a head whose flavor assignment needs preemption fit,
    or None when no set of eligible victims does (nothing is nominated)."""
    if not cq.preemption.may_preempt():
        return None  # the queue may preempt nobody: skip building the candidates
    short = frozenset(
        (check.flavor, check.resource)
        for pod_set in assignment.pod_sets
        for check in pod_set.checks
        if check.mode is Mode.PREEMPT
    )
    if not short:
        return None
    return searches.victims(cq, workload, dict(assignment.usage), short) or None


def plan_preemption(
    state: ClusterState,
    cq: ClusterQueue,
    workload: Workload,
    assignment: FlavorAssignment,
    searches: VictimSearches,
) -> Preempt | None:
    """Victims for a head whose flavor assignment needs preemption, nominated at once; or
    None when no set of eligible victims makes it fit."""
    victims = preemption_victims(cq, workload, assignment, searches)
    if victims is None:
        return None
    return nominate_victims(state, cq, workload, assignment, victims)


def nominate_victims(
    state: ClusterState,
    cq: ClusterQueue,
    workload: Workload,
    assignment: FlavorAssignment,
    victims: tuple[Victim, ...],
    topology: Mapping[str, Mapping[str, Any]] | None = None,
    domain: tuple[str, tuple[str, ...]] | None = None,
) -> Preempt:
    """Nominate the preemptor (its capacity held; with `topology`, its TAS pod sets'
    place once the victims are gone, held on the nodes, in the flavor's `domain` their
    search chose) and decide its victims' eviction."""
    admit = Admit.from_assignment(workload.key, cq.name, assignment, borrowing=False)
    state.nominate(Nomination(admit, victims, dict(assignment.usage), topology, domain))
    return Preempt(workload.key, cq.name, victims, admit)


def settle_nominations(state: ClusterState) -> tuple[list[Admit], list[str]]:
    """Admit every nominated preemptor whose victims are gone; drop infeasible nominations.
    Returns the admissions and the keys whose nominations were dropped. Only preemptors
    something changed for since they were last looked at are looked at
    (`ClusterState.take_nominations_to_settle`): for the others `settle_action` is None."""
    admitted: list[Admit] = []
    dropped: list[str] = []
    for key in state.holds.take_nominations_to_settle():
        action = settle_action(state, key)
        if action is None:
            continue
        if action == "drop":
            state.drop_nomination(key)
            dropped.append(key)
            continue
        nomination = state.holds.nominated[key]
        nominated = nomination.admit
        cq_name = nominated.cluster_queue
        # Its planned place, held while the victims left (tas/holds.py), is given back
        # and it is placed again: in the planned domain while the plan still fits there,
        # anywhere when the nodes changed and it no longer does.
        plan = state.node_holds.release(key)
        cq = state.objects.cluster_queues[cq_name]
        workload = state.cache.records[key].workload
        chosen = [(ps.name, ps.count, ps.flavors) for ps in nominated.pod_sets]
        topology: Mapping[str, Mapping[str, Any]] | str | None = nomination.topology
        if (
            plan is None
            or nomination.topology is None
            or not plan_fits(
                {f: state.tas.view(f) for f in plan},
                plan,
                tas_requests(state, cq, workload, chosen),
                nomination.topology,
            )
        ):
            topology = place_topology(state, cq, workload, chosen)
        else:
            # Placed afresh, as Kueue places at admission (the nodes may have more room
            # now than when it was nominated), in the domain its victims were chosen in
            # when their search chose one; the plan, which fits, if that finds nothing.
            fresh = place_topology(state, cq, workload, chosen, nomination.domain)
            if fresh is not None and not isinstance(fresh, str):
                topology = fresh
        if isinstance(topology, str):  # the victims freed quota, not room on the nodes
            state.drop_nomination(key)
            state.cache.records[key].reason = topology
            dropped.append(key)
            continue
        admit = state.admit_nominated(key, topology)
        if state.cache.resolution(key).value is Preemptibility.NON_PREEMPTIBLE and any(
            state.cache.quota.borrowing(cq_name, fr) for fr in admit.usage()
        ):
            state.release(key)  # never lets a non-preemptible Workload borrow
            dropped.append(key)
            continue
        admitted.append(admit)
    return admitted, dropped


def settle_action(state: ClusterState, key: WorkloadKey) -> str | None:
    """What a nominated preemptor's nomination comes to now: "drop" (the preemptor is gone
    or inactive, its queue gone or stopped, or a victim holds its quota and is no longer
    being evicted — its eviction was never recorded and the state was re-read: a later
    cycle decides afresh), "admit" (every victim has released what it had to), or None
    (still waiting). A victim that released its quota and was then admitted again by the
    cycle (with quota and room the holds did not take) is no longer this preemptor's
    victim."""
    nomination = state.holds.nominated[key]
    workload = state.cache.workloads.get(key)
    cq = state.objects.cluster_queues.get(nomination.admit.cluster_queue)
    if workload is None or not workload.active or cq is None or cq.stopped:
        return "drop"
    left = state.holds.left(key)  # released, then admitted again: no longer a victim
    waited = [v for v in nomination.victims if v.workload_key not in left]
    if any(_abandoned(state, victim) for victim in waited):
        return "drop"
    if all(_released(state, v.workload_key, v.total_pods - v.pods) for v in waited):
        return "admit"
    return None


def _abandoned(state: ClusterState, victim: Victim) -> bool:
    if not victim.whole:
        return False
    held = state.cache.records.get(victim.workload_key)
    return held is not None and held.holds_quota and not held.evicting


def _released(state: ClusterState, key: WorkloadKey, pods_left: int) -> bool:
    """A victim is done when it holds no quota, or (partial) at most `pods_left` pods."""
    held = state.cache.records.get(key)
    if held is None or not held.holds_quota:
        return True
    if pods_left <= 0 or held.admission is None:
        return False
    return sum(a.count for a in held.admission.pod_set_assignments) <= pods_left
