"""Preemption candidate ordering (Kueue CandidatesOrdering + KEP-7990 cost)."""

from __future__ import annotations

import random
from dataclasses import replace
from itertools import pairwise

from hypothesis import given
from hypothesis import strategies as st

from api.quantities import Quantity
from controller.core.preemption.ordering import Candidate, candidate_sort_key, order_candidates

OWN = "team-a"
OTHER = "team-b"


def cand(
    uid: str,
    *,
    cq: str = OWN,
    priority: int = 0,
    cost: str | None = None,
    pods: int = 1,
    reserved_at: float | None = 100.0,
    evicted: bool = False,
) -> Candidate:
    return Candidate(
        key=f"ns/{uid}",
        uid=uid,
        cluster_queue=cq,
        priority=priority,
        preemption_cost=None if cost is None else Quantity.parse(cost),
        pod_count=pods,
        quota_reserved_at=reserved_at,
        evicted=evicted,
    )


def uids(candidates: list[Candidate]) -> list[str]:
    return [c.uid for c in order_candidates(candidates, OWN)]


# --- each tiebreak on its own --------------------------------------------------------------


def test_evicted_first() -> None:
    a = cand("a", cq=OTHER, priority=-10)
    b = cand("b", priority=100, evicted=True)
    assert uids([a, b]) == ["b", "a"]


def test_other_cluster_queue_before_own() -> None:
    a = cand("a", cq=OWN, priority=-10)
    b = cand("b", cq=OTHER, priority=100)
    assert uids([a, b]) == ["b", "a"]


def test_lower_priority_first() -> None:
    assert uids([cand("a", priority=5), cand("b", priority=1), cand("c", priority=3)]) == [
        "b",
        "c",
        "a",
    ]


def test_equal_priority_lower_cost_first() -> None:
    a = cand("a", priority=1, cost="250")
    b = cand("b", priority=1, cost="10")
    assert uids([a, b]) == ["b", "a"]


def test_cost_never_overrides_priority() -> None:
    cheap_high = cand("a", priority=2, cost="0")
    costly_low = cand("b", priority=1, cost="1M")
    assert uids([cheap_high, costly_low]) == ["b", "a"]


def test_unset_cost_equals_zero() -> None:
    unset = cand("b", cost=None, reserved_at=1.0)
    zero = cand("a", cost="0", reserved_at=1.0)
    assert candidate_sort_key(unset, OWN)[:6] == candidate_sort_key(zero, OWN)[:6]
    assert uids([unset, zero]) == ["a", "b"]  # decided by UID only
    assert uids([cand("c", cost="1m"), cand("d", cost=None)]) == ["d", "c"]


def test_cost_is_compared_exactly() -> None:
    assert uids([cand("a", cost="1001m"), cand("b", cost="1")]) == ["b", "a"]
    assert uids([cand("a", cost="1k"), cand("b", cost="999999m")]) == ["b", "a"]
    # Same value written differently is a tie; the UID decides.
    assert uids([cand("b", cost="1000m"), cand("a", cost="1")]) == ["a", "b"]


def test_single_pod_before_gang() -> None:
    gang = cand("a", pods=8, reserved_at=200.0)
    single = cand("b", pods=1, reserved_at=100.0)
    assert uids([gang, single]) == ["b", "a"]


def test_cost_before_pod_count() -> None:
    cheap_gang = cand("a", pods=8, cost="1")
    costly_single = cand("b", pods=1, cost="2")
    assert uids([costly_single, cheap_gang]) == ["a", "b"]


def test_more_recently_reserved_first() -> None:
    old, current, young = (
        cand("a", reserved_at=1.0),
        cand("b", reserved_at=5.0),
        cand("c", reserved_at=9.0),
    )
    assert uids([old, current, young]) == ["c", "b", "a"]


def test_no_reservation_time_counts_as_now() -> None:
    assert uids([cand("a", reserved_at=1e12), cand("b", reserved_at=None)]) == ["b", "a"]


def test_uid_breaks_the_last_tie() -> None:
    assert uids([cand("c"), cand("a"), cand("b")]) == ["a", "b", "c"]


def test_full_precedence_example() -> None:
    candidates = [
        cand("own-low", priority=0),
        cand("other-high", cq=OTHER, priority=9),
        cand("own-evicted", priority=9, evicted=True),
        cand("other-low-costly", cq=OTHER, priority=0, cost="5"),
        cand("other-low-cheap-gang", cq=OTHER, priority=0, cost="1", pods=4),
        cand("other-low-cheap", cq=OTHER, priority=0, cost="1"),
    ]
    assert uids(candidates) == [
        "own-evicted",
        "other-low-cheap",
        "other-low-cheap-gang",
        "other-low-costly",
        "other-high",
        "own-low",
    ]


# --- properties ----------------------------------------------------------------------------

costs = st.one_of(st.none(), st.integers(0, 10**9).map(lambda m: Quantity(m)))
candidates = st.builds(
    Candidate,
    key=st.just("ns/x"),
    uid=st.text("abcdef0123", min_size=1, max_size=6),
    cluster_queue=st.sampled_from([OWN, OTHER, "team-c"]),
    priority=st.integers(-5, 5),
    preemption_cost=costs,
    pod_count=st.integers(1, 4),
    quota_reserved_at=st.one_of(st.none(), st.floats(0, 1000, allow_nan=False)),
    evicted=st.booleans(),
)


def _same_class(a: Candidate, b: Candidate) -> bool:
    """Same evicted state and same side of the own/other ClusterQueue split."""
    return a.evicted == b.evicted and (a.cluster_queue == OWN) == (b.cluster_queue == OWN)


@given(candidates, candidates)
def test_property_lower_priority_first_regardless_of_cost(a: Candidate, b: Candidate) -> None:
    b = replace(b, evicted=a.evicted, cluster_queue=a.cluster_queue)
    if a.priority == b.priority:
        return
    low, high = (a, b) if a.priority < b.priority else (b, a)
    assert order_candidates([high, low], OWN) == [low, high]
    assert order_candidates([low, high], OWN) == [low, high]


@given(candidates, candidates)
def test_property_equal_priority_lower_cost_first(a: Candidate, b: Candidate) -> None:
    b = replace(b, evicted=a.evicted, cluster_queue=a.cluster_queue, priority=a.priority)
    cost_a = a.preemption_cost or Quantity(0)
    cost_b = b.preemption_cost or Quantity(0)
    if cost_a == cost_b:
        return
    cheap, costly = (a, b) if cost_a < cost_b else (b, a)
    assert order_candidates([costly, cheap], OWN)[0] is cheap


@given(st.lists(candidates, max_size=12, unique_by=lambda c: c.uid), st.randoms())
def test_property_total_order_independent_of_input_order(
    items: list[Candidate], rnd: random.Random
) -> None:
    expected = order_candidates(items, OWN)
    shuffled = list(items)
    rnd.shuffle(shuffled)
    assert order_candidates(shuffled, OWN) == expected
    keys = [candidate_sort_key(c, OWN) for c in expected]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)


@given(st.lists(candidates, max_size=12))
def test_property_classes_are_never_interleaved(items: list[Candidate]) -> None:
    ordered = order_candidates(items, OWN)
    ranks = [(not c.evicted, c.cluster_queue == OWN) for c in ordered]
    assert ranks == sorted(ranks)
    for first, second in pairwise(ordered):
        if _same_class(first, second):
            assert first.priority <= second.priority


# --- admission fair sharing: the LocalQueue step -------------------------------------------


def afs_uids(candidates: list[Candidate], usage: dict[str, float]) -> list[str]:
    """Order with admission fair sharing on for team-a and team-c (usage per LocalQueue),
    off for team-b."""

    def usage_of(c: Candidate) -> float | None:
        return usage[c.local_queue] if c.cluster_queue in (OWN, "team-c") else None

    return [c.uid for c in order_candidates(candidates, OWN, usage_of)]


def test_the_higher_usage_local_queue_goes_first_within_a_cluster_queue() -> None:
    busy = replace(cand("busy", priority=10), local_queue="ns/busy")
    idle = replace(cand("idle", priority=1), local_queue="ns/idle")
    assert uids([busy, idle]) == ["idle", "busy"]  # off: priority decides
    assert afs_uids([busy, idle], {"ns/busy": 8.0, "ns/idle": 2.0}) == ["busy", "idle"]
    # Equal usage (or one LocalQueue): priority, cost, recency and UID as before.
    assert afs_uids([busy, idle], {"ns/busy": 2.0, "ns/idle": 2.0}) == ["idle", "busy"]


def test_the_local_queue_step_never_crosses_cluster_queues_or_evicted_first() -> None:
    # Other ClusterQueues: team-c (fair) and team-b (not) interleave by priority as before;
    # within team-c, the busy LocalQueue's Workload takes the first place team-c holds.
    c_busy = replace(cand("c-busy", cq="team-c", priority=9), local_queue="ns/c-busy")
    c_idle = replace(cand("c-idle", cq="team-c", priority=1), local_queue="ns/c-idle")
    b_mid = replace(cand("b-mid", cq=OTHER, priority=5), local_queue="ns/b")
    own_busy = replace(cand("own-busy", priority=7), local_queue="ns/own-busy")
    own_idle = replace(cand("own-idle", priority=3), local_queue="ns/own-idle")
    gone = replace(cand("gone", cq="team-c", priority=50, evicted=True), local_queue="ns/c-idle")
    usage = {"ns/c-busy": 9.0, "ns/c-idle": 1.0, "ns/own-busy": 5.0, "ns/own-idle": 0.0}
    everything = [c_busy, c_idle, b_mid, own_busy, own_idle, gone]
    assert uids(everything) == ["gone", "c-idle", "b-mid", "c-busy", "own-idle", "own-busy"]
    assert afs_uids(everything, usage) == [
        "gone",
        "c-busy",
        "b-mid",
        "c-idle",
        "own-busy",
        "own-idle",
    ]
