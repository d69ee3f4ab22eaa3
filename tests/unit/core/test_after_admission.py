"""The after-admission timers: PodsReady timeout and recovery timeout, requeue backoff and
its limit, maximum execution time, blockAdmission and the requeuing timestamp. Times are
hand-worked; hypothesis checks the backoff bounds and that a ready Workload is never
evicted."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from api.constants import WithinClusterQueuePolicy
from api.workload_status import Admission, PodSetAssignment
from controller.core.after_admission import (
    JITTER_FACTOR,
    BackoffFinished,
    Deactivate,
    PodsReadyPolicy,
    PodsReadyTimeout,
    Requeue,
    backoff_seconds,
    due,
    execution_deadline,
    not_ready_deadline,
)
from controller.core.model.clusterqueues import PreemptionPolicy
from controller.core.model.workloads import ConditionState, Workload
from controller.core.scheduler.cycle import WAITING_FOR_PODS_READY, run_cycle
from tests.unit.core.builders import add, cluster, cq, settle, wl

ADMISSION = Admission("cq", (PodSetAssignment("main", 1, {"cpu": "default"}, {"cpu": 1000}),))
POLICY = PodsReadyPolicy(timeout=60.0, recovery_timeout=30.0, backoff_base_seconds=10)


def admitted(at: float = 100.0, **changes: object) -> Workload:
    """ns/w admitted at `at` (QuotaReserved/Admitted lastTransitionTime)."""
    base = replace(wl("w", cpu="1"), admission=ADMISSION, quota_reserved_at=at)
    return replace(base, **changes)  # type: ignore[arg-type]


def ready(status: bool, reason: str, at: float) -> ConditionState:
    return ConditionState(status, reason, "", at)


# -- Kueue's backoff formula ------------------------------------------------------------


def test_backoff_doubles_from_the_base_and_stops_at_the_cap() -> None:
    assert [backoff_seconds(n, 10, 60) for n in (1, 2, 3, 4, 5, 100)] == [10, 20, 40, 60, 60, 60]
    assert [backoff_seconds(n, 60, 3600) for n in (1, 2, 3)] == [60, 120, 240]  # Kueue's doc


def test_backoff_jitter_adds_at_most_a_ten_thousandth() -> None:
    assert backoff_seconds(1, 60, 3600, jitter=0.5) == 60 * (1 + 0.5 * JITTER_FACTOR)


def test_backoff_max_zero_means_no_cap_as_in_kueue() -> None:
    assert backoff_seconds(20, 1, 0) == 2**19


@given(
    count=st.integers(1, 200),
    base=st.integers(0, 100_000),
    cap=st.integers(1, 100_000),
    jitter=st.floats(0, 1, exclude_max=True),
)
def test_backoff_stays_within_kueues_bounds(count: int, base: int, cap: int, jitter: float) -> None:
    delay = backoff_seconds(count, base, cap, jitter)
    unjittered = min(base * 2 ** min(count - 1, 64), cap)
    assert unjittered <= delay <= unjittered * (1 + JITTER_FACTOR)
    assert delay <= cap * (1 + JITTER_FACTOR)
    assert backoff_seconds(count + 1, base, cap, jitter) >= delay  # never shrinks


# -- PodsReady timeout -------------------------------------------------------------------


def test_timeout_runs_from_admission_while_pods_ready_is_absent_or_waiting_for_start() -> None:
    for pods_ready in (None, ready(False, "WaitForStart", 120.0), ready(False, "PodsReady", 0.0)):
        workload = admitted(pods_ready=pods_ready)
        assert not_ready_deadline(workload, POLICY) == ("WaitForStart", 160.0)
        assert due([workload], POLICY, 159.0) == due([], POLICY, 0).__class__((), 160.0)
        (action,) = due([workload], POLICY, 160.0).actions
        assert action == PodsReadyTimeout(
            "ns/w", "cq", "WaitForStart", "Exceeded the PodsReady timeout ns/w", 1, 170.0
        )


def test_recovery_timeout_runs_from_the_loss_of_readiness() -> None:
    workload = admitted(pods_ready=ready(False, "WaitForRecovery", 500.0))
    assert not_ready_deadline(workload, POLICY) == ("WaitForRecovery", 530.0)
    assert due([workload], POLICY, 529.0).actions == ()
    (action,) = due([workload], POLICY, 530.0).actions
    assert isinstance(action, PodsReadyTimeout) and action.underlying_cause == "WaitForRecovery"
    off = replace(POLICY, recovery_timeout=None)  # recoveryTimeout: 0s
    assert not_ready_deadline(workload, off) is None
    assert due([workload], off, 10_000.0).actions == ()


def test_no_timeout_for_ready_evicted_inactive_finished_or_pending_workloads() -> None:
    for workload in (
        admitted(pods_ready=ready(True, "PodsReady", 120.0)),
        admitted(evicted=True),
        admitted(active=False),
        admitted(finished=True),
        replace(admitted(), admission=None, quota_reserved_at=None),
    ):
        assert not_ready_deadline(workload, POLICY) is None
        assert due([workload], POLICY, 1e9).actions == ()


def test_second_timeout_doubles_the_backoff_and_counts_on() -> None:
    workload = admitted(at=1000.0, requeue_count=1, requeue_at=170.0)
    (action,) = due([workload], POLICY, 1060.0).actions
    assert isinstance(action, PodsReadyTimeout)
    assert (action.requeue_count, action.requeue_at) == (2, 1080.0)


def test_a_later_requeue_at_is_never_moved_earlier() -> None:
    workload = admitted(requeue_at=5000.0)
    (action,) = due([workload], POLICY, 160.0).actions
    assert isinstance(action, PodsReadyTimeout) and action.requeue_at == 5000.0


def test_the_limit_deactivates_instead_of_requeuing() -> None:
    limited = replace(POLICY, backoff_limit_count=2)
    assert isinstance(due([admitted(requeue_count=1)], limited, 160.0).actions[0], PodsReadyTimeout)
    (action,) = due([admitted(requeue_count=2)], limited, 160.0).actions
    assert action == Deactivate(
        "ns/w", "RequeuingLimitExceeded", "exceeding the maximum number of re-queuing retries"
    )
    marked = admitted(
        requeue_count=2, deactivation_target=ConditionState(True, "RequeuingLimitExceeded")
    )
    assert due([marked], limited, 160.0).actions == ()  # marked once, then spec.active: false
    zero = replace(POLICY, backoff_limit_count=0)
    assert isinstance(due([admitted()], zero, 160.0).actions[0], Deactivate)


def test_backoff_finished_after_requeue_at() -> None:
    pending = replace(
        wl("w", cpu="1"),
        requeue_count=1,
        requeue_at=170.0,
        requeued=ConditionState(False, "PodsReadyTimeout"),
    )
    result = due([pending], POLICY, 169.0)
    assert result.actions == () and result.next_deadline == 170.0
    assert due([pending], POLICY, 170.0).actions == (BackoffFinished("ns/w"),)
    done = replace(pending, requeued=ConditionState(True, "BackoffFinished"))
    assert due([done], POLICY, 170.0).actions == ()
    deactivated = replace(pending, active=False, requeued=ConditionState(False, "Deactivated"))
    assert due([deactivated], POLICY, 170.0).actions == ()


def test_requeued_again_once_reactivated_or_its_queue_restarted_with_kueues_reasons() -> None:
    """Kueue's workload controller: Requeued=False (Deactivated) on an active Workload →
    Reactivated; (ClusterQueueStopped / LocalQueueStopped) once that queue runs again."""

    def released(reason: str, **changes: object) -> Workload:
        base = replace(wl("w", cpu="1"), requeued=ConditionState(False, reason, "", 5.0))
        return replace(base, **changes)  # type: ignore[arg-type]

    def running(lq: bool, cq: bool) -> Callable[[Workload], tuple[bool, bool]]:
        return lambda _: (lq, cq)

    both = running(True, True)
    cases = [
        (
            released("Deactivated"),
            both,
            Requeue("ns/w", "Reactivated", "The workload was reactivated"),
        ),
        (released("Deactivated", active=False), both, None),
        # A deactivation with a cause (its own reason) is left as Kueue leaves it.
        (released("DeactivatedDueToRequeuingLimitExceeded"), both, None),
        (
            released("ClusterQueueStopped"),
            running(False, True),
            Requeue(
                "ns/w",
                "ClusterQueueRestarted",
                "The ClusterQueue was restarted after being stopped",
            ),
        ),
        (released("ClusterQueueStopped"), running(True, False), None),
        (
            released("LocalQueueStopped"),
            running(True, False),
            Requeue(
                "ns/w", "LocalQueueRestarted", "The LocalQueue was restarted after being stopped"
            ),
        ),
        (released("LocalQueueStopped"), running(False, True), None),
        (released("ClusterQueueStopped"), None, None),  # queues unknown: nothing said
        (released("Preempted"), both, None),
        # Admitted again already: still said, as Kueue's workload controller says it.
        (
            released("Deactivated", admission=ADMISSION),
            both,
            Requeue("ns/w", "Reactivated", "The workload was reactivated"),
        ),
        (replace(wl("w", cpu="1"), requeued=ConditionState(True, "Preempted")), both, None),
    ]
    for workload, queues, expected in cases:
        actions = due([workload], None, 10.0, running=queues).actions
        assert actions == ((expected,) if expected else ()), (workload.requeued, queues)


def test_off_means_no_pods_ready_actions() -> None:
    assert due([admitted()], None, 1e9).actions == ()


@given(
    admitted_at=st.floats(0, 1e6),
    now=st.floats(0, 2e6),
    ready_at=st.floats(0, 2e6),
    count=st.integers(0, 20),
    limit=st.none() | st.integers(0, 20),
)
def test_a_ready_workload_is_never_evicted_or_deactivated(
    admitted_at: float, now: float, ready_at: float, count: int, limit: int | None
) -> None:
    workload = admitted(
        at=admitted_at, pods_ready=ready(True, "PodsReady", ready_at), requeue_count=count
    )
    policy = replace(POLICY, backoff_limit_count=limit)
    assert due([workload], policy, now).actions == ()


@given(now=st.floats(0, 1e6), timeout=st.floats(0.5, 1e5), reason=st.sampled_from(["", "X"]))
def test_a_not_ready_workload_is_evicted_exactly_once_its_timeout_has_passed(
    now: float, timeout: float, reason: str
) -> None:
    workload = admitted(at=100.0, pods_ready=None if reason else ready(False, "WaitForStart", 0))
    actions = due([workload], replace(POLICY, timeout=timeout), now).actions
    assert bool(actions) == (now >= 100.0 + timeout)


# -- maximum execution time ---------------------------------------------------------------


def test_maximum_execution_time_counts_past_admissions() -> None:
    workload = admitted(
        at=1000.0,
        maximum_execution_time_seconds=100,
        accumulated_past_execution_time_seconds=30,
        pods_ready=ready(True, "PodsReady", 1001.0),
    )
    assert execution_deadline(workload) == 1070.0
    result = due([workload], None, 1069.0)
    assert result.actions == () and result.next_deadline == 1070.0
    (action,) = due([workload], None, 1070.0).actions
    assert action == Deactivate(
        "ns/w",
        "MaximumExecutionTimeExceeded",
        "exceeding the maximum execution time",
        clear_accumulated=True,
        maximum_execution_time_seconds=100,
    )
    marked = replace(
        workload, deactivation_target=ConditionState(True, "MaximumExecutionTimeExceeded")
    )
    assert execution_deadline(marked) is None
    assert execution_deadline(replace(workload, admission=None)) is None  # pending: no clock
    assert execution_deadline(replace(workload, maximum_execution_time_seconds=None)) is None


def test_maximum_execution_time_wins_over_a_pods_ready_timeout_at_the_same_moment() -> None:
    workload = admitted(at=100.0, maximum_execution_time_seconds=60)
    (action,) = due([workload], POLICY, 160.0).actions
    assert isinstance(action, Deactivate) and action.reason == "MaximumExecutionTimeExceeded"


# -- blockAdmission and the requeuing timestamp -------------------------------------------


def test_block_admission_admits_one_at_a_time_until_pods_ready() -> None:
    state = add(cluster(cq("cq", {"default": {"cpu": "10"}})), wl("a", cpu="1"))
    add(state, wl("b", cpu="1", created=1.0))
    state.block_admission = True
    assert [a.workload_key for a in run_cycle(state, 0.0).admitted] == ["ns/a"]
    blocked = run_cycle(state, 1.0)
    assert not blocked.admitted and blocked.changed
    assert [(i.workload_key, i.condition_reason) for i in blocked.inadmissible] == [
        ("ns/b", "WaitingForPodsReady")
    ]
    assert blocked.inadmissible[0].reason == WAITING_FOR_PODS_READY
    again = run_cycle(state, 2.0)
    assert not again.admitted and not again.changed  # same reason: nothing to rewrite
    record = state.cache.records["ns/a"]
    state.upsert_workload(replace(record.workload, pods_ready=ready(True, "PodsReady", 2.0)))
    assert [a.workload_key for a in run_cycle(state, 3.0).admitted] == ["ns/b"]


def test_block_admission_lets_one_head_through_per_cycle_across_queues() -> None:
    state = cluster(cq("x", {"default": {"cpu": "10"}}), cq("y", {"default": {"cpu": "10"}}))
    add(state, wl("a", "x", cpu="1"), wl("b", "y", cpu="1", created=1.0))
    state.block_admission = True
    result = run_cycle(state, 0.0)
    assert [a.workload_key for a in result.admitted] == ["ns/a"]  # the older head first
    assert [i.workload_key for i in result.inadmissible] == ["ns/b"]


def test_without_block_admission_not_ready_workloads_block_nothing() -> None:
    state = add(cluster(cq("cq", {"default": {"cpu": "10"}})), wl("a", cpu="1"))
    add(state, wl("b", cpu="1", created=1.0))
    settle(state)
    assert set(state.cache.admitted) == {"ns/a", "ns/b"}


def _requeued(name: str, created: float, evicted_at: float) -> Workload:
    return replace(
        wl(name, cpu="6", created=created),
        evicted=True,
        eviction=ConditionState(True, "PodsReadyTimeout", "", evicted_at),
    )


def test_requeuing_timestamp_eviction_puts_a_timed_out_workload_behind() -> None:
    # "old" was created first but timed out at 50; "young" was created at 10.
    state = add(cluster(cq("cq", {"default": {"cpu": "6"}})), _requeued("old", 0.0, 50.0))
    add(state, wl("young", cpu="6", created=10.0))
    assert state.queue_order_time(state.cache.records["ns/old"].workload) == 50.0
    assert [a.workload_key for a in run_cycle(state, 60.0).admitted] == ["ns/young"]


def test_requeuing_timestamp_creation_keeps_the_place() -> None:
    state = cluster(cq("cq", {"default": {"cpu": "6"}}))
    state.requeuing_timestamp = "Creation"
    add(state, _requeued("old", 0.0, 50.0), wl("young", cpu="6", created=10.0))
    assert [a.workload_key for a in run_cycle(state, 60.0).admitted] == ["ns/old"]


def test_a_deactivation_target_becomes_the_evictions_underlying_cause() -> None:
    state = add(cluster(cq("cq", {"default": {"cpu": "10"}})), wl("w", cpu="1"))
    settle(state)
    target = ConditionState(True, "RequeuingLimitExceeded", "exceeding the maximum")
    workload = replace(state.cache.records["ns/w"].workload, deactivation_target=target)
    state.upsert_workload(workload)
    assert state.take_evictions() == []  # marked, still active
    state.upsert_workload(replace(workload, active=False))
    (evict,) = state.take_evictions()
    assert (evict.reason, evict.underlying_cause) == ("Deactivated", "RequeuingLimitExceeded")
    assert evict.message == "The workload is deactivated due to exceeding the maximum"


def test_a_timed_out_workload_competes_only_once_its_backoff_is_marked_finished() -> None:
    waiting = replace(
        wl("w", cpu="1"),
        requeue_count=1,
        requeue_at=170.0,
        requeued=ConditionState(False, "PodsReadyTimeout"),
    )
    state = add(cluster(cq("cq", {"default": {"cpu": "10"}})), waiting)
    assert not run_cycle(state, 100.0).admitted
    assert not run_cycle(state, 200.0).admitted  # requeueAt passed, Requeued still False
    assert due(state.cache.workloads.values(), None, 200.0).actions == (BackoffFinished("ns/w"),)
    done = replace(
        waiting, requeue_at=None, requeued=ConditionState(True, "BackoffFinished", "", 200.0)
    )
    state.upsert_workload(done)
    assert [a.workload_key for a in run_cycle(state, 201.0).admitted] == ["ns/w"]


@pytest.mark.parametrize(("timestamp", "preempts"), [("Eviction", False), ("Creation", True)])
def test_lower_or_newer_equal_priority_compares_kueues_queue_order_timestamps(
    timestamp: str, preempts: bool
) -> None:
    """Kueue's SatisfiesPreemptionPolicy compares GetQueueOrderTimestamp: a preemptor
    created at 0 but timed out (PodsReadyTimeout) at 50 is newer than an equal-priority
    Workload created at 10 under requeuingStrategy.timestamp Eviction, so it may not
    preempt it; under Creation it is older and may."""
    policy = PreemptionPolicy(
        within_cluster_queue=WithinClusterQueuePolicy.LOWER_OR_NEWER_EQUAL_PRIORITY
    )
    state = cluster(cq("cq", {"default": {"cpu": "6"}}, preemption=policy))
    state.requeuing_timestamp = timestamp
    add(state, wl("running", cpu="6", created=10.0))
    settle(state)
    add(state, _requeued("old", 0.0, 50.0))
    result = run_cycle(state, 60.0)
    victims = [v.workload_key for p in result.preempting for v in p.victims]
    assert victims == (["ns/running"] if preempts else [])
