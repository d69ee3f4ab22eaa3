"""Balanced placement (Kueue's alpha `TASBalancedPlacement`, off by default; Kueue's
`tas_balanced_placement.go`), for a `preferred` request: instead of filling the roomiest
domains first, spread the slices evenly over as few domains as hold them.

1. Under each domain of the level above the one asked for (or over the whole top level),
   the greedy fill says how many domains it takes; the *threshold* is the fewest slices
   each would get if spread evenly (capped by the last, smallest domain the fill used).
   Domains below the threshold are pruned (on copies of the counts) and the fill is tried
   again; the best threshold wins (then fewer domains). A threshold of 0: no balanced
   placement, the ordinary search runs.
2. Among the chosen domains, the set of that many domains with the least spare room
   (dynamic programming over pods and leaders left) is kept; when slices are asked at a
   lower level, its children are the candidates (ranked by room, then by how evenly
   their own children are filled: entropy).
3. Each domain gets the threshold, and the extra slices go to the first ones in order.

Failures at steps 2-3 fall back to the ordinary search, as in Kueue.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import replace

from controller.core.tas.counts import SearchState, refill, sorted_domains, sorted_with_leader
from controller.core.tas.snapshot import Domain, TopologySnapshot

__all__ = ["balanced_domains"]

_Greedy = tuple[bool, int, Domain | None, Domain | None]


def _greedy(domains: Sequence[Domain], slices: int, leaders: int) -> _Greedy:
    """Kueue's `evaluateGreedyAssignment`: whether the roomiest-first fill holds the
    request, how many domains it uses, and the last one taken with and without a leader."""
    used = 0
    last_with_leader: Domain | None = None
    last: Domain | None = None
    remaining, remaining_leaders = slices, leaders
    if leaders > 0:
        ordered = sorted_with_leader(domains, False)
        i = 0
        while remaining_leaders > 0 and i < len(ordered) and ordered[i].leader_count > 0:
            used += 1
            last_with_leader = ordered[i]
            remaining_leaders -= ordered[i].leader_count
            remaining -= ordered[i].slice_count_with_leader
            i += 1
        rest = sorted_domains(ordered[i:], False)
    else:
        rest = sorted_domains(domains, False)
    if remaining_leaders > 0:
        return False, 0, None, None
    i = 0
    while remaining > 0 and i < len(rest) and rest[i].slice_count > 0:
        used += 1
        last = rest[i]
        remaining -= rest[i].slice_count
        i += 1
    if remaining > 0:
        return False, 0, None, None
    return True, used, last_with_leader, last


def _threshold(slices: int, used: int, last_with_leader: Domain | None, last: Domain | None) -> int:
    threshold = slices // used if used else 0
    if last_with_leader is not None:
        threshold = min(threshold, last_with_leader.slice_count_with_leader)
    if last is not None:
        threshold = min(threshold, last.slice_count)
    return threshold


def _clone(domain: Domain, parent: Domain | None = None) -> Domain:
    """The domain's subtree with counts of its own (the search prunes the copies)."""
    copy = Domain(domain.id, domain.key, parent)
    copy.free = domain.free
    copy.pod_count = domain.pod_count
    copy.pod_count_with_leader = domain.pod_count_with_leader
    copy.slice_count = domain.slice_count
    copy.slice_count_with_leader = domain.slice_count_with_leader
    copy.leader_count = domain.leader_count
    copy.children = [_clone(child, copy) for child in domain.children]
    return copy


def _clear(domain: Domain) -> None:
    domain.reset()
    for child in domain.children:
        _clear(child)


def _clear_leader(domain: Domain) -> None:
    domain.pod_count_with_leader = domain.slice_count_with_leader = domain.leader_count = 0
    for child in domain.children:
        _clear_leader(child)


def _prune_one(domain: Domain, threshold: int, leader_required: bool) -> None:
    if domain.slice_count < threshold:
        _clear(domain)
    elif leader_required and domain.leader_count > 0 and domain.slice_count_with_leader < threshold:
        _clear_leader(domain)  # still for workers, no longer for the leader


def _prune(domains: Sequence[Domain], threshold: int, state: SearchState, level: int) -> None:
    """Kueue's `pruneDomainsBelowThreshold`: clear the children below the threshold, count
    the domains again from what is left, clear those below it."""
    leader_required = state.leader_count > 0
    for domain in domains:
        for child in domain.children:
            _prune_one(child, threshold, leader_required)
    plain = replace(state, size_at_level={})  # Kueue recounts without the inner layers
    for domain in domains:
        refill(domain, plain, level)
        _prune_one(domain, threshold, leader_required)


def _children(domains: Iterable[Domain]) -> list[Domain]:
    return [child for domain in domains for child in domain.children]


def _entropy(domains: Sequence[Domain]) -> float:
    total = sum(d.pod_count for d in domains)
    if total == 0:
        return 0.0
    return -sum(
        d.pod_count / total * math.log2(d.pod_count / total) for d in domains if d.pod_count > 0
    )


def _optimal_set(
    domains: Sequence[Domain], slices: int, leaders: int, slice_size: int, by_entropy: bool
) -> list[Domain] | None:
    """Kueue's `selectOptimalDomainSetToFit`: as many domains as the greedy fill uses,
    holding the request with the least to spare."""
    fits, used, _, _ = _greedy(domains, slices, leaders)
    if not fits:
        return None
    if by_entropy:
        ordered = sorted(
            domains,
            key=lambda d: (
                -d.leader_count,
                -d.slice_count_with_leader,
                -_entropy(d.children),
                d.id,
            ),
        )
    else:
        ordered = sorted(domains, key=lambda d: d.id)
    # placements[i][leaders left][pods left]: the first set of i domains found leaving that
    placements: list[dict[int, dict[int, list[Domain]]]] = [{} for _ in range(used + 1)]
    placements[0][leaders] = {slices * slice_size: []}
    for domain in ordered:
        for i in range(used, 0, -1):
            before_level = placements[i - 1]
            for leaders_left in sorted(before_level):
                for pods_left in sorted(before_level[leaders_left]):
                    if leaders_left <= 0 and pods_left <= 0:
                        continue
                    chosen = [*before_level[leaders_left][pods_left], domain]
                    if leaders_left > 0 and domain.leader_count > 0:
                        after = placements[i].setdefault(leaders_left - domain.leader_count, {})
                        after.setdefault(pods_left - domain.pod_count_with_leader, chosen)
                    if domain.slice_count > 0:
                        after = placements[i].setdefault(leaders_left, {})
                        after.setdefault(pods_left - domain.pod_count, chosen)
    done = placements[used].get(0, {})
    left = [pods for pods in done if pods <= 0]
    return done[max(left)] if left else None


def _spread(
    domains: Sequence[Domain], slices: int, leaders: int, slice_size: int, threshold: int
) -> list[Domain] | None:
    """Kueue's `placeSlicesOnDomainsBalanced`: the threshold to every domain of the best
    set, the extra slices to the first ones."""
    chosen = _optimal_set(domains, slices, leaders, slice_size, False)
    if chosen is None or slices < len(chosen) * threshold:
        return None
    chosen = sorted_with_leader(chosen, False)
    extra = slices - len(chosen) * threshold
    leaders_left = leaders
    for domain in chosen:
        if leaders_left > 0:
            take = min(domain.slice_count_with_leader - threshold, extra)
            domain.leader_count = 1
            leaders_left -= 1
        elif extra > 0:
            take = min(domain.slice_count - threshold, extra)
            domain.leader_count = 0
        else:
            domain.leader_count = take = 0
        domain.slice_count = domain.slice_count_with_leader = threshold + take
        domain.pod_count = domain.slice_count * slice_size
        domain.pod_count_with_leader = domain.pod_count - domain.leader_count
        extra -= take
    if extra > 0 or leaders_left > 0:
        return None
    return chosen


def _best_domains(snapshot: TopologySnapshot, state: SearchState) -> tuple[list[Domain], int]:
    """Kueue's `findBestDomainsForBalancedPlacement`: the domains of the level asked for
    (copies, pruned) under the best parent, and the threshold (0: none)."""
    slices = state.count // state.slice_size
    level = state.level
    if level == 0:
        groups = [list(snapshot.domains_per_level[0].values())]
    else:
        above = sorted(snapshot.domains_per_level[level - 1].values(), key=lambda d: d.id)
        groups = [d.children for d in above]
    best, best_count = 0, 0
    found: list[Domain] = []
    for group in groups:
        candidates = [_clone(d) for d in group]
        lower = _children(candidates) if level < state.slice_level else candidates
        fits, used, last_with_leader, last = _greedy(lower, slices, state.leader_count)
        if not fits:
            continue
        threshold = _threshold(slices, used, last_with_leader, last)
        with_leader_room = threshold
        if state.leader_count > 0 and last is not None:
            with_leader_room = min(threshold, last.slice_count_with_leader)
        if threshold < best:
            continue
        _prune(candidates, threshold, state, level)
        fits, count, _, _ = _greedy(candidates, slices, state.leader_count)
        if not fits and with_leader_room < threshold:
            # again with a lower threshold that keeps room for the leader
            if with_leader_room <= 0 or with_leader_room < best:
                continue
            threshold = with_leader_room
            candidates = [_clone(d) for d in group]
            _prune(candidates, threshold, state, level)
            fits, count, _, _ = _greedy(candidates, slices, state.leader_count)
        if not fits:
            continue
        if threshold > best or (threshold == best and count < best_count):
            best, best_count, found = threshold, count, candidates
    return found, best


def balanced_domains(
    snapshot: TopologySnapshot, state: SearchState
) -> tuple[int, list[Domain]] | None:
    """The level and domains (with their shares) of a balanced placement, or None when
    there is none (the ordinary search places the request)."""
    fit, threshold = _best_domains(snapshot, state)
    if threshold <= 0:
        return None
    slices = state.count // state.slice_size
    level = state.level
    if level < state.slice_level:
        chosen = _optimal_set(fit, slices, state.leader_count, state.slice_size, True)
        if chosen is None:
            return None
        fit = _children(chosen)
        level += 1
    spread = _spread(fit, slices, state.leader_count, state.slice_size, threshold)
    if spread is None:
        return None
    return level, spread
