"""Topology-aware preemption, split by domain (KEP-5710's next step): when a Workload's TAS
pod sets lack quota, or fit the quota and no domain, the victims must free the quota AND
leave the pod sets a place on the nodes — never quota in one place while the pods cannot
go anywhere.

Candidates are those of the ordinary victim search (preemption/search.py): the
ClusterQueue's own under `withinClusterQueue`, the cohort's borrowing queues under
`reclaimWithinCohort` and `borrowWithinCohort`, never a non-preemptible Workload, in our
order (priority, then `preemptionCost`). The search runs once per domain of the level
asked for (preemption/nodes.py): the pod sets must fit in that domain; once the quota fits,
only Workloads with pods there are taken, and the walk-back leaves the minimal set. A domain
that could not hold them even with all its Workloads gone is skipped. The domain whose
victim set is cheapest wins: lowest highest priority, then lowest total `preemptionCost`,
then fewest victims, then the domain's values. When the nodes already hold the pod sets
(only quota is short), or no single domain can be freed (a preferred request may spread),
one search with the pods placed anywhere is made. Under fair sharing each of these searches
is the fair-sharing one (fairsharing/preemption.py): its target queues and strategies
decide every victim, and it goes on past the quota until the pods fit in the domain.
The cost: the candidates are ordered once per preemptor, O(n log n), and kept across its
domains; each domain's walk (at most two, each with Kueue's attempts or strategies) looks
at each candidate at most once — a quota check, and under fair sharing a share (once more
for the second strategy) — and places the pods again only after a victim with pods in
the domain is taken out, and in the walk-back: O(D·(n·s + k·P)) for D domains, n
candidates, s one share or quota check, k victims taken (and target choices, under fair
sharing) and P one placement in a domain.

Kueue runs one search whose fit test places the pods anywhere
(`preemption.go`'s `workloadFits`, for the classical and the fair-sharing search alike);
its victims follow the quota order and may be spread over domains the pods never use.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.core.decisions import Preempt
from controller.core.model.clusterqueues import ClusterQueue, FlavorResource
from controller.core.model.workloads import Workload, WorkloadKey
from controller.core.preemption.nodes import NodeRoom, Placement
from controller.core.preemption.types import Contender, Victim
from controller.core.scheduler.flavor_assignment import FlavorAssignment, Mode
from controller.core.scheduler.preemption import DomainOrders, VictimSearches, nominate_victims
from controller.core.scheduler.topology import tas_requests
from controller.core.state import ClusterState
from controller.core.tas.encoding import encode
from controller.core.tas.snapshot import DomainID

__all__ = [
    "plan_topology_preemption",
    "short_of",
    "topology_placements",
    "topology_victims",
    "uses_topology",
]

_Cost = tuple[int, int, int, DomainID]


def uses_topology(state: ClusterState, assignment: FlavorAssignment) -> bool:
    """Whether a pod set of the assignment is in a TAS flavor."""
    return any(
        state.tas.tas_flavor_of(ps.flavors.values()) is not None for ps in assignment.pod_sets
    )


def topology_placements(
    state: ClusterState, cq: ClusterQueue, workload: Workload, assignment: FlavorAssignment
) -> list[Placement] | None:
    """The preemptor's TAS pod sets with their flavors' views; None when it has none or a
    flavor has no view."""
    by_flavor = tas_requests(
        state, cq, workload, ((ps.name, ps.count, ps.flavors) for ps in assignment.pod_sets)
    )
    placements = []
    for flavor, requests in by_flavor.items():
        view = state.tas.view(flavor)
        if isinstance(view, str):
            return None
        placements.append(Placement(flavor, view, requests))
    return placements or None


def short_of(state: ClusterState, assignment: FlavorAssignment) -> frozenset[FlavorResource]:
    """What the search frees: the pairs the quota lacks, and every pair of a TAS pod set
    (as Kueue marks them all `Preempt` when the pod set fits no domain)."""
    short = set()
    for pod_set in assignment.pod_sets:
        for check in pod_set.checks:
            if check.mode is Mode.PREEMPT:
                short.add((check.flavor, check.resource))
        if state.tas.tas_flavor_of(pod_set.flavors.values()) is not None:
            short.update((flavor, resource) for resource, flavor in pod_set.flavors.items())
    return frozenset(short)


def _domains(
    state: ClusterState, placement: Placement, contenders: Mapping[str, list[Contender]]
) -> tuple[int, dict[DomainID, list[Contender]]] | None:
    """The level asked for and its domains holding a candidate's pods, with those
    candidates."""
    view = placement.view
    topology = placement.requests[0].topology
    level = view.level_index(topology.required or topology.preferred or view.levels[-1])
    if level is None:
        return None
    found: dict[DomainID, list[Contender]] = {}
    for members in contenders.values():
        for contender in members:
            seen: set[DomainID] = set()
            for leaf_key in state.tas.usage_of(contender.key, placement.flavor):
                leaf = view.leaves.get(leaf_key)
                if leaf is not None and leaf.id[: level + 1] not in seen:
                    seen.add(leaf.id[: level + 1])
                    found.setdefault(leaf.id[: level + 1], []).append(contender)
    return level, found


def _cost(
    victims: tuple[Victim, ...], by_key: Mapping[WorkloadKey, Contender], domain: DomainID
) -> _Cost:
    chosen = [by_key[v.workload_key] for v in victims]
    return (
        max(c.priority for c in chosen),
        sum(c.preemption_cost for c in chosen),
        len(chosen),
        domain,
    )


def topology_victims(
    state: ClusterState,
    cq: ClusterQueue,
    workload: Workload,
    assignment: FlavorAssignment,
    searches: VictimSearches,
) -> tuple[Victim, ...] | None:
    """The cheapest domain's minimal victim set for a TAS Workload, or None when no domain
    can be freed (or the Workload has no TAS pod set)."""
    found = _victims_where(state, cq, workload, assignment, searches)
    return found[0] if found is not None else None


def _victims_where(
    state: ClusterState,
    cq: ClusterQueue,
    workload: Workload,
    assignment: FlavorAssignment,
    searches: VictimSearches,
) -> tuple[tuple[Victim, ...], NodeRoom] | None:
    """`topology_victims`, with the nodes as their search saw them (the domain chosen)."""
    if not cq.preemption.may_preempt():
        return None
    placements = topology_placements(state, cq, workload, assignment)
    if placements is None:
        return None
    usage = dict(assignment.usage)
    short = short_of(state, assignment)
    if searches.victims(cq, workload, usage, short) is None:
        # not even freeing the quota alone is possible: nothing frees quota and nodes
        return None
    gone = state.node_holds.simulate_gone
    whole = NodeRoom(placements, state.tas.usage_of, gone=gone)
    if len(placements) != 1 or (assignment.mode is Mode.PREEMPT and whole.fits()):
        # only quota is short, or pods in several flavors: one search over every candidate
        victims = searches.topology_victims(cq, workload, usage, short, whole)
        return (victims, whole) if victims else None
    contenders = searches.contenders.in_reach(state, cq.name, short)
    split = _domains(state, placements[0], contenders)
    if split is None:
        return None
    level, domains = split
    by_key = {c.key: c for members in contenders.values() for c in members}
    best: tuple[_Cost, tuple[Victim, ...], NodeRoom] | None = None
    orders = DomainOrders()  # the candidates' order, kept across domains
    for domain in sorted(domains):
        inside = domains[domain]
        keys = {c.key for c in inside}
        room = NodeRoom(placements, state.tas.usage_of, (level, domain), keys, gone)
        if not room.could_fit(inside):
            continue  # not even with every Workload there gone
        victims = searches.topology_victims(cq, workload, usage, short, room, orders)
        if not victims:
            continue
        cost = _cost(victims, by_key, domain)
        if best is None or cost < best[0]:
            best = (cost, victims, room)
    if best is None:  # no single domain: a placement over several (preferred), if any
        victims = searches.topology_victims(cq, workload, usage, short, whole)
        return (victims, whole) if victims else None
    return best[1], best[2]


def _planned(
    searches: VictimSearches,
    cq: ClusterQueue,
    short: frozenset[FlavorResource],
    victims: tuple[Victim, ...],
    room: NodeRoom,
) -> dict[str, Mapping[str, Any]] | None:
    """Where the pods go once the victims are gone (in the domain their search chose), as
    each TAS pod set's `topologyAssignment`; None when they would not fit even then."""
    gone = {v.workload_key for v in victims if v.whole}
    in_reach = searches.contenders.in_reach(searches.state, cq.name, short)
    contenders = [c for members in in_reach.values() for c in members if c.key in gone]
    for contender in contenders:
        room.move(contender, out=True)
    try:
        placed = room.placed()
    finally:
        room.restore()
    if placed is None:
        return None
    return {name: encode(a) for found in placed for name, a in found.items()}


def plan_topology_preemption(
    state: ClusterState,
    cq: ClusterQueue,
    workload: Workload,
    assignment: FlavorAssignment,
    searches: VictimSearches,
) -> Preempt | None:
    """Victims for a TAS Workload that lacks quota or room on the nodes, the cheapest
    domain's nominated at once with the place its pods take once they are gone (held on the
    nodes meanwhile: controller/core/tas/holds.py); None when no domain can be freed."""
    found = _victims_where(state, cq, workload, assignment, searches)
    if found is None:
        return None
    victims, room = found
    planned = _planned(searches, cq, short_of(state, assignment), victims, room)
    if planned is None:
        return None  # never evict for pods that would not fit once the victims are gone
    domain = None
    if room.domain is not None:  # the search was split by domain: the one it chose
        domain = (room.placements[0].flavor, room.domain[1])
    return nominate_victims(state, cq, workload, assignment, victims, planned, domain)
