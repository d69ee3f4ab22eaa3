"""Kueue's recorder, rewritten (tools/bench/recorder.py), against event sequences
worked out by hand."""

from __future__ import annotations

from typing import Any

import pytest

from tools.bench.recorder import (
    CLASS_LABEL,
    ClusterQueueEvent,
    Recorder,
    WorkloadEvent,
    cluster_queue_event,
    milliseconds,
    workload_event,
)


def _cq(time: float, name: str, usage: int, nominal: int, cls: str = "cq") -> ClusterQueueEvent:
    return ClusterQueueEvent(time, name, cls, nominal, usage)


def test_cluster_queue_usage_of_a_class_worked_by_hand() -> None:
    """Two queues of class `cq`, a (nominal 4 cpu) and b (nominal 2 cpu); usage in milli-cpu.

    a: t=10.0 usage 0 (its first event), 11.0 → 2000, 11.5 → 5000 (borrowing), 13.0 → 1000,
       14.25 → 0. Each event adds the previous usage × the ms since it:
       0 × 1000 (not added) + 2000 × 500 + 5000 × 1500 + 1000 × 1250
       = 1,000,000 + 7,500,000 + 1,250,000 = 9,750,000 m·ms.
    b: t=10.2 usage 0, 12.0 → 2000, 12.3 → 2000 (another status change, same usage), 15.0 → 0:
       2000 × 300 + 2000 × 2700 = 600,000 + 5,400,000 = 6,000,000 m·ms. (15.0 - 12.3 is
       2.6999999999999993 as floats: still 2700 ms, as Go's whole milliseconds of 2.7 s.)
    Class cq: used 15,750,000; nominal 4000 + 2000 = 6000; first event 10.0 (a's), last
    15.0 (b's): 5000 ms. Usage = 15,750,000 × 100 / (6000 × 5000) = 52.5 %; Kueue's
    cpuAverageUsage = 15,750,000 // 5000 = 3150 m.
    Class other: one queue, one event: no time between its first and last events, so the
    checker has no figure (None)."""
    recorder = Recorder()
    events = [
        _cq(10.0, "a", 0, 4000),
        _cq(10.0, "c", 0, 1000, cls="other"),
        _cq(10.2, "b", 0, 2000),
        _cq(11.0, "a", 2000, 4000),
        _cq(11.5, "a", 5000, 4000),
        _cq(12.0, "b", 2000, 2000),
        _cq(12.3, "b", 2000, 2000),
        _cq(13.0, "a", 1000, 4000),
        _cq(14.25, "a", 0, 4000),
        _cq(15.0, "b", 0, 2000),
    ]
    for event in events:
        recorder.record_cluster_queue(event)
    assert recorder.cluster_queues["a"].used == 9_750_000
    assert recorder.cluster_queues["a"].max_usage == 5000
    assert recorder.cluster_queues["b"].used == 6_000_000
    classes = recorder.cluster_queue_classes()
    cq = classes["cq"]
    assert (cq.used, cq.nominal_quota, cq.queues, cq.elapsed_ms) == (15_750_000, 6000, 2, 5000)
    assert cq.usage_pct == pytest.approx(52.5)
    assert cq.average_usage == 3150
    assert classes["other"].usage_pct is None


def test_time_to_admission_worked_by_hand() -> None:
    """Class small, three Workloads; observed times t in seconds, object timestamps
    (creationTimestamp, Admitted's lastTransitionTime) in epoch seconds.

    w1: first seen t=10.0 (created 1000); admitted at t=12.0 with the Admitted condition at
        1003: the timestamps win, 3000 ms. Evicted at t=13.0 (1 eviction), released at
        13.5, admitted again at t=16.0 (Admitted at 1006): the last admission counts,
        6000 ms. Finished at t=17.0: 17.0 - 10.0 = 7000 ms to finish.
    w2: no creationTimestamp; first seen t=10.5, admitted at t=11.25 (Admitted at 1001):
        the observed times, 11.25 - 10.5 = 750 ms; finished at 12.25: 1750 ms.
    w3: created 1005 but Admitted at 1004 (before its creation: a skewed clock): the
        observed times, 11.1 - 11.0 = 100 ms; finished at 14.0: 3000 ms.
    Class small: times 6000, 750, 100; Kueue's mean is (6000 + 750 + 100) // 3 = 2283 ms;
    nearest rank of [100, 750, 6000]: p50 rank ⌈1.5⌉ = 2 → 750, p95 rank ⌈2.85⌉ = 3 → 6000.
    Mean to finish (7000 + 1750 + 3000) // 3 = 3916 ms. One eviction.
    Class large: w4, seen and never admitted: count 1, admitted 0, mean 0."""
    recorder = Recorder()
    events = [
        WorkloadEvent(10.0, "w1", "small", created=1000.0),
        WorkloadEvent(10.5, "w2", "small"),
        WorkloadEvent(11.0, "w3", "small", created=1005.0),
        WorkloadEvent(11.0, "w4", "large", created=1001.0),
        WorkloadEvent(11.1, "w3", "small", created=1005.0, admission_time=1004.0, admitted=True),
        WorkloadEvent(11.25, "w2", "small", admission_time=1001.0, admitted=True),
        WorkloadEvent(12.0, "w1", "small", created=1000.0, admission_time=1003.0, admitted=True),
        WorkloadEvent(12.25, "w2", "small", admission_time=1001.0, admitted=True, finished=True),
        WorkloadEvent(
            13.0, "w1", "small", created=1000.0, admission_time=1003.0, admitted=True, evicted=True
        ),
        WorkloadEvent(13.5, "w1", "small", created=1000.0),
        WorkloadEvent(
            14.0, "w3", "small", created=1005.0, admission_time=1004.0, admitted=True, finished=True
        ),
        WorkloadEvent(16.0, "w1", "small", created=1000.0, admission_time=1006.0, admitted=True),
        WorkloadEvent(
            17.0, "w1", "small", created=1000.0, admission_time=1006.0, admitted=True, finished=True
        ),
    ]
    for event in events:
        recorder.record_workload(event)
    w1 = recorder.workloads["w1"]
    assert (w1.time_to_admit_ms, w1.admissions, w1.evictions, w1.time_to_finish_ms) == (
        6000,
        2,
        1,
        7000,
    )
    assert recorder.workloads["w2"].time_to_admit_ms == 750
    assert recorder.workloads["w3"].time_to_admit_ms == 100
    classes = recorder.workload_classes()
    small = classes["small"]
    assert (small.count, small.admitted, small.evictions) == (3, 3, 1)
    assert small.mean_admission_ms == 2283
    assert (small.p50_admission_ms, small.p95_admission_ms) == (750, 6000)
    assert small.mean_finish_ms == 3916
    large = classes["large"]
    assert (large.count, large.admitted, large.mean_admission_ms) == (1, 0, 0)


def test_a_repeated_admitted_event_does_not_restart_the_clock() -> None:
    """Only a transition to Admitted counts: a later event of the same admission (a status
    change elsewhere) leaves the time as it was."""
    recorder = Recorder()
    recorder.record_workload(WorkloadEvent(0.0, "w", "c"))
    recorder.record_workload(WorkloadEvent(2.0, "w", "c", admitted=True))
    recorder.record_workload(WorkloadEvent(5.0, "w", "c", admitted=True))
    assert recorder.workloads["w"].time_to_admit_ms == 2000
    assert recorder.workloads["w"].admissions == 1


def test_more_events_are_expected_while_an_active_queue_has_work() -> None:
    recorder = Recorder()
    assert not recorder.expect_more_events()
    recorder.record_cluster_queue(ClusterQueueEvent(0.0, "a", "cq", 1000, 0, pending=2))
    assert recorder.expect_more_events()
    recorder.record_cluster_queue(ClusterQueueEvent(1.0, "a", "cq", 1000, 1000, reserving=1))
    recorder.record_cluster_queue(ClusterQueueEvent(1.0, "b", "cq", 1000, 0, pending=1))
    assert recorder.expect_more_events()
    assert recorder.busy_cluster_queues() == ["a", "b"]
    recorder.record_cluster_queue(ClusterQueueEvent(2.0, "a", "cq", 1000, 0))
    recorder.record_cluster_queue(ClusterQueueEvent(2.0, "b", "cq", 1000, 0))
    assert not recorder.expect_more_events()
    # An inactive queue admits nothing: its pending Workloads are not waited for.
    recorder.record_cluster_queue(
        ClusterQueueEvent(3.0, "c", "cq", 1000, 0, pending=3, active=False)
    )
    assert not recorder.expect_more_events()
    assert recorder.busy_cluster_queues() == []


@pytest.mark.parametrize(
    ("seconds", "ms"), [(0.3 - 0.1, 200), (2.7, 2700), (0.0019994, 1), (-0.0015, -1), (0.0, 0)]
)
def test_milliseconds_truncate_toward_zero_as_go(seconds: float, ms: int) -> None:
    assert milliseconds(seconds) == ms


def test_events_read_from_api_objects() -> None:
    cq: dict[str, Any] = {
        "metadata": {"name": "cq-0-1-cohort-0", "labels": {CLASS_LABEL: "cq"}},
        "spec": {
            "cohortName": "cohort-0",
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {"name": "rf", "resources": [{"name": "cpu", "nominalQuota": "20"}]}
                    ],
                }
            ],
        },
        "status": {
            "pendingWorkloads": 3,
            "reservingWorkloads": 2,
            "admittedWorkloads": 1,
            "flavorsReservation": [{"name": "rf", "resources": [{"name": "cpu", "total": "21"}]}],
            "flavorsUsage": [{"name": "rf", "resources": [{"name": "cpu", "total": "1500m"}]}],
            "conditions": [{"type": "Active", "status": "True"}],
        },
    }
    event = cluster_queue_event(cq, 4.5)
    assert event == ClusterQueueEvent(
        4.5, "cq-0-1-cohort-0", "cq", 20_000, 1500, 21_000, "cohort-0", 3, 2, 1, True
    )
    # A new queue: no status yet.
    assert cluster_queue_event({**cq, "status": {}}, 0.0).usage == 0
    assert not cluster_queue_event({**cq, "status": {}}, 0.0).active

    wl: dict[str, Any] = {
        "metadata": {
            "uid": "u-1",
            "namespace": "ns",
            "name": "small-0-3-0",
            "labels": {CLASS_LABEL: "small"},
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "status": {
            "conditions": [
                {"type": "QuotaReserved", "status": "True"},
                {
                    "type": "Admitted",
                    "status": "True",
                    "lastTransitionTime": "2026-01-01T00:00:07Z",
                },
                {"type": "Evicted", "status": "False"},
            ]
        },
    }
    event_w = workload_event(wl, 9.0)
    assert (event_w.uid, event_w.class_name, event_w.admitted, event_w.evicted) == (
        "u-1",
        "small",
        True,
        False,
    )
    assert event_w.created is not None and event_w.admission_time is not None
    assert event_w.admission_time - event_w.created == 7.0
    pending = workload_event({"metadata": wl["metadata"], "status": {}}, 9.0)
    assert not pending.admitted and pending.admission_time is None
