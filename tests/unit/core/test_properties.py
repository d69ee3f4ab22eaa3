"""Invariants over random cohorts, quotas and Workload streams (hypothesis).

- A ClusterQueue never reserves more than nominal + borrowingLimit (nominal alone without
  a cohort), and usage always equals the sum of its admitted Workloads.
- A cohort never lends more than its members' lending limits allow:
  Σ max(0, usage − private) ≤ Σ (nominal − private), private = nominal − lendingLimit.
- Admitting then releasing everything returns every counter to exactly zero.
- With preemption, reserved usage fits now and once every nominated preemptor has
  replaced its victims, and the quota tree counts at least the larger of the two.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from hypothesis import given, settings
from hypothesis import strategies as st

from api.constants import QueueingStrategy
from controller.core.after_admission import may_come_due
from controller.core.cache.records import Phase
from controller.core.model.clusterqueues import (
    PreemptionPolicy,
    ReclaimWithinCohortPolicy,
    WithinClusterQueuePolicy,
)
from controller.core.model.workloads import ConditionState, PodSet
from controller.core.scheduler.cycle import run_cycle
from controller.core.scheduler.preemption import settle_action
from controller.core.state import ClusterState
from tests.unit.core.builders import cluster, cq, quota, wl

FLAVORS = ("f1", "f2")


@dataclass(frozen=True)
class Spec:
    name: str
    cohort: str | None
    quotas: dict[str, tuple[int, int | None, int | None]]  # flavor → (nominal, borrow, lend)
    strict: bool


@st.composite
def specs(draw: st.DrawFn) -> list[Spec]:
    out = []
    for i in range(draw(st.integers(1, 6))):
        cohort = draw(st.sampled_from([None, "c1", "c1", "c2"]))
        quotas = {}
        for flavor in draw(st.sampled_from([("f1",), ("f1", "f2"), ("f2", "f1")])):
            nominal = draw(st.integers(0, 10))
            borrow = draw(st.none() | st.integers(0, 10)) if cohort else None
            lend = draw(st.none() | st.integers(0, nominal)) if cohort else None
            quotas[flavor] = (nominal, borrow, lend)
        out.append(Spec(f"cq{i}", cohort, quotas, draw(st.booleans())))
    return out


ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(0, 5), st.integers(1, 5), st.integers(1, 2)),
        st.tuples(st.just("cycle"), st.just(0), st.just(0), st.just(0)),
        st.tuples(st.just("release"), st.integers(0, 50), st.just(0), st.just(0)),
    ),
    min_size=5,
    max_size=60,
)


def build(queues: list[Spec], preemption: PreemptionPolicy | None = None) -> ClusterState:
    return cluster(
        *(
            cq(
                s.name,
                {f: {"cpu": quota(*q)} for f, q in s.quotas.items()},
                cohort=s.cohort,
                strategy=QueueingStrategy.STRICT_FIFO
                if s.strict
                else QueueingStrategy.BEST_EFFORT_FIFO,
                preemption=preemption,
            )
            for s in queues
        ),
        flavors=FLAVORS,
    )


Usage = dict[str, dict[str, int]]  # queue → flavor → milli-CPU


def _private(s: Spec, flavor: str) -> int:
    """The milli-CPU of `flavor` the queue never lends (nominal − lendingLimit, or 0)."""
    nominal, _, lend = s.quotas[flavor]
    return (nominal - lend) * 1000 if lend is not None else 0


def cohort_taken(queues: list[Spec], usage: Usage) -> dict[tuple[str, str], int]:
    """Per (cohort, flavor) a member has quota of: Σ max(0, used − private)."""
    taken: dict[tuple[str, str], int] = {}
    for s in queues:
        if s.cohort is None:
            continue
        for flavor in s.quotas:
            used = usage.get(s.name, {}).get(flavor, 0)
            key = (s.cohort, flavor)
            taken[key] = taken.get(key, 0) + max(0, used - _private(s, flavor))
    return taken


def assert_within_limits(queues: list[Spec], usage: Usage) -> None:
    """Per-queue usage is within every queue's and cohort's limits, computed from the specs
    alone (not from the quota tree)."""
    lendable: dict[tuple[str, str], int] = {}
    for s in queues:
        for flavor in FLAVORS:
            used = usage.get(s.name, {}).get(flavor, 0)
            if flavor not in s.quotas:
                assert used == 0, (s.name, flavor)
                continue
            nominal, borrow, _ = s.quotas[flavor]
            if s.cohort is None:
                assert used <= nominal * 1000, (s.name, flavor)
                continue
            if borrow is not None:
                assert used <= (nominal + borrow) * 1000, (s.name, flavor)
            key = (s.cohort, flavor)
            lendable[key] = lendable.get(key, 0) + nominal * 1000 - _private(s, flavor)
    for key, taken in cohort_taken(queues, usage).items():
        assert taken <= lendable[key], (key, taken, lendable[key])


def usage_by_queue(state: ClusterState, *, after_evictions: bool = False) -> Usage:
    """Reserved usage per queue and flavor, now (`after_evictions=False`) or once every
    nominated preemptor's victims are gone and it is admitted in their place."""
    leaving = {
        victim.workload_key
        for nomination in state.holds.nominated.values()
        for victim in nomination.victims
    }
    out: Usage = {}

    def charge(queue: str, usage: Mapping[tuple[str, str], int]) -> None:
        bucket = out.setdefault(queue, {})
        for (flavor, _), value in usage.items():
            bucket[flavor] = bucket.get(flavor, 0) + value

    for key, held in state.cache.admitted.items():
        if not (after_evictions and key in leaving):
            charge(held.cluster_queue, held.usage or {})
    if after_evictions:
        for nomination in state.holds.nominated.values():
            charge(nomination.admit.cluster_queue, nomination.usage)
    return out


def check_invariants(state: ClusterState, queues: list[Spec]) -> None:
    usage = usage_by_queue(state)
    for s in queues:
        for flavor in FLAVORS:
            assert state.cache.quota.usage(s.name, (flavor, "cpu")) == usage.get(s.name, {}).get(
                flavor, 0
            )
    assert_within_limits(queues, usage)
    for (cohort, flavor), taken in cohort_taken(queues, usage).items():
        assert state.cache.quota.cohort_usage(cohort, (flavor, "cpu")) == taken


def play(
    state: ClusterState,
    queues: list[Spec],
    steps: list[tuple[str, int, int, int]],
    released: Callable[[int], str],
    check: Callable[[], None],
) -> None:
    """Apply a random stream: add a Workload, run a cycle, or release the Workload that
    `released(a)` names (requeued when `a` is odd); `check()` after every step."""
    serial = 0
    for op, a, b, c in steps:
        if op == "add":
            serial += 1
            target = queues[a % len(queues)].name
            state.upsert_workload(
                wl(f"w{serial}", target, cpu=b, count=c, created=serial, priority=a)
            )
        elif op == "cycle":
            run_cycle(state, float(serial))
        elif state.cache.admitted:
            state.release(released(a), requeue=bool(a % 2))
        check()


def release_all_to_zero(state: ClusterState, queues: list[Spec]) -> None:
    """Release everything admitted; every queue's and cohort's counter is exactly zero."""
    for key in sorted(state.cache.admitted):
        state.release(key, requeue=False)
    for s in queues:
        assert state.cache.quota.usage_of(s.name) == {}
    for cohort in ("c1", "c2"):
        for flavor in FLAVORS:
            assert state.cache.quota.cohort_usage(cohort, (flavor, "cpu")) == 0


@settings(max_examples=400, deadline=None)
@given(specs(), ops)
def test_quota_invariants_hold_over_random_streams(
    queues: list[Spec], steps: list[tuple[str, int, int, int]]
) -> None:
    state = build(queues)
    play(
        state,
        queues,
        steps,
        lambda a: sorted(state.cache.admitted)[a % len(state.cache.admitted)],
        lambda: check_invariants(state, queues),
    )

    for _ in range(50):
        if not run_cycle(state, 1e9).changed:
            break
        check_invariants(state, queues)
    release_all_to_zero(state, queues)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 4000), st.integers(1, 4)), max_size=12))
def test_admit_then_release_returns_usage_to_exactly_zero(
    requests: list[tuple[int, int, int]],
) -> None:
    state = build(
        [
            Spec("cq0", "c", {"f1": (5, None, None), "f2": (7, 2, 3)}, False),
            Spec("cq1", "c", {"f2": (4, None, 1), "f1": (3, 0, None)}, False),
        ]
    )
    for i, (target, milli, count) in enumerate(requests):
        sets = [PodSet("main", count, {"cpu": milli}), PodSet("extra", 1, {"cpu": 1 + milli // 3})]
        state.upsert_workload(wl(f"w{i}", f"cq{target % 2}", pod_sets=sets, created=i))
    while run_cycle(state, 0).changed:
        pass
    for key in list(state.cache.admitted):
        state.release(key, requeue=False)
    for name in ("cq0", "cq1"):
        assert state.cache.quota.usage_of(name) == {}
    assert all(state.cache.quota.cohort_usage("c", (f, "cpu")) == 0 for f in FLAVORS)


def check_held(state: ClusterState, queues: list[Spec]) -> None:
    """With nominated preemptors: reserved usage fits every limit now and once every
    preemptor has replaced its victims, the quota tree counts at least the larger of the
    two per queue and per cohort, and settling looks at every nomination that could
    change."""
    marked = state.holds.nominations_to_settle()
    for key in state.holds.nominated:  # settling looks only where something changed
        assert key in marked or settle_action(state, key) is None, key
    now = usage_by_queue(state)
    later = usage_by_queue(state, after_evictions=True)
    assert_within_limits(queues, now)
    assert_within_limits(queues, later)
    for s in queues:
        for flavor in FLAVORS:
            counted = state.cache.quota.usage(s.name, (flavor, "cpu"))
            assert counted >= now.get(s.name, {}).get(flavor, 0)
            assert counted >= later.get(s.name, {}).get(flavor, 0)
    taken_now, taken_later = cohort_taken(queues, now), cohort_taken(queues, later)
    for cohort in ("c1", "c2"):
        for flavor in FLAVORS:
            key = (cohort, flavor)
            counted = state.cache.quota.cohort_usage(cohort, (flavor, "cpu"))
            assert counted >= max(taken_now.get(key, 0), taken_later.get(key, 0)), key


PREEMPTING = PreemptionPolicy(
    within_cluster_queue=WithinClusterQueuePolicy.LOWER_PRIORITY,
    reclaim_within_cohort=ReclaimWithinCohortPolicy.ANY,
)


@st.composite
def lending_cohort(draw: st.DrawFn) -> list[Spec]:
    """Queues that all lend everything to one cohort: where reclamation happens most."""
    return [
        Spec(f"cq{i}", "c1", {"f1": (draw(st.integers(0, 6)), None, None)}, False)
        for i in range(draw(st.integers(2, 4)))
    ]


@settings(max_examples=300, deadline=None)
@given(specs() | lending_cohort(), ops, st.lists(st.integers(0, 50), min_size=5, max_size=60))
def test_preemption_never_overcommits_while_victims_leave(
    queues: list[Spec], steps: list[tuple[str, int, int, int]], leaves: list[int]
) -> None:
    """With preemption on, at every step: the reserved usage fits every limit; so does the
    usage once every nominated preemptor has replaced its victims; and the quota tree
    counts, per queue and per cohort, at least the larger of the two (a held preemptor and
    its victims are not counted twice, and never less than either)."""
    state = build(queues, PREEMPTING)
    leave = iter(leaves)

    def check() -> None:
        check_held(state, queues)

    def leaving(a: int) -> str:
        # The job side: a victim acknowledges its eviction, or something finishes.
        evicting = sorted(k for k, held in state.cache.admitted.items() if held.evicting)
        keys = evicting or sorted(state.cache.admitted)
        return keys[(a + next(leave, 0)) % len(keys)]

    play(state, queues, steps, leaving, check)

    for _ in range(100):
        for key in sorted(k for k, held in state.cache.admitted.items() if held.evicting):
            state.release(key, requeue=False)
        changed = run_cycle(state, 1e9).changed
        check()
        if not changed and not state.holds.nominated:
            break
    release_all_to_zero(state, queues)


@settings(max_examples=300, deadline=None)
@given(
    specs() | lending_cohort(),
    st.lists(st.tuples(st.integers(0, 5), st.integers(2, 8)), min_size=1, max_size=6),
    st.lists(
        st.tuples(st.sampled_from(["add", "add", "cycle", "cycle", "leave"]), st.integers(0, 50)),
        min_size=5,
        max_size=50,
    ),
)
def test_preemptors_waiting_for_the_same_leaving_victims_never_overcommit(
    queues: list[Spec], bigs: list[tuple[int, int]], steps: list[tuple[str, int]]
) -> None:
    """Large low-priority Workloads fill the quota; small high-priority ones arrive and
    preempt while the victims take their time to leave, so later preemptors wait for
    victims already leaving for earlier ones (sharing what those free). At every step the
    held usage is counted as `check_held` requires, and once every victim has left, every
    preemptor is admitted or pending again within every limit."""
    state = build(queues, PREEMPTING)
    for i, (target, size) in enumerate(bigs):
        state.upsert_workload(
            wl(f"big{i}", queues[target % len(queues)].name, cpu=size, created=i, priority=0)
        )
    while run_cycle(state, 0.0).changed:
        pass
    for serial, (op, a) in enumerate(steps, start=1):
        if op == "add":
            target = queues[a % len(queues)].name
            state.upsert_workload(
                wl(f"p{serial}", target, cpu=1 + a % 3, created=100 + serial, priority=10 + a % 3)
            )
        elif op == "cycle":
            run_cycle(state, float(serial))
        else:
            evicting = sorted(k for k, held in state.cache.admitted.items() if held.evicting)
            if evicting:
                state.release(evicting[a % len(evicting)], requeue=True)
        check_held(state, queues)
    for _ in range(100):
        for key in sorted(k for k, held in state.cache.admitted.items() if held.evicting):
            state.release(key, requeue=False)
        changed = run_cycle(state, 1e9).changed
        check_held(state, queues)
        if not changed and not state.holds.nominated:
            break
    assert not state.holds.nominated
    assert_within_limits(queues, usage_by_queue(state))


finish_ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(0, 5), st.integers(1, 5)),
        st.tuples(st.just("cycle"), st.just(0), st.just(0)),
        st.tuples(st.just("release"), st.integers(0, 50), st.integers(0, 1)),
        st.tuples(st.just("finish"), st.integers(0, 50), st.integers(0, 1)),
        st.tuples(st.just("unfinish"), st.integers(0, 50), st.just(0)),
        st.tuples(st.just("remove"), st.integers(0, 50), st.just(0)),
        st.tuples(st.just("active"), st.integers(0, 50), st.integers(0, 1)),
        st.tuples(st.just("backoff"), st.integers(0, 50), st.integers(0, 2)),
    ),
    min_size=5,
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(specs(), finish_ops)
def test_live_and_finished_counts_match_a_recount(
    queues: list[Spec], steps: list[tuple[str, int, int]]
) -> None:
    """`state.index.live`, `live_in`, `deactivated` and `finished_in` (kept as Workloads come,
    go, finish, are released, deactivated, reactivated and backed off) always equal a pass
    over every record: the unfinished Workloads with their LocalQueue, their number per
    LocalQueue, the unfinished deactivated ones, and the finished ones per ClusterQueue of
    their admission; every Workload holding quota is among the unfinished, and `timed`
    holds every unfinished one the after-admission timers may have something due for."""
    state = build(queues)
    serial = 0
    for op, a, b in steps:
        keys = sorted(state.cache.records)
        pick = keys[a % len(keys)] if keys else None
        if op == "add":
            serial += 1
            target = queues[a % len(queues)].name
            state.upsert_workload(wl(f"w{serial}", target, cpu=b, created=serial))
        elif op == "cycle":
            run_cycle(state, float(serial))
        elif op == "release" and pick is not None and pick in state.cache.admitted:
            state.release(pick, requeue=bool(b))
        elif op == "finish" and pick is not None:
            # The API's Finished Workload, with its admission kept (b=1) or without.
            record = state.cache.records[pick]
            admission = record.admission if b else None
            state.upsert_workload(replace(record.workload, finished=True, admission=admission))
        elif op == "unfinish" and pick is not None:
            state.upsert_workload(replace(state.cache.records[pick].workload, finished=False))
        elif op == "remove" and pick is not None:
            state.remove_workload(pick)
        elif op == "active" and pick is not None:
            state.upsert_workload(replace(state.cache.records[pick].workload, active=bool(b)))
        elif op == "backoff" and pick is not None:
            # A PodsReadyTimeout backoff begun (b=0), its end marked (b=1), or a requeueAt
            # alone (b=2), as the API's Workload says.
            requeued = ConditionState(b == 1, "PodsReadyTimeout" if b == 0 else "BackoffFinished")
            state.upsert_workload(
                replace(
                    state.cache.records[pick].workload,
                    requeued=None if b == 2 else requeued,
                    requeue_at=None if b == 1 else float(serial + 60),
                )
            )
        finished: dict[str, int] = {}
        for record in state.cache.records.values():
            workload = record.workload
            if workload.finished and workload.admission is not None:
                name = workload.admission.cluster_queue
                finished[name] = finished.get(name, 0) + 1
        live = {k: r.workload for k, r in state.cache.records.items() if not r.workload.finished}
        assert state.index.live == {k: f"{w.namespace}/{w.queue_name}" for k, w in live.items()}
        assert set(state.index.held_back) == {k for k, w in live.items() if w.held_back}
        per_local_queue: dict[str, int] = {}
        for local_queue in state.index.live.values():
            per_local_queue[local_queue] = per_local_queue.get(local_queue, 0) + 1
        assert state.index.live_in == per_local_queue
        assert state.index.finished_in == finished
        assert set(state.cache.holding()) <= set(state.index.live)
        assert {k for k, w in live.items() if may_come_due(w)} <= set(state.index.timed)
        assert set(state.index.timed) <= set(state.index.live)
        assert set(state.pending()) == {
            k for k, r in state.cache.records.items() if r.phase in (Phase.QUEUED, Phase.NOMINATED)
        }
