"""Which gated pod goes to which domain of its pod set's topology assignment, as Kueue's
topology ungater decides (`pkg/controller/tas/topology_ungater.go`).

By rank when it can: a pod set's `topologyRequest.podIndexLabel` names the label holding
each pod's index (a Job's completion index, a JobSet's index within its Job plus
`subGroupIndexLabel` for the Job's index, an MPIJob's replica index...), and the pod of
rank r goes to the domain holding the r-th place of the assignment (domains in order,
each counted as many times as its pod count), so consecutive ranks share a domain. When
the ranks cannot be used (a pod without the label or with a value that is not a number
below its bound, two pods of one rank, a rank with no place in the assignment, a released
pod outside the domain its rank gives), the whole pod set falls back to the greedy fill:
gated pods to the domains in order, each given what it still lacks.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from controller.core.tas.assignment import Assignment
from controller.core.tas.snapshot import DomainID

__all__ = [
    "PodFacts",
    "RankLabels",
    "RankRange",
    "Release",
    "domain_of_rank",
    "greedy_releases",
    "parse_offset",
    "rank_ranges",
    "read_ranks",
    "releases",
]

_UINT = re.compile(r"[0-9]+")
_INT = re.compile(r"[+-]?[0-9]+")


@dataclass(frozen=True, slots=True)
class PodFacts:
    """What the ungater needs of one live (not finished) pod of a pod set."""

    labels: Mapping[str, str]
    gated: bool
    domain: DomainID
    """A released pod's node selector values at the assignment's levels ("" where none)."""


@dataclass(frozen=True, slots=True)
class RankLabels:
    """A pod set's `topologyRequest` fields that say where a pod's rank is read."""

    pod_index: str
    sub_group_index: str | None = None
    sub_group_count: int | None = None


@dataclass(frozen=True, slots=True)
class RankRange:
    """Kueue's `rankOffsets` and `maxRank` of a pod set: its pods' indexes are read below
    `bound`, and a pod's rank is its index minus `offset`."""

    offset: int
    bound: int


@dataclass(frozen=True, slots=True)
class Release:
    """The gated pods to release (indexes into the pods given) with their domains."""

    pods: tuple[tuple[int, DomainID], ...]
    by_rank: bool
    fallback: str | None = None
    """Why the ranks were not used (None when they were, or when there are none)."""


def rank_ranges(pod_sets: Sequence[tuple[str, int, str | None]]) -> dict[str, RankRange]:
    """Kueue's rank offsets per pod set, from the admission's pod sets in order: (name,
    count, `podSetGroupName`). A pod set alone counts its ranks from 0 below its count. Of
    two pod sets in one group (a LeaderWorkerSet's leader and workers, an MPIJob's
    launcher and workers), the smaller (the first on a tie) holds the first ranks and the
    other the next ones. Kueue's key for a pod set without a group is its position, and a
    group of more than two sets gives the others no range (bound 0: no rank reads)."""
    groups: dict[str, list[tuple[str, int]]] = {}
    for position, (name, count, group) in enumerate(pod_sets):
        groups.setdefault(group if group is not None else str(position), []).append((name, count))
    ranges: dict[str, RankRange] = {}
    for members in groups.values():
        if len(members) > 1:
            smaller, larger = members[0], members[1]
            if smaller[1] > larger[1]:
                smaller, larger = larger, smaller
            ranges[smaller[0]] = RankRange(0, smaller[1])
            ranges[larger[0]] = RankRange(smaller[1], larger[1] + smaller[1])
        else:
            ranges[members[0][0]] = RankRange(0, members[0][1])
    return ranges


def parse_offset(value: str) -> int:
    """The `kueue.x-k8s.io/pod-index-offset` annotation's value (Go's `strconv.Atoi`)."""
    if not _INT.fullmatch(value):
        raise ValueError(f"not an integer: {value!r}")
    return int(value)


def domain_of_rank(assignment: Assignment) -> list[DomainID]:
    """Kueue's `rankToDomainID`: the domain of each place, domains in order."""
    return [values for values, count in assignment.domains for _ in range(count)]


def _index(labels: Mapping[str, str], key: str, bound: int) -> int:
    """Kueue's `ReadUIntFromLabelBelowBound`: a decimal without sign, below `bound`."""
    value = labels.get(key)
    if value is None:
        raise ValueError(f"no label {key}")
    if not _UINT.fullmatch(value):
        raise ValueError(f"label {key}={value!r} is not an unsigned integer")
    number = int(value)
    if number >= bound:
        raise ValueError(f"label {key}={value!r} is not below {bound}")
    return number


def read_ranks(
    pods: Sequence[PodFacts], labels: RankLabels, count: int, ranks: RankRange
) -> dict[int, int]:
    """Rank → position in `pods` (Kueue's `readRanksForLabels`); ValueError naming the
    first pod whose rank cannot be used. `count` is the pod set's admitted count; with a
    sub-group (a JobSet's replicated Job), each of its `sub_group_count` Jobs holds
    `count // sub_group_count` consecutive ranks."""
    job_size = count
    if labels.sub_group_index is not None:
        if labels.sub_group_count is None or labels.sub_group_count <= 0:
            raise ValueError(f"subGroupCount must be set and above 0 for {labels.sub_group_index}")
        job_size = count // labels.sub_group_count
    found: dict[int, int] = {}
    for position, pod in enumerate(pods):
        index = _index(pod.labels, labels.pod_index, ranks.bound)
        rank = index - ranks.offset
        if labels.sub_group_index is not None:
            assert labels.sub_group_count is not None
            job = _index(pod.labels, labels.sub_group_index, labels.sub_group_count)
            if index >= job_size:
                raise ValueError(f"pod index {index} is not below the Job size {job_size}")
            rank = index + job * job_size - ranks.offset
        if rank >= count:
            raise ValueError(f"rank {rank} is not below the pod set's count {count}")
        if rank < 0:
            raise ValueError(f"rank {rank} is below 0")
        if rank in found:
            raise ValueError(f"two pods of rank {rank}")
        found[rank] = position
    return found


def greedy_releases(
    assignment: Assignment, pods: Sequence[PodFacts], usable: Callable[[DomainID], bool]
) -> list[tuple[int, DomainID]]:
    """Kueue's `assignGatedPodsToDomainsGreedy`: the gated pods in the order given, each
    domain in the assignment's order taking as many as it still lacks (its count minus the
    released pods selecting it). A domain `usable` refuses takes none, so its share goes to
    the next domains that lack pods (Kueue assigns first and then leaves the pods of such a
    domain gated; the count per domain is the same)."""
    gated = [position for position, pod in enumerate(pods) if pod.gated]
    placed: dict[DomainID, int] = {}
    for pod in pods:
        if not pod.gated:
            placed[pod.domain] = placed.get(pod.domain, 0) + 1
    out: list[tuple[int, DomainID]] = []
    for values, count in assignment.domains:
        if not usable(values):
            continue
        take = min(max(count - placed.get(values, 0), 0), len(gated) - len(out))
        out.extend((position, values) for position in gated[len(out) : len(out) + take])
    return out


def releases(
    assignment: Assignment,
    pods: Sequence[PodFacts],
    labels: RankLabels | None,
    count: int,
    ranks: RankRange,
    usable: Callable[[DomainID], bool] = lambda _: True,
) -> Release:
    """The gated pods to release now and their domains (Kueue's
    `assignGatedPodsToDomains`): by rank when the pod set names a pod index label and
    every live pod's rank is usable, a pod of a domain `usable` refuses left gated; else
    greedily."""
    if labels is None:
        return Release(tuple(greedy_releases(assignment, pods, usable)), by_rank=False)
    places = domain_of_rank(assignment)
    try:
        by_rank = read_ranks(pods, labels, count, ranks)
        for rank, position in by_rank.items():
            if rank >= len(places):
                # fewer places than the count (a slice size not dividing it)
                raise ValueError(f"rank {rank} has no place among {len(places)}")
            pod = pods[position]
            if not pod.gated and pod.domain != places[rank]:
                raise ValueError(f"the released pod of rank {rank} is in another domain")
    except ValueError as exc:
        greedy = greedy_releases(assignment, pods, usable)
        return Release(tuple(greedy), by_rank=False, fallback=str(exc))
    chosen = sorted(
        (rank, position)
        for rank, position in by_rank.items()
        if pods[position].gated and usable(places[rank])
    )
    return Release(tuple((position, places[rank]) for rank, position in chosen), by_rank=True)
