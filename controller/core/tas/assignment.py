"""Where a pod set's pods go in a TAS flavor (Kueue's `findTopologyAssignment` in
`pkg/cache/scheduler/tas_flavor_snapshot.go`, with Kueue's default feature gates:
`TASProfileMixed` and `TASMultiLayerTopology` on, `TASRespectNodeAffinityPreferred` off;
`TASBalancedPlacement`, off by default, as configured: balanced.py).

1. Count, for every domain, how many pods (and slices) of the request fit: a leaf by its
   free capacity, a parent as the sum of its children (`counts.py`).
2. Find the level and the domains: at the requested level, the domain with the most room,
   then the tightest one that still holds every slice ("fewest domains, then best fit").
   `required` fails there; `preferred` walks up a level at a time and, at the top, spreads
   over as few domains as it can; `unconstrained` (least free capacity first) spreads at
   the lowest level.
3. Walk down to the leaves, at each level keeping as few domains as hold the pods, the
   tightest last; below the slice level, in groups of an inner slice layer's size where
   one applies (multi-layer slices: a child domain counts only whole groups).

A pod set group (`podSetGroupName`: a leader pod set of one pod and its workers) is placed
together: counts are also kept "with the leader" and the leader goes where it fits.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from controller.core.model.selectors import Requirement
from controller.core.model.topology import TopologyRequest
from controller.core.model.workloads import Toleration
from controller.core.tas.balanced import balanced_domains
from controller.core.tas.counts import (
    SearchState,
    fill_counts,
    sorted_domains,
    sorted_with_leader,
    with_pod,
)
from controller.core.tas.slices import inner_slices, layers_not_fit
from controller.core.tas.snapshot import Domain, DomainID, TopologySnapshot

__all__ = [
    "Assignment",
    "PodSetRequest",
    "TopologyRequest",
    "add_usage",
    "find_assignment",
    "find_assignments",
    "usage_of",
]


@dataclass(frozen=True, slots=True)
class PodSetRequest:
    """One pod set to place: its pods' requests (milli-units, without the pod itself), the
    node selector and tolerations its pods carry (the flavor's included), and whether
    its topology is only implied (no request: unconstrained at the lowest level)."""

    name: str
    count: int
    requests: Mapping[str, int]
    topology: TopologyRequest = field(default_factory=TopologyRequest)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    affinity_terms: tuple[tuple[Requirement, ...], ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    implied: bool = False


@dataclass(frozen=True, slots=True)
class Assignment:
    """Where the pods go: the levels written (the lowest only when it is the node) and, per
    domain, its values at those levels and its pod count, domains in order."""

    levels: tuple[str, ...]
    domains: tuple[tuple[DomainID, int], ...]

    @property
    def pod_count(self) -> int:
        return sum(count for _, count in self.domains)


class _Placement:
    """One call of the search over a snapshot (the snapshot's counts are its scratch)."""

    def __init__(self, snapshot: TopologySnapshot) -> None:
        self.s = snapshot

    # --- ordering --------------------------------------------------------------------------

    sorted_with_leader = staticmethod(sorted_with_leader)
    sorted_domains = staticmethod(sorted_domains)

    @staticmethod
    def best_fit(domains: Sequence[Domain], needed: int, leader_count: int, slices: bool) -> Domain:
        """The domain holding `needed` with the least to spare (the first when none)."""
        best, best_count = domains[0], None
        for domain in domains:
            if domain.leader_count < leader_count:
                continue
            if slices:
                have = domain.slice_count_with_leader if leader_count else domain.slice_count
            else:
                have = domain.pod_count_with_leader if leader_count else domain.pod_count
            if have >= needed and (best_count is None or have < best_count):
                best, best_count = domain, have
        return best

    # --- phase 2a: the level -------------------------------------------------------------

    def find_level(self, level: int, state: SearchState) -> tuple[int, list[Domain]] | str:
        by_id = self.s.domains_per_level[level]
        if not by_id:
            return f"no topology domains at level: {self.s.levels[level]}"
        least_free = state.unconstrained
        ordered = self.sorted_with_leader(by_id.values(), least_free)
        top = ordered[0]
        slice_count = state.count // state.slice_size
        if (
            not least_free
            and top.slice_count_with_leader >= slice_count
            and top.leader_count >= state.leader_count
        ):
            top = self.best_fit(ordered, slice_count, state.leader_count, True)
        if least_free:
            for candidate in ordered:
                capacity = candidate.slice_count
                if state.leader_count > 0:
                    if candidate.leader_count < state.leader_count:
                        continue
                    capacity = candidate.slice_count_with_leader
                if capacity >= slice_count:
                    return level, [candidate]
            if state.required:
                return self.not_fit(ordered[-1].pod_count, slice_count, state, level)
        if top.slice_count_with_leader >= slice_count and top.leader_count >= state.leader_count:
            return level, [top]
        if state.required:
            return self.not_fit(top.slice_count, slice_count, state, level)
        if level > 0 and not state.unconstrained:
            return self.find_level(level - 1, state)
        return self.spread(level, ordered, slice_count, state)

    def spread(
        self, level: int, ordered: list[Domain], slice_count: int, state: SearchState
    ) -> tuple[int, list[Domain]] | str:
        """At the top (or, unconstrained, at the lowest level): as few domains as hold it."""
        best_fit = not state.unconstrained
        results: list[Domain] = []
        remaining, remaining_leaders = slice_count, state.leader_count
        ordered = self.leader_first(
            ordered, state.count, state.leader_count, state.slice_size, True
        )
        i = 0
        while remaining_leaders > 0 and i < len(ordered) and ordered[i].leader_count > 0:
            domain = ordered[i]
            if best_fit and domain.slice_count_with_leader >= remaining:
                domain = self.best_fit(ordered[i:], remaining, remaining_leaders, True)
            results.append(domain)
            remaining_leaders -= domain.leader_count
            remaining -= domain.slice_count_with_leader
            i += 1
        if remaining_leaders > 0:
            return self.not_fit(state.leader_count - remaining_leaders, slice_count, state, level)
        rest = self.sorted_domains(ordered[i:], state.unconstrained)
        j = 0
        while remaining > 0 and j < len(rest):
            domain = rest[j]
            if best_fit and domain.slice_count >= remaining:
                domain = self.best_fit(rest[j:], remaining, 0, True)
            results.append(domain)
            remaining -= domain.slice_count
            j += 1
        if remaining > 0:
            return self.not_fit(slice_count - remaining, slice_count, state, level)
        return level, results

    def not_fit(self, fit: int, wanted: int, state: SearchState, level: int) -> str:
        if state.layers:
            return layers_not_fit(self.s, level, state)
        unit = "pod" if state.slice_size == 1 else "slice"
        name = f'"{self.s.topology}"'
        if fit <= 0:
            message = f"topology {name} doesn't allow to fit any of {wanted} {unit}(s)"
        else:
            message = f"topology {name} allows to fit only {fit} out of {wanted} {unit}(s)"
        reasons = str(state.excluded)
        if reasons:
            message += f". Total nodes: {state.excluded.total_nodes}; excluded: {reasons}"
        return message

    # --- phase 2b: down to the leaves ----------------------------------------------------

    @staticmethod
    def leader_first(
        domains: list[Domain], count: int, leader_count: int, slice_size: int, slices: bool
    ) -> list[Domain]:
        """The first domain that can take the leader and leave room for every worker, moved
        to the front (Kueue's `prioritizeLeaderDomain`)."""
        if leader_count == 0 or len(domains) < 2:
            return domains
        needed = count // slice_size if slices else count
        available = sum(d.slice_count if slices else d.pod_count for d in domains)
        for i, domain in enumerate(domains):
            if domain.leader_count < leader_count:
                continue
            penalty = (
                domain.slice_count - domain.slice_count_with_leader
                if slices
                else domain.pod_count - domain.pod_count_with_leader
            )
            if available - penalty < needed:
                continue
            return domains if i == 0 else [domain, *domains[:i], *domains[i + 1 :]]
        return domains

    def minimum(
        self,
        domains: list[Domain],
        count: int,
        leader_count: int,
        slice_size: int,
        unconstrained: bool,
        slices: bool,
    ) -> list[Domain]:
        """As few of `domains` (in order) as hold `count` pods and the leaders, each given
        its share (Kueue's `updateCountsToMinimumGeneric`)."""
        domains = self.leader_first(domains, count, leader_count, slice_size, slices)
        best_fit = not unconstrained
        remaining = count // slice_size if slices else count
        remaining_leaders = leader_count
        result: list[Domain] = []
        for i, domain in enumerate(domains):
            if remaining_leaders > 0:
                with_leader = (
                    domain.slice_count_with_leader if slices else domain.pod_count_with_leader
                )
                if (
                    best_fit
                    and with_leader >= remaining
                    and domain.leader_count >= remaining_leaders
                ):
                    domain = self.best_fit(domains[i:], remaining, remaining_leaders, slices)
                with_leader = (
                    domain.slice_count_with_leader if slices else domain.pod_count_with_leader
                )
                size = slice_size if slices else 1
                if with_leader >= remaining and domain.leader_count >= remaining_leaders:
                    self._set_primary(domain, remaining, slices)
                    domain.leader_count = remaining_leaders
                    domain.pod_count = remaining * size
                    result.append(domain)
                    return result
                taken = min(with_leader, remaining)
                domain.leader_count = min(domain.leader_count, remaining_leaders)
                self._set_primary(domain, taken, slices)
                domain.pod_count = taken * size
                remaining_leaders -= domain.leader_count
                remaining -= taken
                result.append(domain)
                continue
            have = domain.slice_count if slices else domain.pod_count
            if best_fit and have >= remaining:
                domain = self.best_fit(domains[i:], remaining, 0, slices)
            domain.leader_count = 0
            have = domain.slice_count if slices else domain.pod_count
            if have >= remaining:
                domain.pod_count = remaining * slice_size if slices else remaining
                if slices:
                    domain.slice_count = remaining
                result.append(domain)
                return result
            if slices:
                domain.pod_count = domain.slice_count * slice_size
            remaining -= have
            result.append(domain)
        return result  # the counts said it fits; Kueue logs and keeps what it found

    @staticmethod
    def _set_primary(domain: Domain, value: int, slices: bool) -> None:
        if slices:
            domain.slice_count = value
        else:
            domain.pod_count = value

    def walk_down(
        self, fit: list[Domain], fit_level: int, state: SearchState, balanced: bool = False
    ) -> list[Domain]:
        current = self.minimum(
            fit, state.count, state.leader_count, state.slice_size, state.unconstrained, True
        )
        level = fit_level
        last = len(self.s.levels) - 1
        while level < min(last, state.slice_level) and not balanced:
            lower = [child for domain in current for child in domain.children]
            current = self.minimum(
                self.sorted_domains(lower, state.unconstrained),
                state.count,
                state.leader_count,
                state.slice_size,
                state.unconstrained,
                True,
            )
            level += 1
        while level < last:
            # each parent's share among its children: above the slice level (a balanced
            # placement's) in slices, below it single pods or an inner layer's groups
            if level < state.slice_level:
                size = state.slice_size
            else:
                size = state.size_at_level.get(level + 1, 1)
            chosen: list[Domain] = []
            for domain in current:
                children = self.sorted_domains(domain.children, state.unconstrained)
                if size > 1:  # the counts were of the outermost layer's slices
                    for child in children:
                        child.slice_count = child.pod_count // size
                        child.slice_count_with_leader = child.pod_count_with_leader // size
                chosen += self.minimum(
                    children,
                    domain.pod_count,
                    domain.leader_count,
                    size,
                    state.unconstrained,
                    size > 1,
                )
            current = chosen
            level += 1
        return current

    def build(self, domains: Iterable[Domain]) -> Assignment:
        start = len(self.s.levels) - 1 if self.s.lowest_is_node else 0
        ordered = sorted((d for d in domains if d.pod_count > 0), key=lambda d: d.id)
        return Assignment(
            self.s.levels[start:], tuple((d.id[start:], d.pod_count) for d in ordered)
        )


def _level_key(snapshot: TopologySnapshot, request: PodSetRequest) -> str | None:
    topology = request.topology
    if topology.required is not None:
        return topology.required
    if topology.preferred is not None:
        return topology.preferred
    if topology.slice_level is not None:
        return snapshot.levels[0]
    if topology.unconstrained or request.implied:
        return snapshot.levels[-1]
    return None


def find_assignment(
    snapshot: TopologySnapshot,
    workers: PodSetRequest,
    leader: PodSetRequest | None = None,
    assumed: Mapping[DomainID, Mapping[str, int]] | None = None,
) -> dict[str, Assignment] | str:
    """Where `workers` (and the one pod of their group's `leader`) go, by pod set name, or
    why they fit nowhere (Kueue's messages). `assumed` is usage already promised in this
    cycle, per leaf."""
    topology = workers.topology
    state = SearchState(count=workers.count, leader_count=1 if leader is not None else 0)
    if topology.slice_level is not None:
        if not topology.slice_size or topology.slice_size <= 0:
            return "slice topology requested, but slice size not provided"
        state.slice_size = topology.slice_size
    state.required = topology.required is not None
    only_slices = (
        topology.slice_level is not None
        and topology.required is None
        and topology.preferred is None
    )
    state.unconstrained = topology.unconstrained or workers.implied or only_slices
    key = _level_key(snapshot, workers)
    if key is None:
        return "topology level not specified"
    level = snapshot.level_index(key)
    if level is None:
        return f"no requested topology level: {key}"
    state.level = level
    slice_key = topology.slice_level if topology.slice_level is not None else snapshot.levels[-1]
    slice_level = snapshot.level_index(slice_key)
    if slice_level is None:
        return f"no requested topology level for slices: {slice_key}"
    if level > slice_level:
        return f"podset slice topology {slice_key} is above the podset topology {key}"
    state.slice_level = slice_level
    if snapshot.multi_layer:
        inner = inner_slices(snapshot, topology, state)
        if inner is not None:
            return inner
    placement = _Placement(snapshot)
    fill_counts(snapshot, workers, leader, state, assumed or {})
    found: tuple[int, list[Domain]] | str | None = None
    if snapshot.balanced_placement and not state.required and not state.unconstrained:
        found = balanced_domains(snapshot, state)
    balanced = found is not None
    if found is None:
        found = placement.find_level(level, state)
    if isinstance(found, str):
        return found
    fit_level, fit = found
    leaves = placement.walk_down(fit, fit_level, state, balanced)
    out: dict[str, Assignment] = {}
    if leader is not None:
        leader_domains = []
        for domain in leaves:
            if domain.leader_count > 0:
                share = domain.copy_counts()
                share.pod_count = domain.leader_count
                leader_domains.append(share)
        out[leader.name] = placement.build(leader_domains)
    out[workers.name] = placement.build(leaves)
    return out


def usage_of(assignment: Assignment, requests: Mapping[str, int]) -> dict[DomainID, dict[str, int]]:
    """What an assignment takes from each leaf: its pods' requests and the pods."""
    pod = with_pod(requests)
    return {
        values: {name: amount * count for name, amount in pod.items()}
        for values, count in assignment.domains
    }


def add_usage(
    into: dict[DomainID, dict[str, int]], usage: Mapping[DomainID, Mapping[str, int]]
) -> None:
    for key, amounts in usage.items():
        total = into.setdefault(key, {})
        for name, amount in amounts.items():
            total[name] = total.get(name, 0) + amount


def find_assignments(
    snapshot: TopologySnapshot,
    requests: Sequence[PodSetRequest],
    assumed: Mapping[DomainID, Mapping[str, int]] | None = None,
) -> tuple[dict[str, Assignment], str | None]:
    """Every pod set of one Workload in one TAS flavor, in order, each group (pod sets of
    one `podSetGroupName`: the one with fewer pods is the leader) placed together, each
    placement's usage assumed by the next (Kueue's `FindTopologyAssignmentsForFlavor`).
    The assignments found and, when one fails, why (the assignments stop there)."""
    taken: dict[DomainID, dict[str, int]] = {}
    add_usage(taken, assumed or {})
    groups: dict[str, list[PodSetRequest]] = {}
    for i, request in enumerate(requests):
        groups.setdefault(request.topology.group or f"#{i}", []).append(request)
    out: dict[str, Assignment] = {}
    for members in groups.values():
        workers, leader = members[0], members[1] if len(members) > 1 else None
        if leader is not None and leader.count > workers.count:
            workers, leader = leader, workers
        found = find_assignment(snapshot, workers, leader, taken)
        if isinstance(found, str):
            return out, found
        out.update(found)
        for member in members:
            add_usage(taken, usage_of(found[member.name], member.requests))
    return out, None
