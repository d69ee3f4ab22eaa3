"""One record per Workload (controller/core/cache/records.py): a Workload's phase through its
life, removal as one operation, and the state's indexes always agreeing with the records
(a hypothesis property over random event sequences)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.constants import WithinClusterQueuePolicy
from controller.core.cache.records import Phase
from controller.core.model.clusterqueues import PreemptionPolicy
from controller.core.model.workloads import WorkloadKey
from controller.core.scheduler.cycle import run_cycle
from controller.core.scheduler.preemption import settle_action
from controller.core.state import ClusterState
from tests.unit.core.builders import add, cluster, cq, settle, usage, wl

LOWER = PreemptionPolicy(within_cluster_queue=WithinClusterQueuePolicy.LOWER_PRIORITY)


def phase(state: ClusterState, key: str) -> Phase:
    return state.cache.records[WorkloadKey(key)].phase


def test_a_workload_goes_through_every_phase() -> None:
    state = cluster(cq("cq", {"default": {"cpu": "2"}}, preemption=LOWER))
    add(state, wl("low", cpu="2", priority=1))
    assert phase(state, "ns/low") is Phase.QUEUED
    settle(state)
    assert phase(state, "ns/low") is Phase.ADMITTED

    add(state, wl("high", cpu="2", priority=10, created=1))
    result = run_cycle(state, 0)
    assert [p.preemptor_key for p in result.preempting] == ["ns/high"]
    assert phase(state, "ns/high") is Phase.NOMINATED
    assert phase(state, "ns/low") is Phase.EVICTING
    assert state.cache.records[WorkloadKey("ns/low")].evicting

    state.release(WorkloadKey("ns/low"))  # its owner released it
    assert phase(state, "ns/low") is Phase.QUEUED
    settle(state)
    assert phase(state, "ns/high") is Phase.ADMITTED

    state.release(WorkloadKey("ns/high"), requeue=False)  # finished
    assert phase(state, "ns/high") is Phase.FINISHED
    assert WorkloadKey("ns/high") not in list(state.pending())


def test_removing_a_workload_is_one_operation_that_leaves_nothing_behind() -> None:
    state = cluster(cq("cq", {"default": {"cpu": "2"}}, preemption=LOWER))
    add(state, wl("low", cpu="2", priority=1))
    settle(state)
    add(state, wl("high", cpu="2", priority=10, created=1), wl("queued", cpu="1", created=2))
    run_cycle(state, 0)
    for key in ("ns/low", "ns/high", "ns/queued"):
        state.remove_workload(WorkloadKey(key))
    assert_consistent(state)
    assert not state.cache.records and usage(state, "cq") == 0
    assert not list(state.queues["cq"].workload_keys())


def test_marking_a_workload_evicting_needs_quota() -> None:
    state = add(cluster(cq("cq", {"default": {"cpu": "2"}})), wl("w", cpu="5"))
    with pytest.raises(ValueError, match="holds no quota"):
        state.cache.records[WorkloadKey("ns/w")].evicting = True


def assert_consistent(state: ClusterState) -> None:
    """Every index agrees with the records, and the quota charged is the records' usage."""
    holding = {k for k, r in state.cache.records.items() if r.holds_quota}
    assert set(state.cache.admitted) == holding
    assert set(state.holds.nominated) == {k for k, r in state.cache.records.items() if r.nomination}
    by_cq: dict[str, set[WorkloadKey]] = {}
    for key in holding:
        by_cq.setdefault(state.cache.records[key].cluster_queue, set()).add(key)
    for name in state.objects.cluster_queues:
        assert state.cache.admitted_in(name) == frozenset(by_cq.get(name, ()))
        charged = sum(
            (state.cache.records[k].usage or {}).get(("default", "cpu"), 0)
            for k in by_cq.get(name, ())
        )
        for nomination in state.holds.nominated.values():
            if nomination.admit.cluster_queue != name:
                continue
            # A held preemptor and its leaving victims in its own queue count once: the
            # larger of the two (`PreemptionHolds._cover`).
            wanted = nomination.usage.get(("default", "cpu"), 0)
            leaving = sum(
                (state.cache.records[v.workload_key].usage or {}).get(("default", "cpu"), 0)
                for v in nomination.victims
                if v.whole
                and v.cluster_queue == name
                and v.workload_key in holding
                and state.cache.records[v.workload_key].phase is Phase.EVICTING
            )
            charged += wanted - min(wanted, leaving)
        assert usage(state, name) == charged
    queued = {k for queue in state.queues.values() for k in queue.workload_keys()}
    for key in queued:
        record = state.cache.records[key]
        assert record.phase is Phase.QUEUED and record.queued_in is not None
    for key, record in state.cache.records.items():
        assert (record.admission is not None) == record.holds_quota, key
        assert (record.nomination is not None) == (record.phase is Phase.NOMINATED), key
    # Settling looks only at the preemptors something changed for: every other one can
    # neither be admitted nor dropped now.
    marked = state.holds.nominations_to_settle()
    for key in state.holds.nominated:
        if key not in marked:
            assert settle_action(state, key) is None, key


_event = st.one_of(
    st.tuples(st.just("add"), st.integers(0, 7), st.integers(1, 3), st.integers(0, 2)),
    st.tuples(st.just("cycle"), st.just(0), st.just(0), st.just(0)),
    st.tuples(st.just("release"), st.integers(0, 7), st.just(0), st.just(0)),
    st.tuples(st.just("finish"), st.integers(0, 7), st.just(0), st.just(0)),
    st.tuples(st.just("remove"), st.integers(0, 7), st.just(0), st.just(0)),
    st.tuples(st.just("deactivate"), st.integers(0, 7), st.just(0), st.just(0)),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_event, max_size=40))
def test_indexes_agree_with_the_records_after_any_sequence(
    events: list[tuple[str, int, int, int]],
) -> None:
    state = cluster(
        cq("a", {"default": {"cpu": "4"}}, cohort="co", preemption=LOWER),
        cq("b", {"default": {"cpu": "2"}}, cohort="co", preemption=LOWER),
    )
    created = 0.0
    for kind, n, cpu, priority in events:
        key = WorkloadKey(f"ns/w{n}")
        record = state.cache.records.get(key)
        if kind == "add":
            created += 1
            add(state, wl(f"w{n}", "ab"[n % 2], cpu=str(cpu), priority=priority, created=created))
        elif kind == "cycle":
            result = run_cycle(state, 0)
            for evict in result.evicted:
                state.release(evict.workload_key)
        elif kind == "release" and record is not None and record.holds_quota:
            state.release(key)
        elif kind == "finish" and record is not None:
            state.upsert_workload(replace(record.workload, finished=True))
        elif kind == "remove":
            state.remove_workload(key)
        elif kind == "deactivate" and record is not None:
            state.upsert_workload(replace(record.workload, active=False))
            for evict in state.take_evictions():
                state.release(evict.workload_key)
        assert_consistent(state)
