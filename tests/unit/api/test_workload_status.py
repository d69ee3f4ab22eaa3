"""api/workload_status.py: the reservation rule, Kueue's status sequence (kueue-semantics
§5.9), what an admission-status write carries, and the admission ⇄ API round trip."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from api import workload_status as ws
from api.workload_status import Admission, PodSetAssignment, PodSetShape

ADMISSION = {
    "clusterQueue": "cq-a",
    "podSetAssignments": [
        {"name": "main", "count": 2, "flavors": {"cpu": "on-demand"}, "resourceUsage": {"cpu": "4"}}
    ],
}


def workload(status: dict[str, Any] | None = None, generation: int = 3) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "w",
            "namespace": "ns",
            "uid": "u-1",
            "resourceVersion": "42",
            "generation": generation,
        },
        "status": status or {},
    }


def by_type(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status["conditions"]}


def test_pending_then_admitted_then_preempted_then_released_then_readmitted() -> None:
    wl = workload()
    wl["status"] = ws.unset_quota_reservation(wl, "Pending", "insufficient quota for cpu", 100.0)
    conditions = by_type(wl["status"])
    assert conditions["QuotaReserved"]["status"] == "False"
    assert conditions["QuotaReserved"]["message"] == "insufficient quota for cpu"
    assert conditions["QuotaReserved"]["observedGeneration"] == 3
    assert conditions["Admitted"]["reason"] == "NoReservation"
    assert not ws.pending_changed(wl, "Pending", "insufficient quota for cpu")
    assert ws.pending_changed(wl, "Pending", "other reason")
    assert not ws.has_quota_reservation(wl)

    wl["status"] = ws.admit(wl, ADMISSION, 200.0)
    conditions = by_type(wl["status"])
    assert wl["status"]["admission"]["clusterQueue"] == "cq-a"
    assert conditions["QuotaReserved"] == {
        "type": "QuotaReserved",
        "status": "True",
        "reason": "QuotaReserved",
        "message": "Quota reserved in ClusterQueue cq-a",
        "lastTransitionTime": "1970-01-01T00:03:20Z",
        "observedGeneration": 3,
    }
    assert ws.has_quota_reservation(wl) and ws.is_admitted(wl)

    wl["status"] = ws.evict(
        wl, "Preempted", "Preempted to accommodate ns/big", 300.0, "InClusterQueue"
    )
    conditions = by_type(wl["status"])
    assert conditions["Evicted"]["reason"] == "Preempted"
    assert conditions["Preempted"]["reason"] == "InClusterQueue"
    assert ws.has_quota_reservation(wl)  # quota held until the owner releases it
    assert wl["status"]["schedulingStats"]["evictions"] == [
        {"reason": "Preempted", "underlyingCause": "", "count": 1}
    ]

    wl["status"] = ws.release(wl, 400.0)
    conditions = by_type(wl["status"])
    assert "admission" not in wl["status"]
    assert not ws.has_quota_reservation(wl) and not ws.is_admitted(wl)
    assert conditions["QuotaReserved"]["reason"] == "PendingEvaluation"
    assert conditions["Requeued"]["status"] == "True"
    assert conditions["Requeued"]["reason"] == "Preempted"
    assert conditions["Requeued"]["message"] == "Preempted to accommodate ns/big"

    wl["status"] = ws.admit(wl, ADMISSION, 500.0)
    conditions = by_type(wl["status"])
    assert conditions["Evicted"]["status"] == "False"
    assert conditions["Evicted"]["reason"] == "QuotaReserved"
    assert conditions["Evicted"]["message"].startswith("Previously: ")
    assert conditions["Preempted"]["status"] == "False"

    wl["status"] = ws.evict(wl, "Preempted", "again", 600.0, "InCohortReclamation")
    assert wl["status"]["schedulingStats"]["evictions"] == [
        {"reason": "Preempted", "underlyingCause": "", "count": 2}
    ]


def test_reservation_is_the_condition_not_the_admission() -> None:
    """Kueue's `HasQuotaReservation`: a job side that cleared only the condition has
    released the quota; a reserved condition without an admission still holds it."""
    stale = workload({"admission": ADMISSION, "conditions": [_cond("QuotaReserved", "False")]})
    assert not ws.has_quota_reservation(stale)
    assert "admission" not in ws.kueue_status(stale)  # never written back as if reserved
    assert ws.has_quota_reservation(workload({"conditions": [_cond("QuotaReserved", "True")]}))
    assert not ws.has_quota_reservation(workload({"admission": ADMISSION}))


def _cond(type_: str, status: str, reason: str = "R") -> dict[str, Any]:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }


def test_kueue_status_carries_what_kueue_carries_and_nothing_else() -> None:
    status = {
        "admission": ADMISSION,
        "conditions": [_cond("QuotaReserved", "True"), _cond("Custom", "True")],
        "requeueState": {"count": 1},
        "schedulingStats": {
            "evictions": [{"reason": "Preempted", "underlyingCause": "", "count": 1}]
        },
        "accumulatedPastExecutionTimeSeconds": 5,
        "preemptionCost": "3",
        "resolvedPreemptibility": {"value": "preemptible", "source": "default"},
    }
    carried = ws.kueue_status(workload(status))
    assert [c["type"] for c in carried["conditions"]] == ["QuotaReserved"]
    assert "preemptionCost" not in carried  # the cost controller's, under its own manager
    assert carried["requeueState"] == {"count": 1}
    assert carried["accumulatedPastExecutionTimeSeconds"] == 5
    assert carried["resolvedPreemptibility"] == status["resolvedPreemptibility"]
    assert carried["admission"] == ADMISSION


def test_evictions_for_other_reasons_are_counted_apart() -> None:
    wl = workload(
        {
            "admission": ADMISSION,
            "conditions": [_cond("QuotaReserved", "True")],
            "schedulingStats": {
                "evictions": [{"reason": "Preempted", "underlyingCause": "", "count": 2}]
            },
        }
    )
    status = ws.evict(wl, "ClusterQueueStopped", "stopped", 1.0)
    assert status["schedulingStats"]["evictions"] == [
        {"reason": "Preempted", "underlyingCause": "", "count": 2},
        {"reason": "ClusterQueueStopped", "underlyingCause": "", "count": 1},
    ]
    assert "Preempted" not in by_type(status)


def test_release_after_non_preemption_eviction_is_not_requeued() -> None:
    wl = workload()
    wl["status"] = ws.admit(wl, ADMISSION, 1.0)
    wl["status"] = ws.evict(wl, "ClusterQueueStopped", "The ClusterQueue cq-a is stopped", 2.0)
    wl["status"] = ws.release(wl, 3.0)
    assert by_type(wl["status"])["Requeued"]["status"] == "False"


def test_condition_keeps_transition_time_when_status_is_unchanged() -> None:
    first = ws.set_condition([], "QuotaReserved", False, "Pending", "a", 10.0)
    second = ws.set_condition(first, "QuotaReserved", False, "Pending", "b", 20.0)
    assert second[0]["lastTransitionTime"] == first[0]["lastTransitionTime"]
    assert second[0]["message"] == "b"
    third = ws.set_condition(second, "QuotaReserved", True, "QuotaReserved", "c", 30.0)
    assert third[0]["lastTransitionTime"] == ws.rfc3339(30.0)


def test_shrink_takes_pods_from_the_single_pod_set() -> None:
    wl = workload()
    wl["status"] = ws.admit(wl, ADMISSION, 1.0)
    shrunk = ws.shrink(wl, 1)
    assert shrunk is not None
    [assignment] = shrunk["admission"]["podSetAssignments"]
    assert (assignment["count"], assignment["resourceUsage"]) == (1, {"cpu": "2"})
    assert shrunk["schedulingStats"]["evictions"][0]["count"] == 1
    assert ws.shrink(wl, 2) is None  # that would take every pod
    assert ws.shrink(workload(), 1) is None  # nothing reserved


def test_apply_body_names_the_object_and_its_version() -> None:
    wl = workload()
    body = ws.apply_body(wl, {"conditions": []}, extra=[("resolvedPreemptibility", {"value": "x"})])
    assert body["apiVersion"] == "kueue.x-k8s.io/v1beta2" and body["kind"] == "Workload"
    assert body["metadata"] == {
        "name": "w",
        "namespace": "ns",
        "uid": "u-1",
        "resourceVersion": "42",
    }
    assert body["status"]["resolvedPreemptibility"] == {"value": "x"}
    assert "resourceVersion" not in ws.apply_body(wl, {}, strict=False)["metadata"]


def test_admission_from_api_fills_count_and_usage_from_the_pod_set() -> None:
    raw = {
        "clusterQueue": "cq",
        "podSetAssignments": [{"name": "main", "flavors": {"cpu": "f", "pods": "f"}}],
    }
    admission, problems = ws.admission_from_api(raw, {"main": PodSetShape(3, {"cpu": 500})})
    assert problems == []
    assert admission == Admission(
        "cq", (PodSetAssignment("main", 3, {"cpu": "f", "pods": "f"}, {"cpu": 1500, "pods": 3000}),)
    )


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        ({"podSetAssignments": []}, "status.admission.clusterQueue"),
        (
            {"clusterQueue": "cq", "podSetAssignments": [{"count": -1}]},
            "status.admission.podSetAssignments[0].count",
        ),
        (
            {"clusterQueue": "cq", "podSetAssignments": [{"resourceUsage": {"cpu": "x"}}]},
            "status.admission.podSetAssignments[0].resourceUsage.cpu",
        ),
        ("nope", "status.admission"),
    ],
)
def test_admission_from_api_names_the_bad_field(raw: Any, path: str) -> None:
    admission, problems = ws.admission_from_api(raw, {})
    assert admission is None
    assert [p for p, _ in problems] == [path]


_names = st.text("abcdefgh", min_size=1, max_size=4)


@given(
    st.lists(
        st.tuples(
            _names,
            st.integers(0, 50),
            st.dictionaries(
                st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]),
                st.tuples(_names, st.integers(0, 10**9)),
                min_size=1,
            ),
        ),
        min_size=1,
        max_size=4,
        unique_by=lambda t: t[0],
    )
)
def test_admission_round_trips_through_the_api(
    entries: list[tuple[str, int, dict[str, tuple[str, int]]]],
) -> None:
    admission = Admission(
        "cq",
        tuple(
            PodSetAssignment(
                name,
                count,
                {r: f for r, (f, _) in res.items()},
                {r: v for r, (_, v) in res.items()},
            )
            for name, count, res in entries
        ),
    )
    parsed, problems = ws.admission_from_api(ws.admission_to_api(admission), {})
    assert problems == []
    assert parsed == admission


def test_pods_ready_timeout_then_limit_then_deactivation_as_kueue_writes_them() -> None:
    wl = workload()
    wl["status"] = ws.admit(wl, ADMISSION, 100.0)
    requeue = {"count": 1, "requeueAt": "1970-01-01T00:02:50Z"}
    wl["status"] = ws.evict(
        wl,
        "PodsReadyTimeout",
        "Exceeded the PodsReady timeout ns/w",
        160.0,
        underlying_cause="WaitForStart",
        requeue_state=requeue,
    )
    assert by_type(wl["status"])["Evicted"]["reason"] == "PodsReadyTimeout"
    assert wl["status"]["requeueState"] == requeue
    assert wl["status"]["schedulingStats"]["evictions"] == [
        {"reason": "PodsReadyTimeout", "underlyingCause": "WaitForStart", "count": 1}
    ]
    wl["status"] = ws.release(wl, 161.0)  # the job side: Requeued=False with the reason
    assert by_type(wl["status"])["Requeued"]["status"] == "False"
    assert by_type(wl["status"])["Requeued"]["reason"] == "PodsReadyTimeout"
    assert wl["status"]["accumulatedPastExecutionTimeSeconds"] == 61  # admitted 100 → 161
    wl["status"] = ws.finish_backoff(wl, 171.0)
    assert wl["status"]["requeueState"] == {"count": 1}
    assert by_type(wl["status"])["Requeued"]["reason"] == "BackoffFinished"
    assert by_type(wl["status"])["Requeued"]["status"] == "True"

    wl["status"] = ws.admit(wl, ADMISSION, 200.0)
    wl["status"] = ws.set_deactivation_target(
        wl, "RequeuingLimitExceeded", "exceeding the maximum number of re-queuing retries", 260.0
    )
    assert by_type(wl["status"])["DeactivationTarget"]["status"] == "True"
    wl["status"] = ws.evict(
        wl,
        "Deactivated",
        "The workload is deactivated due to exceeding the maximum number of re-queuing retries",
        261.0,
        underlying_cause="RequeuingLimitExceeded",
    )
    conditions = by_type(wl["status"])
    assert conditions["Evicted"]["reason"] == "DeactivatedDueToRequeuingLimitExceeded"
    assert "DeactivationTarget" not in conditions and "requeueState" not in wl["status"]
    assert {"reason": "Deactivated", "underlyingCause": "RequeuingLimitExceeded", "count": 1} in (
        wl["status"]["schedulingStats"]["evictions"]
    )
    wl["status"] = ws.release(wl, 270.0)
    assert wl["status"]["accumulatedPastExecutionTimeSeconds"] == 61 + 70


def test_maximum_execution_time_mark_clears_the_accumulated_time() -> None:
    wl = workload({"accumulatedPastExecutionTimeSeconds": 30})
    wl["status"] = ws.admit(wl, ADMISSION, 100.0)
    wl["status"] = ws.set_deactivation_target(
        wl, "MaximumExecutionTimeExceeded", "exceeding the maximum execution time", 170.0, True
    )
    assert "accumulatedPastExecutionTimeSeconds" not in wl["status"]
    assert by_type(wl["status"])["DeactivationTarget"]["reason"] == "MaximumExecutionTimeExceeded"


def test_parse_rfc3339_reads_kubernetes_times() -> None:
    assert ws.parse_rfc3339("1970-01-01T00:01:40Z") == 100.0
    assert ws.parse_rfc3339("1970-01-01T00:01:40.5Z") == 100.5
    assert ws.parse_rfc3339("yesterday") is None and ws.parse_rfc3339(None) is None
