"""Workload status transitions follow Kueue's sequence (kueue-semantics §5.9)."""

from __future__ import annotations

from typing import Any

from controller.runtime import workload_status as ws

ADMISSION = {
    "clusterQueue": "cq-a",
    "podSetAssignments": [
        {"name": "main", "count": 2, "flavors": {"cpu": "on-demand"}, "resourceUsage": {"cpu": "4"}}
    ],
}


def by_type(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status["conditions"]}


def test_pending_then_admitted_then_preempted_then_released_then_readmitted() -> None:
    status: dict[str, Any] = {}
    status |= ws.pending(status, "Pending", "insufficient quota for cpu", 100.0, None)
    conditions = by_type(status)
    assert conditions["QuotaReserved"]["status"] == "False"
    assert conditions["QuotaReserved"]["message"] == "insufficient quota for cpu"
    assert conditions["Admitted"]["reason"] == "NoReservation"
    assert not ws.pending_changed(status, "Pending", "insufficient quota for cpu")
    assert ws.pending_changed(status, "Pending", "other reason")

    status |= ws.admitted(status, ADMISSION, 200.0, None)
    conditions = by_type(status)
    assert status["admission"]["clusterQueue"] == "cq-a"
    assert conditions["QuotaReserved"] == {
        "type": "QuotaReserved",
        "status": "True",
        "reason": "QuotaReserved",
        "message": "Quota reserved in ClusterQueue cq-a",
        "lastTransitionTime": "1970-01-01T00:03:20Z",
    }
    assert conditions["Admitted"]["status"] == "True"

    status |= ws.evicted(
        status, "Preempted", "Preempted to accommodate ns/big", 300.0, None, "InClusterQueue"
    )
    conditions = by_type(status)
    assert conditions["Evicted"]["reason"] == "Preempted"
    assert conditions["Preempted"]["reason"] == "InClusterQueue"
    assert (
        conditions["QuotaReserved"]["status"] == "True"
    )  # quota held until the owner acknowledges
    assert status["schedulingStats"]["evictions"] == [
        {"reason": "Preempted", "underlyingCause": "", "count": 1}
    ]

    status |= ws.released(status, 400.0, None)
    conditions = by_type(status)
    assert status["admission"] is None
    assert conditions["QuotaReserved"]["reason"] == "PendingEvaluation"
    assert conditions["Requeued"] == {
        "type": "Requeued",
        "status": "True",
        "reason": "Preempted",
        "message": "Preempted to accommodate ns/big",
        "lastTransitionTime": "1970-01-01T00:06:40Z",
    }

    status |= ws.admitted(status, ADMISSION, 500.0, None)
    conditions = by_type(status)
    assert conditions["Evicted"]["status"] == "False"
    assert conditions["Evicted"]["reason"] == "QuotaReserved"
    assert conditions["Evicted"]["message"].startswith("Previously: ")
    assert conditions["Preempted"]["status"] == "False"

    status |= ws.evicted(status, "Preempted", "again", 600.0, None, "InCohortReclamation")
    assert status["schedulingStats"]["evictions"] == [
        {"reason": "Preempted", "underlyingCause": "", "count": 2}
    ]


def test_condition_keeps_transition_time_when_status_is_unchanged() -> None:
    first = ws.set_condition([], "QuotaReserved", False, "Pending", "a", 10.0)
    second = ws.set_condition(first, "QuotaReserved", False, "Pending", "b", 20.0)
    assert second[0]["lastTransitionTime"] == first[0]["lastTransitionTime"]
    assert second[0]["message"] == "b"
    third = ws.set_condition(second, "QuotaReserved", True, "QuotaReserved", "c", 30.0)
    assert third[0]["lastTransitionTime"] == ws.rfc3339(30.0)


def test_evictions_for_other_reasons_are_counted_apart() -> None:
    status: dict[str, Any] = {
        "schedulingStats": {
            "evictions": [{"reason": "Preempted", "underlyingCause": "", "count": 2}]
        }
    }
    status |= ws.evicted(status, "ClusterQueueStopped", "stopped", 1.0, None)
    assert status["schedulingStats"]["evictions"] == [
        {"reason": "Preempted", "underlyingCause": "", "count": 2},
        {"reason": "ClusterQueueStopped", "underlyingCause": "", "count": 1},
    ]
    assert "Preempted" not in by_type(status)


def test_release_after_non_preemption_eviction_is_not_requeued() -> None:
    status: dict[str, Any] = {}
    status |= ws.admitted(status, ADMISSION, 1.0, None)
    status |= ws.evicted(
        status, "ClusterQueueStopped", "The ClusterQueue cq-a is stopped", 2.0, None
    )
    status |= ws.released(status, 3.0, None)
    assert by_type(status)["Requeued"]["status"] == "False"
