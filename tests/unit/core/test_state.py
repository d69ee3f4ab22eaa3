"""Incremental cluster state (controller/core/state.py)."""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction

import pytest

from api.constants import AdmissionMode
from api.workload_status import Admission, PodSetAssignment
from controller.core.afs.queue import AdmissionFairQueue
from controller.core.afs.usage import AdmissionFairSharing
from controller.core.model.clusterqueues import LocalQueue
from controller.core.model.priorities import KUEUE_GROUP, WorkloadPriorityClass
from controller.core.model.workloads import PriorityClassRef, WorkloadKey
from controller.core.pending import why_pending
from controller.core.queue.pending_queue import PendingQueue
from controller.core.scheduler.cycle import run_cycle
from controller.core.state import ClusterState, UnknownWorkload
from tests.unit.core.builders import add, cluster, cq, m, settle, usage, wl

CQ = cq("cq", {"default": {"cpu": "10"}}, cohort="co")


def test_workload_before_its_local_queue_waits_then_is_queued() -> None:
    state = cluster(CQ)
    add(state, wl("w", "later", cpu="1"))
    assert why_pending(state, "ns/w") == "LocalQueue later doesn't exist"
    state.set_local_queue(LocalQueue("ns", "later", "cq"))
    assert state.queues.queued_in("ns/w") == "cq"
    assert run_cycle(state, 0).admitted


def test_removing_local_queue_or_cluster_queue_unqueues() -> None:
    state = add(cluster(CQ), wl("w", cpu="1"))
    state.remove_local_queue("ns", "cq")
    assert state.queues.queued_in("ns/w") is None
    state.set_local_queue(LocalQueue("ns", "cq", "cq"))
    state.remove_cluster_queue("cq")
    assert why_pending(state, "ns/w") == "ClusterQueue cq doesn't exist"
    state.set_cluster_queue(CQ)
    assert state.queues.queued_in("ns/w") == "cq"


def test_already_admitted_workload_charges_usage_once() -> None:
    admission = Admission("cq", (PodSetAssignment("main", 2, {"cpu": "default"}, {"cpu": m(4)}),))
    running = replace(wl("r", cpu="2", count=2), admission=admission)
    state = add(cluster(CQ), running, running)
    assert usage(state, "cq") == m(4)
    state.upsert_workload(replace(running, finished=True))
    assert usage(state, "cq") == 0
    assert list(state.pending()) == []


def test_remove_admitted_workload_frees_quota_and_retries_inadmissible() -> None:
    state = add(cluster(CQ), wl("a", cpu="8"), wl("b", cpu="4", created=1))
    settle(state)
    assert state.queues["cq"].is_inadmissible("ns/b")
    state.remove_workload("ns/a")
    assert usage(state, "cq") == 0
    assert not state.queues["cq"].is_inadmissible("ns/b")
    settle(state)
    assert set(state.cache.admitted) == {"ns/b"}


def test_priority_from_class_resolved_when_first_seen() -> None:
    state = cluster(CQ)
    state.set_workload_priority_class(WorkloadPriorityClass("batch", 40))
    ref = PriorityClassRef(KUEUE_GROUP, "WorkloadPriorityClass", "batch")
    add(state, wl("w", cpu="1", priority_class=ref))
    assert state.cache.priority_of("ns/w") == 40
    state.set_workload_priority_class(WorkloadPriorityClass("batch", 99))
    add(state, wl("w", cpu="2", priority_class=ref))
    assert state.cache.priority_of("ns/w") == 40


def test_release_requeues_at_original_place() -> None:
    state = add(cluster(CQ), wl("old", cpu="6", created=0))
    settle(state)
    add(state, wl("young", cpu="6", created=5))
    state.release("ns/old")
    head = state.queues["cq"].peek()
    assert head is not None and head[4] == "ns/old"


def test_release_and_apply_admit_errors_name_the_workload() -> None:
    state = add(cluster(CQ), wl("w", cpu="1"))
    with pytest.raises(UnknownWorkload, match="ns/w"):
        state.release("ns/w")
    [admit] = run_cycle(state, 0).admitted
    with pytest.raises(UnknownWorkload, match="already"):
        state.apply_admit(admit)


def test_simulate_removal_for_preemption() -> None:
    state = add(cluster(CQ), wl("a", cpu="5"), wl("b", cpu="5", created=1))
    settle(state)
    assert not state.cache.quota.fits("cq", {("default", "cpu"): m(6)})
    with state.cache.simulate_removal(["ns/a"]):
        assert state.cache.quota.fits("cq", {("default", "cpu"): m(5)})
        assert not state.cache.quota.fits("cq", {("default", "cpu"): m(6)})
    with state.cache.simulate_removal(["ns/a", "ns/b"]):
        assert state.cache.quota.fits("cq", {("default", "cpu"): m(10)})
    assert usage(state, "cq") == m(10)


def test_backoff_reason_names_the_time() -> None:
    state = add(cluster(CQ), wl("w", cpu="1"))
    settle(state)
    state.release("ns/w")
    state.upsert_workload(replace(state.cache.records["ns/w"].workload, requeue_at=60.0))
    assert why_pending(state, "ns/w") == "waiting for eviction backoff until 1970-01-01T00:01:00Z"


def test_unchanged_queue_objects_leave_parked_workloads_parked() -> None:
    """The watch echoes every queue status write: an identical ClusterQueue, LocalQueue,
    flavor or namespace must not send the parked Workloads back for assessment."""
    state = add(cluster(CQ), wl("a", cpu="8"), wl("b", cpu="4", created=1))
    state.set_namespace("ns", {"team": "a"})
    settle(state)
    assert state.queues["cq"].is_inadmissible("ns/b")
    state.set_cluster_queue(replace(CQ))
    state.set_local_queue(LocalQueue("ns", "cq", "cq"))
    state.set_flavor(state.objects.flavors["default"])
    state.set_namespace("ns", {"team": "a"})
    assert state.queues["cq"].is_inadmissible("ns/b")
    state.set_namespace("ns", {"team": "b"})
    assert not state.queues["cq"].is_inadmissible("ns/b")
    settle(state)
    state.set_cluster_queue(cq("cq", {"default": {"cpu": "12"}}, cohort="co"))
    assert not state.queues["cq"].is_inadmissible("ns/b")


# -- admission fair sharing -------------------------------------------------------------------

AFS = AdmissionFairSharing(usage_half_life_seconds=10, usage_sampling_interval_seconds=1)
TENTH = 1 - 0.5**0.1  # the entry penalty rate with sampling 1s and half-life 10s
USAGE_BASED = AdmissionMode.USAGE_BASED_ADMISSION_FAIR_SHARING


def fair_cluster(
    seeded: dict[str, float] | None = None, weights: dict[str, Fraction] | None = None
) -> ClusterState:
    """cq1 (8 cpus, usage-based admission mode) with LocalQueues lq-a and lq-b, admission
    fair sharing on; `seeded` cpus of history per LocalQueue, as their status records."""
    state = cluster(cq("cq1", {"default": {"cpu": "8"}}, admission_mode=USAGE_BASED))
    state.admission_fair_sharing = AFS
    for name in ("lq-a", "lq-b"):
        history = (seeded or {}).get(name)
        state.set_local_queue(
            LocalQueue(
                "ns",
                name,
                "cq1",
                fair_weight=(weights or {}).get(name, Fraction(1)),
                consumed_status=None if history is None else {"cpu": history},
            )
        )
    return state


def test_the_queue_orders_by_local_queue_usage_only_with_mode_and_configuration() -> None:
    state = cluster(cq("cq1", {"default": {"cpu": "8"}}, admission_mode=USAGE_BASED))
    add(state, wl("a", "cq1", cpu="9"), wl("b", "cq1", cpu="1", created=1))
    settle(state)
    assert isinstance(state.queues["cq1"], PendingQueue) and set(state.cache.admitted) == {"ns/b"}
    state.admission_fair_sharing = AFS  # the same Workloads, a parked one still parked
    assert isinstance(state.queues["cq1"], AdmissionFairQueue)
    assert state.queues["cq1"].is_inadmissible("ns/a") and len(state.queues["cq1"]) == 1
    state.set_cluster_queue(
        cq("cq1", {"default": {"cpu": "8"}}, admission_mode=AdmissionMode.NO_ADMISSION_FAIR_SHARING)
    )
    assert isinstance(state.queues["cq1"], PendingQueue)  # (a changed queue retries all)
    assert "ns/a" in state.queues["cq1"] and not state.queues.uses_admission_fair_sharing("cq1")


def test_the_least_used_local_queue_is_admitted_first() -> None:
    """Kueue's 'admits workload from less active localqueue': lq-a used 8 cpus recently,
    lq-b 2; lq-b's Workload is admitted although lq-a's is older."""
    state = fair_cluster({"lq-a": 8.0, "lq-b": 2.0})
    add(state, wl("a1", "lq-a", cpu="8", created=0), wl("b1", "lq-b", cpu="8", created=1))
    assert [a.workload_key for a in run_cycle(state, 0).admitted] == ["ns/b1"]
    assert state.queues.local_queue_usage("ns/lq-a") == 8.0
    # lq-b: 2 cpus of history and the entry penalty of 8 cpus, until it is seen back.
    assert state.queues.local_queue_usage("ns/lq-b") == pytest.approx(2 + 8 * TENTH)


def test_a_weight_divides_the_usage_and_a_zero_weight_goes_last() -> None:
    state = fair_cluster({"lq-a": 8.0, "lq-b": 2.0}, {"lq-a": Fraction(8), "lq-b": Fraction(0)})
    assert state.queues.local_queue_usage("ns/lq-a") == 1.0
    assert state.queues.local_queue_usage("ns/lq-b") == math.inf
    assert state.queues.local_queue_usage("ns/unknown") == 0.0  # no history, weight 1
    add(state, wl("b1", "lq-b", cpu="8", created=0), wl("a1", "lq-a", cpu="8", created=1))
    assert [a.workload_key for a in run_cycle(state, 0).admitted] == ["ns/a1"]


def test_the_entry_penalty_settles_into_consumed_usage_when_seen_admitted() -> None:
    state = fair_cluster({"lq-a": 4.0})
    add(state, wl("a1", "lq-a", cpu="8"))
    run_cycle(state, 0)
    entry = state.queues.usage_ledger.entry("ns/lq-a")
    assert entry is not None and entry.penalty == pytest.approx({"cpu": 8 * TENTH})
    state.settle_admission(WorkloadKey("ns/a1"), 100.0)  # first stamp: nothing elapsed
    assert entry.penalty == {} and entry.consumed == pytest.approx({"cpu": 4 + 8 * TENTH})
    assert entry.last_update == 100.0
    # Seen admitted again later (after an eviction and a new admission, say): one
    # half-life elapsed with 8 cpus admitted, no penalty pending any more.
    state.settle_admission(WorkloadKey("ns/a1"), 110.0)
    assert entry.consumed == pytest.approx({"cpu": (4 + 8 * TENTH) / 2 + 4})


@pytest.mark.parametrize(
    "never_settles",
    ["deleted", "finished", "moved", "rolled back", "deactivated"],
)
def test_a_penalty_that_will_never_settle_is_dropped(never_settles: str) -> None:
    state = fair_cluster()
    add(state, wl("a1", "lq-a", cpu="2"))
    [admit] = run_cycle(state, 0).admitted
    key = admit.workload_key
    assert state.queues.usage_ledger.penalized_local_queue(key) == "ns/lq-a"
    workload = state.cache.workloads[key]
    if never_settles == "deleted":
        state.remove_workload(key)
    elif never_settles == "finished":
        state.upsert_workload(replace(workload, admission=None, finished=True))
    elif never_settles == "moved":
        state.upsert_workload(replace(workload, admission=None, queue_name="lq-b"))
    elif never_settles == "rolled back":  # the admission could not be written
        state.release(key)
    else:
        state.upsert_workload(replace(workload, admission=None, active=False))
    assert state.queues.usage_ledger.penalized_local_queue(key) is None
    assert state.queues.local_queue_usage("ns/lq-a") == 0.0


def test_no_penalty_outside_a_usage_based_cluster_queue() -> None:
    state = cluster(cq("cq1", {"default": {"cpu": "8"}}))
    state.admission_fair_sharing = AFS
    add(state, wl("w", "cq1", cpu="2"))
    [admit] = run_cycle(state, 0).admitted
    assert state.queues.usage_ledger.penalized_local_queue(admit.workload_key) is None
    state.settle_admission(admit.workload_key, 5.0)  # nothing folded: not usage-based
    entry = state.queues.usage_ledger.entry("ns/cq1")
    assert entry is not None and (entry.consumed, entry.last_update) == ({}, None)


def test_history_is_seeded_once_and_forgotten_with_the_local_queue() -> None:
    state = fair_cluster({"lq-a": 8.0})
    add(state, wl("a1", "lq-a", cpu="9"))
    settle(state)
    assert state.queues["cq1"].is_inadmissible("ns/a1")
    # Our own status write comes back with another value: ignored, and nothing parked
    # is sent back for another try (the LocalQueue is unchanged).
    echo = replace(state.objects.local_queues["ns/lq-a"], consumed_status={"cpu": 1.0})
    state.set_local_queue(echo)
    assert state.queues.local_queue_usage("ns/lq-a") == 8.0
    assert state.queues["cq1"].is_inadmissible("ns/a1")
    state.remove_local_queue("ns", "lq-a")
    state.set_local_queue(echo)  # created again: its status is history again
    assert state.queues.local_queue_usage("ns/lq-a") == 1.0


def test_a_new_weight_or_a_sample_ranks_the_local_queue_again_at_once() -> None:
    """Kueue's 'admits from the LocalQueue whose weight is raised through the API', and the
    same after a sample: the queue is told whenever a LocalQueue's usage may change."""
    state = fair_cluster({"lq-a": 8.0, "lq-b": 2.0})
    add(state, wl("a1", "lq-a", cpu="8", created=0), wl("b1", "lq-b", cpu="8", created=1))
    queue = state.queues["cq1"]
    assert queue.peek() == state.cache.order_of(WorkloadKey("ns/b1"))
    raised = replace(state.objects.local_queues["ns/lq-a"], fair_weight=Fraction(1_000_000))
    state.set_local_queue(raised)
    assert queue.peek() == state.cache.order_of(WorkloadKey("ns/a1"))
    state.set_local_queue(replace(raised, fair_weight=Fraction(1)))
    assert queue.peek() == state.cache.order_of(WorkloadKey("ns/b1"))
    # lq-b has 8 cpus running: ten half-lives later its usage is near 8, lq-a's near 0.
    running = replace(
        wl("running", "lq-b", cpu="8"),
        admission=Admission(
            "cq1", (PodSetAssignment("main", 1, {"cpu": "default"}, {"cpu": m(8)}),)
        ),
    )
    state.set_cluster_queue(cq("cq1", {"default": {"cpu": "16"}}, admission_mode=USAGE_BASED))
    add(state, running)
    for local_queue in ("ns/lq-a", "ns/lq-b"):
        state.queues.usage_ledger.sample(local_queue, 0.0, AFS.usage_half_life_seconds)
        state.queues.usage_ledger.sample(local_queue, 100.0, AFS.usage_half_life_seconds)
    assert (
        state.queues.local_queue_usage("ns/lq-a")
        < 0.01
        < 7.99
        < state.queues.local_queue_usage("ns/lq-b")
    )
    assert queue.peek() == state.cache.order_of(WorkloadKey("ns/a1"))


def test_the_history_written_for_a_new_local_queue_is_not_read_back_as_more() -> None:
    """A LocalQueue first seen without status has no history; the status the controller then
    writes comes back on it, and must not be added to what the ledger already holds."""
    state = fair_cluster()  # lq-a, lq-b without status
    add(state, wl("a1", "lq-a", cpu="8"))
    run_cycle(state, 0)
    state.settle_admission(WorkloadKey("ns/a1"), 1.0)
    entry = state.queues.usage_ledger.entry("ns/lq-a")
    assert entry is not None
    written = dict(entry.consumed)
    state.set_local_queue(replace(state.objects.local_queues["ns/lq-a"], consumed_status=written))
    assert entry.consumed == written
