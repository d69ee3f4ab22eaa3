"""Fair sharing over random trees (hypothesis): with the tournament and fair preemption
on, quota is never over-committed anywhere in the tree — now, and once every nominated
preemptor has replaced its victims — and every queue and cohort counts at least the
larger of the two, through random streams of arrivals, cycles,
completions and acknowledged evictions; a non-preemptible Workload is never a victim and
never borrows; releasing everything returns every counter to zero.

Limits are checked against `Model`, the from-scratch rendering of Kueue's resource-node
recursion in test_cohort_tree.py, not against the quota tree under test."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from api.constants import Preemptibility
from controller.core.fairsharing.settings import ALLOWED_STRATEGIES, FairSharing
from controller.core.model.clusterqueues import ResourceQuota
from controller.core.model.cohorts import Cohort
from controller.core.scheduler.cycle import run_cycle
from controller.core.state import ClusterState
from tests.unit.core.builders import cluster, cq, group, wl
from tests.unit.core.cache.test_cohort_tree import Model
from tests.unit.core.fairsharing.test_preemption import FAIR
from tests.unit.core.test_properties import usage_by_queue

FR = ("default", "cpu")
COHORTS = ("a", "b", "c")
QUEUES = ("q1", "q2", "q3", "q4", "q5")

limits = st.none() | st.integers(0, 6)
queue_quota = st.builds(ResourceQuota, st.integers(0, 6), limits, st.none() | st.integers(0, 6))
queue_quota_lending_all = st.builds(ResourceQuota, st.integers(0, 6), limits)


@st.composite
def trees(draw: st.DrawFn, lending_limits: bool = True) -> tuple[ClusterState, Model]:
    """Five queues in up to three cohorts, with or without lending limits (without them,
    every queue and cohort lends everything: what a held preemptor and its victims in
    other queues both count is counted once, at their lowest common cohort)."""
    model = Model()
    queues = []
    for name in QUEUES:
        q = draw(queue_quota if lending_limits else queue_quota_lending_all)
        if q.lending_limit is not None and q.lending_limit > q.nominal:
            q = replace(q, lending_limit=q.nominal)
        cohort = draw(st.sampled_from(COHORTS))
        model.quota[name] = ResourceQuota(
            q.nominal * 1000,
            *(None if v is None else v * 1000 for v in (q.borrowing_limit, q.lending_limit)),
        )
        model.cohort_of[name] = cohort
        queues.append(
            replace(
                cq(
                    name,
                    {"default": {"cpu": (q.nominal, q.borrowing_limit, q.lending_limit)}},
                    cohort=cohort,
                    preemption=FAIR,
                ),
                fair_weight=Fraction(draw(st.sampled_from(["0", "1", "1", "2", "0.5"]))),
            )
        )
    state = cluster(*queues)
    state.fair_sharing = FairSharing(draw(st.sampled_from(ALLOWED_STRATEGIES)))
    for i, name in enumerate(COHORTS):  # a parent comes later in COHORTS: no cycles here
        above = COHORTS[i + 1 :]
        parent = draw(st.none() | st.sampled_from(above)) if above else None
        own = draw(st.integers(0, 4))
        borrow = draw(limits) if parent else None
        lend = draw(st.none() | st.integers(0, 4)) if parent and lending_limits else None
        quota = ResourceQuota(own, borrow, lend)
        state.set_cohort(
            Cohort(
                name,
                parent,
                (group({"default": {"cpu": (own, borrow, lend)}}),),
                Fraction(draw(st.sampled_from(["0", "1", "3"]))),
            )
        )
        model.parent[name] = parent
        model.cohort_quota[name] = ResourceQuota(
            quota.nominal * 1000, *(None if v is None else v * 1000 for v in (borrow, lend))
        )
    return state, model


def assert_not_over_committed(model: Model, usage: dict[str, int]) -> None:
    model.usage = usage
    for name in QUEUES:
        q = model.quota[name]
        if q.borrowing_limit is not None:
            assert usage.get(name, 0) <= q.nominal + q.borrowing_limit, name
    for cohort in model.cohorts():
        parent = model.effective_parent(cohort)
        if parent is None:
            assert model.used(cohort) <= model.subtree(cohort), cohort
            continue
        limit = model.cohort_quota.get(cohort, ResourceQuota(0)).borrowing_limit
        if limit is not None:
            assert model.used(cohort) <= model.subtree(cohort) + limit, cohort


add = st.tuples(
    st.just("add"), st.sampled_from(QUEUES), st.integers(1, 4), st.integers(0, 3), st.booleans()
)
cycle = st.tuples(st.just("cycle"), st.just(""), st.just(0), st.just(0), st.just(False))
leave = st.tuples(st.just("leave"), st.just(""), st.integers(0, 40), st.just(0), st.just(False))
steps = st.lists(st.one_of(add, add, add, cycle, cycle, leave), min_size=30, max_size=80)


@settings(max_examples=250, deadline=None)
@given(trees() | trees(lending_limits=False), steps)
def test_fair_sharing_never_over_commits_a_tree(
    scene: tuple[ClusterState, Model], ops: list[tuple[str, str, int, int, bool]]
) -> None:
    state, model = scene
    non_preemptible: set[str] = set()

    def check() -> None:
        now = {q: u.get("default", 0) for q, u in usage_by_queue(state).items()}
        later = {
            q: u.get("default", 0) for q, u in usage_by_queue(state, after_evictions=True).items()
        }
        for name in QUEUES:
            assert state.cache.quota.usage(name, FR) >= max(now.get(name, 0), later.get(name, 0))
        assert_not_over_committed(model, now)
        used_now = {cohort: model.used(cohort) for cohort in model.cohorts()}
        assert_not_over_committed(model, later)
        for cohort in model.cohorts():  # the held capacity: counted once, never less
            counted = state.cache.quota.cohort_usage(cohort, FR)
            assert counted >= max(used_now[cohort], model.used(cohort)), cohort
        for nomination in state.holds.nominated.values():
            assert not non_preemptible & {v.workload_key for v in nomination.victims}

    serial = 0
    for op, queue, a, b, flag in ops:
        if op == "add":
            serial += 1
            workload = wl(f"w{serial}", queue, cpu=a, priority=b, created=float(serial))
            if flag and b == 0:
                workload = replace(workload, preemptibility="non-preemptible")
                non_preemptible.add(workload.key)
            state.upsert_workload(workload)
        elif op == "cycle":
            admitted = run_cycle(state, float(serial)).admitted
            usage = {q: u.get("default", 0) for q, u in usage_by_queue(state).items()}
            for i, admit in enumerate(admitted):
                if admit.workload_key not in non_preemptible:
                    continue
                # The queue's usage when it was admitted: what it holds now, less what was
                # admitted after it in this cycle. It never borrows.
                queue = admit.cluster_queue
                later = sum(
                    a.usage().get(FR, 0) for a in admitted[i + 1 :] if a.cluster_queue == queue
                )
                assert usage.get(queue, 0) - later <= state.cache.quota.quota(queue, FR).nominal
        elif state.cache.admitted:
            evicting = sorted(k for k, h in state.cache.admitted.items() if h.evicting)
            keys = evicting or sorted(state.cache.admitted)
            state.release(keys[a % len(keys)], requeue=bool(evicting))
        check()
    for key in non_preemptible:
        assert state.cache.resolution(key).value is Preemptibility.NON_PREEMPTIBLE
    for _ in range(60):
        for key in sorted(k for k, h in state.cache.admitted.items() if h.evicting):
            state.release(key, requeue=False)
        changed = run_cycle(state, 1e9).changed
        check()
        if not changed and not state.holds.nominated:
            break
    for key in sorted(state.cache.admitted):
        state.release(key, requeue=False)
    for name in QUEUES:
        assert state.cache.quota.usage_of(name) == {}
    for cohort in COHORTS:
        assert state.cache.quota.cohort_usage(cohort, FR) == 0
