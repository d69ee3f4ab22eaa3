"""Which gated pod goes to which domain (`controller/core/tas/ranks.py`): Kueue's topology
ungater's cases (`pkg/controller/tas/topology_ungater_test.go`, the "ranks:" ones), written
from its code, and properties: with every rank present each domain gets exactly its count
and consecutive ranks; any unusable rank falls back to the greedy fill of the same counts."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from random import Random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.core.tas.assignment import Assignment
from controller.core.tas.ranks import (
    PodFacts,
    RankLabels,
    RankRange,
    Release,
    domain_of_rank,
    greedy_releases,
    parse_offset,
    rank_ranges,
    read_ranks,
    releases,
)
from controller.core.tas.snapshot import DomainID

COMPLETION = "batch.kubernetes.io/job-completion-index"
JOB_INDEX = "jobset.sigs.k8s.io/job-index"
WORKER = "leaderworkerset.sigs.k8s.io/worker-index"
R11, R12, R21 = ("b1", "r1"), ("b1", "r2"), ("b2", "r1")
JOB = RankLabels(COMPLETION)


def assignment(*domains: tuple[DomainID, int]) -> Assignment:
    return Assignment(("block", "rack"), tuple(domains))


def gated(label: str | None, index: int | str | None) -> PodFacts:
    labels = {} if index is None or label is None else {label: str(index)}
    return PodFacts(labels, gated=True, domain=("", ""))


def released(label: str, index: int, domain: DomainID) -> PodFacts:
    return PodFacts({label: str(index)}, gated=False, domain=domain)


def where(release: Release, pods: Sequence[PodFacts], label: str) -> dict[str, DomainID]:
    """Pod index label value → the domain the pod is released to."""
    return {pods[position].labels[label]: domain for position, domain in release.pods}


def counts(release: Release) -> Counter[DomainID]:
    return Counter(domain for _, domain in release.pods)


def test_a_job_some_pods_already_placed_gets_the_rest_by_completion_index() -> None:
    """Kueue: "ranks: ungate pods according to their ranks for batch/Job - some Pods
    already scheduled"."""
    pods = [
        released(COMPLETION, 0, R11),
        gated(COMPLETION, 1),
        gated(COMPLETION, 2),
        released(COMPLETION, 3, R21),
        gated(COMPLETION, 4),
    ]
    a = assignment((R11, 2), (R12, 1), (R21, 2))
    release = releases(a, pods, JOB, 5, RankRange(0, 5))
    assert release.by_rank
    assert where(release, pods, COMPLETION) == {"1": R11, "2": R12, "4": R21}


def test_ranks_decide_whatever_the_order_of_the_pods() -> None:
    """Pods arriving in any order (or named so that they sort out of index order) still go
    by index; the greedy fill would give the first domain to the first pods listed."""
    pods = [gated(COMPLETION, i) for i in (3, 0, 2, 1)]
    a = assignment((R11, 2), (R12, 2))
    release = releases(a, pods, JOB, 4, RankRange(0, 4))
    assert where(release, pods, COMPLETION) == {"0": R11, "1": R11, "2": R12, "3": R12}
    greedy = greedy_releases(a, pods, lambda _: True)
    assert [pods[p].labels[COMPLETION] for p, d in greedy if d == R11] == ["3", "0"]


def test_a_leader_and_workers_in_one_group_share_the_ranks() -> None:
    """Kueue's LeaderWorkerSet case: the smaller pod set (the leader, worker index 0)
    holds rank 0, the workers (indexes 1..4) ranks 0..3 of their own assignment."""
    ranges = rank_ranges([("workers", 4, "lws"), ("leader", 1, "lws")])
    assert ranges == {"leader": RankRange(0, 1), "workers": RankRange(1, 5)}
    workers = [gated(WORKER, i) for i in (1, 2, 3, 4)]
    a = assignment((R11, 1), (R12, 1), (R21, 2))
    release = releases(a, workers, RankLabels(WORKER), 4, ranges["workers"])
    assert where(release, workers, WORKER) == {"1": R11, "2": R12, "3": R21, "4": R21}
    leader = [gated(WORKER, 0)]
    release = releases(assignment((R11, 1)), leader, RankLabels(WORKER), 1, ranges["leader"])
    assert where(release, leader, WORKER) == {"0": R11}


def test_rank_ranges_of_pod_sets_alone_ties_and_large_groups() -> None:
    assert rank_ranges([("a", 3, None), ("b", 2, None)]) == {
        "a": RankRange(0, 3),
        "b": RankRange(0, 2),
    }
    # equal counts: the first listed holds the first ranks
    assert rank_ranges([("x", 2, "g"), ("y", 2, "g")]) == {
        "x": RankRange(0, 2),
        "y": RankRange(2, 4),
    }
    # Kueue ranges only the first two sets of a group; a third reads no rank
    ranges = rank_ranges([("x", 1, "g"), ("y", 2, "g"), ("z", 2, "g")])
    assert "z" not in ranges and ranges["y"] == RankRange(1, 3)


def test_workers_counting_from_zero_in_a_group_fall_back_to_the_greedy_fill() -> None:
    """Kueue: "ranks: gracefully handle situation with ranks going below 0"."""
    workers = [gated(WORKER, i) for i in range(4)]
    a = assignment((R11, 1), (R12, 1), (R21, 2))
    release = releases(a, workers, RankLabels(WORKER), 4, RankRange(1, 5))
    assert not release.by_rank and release.fallback == "rank -1 is below 0"
    assert counts(release) == {R11: 1, R12: 1, R21: 2}


def test_repeated_ranks_fall_back_to_the_greedy_fill() -> None:
    pods = [gated(COMPLETION, i) for i in (0, 1, 0, 1)]
    a = assignment((R11, 2), (R12, 1), (R21, 1))
    release = releases(a, pods, JOB, 4, RankRange(0, 4))
    assert release.fallback == "two pods of rank 0"
    assert counts(release) == {R11: 2, R12: 1, R21: 1}


def test_an_index_beyond_the_count_falls_back_to_the_greedy_fill() -> None:
    """Kueue: "parallelism < completions": count 1, index 0 failed (not given), index 1
    gated: its index is not below the bound, the greedy fill releases it."""
    pods = [gated(COMPLETION, 1)]
    release = releases(assignment((R11, 1)), pods, JOB, 1, RankRange(0, 1))
    assert release.fallback == f"label {COMPLETION}='1' is not below 1"
    assert release.pods == ((0, R11),)


def test_a_missing_or_malformed_label_falls_back_to_the_greedy_fill() -> None:
    a = assignment((R11, 2))
    for bad in (None, "-1", "+1", "1.0", "", "٣"):
        pods = [gated(COMPLETION, 0), gated(COMPLETION, bad)]
        release = releases(a, pods, JOB, 2, RankRange(0, 2))
        assert not release.by_rank and release.fallback is not None, bad
        assert counts(release) == {R11: 2}


def test_an_assignment_shorter_than_the_count_falls_back_to_the_greedy_fill() -> None:
    """Kueue: a slice size that does not divide the count leaves ranks without a place."""
    pods = [gated(COMPLETION, 1)]
    release = releases(assignment((R11, 1)), pods, JOB, 2, RankRange(0, 2))
    assert release.fallback == "rank 1 has no place among 1"
    assert release.pods == ((0, R11),)


def test_a_released_pod_outside_its_ranks_domain_falls_back_to_the_greedy_fill() -> None:
    """Released greedily before (say by an earlier quotagate), index 0 sits in the second
    domain: the ranks cannot be honoured, so the rest fill what each domain lacks."""
    pods = [released(COMPLETION, 0, R12), gated(COMPLETION, 1), gated(COMPLETION, 2)]
    release = releases(assignment((R11, 2), (R12, 1)), pods, JOB, 3, RankRange(0, 3))
    assert release.fallback == "the released pod of rank 0 is in another domain"
    assert counts(release) == {R11: 2}


def test_a_jobset_ranks_by_job_index_then_completion_index() -> None:
    """Kueue's JobSet case: 2 Jobs of 2 pods, rank = job index × 2 + completion index;
    only some pods observed so far still go by rank."""
    labels = RankLabels(COMPLETION, JOB_INDEX, 2)

    def pod(job: int, index: int) -> PodFacts:
        return PodFacts({COMPLETION: str(index), JOB_INDEX: str(job)}, True, ("", ""))

    pods = [pod(1, 1), pod(0, 0), pod(1, 0), pod(0, 1)]
    a = assignment((R11, 1), (R12, 2), (R21, 1))
    release = releases(a, pods, labels, 4, RankRange(0, 4))
    assert [
        (pods[p].labels[JOB_INDEX], pods[p].labels[COMPLETION], d) for p, d in release.pods
    ] == [
        ("0", "0", R11),
        ("0", "1", R12),
        ("1", "0", R12),
        ("1", "1", R21),
    ]
    partial = [pod(1, 1)]
    assert releases(a, partial, labels, 4, RankRange(0, 4)).pods == ((0, R21),)
    # an index past one Job's size, a job index past the count, no sub-group count
    assert releases(a, [pod(0, 2)], labels, 4, RankRange(0, 4)).fallback is not None
    assert releases(a, [pod(2, 0)], labels, 4, RankRange(0, 4)).fallback is not None
    no_count = RankLabels(COMPLETION, JOB_INDEX, None)
    zero = RankLabels(COMPLETION, JOB_INDEX, 0)
    for bad in (no_count, zero):
        release = releases(a, [pod(0, 0)], bad, 4, RankRange(0, 4))
        assert release.fallback is not None and "subGroupCount" in release.fallback


def test_an_offset_shifts_the_ranks() -> None:
    """An MPIJob's workers after a launcher, `kueue.x-k8s.io/pod-index-offset: "1"`:
    replica indexes 1..3 are ranks 0..2."""
    pods = [gated(COMPLETION, i) for i in (3, 1, 2)]
    a = assignment((R11, 1), (R12, 1), (R21, 1))
    release = releases(a, pods, JOB, 3, RankRange(1, 4))
    assert where(release, pods, COMPLETION) == {"1": R11, "2": R12, "3": R21}
    assert parse_offset("1") == 1 and parse_offset("+2") == 2 and parse_offset("-1") == -1
    for bad in ("invalid", "", "1.5", " 1"):
        with pytest.raises(ValueError, match="not an integer"):
            parse_offset(bad)


def test_a_pod_whose_rank_falls_in_an_unusable_domain_stays_gated() -> None:
    """A failed node awaiting its replacement: its ranks wait gated, the others go."""
    pods = [gated(COMPLETION, i) for i in range(3)]
    a = assignment((R11, 2), (R12, 1))
    release = releases(a, pods, JOB, 3, RankRange(0, 3), usable=lambda d: d != R11)
    assert where(release, pods, COMPLETION) == {"2": R12}


def test_without_a_pod_index_label_the_domains_fill_in_order() -> None:
    pods = [gated(None, None) for _ in range(3)]
    release = releases(assignment((R11, 2), (R12, 2)), pods, None, 4, RankRange(0, 4))
    assert release == Release(((0, R11), (1, R11), (2, R12)), by_rank=False)


def test_read_ranks_maps_each_rank_to_its_pod() -> None:
    pods = [gated(COMPLETION, 2), gated(COMPLETION, 0)]
    assert read_ranks(pods, JOB, 3, RankRange(0, 3)) == {2: 0, 0: 1}


# --- properties -----------------------------------------------------------------------------

domain_counts = st.lists(st.integers(1, 4), min_size=1, max_size=6)


@given(domain_counts, st.randoms(use_true_random=False), st.integers(0, 3))
def test_every_rank_present_fills_each_domain_with_consecutive_ranks(
    sizes: list[int], rng: Random, offset: int
) -> None:
    """All ranks present and gated, in any order: each domain gets exactly its count, and
    the ranks of each domain are consecutive, in the assignment's order (rank r in the
    domain of the r-th place)."""
    domains = [((f"b{i}", f"r{i}"), n) for i, n in enumerate(sizes)]
    a = assignment(*domains)
    total = a.pod_count
    pods = [gated(COMPLETION, rank + offset) for rank in range(total)]
    rng.shuffle(pods)
    release = releases(a, pods, JOB, total, RankRange(offset, total + offset))
    assert release.by_rank
    assert counts(release) == {values: n for values, n in domains}
    ranks_in: dict[DomainID, list[int]] = {}
    for position, values in release.pods:
        ranks_in.setdefault(values, []).append(int(pods[position].labels[COMPLETION]) - offset)
    start = 0
    for values, n in domains:
        assert sorted(ranks_in[values]) == list(range(start, start + n))
        start += n


@given(domain_counts, st.data())
def test_some_pods_released_by_rank_the_rest_follow_their_ranks(
    sizes: list[int], data: st.DataObject
) -> None:
    """Pods released where their ranks say, others gated, some not created yet: every gated
    pod goes to its rank's place and no domain gets more than its count."""
    a = assignment(*[((f"b{i}", f"r{i}"), n) for i, n in enumerate(sizes)])
    places = domain_of_rank(a)
    states = data.draw(st.lists(st.sampled_from("grx"), min_size=len(places), max_size=len(places)))
    pods = [
        gated(COMPLETION, r) if s == "g" else released(COMPLETION, r, places[r])
        for r, s in enumerate(states)
        if s != "x"
    ]
    release = releases(a, pods, JOB, len(places), RankRange(0, len(places)))
    assert release.by_rank
    assert {position for position, _ in release.pods} == {i for i, p in enumerate(pods) if p.gated}
    for position, values in release.pods:
        assert values == places[int(pods[position].labels[COMPLETION])]
    filled = counts(release) + Counter(p.domain for p in pods if not p.gated)
    assert all(filled[values] <= n for values, n in a.domains)


@given(domain_counts, st.data())
def test_the_greedy_fill_never_overfills_and_releases_what_it_can(
    sizes: list[int], data: st.DataObject
) -> None:
    """Pods with no usable ranks (any labels at all): no domain gets more than its count
    minus the pods released there, and the released total is what the gated pods and the
    room allow."""
    a = assignment(*[((f"b{i}", f"r{i}"), n) for i, n in enumerate(sizes)])
    domains = [values for values, _ in a.domains]
    pods = data.draw(
        st.lists(
            st.one_of(
                st.builds(gated, st.just(COMPLETION), st.integers(0, 30) | st.none()),
                st.builds(
                    released, st.just(COMPLETION), st.integers(0, 30), st.sampled_from(domains)
                ),
            ),
            max_size=a.pod_count + 3,
        )
    )
    release = releases(a, pods, None, a.pod_count, RankRange(0, a.pod_count))
    placed = Counter(p.domain for p in pods if not p.gated)
    got = counts(release)
    lacking = 0
    for values, n in a.domains:
        assert got[values] <= max(n - placed[values], 0)
        lacking += max(n - placed[values], 0)
    assert len(release.pods) == min(lacking, sum(p.gated for p in pods))
    assert all(pods[position].gated for position, _ in release.pods)
