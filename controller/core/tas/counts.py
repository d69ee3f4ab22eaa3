"""Phase 1 of the placement search (Kueue's `fillInCounts`): how many pods, and slices, of
one pod set (and of its group's leader) fit in every domain of a TAS flavor's view, the
nodes a pod set cannot use left out and counted (for Kueue's not-fit message)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from controller.core.model.flavors import Taint
from controller.core.model.workloads import Toleration
from controller.core.tas.snapshot import ONE_POD, Domain, DomainID, TopologySnapshot, count_in

if TYPE_CHECKING:  # the request types are the search's
    from controller.core.tas.assignment import PodSetRequest

__all__ = [
    "Exclusions",
    "SearchState",
    "admits",
    "count_with_limit",
    "fill_counts",
    "refill",
    "sorted_domains",
    "sorted_with_leader",
    "with_pod",
]

_EVALUATED_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


@dataclass(slots=True)
class Exclusions:
    """Why nodes were left out (Kueue's `tasExclusionStats`), for the not-fit message."""

    total_nodes: int = 0
    node_selector: int = 0
    affinity: int = 0
    taints: dict[str, int] = field(default_factory=dict)
    resources: dict[str, int] = field(default_factory=dict)

    def __str__(self) -> str:
        reasons = []
        if self.node_selector:
            reasons.append(f"nodeSelector: {self.node_selector}")
        if self.affinity:
            reasons.append(f"affinity: {self.affinity}")
        reasons += [f'taint "{taint}": {n}' for taint, n in self.taints.items()]
        reasons += [f'resource "{name}": {n}' for name, n in self.resources.items()]
        return ", ".join(sorted(reasons))


@dataclass(slots=True)
class SearchState:
    count: int
    slice_size: int = 1
    leader_count: int = 0
    required: bool = False
    unconstrained: bool = False
    level: int = 0
    slice_level: int = 0
    # Multi-layer slices (Kueue's `sliceSizeAtLevel`): below the outermost slice level, the
    # size pods are grouped in at a level (levels without one: single pods).
    size_at_level: dict[int, int] = field(default_factory=dict)
    layers: tuple[tuple[str, int], ...] = ()  # every slice layer, when there are inner ones
    excluded: Exclusions = field(default_factory=Exclusions)


def with_pod(requests: Mapping[str, int]) -> dict[str, int]:
    out = dict(requests)
    out["pods"] = out.get("pods", 0) + ONE_POD
    return out


def _untolerated(domain: Domain, tolerations: Sequence[Toleration]) -> Taint | None:
    for taint in domain.taints:
        if taint.effect in _EVALUATED_EFFECTS and not any(
            t.tolerates(taint.key, taint.value, taint.effect) for t in tolerations
        ):
            return taint
    return None


def _shown(taint: Taint) -> str:
    """`corev1.Taint.ToString`."""
    if taint.value:
        return f"{taint.key}={taint.value}:{taint.effect}"
    return f"{taint.key}:{taint.effect}"


def count_with_limit(requests: Mapping[str, int], free: Mapping[str, int]) -> tuple[int, str]:
    """How many pods fit and the resource that limits it (ties: the first by name)."""
    best: tuple[int, str] | None = None
    for name, amount in requests.items():
        fits = (1 << 31) - 1 if amount == 0 else max(free.get(name, 0) // amount, 0)
        if best is None or (fits, name) < best:
            best = (fits, name)
    return best if best is not None else (0, "")


def _excluded(leaf: Domain, request: PodSetRequest, excluded: Exclusions) -> bool:
    """Whether a node leaf is left out for this pod set (its taints first, then its
    labels), counted in `excluded`."""
    taint = _untolerated(leaf, request.tolerations)
    if taint is not None:
        key = _shown(taint)
        excluded.taints[key] = excluded.taints.get(key, 0) + 1
        return True
    if any(leaf.labels.get(k) != v for k, v in request.node_selector.items()):
        excluded.node_selector += 1
        return True
    if request.affinity_terms and not any(
        all(requirement.matches(leaf.labels) for requirement in term)
        for term in request.affinity_terms
    ):
        excluded.affinity += 1
        return True
    return False


def admits(snapshot: TopologySnapshot, leaf: Domain, request: PodSetRequest) -> bool:
    """Whether a pod set's pods may go on a leaf of the view: on nodes, its taints
    tolerated and its labels selected (as the placement search leaves them out)."""
    return not (snapshot.lowest_is_node and _excluded(leaf, request, Exclusions()))


def fill_counts(
    snapshot: TopologySnapshot,
    workers: PodSetRequest,
    leader: PodSetRequest | None,
    state: SearchState,
    assumed: Mapping[DomainID, Mapping[str, int]],
) -> None:
    requests = with_pod(workers.requests)
    leader_requests = with_pod(leader.requests) if leader is not None else None
    for level in snapshot.domains_per_level:
        for domain in level.values():
            domain.reset()
    excluded = state.excluded
    excluded.total_nodes += len(snapshot.leaves)
    # Nodes are checked against the pod set only when something can exclude one (a taint,
    # a selector, an affinity): the common case of none is a placement's hot loop.
    selective = bool(workers.node_selector or workers.affinity_terms)
    for leaf in snapshot.leaves.values():
        if (
            snapshot.lowest_is_node
            and (selective or leaf.taints)
            and _excluded(leaf, workers, excluded)
        ):
            continue
        taken = assumed.get(leaf.key)
        free: Mapping[str, int] = leaf.free
        if taken:
            free = dict(free)
            for name, amount in taken.items():
                free[name] = free.get(name, 0) - amount
        leaf.pod_count, limit = count_with_limit(requests, free)
        if leaf.pod_count == 0 and limit:
            excluded.resources[limit] = excluded.resources.get(limit, 0) + 1
        if leader_requests is None:
            leaf.pod_count_with_leader = leaf.pod_count  # nothing more taken
            continue
        if count_in(leader_requests, free) > 0:
            leaf.leader_count = 1
            free = dict(free)
            for name, amount in leader_requests.items():
                free[name] = free.get(name, 0) - amount
        leaf.pod_count_with_leader = count_in(requests, free)
    for root in snapshot.roots:
        _fill(root, state, 0)


def refill(domain: Domain, state: SearchState, level: int) -> None:
    """Count a domain of `level` again from its leaves' counts (Kueue's
    `fillInCountsHelper`)."""
    _fill(domain, state, level)


def _fill(domain: Domain, state: SearchState, level: int) -> None:
    if not domain.children:
        if level == state.slice_level:
            domain.slice_count = domain.pod_count // state.slice_size
            domain.slice_count_with_leader = domain.pod_count_with_leader // state.slice_size
        return
    pods = slices = leader_count = 0
    contributes = False
    min_pod_gap = min_slice_gap = 1 << 62
    # an inner slice layer at the children's level: they give only whole groups of its size
    inner = state.size_at_level.get(level + 1, 1)
    for child in domain.children:
        _fill(child, state, level + 1)
        child_pods = child.pod_count // inner * inner
        child_pods_with_leader = child.pod_count_with_leader // inner * inner
        pods += child_pods
        slices += child.slice_count
        if state.leader_count == 0 or child.leader_count > 0:
            contributes = True
            min_pod_gap = min(min_pod_gap, child_pods - child_pods_with_leader)
            min_slice_gap = min(min_slice_gap, child.slice_count - child.slice_count_with_leader)
        leader_count = max(leader_count, child.leader_count)
    domain.pod_count = pods
    slices_with_leader = 0
    if contributes:
        domain.pod_count_with_leader = pods - min_pod_gap
        slices_with_leader = slices - min_slice_gap
    else:
        domain.pod_count_with_leader = 0
    domain.leader_count = leader_count
    if level == state.slice_level:
        slices = domain.pod_count // state.slice_size
        slices_with_leader = domain.pod_count_with_leader // state.slice_size
    domain.slice_count = slices
    domain.slice_count_with_leader = slices_with_leader


def sorted_with_leader(domains: Iterable[Domain], least_free: bool) -> list[Domain]:
    """Kueue's `sortedDomainsWithLeader`: those that take the leader first, then by slices
    (most first, or least with `least_free`), fewer pods, values."""
    sign = 1 if least_free else -1
    return sorted(
        domains,
        key=lambda d: (
            -d.leader_count,
            sign * d.slice_count_with_leader,
            d.pod_count_with_leader,
            d.id,
        ),
    )


def sorted_domains(domains: Iterable[Domain], least_free: bool) -> list[Domain]:
    """Kueue's `sortedDomains`: by slices (most first, or least with `least_free`), fewer
    pods, values."""
    sign = 1 if least_free else -1
    return sorted(domains, key=lambda d: (sign * d.slice_count, d.pod_count, d.id))
