"""api/workload_status.py with admission checks: the two phases as Kueue writes them
(QuotaReserved, then Admitted once every check is Ready), `status.admissionChecks` kept to
the checks needed, and the reset of the checks on eviction (`resetChecksOnEviction`)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from api import workload_status as ws
from api.workload import WorkloadStatus
from tests.unit.api.test_workload_status import ADMISSION, by_type, workload


def validate_status(status: dict[str, Any]) -> None:
    """The status fits Kueue's schema (the CRD's model)."""
    WorkloadStatus.model_validate(status)


def set_state(wl: dict[str, Any], name: str, state: str, **extra: Any) -> None:
    for check in wl["status"]["admissionChecks"]:
        if check["name"] == name:
            check.update(state=state, lastTransitionTime="1970-01-01T00:05:00Z", **extra)


def test_quota_reserved_first_then_admitted_when_every_check_is_ready() -> None:
    wl = workload()
    wl["status"] = ws.admit(wl, ADMISSION, 200.0, ("prov", "budget"))
    conditions = by_type(wl["status"])
    assert conditions["QuotaReserved"]["status"] == "True"
    assert conditions["Admitted"]["status"] == "False"
    assert conditions["Admitted"]["reason"] == "UnsatisfiedAdmissionChecks"
    assert conditions["Admitted"]["message"] == "The workload has not all checks ready"
    assert wl["status"]["admissionChecks"] == [
        {"name": n, "state": "Pending", "message": "", "lastTransitionTime": "1970-01-01T00:03:20Z"}
        for n in ("budget", "prov")
    ]
    validate_status(wl["status"])
    assert not ws.is_admitted(wl)

    set_state(wl, "prov", "Ready")
    assert ws.sync_checks(wl, ("budget", "prov"), 300.0) is None  # nothing changes yet
    set_state(wl, "budget", "Ready")
    wl["status"] = ws.sync_checks(wl, ("budget", "prov"), 310.0)
    admitted = by_type(wl["status"])["Admitted"]
    assert (admitted["status"], admitted["reason"]) == ("True", "Admitted")
    assert admitted["lastTransitionTime"] == "1970-01-01T00:05:10Z"
    assert ws.is_admitted(wl)


def test_without_checks_admission_is_one_write_as_before() -> None:
    wl = workload()
    wl["status"] = ws.admit(wl, ADMISSION, 200.0)
    assert by_type(wl["status"])["Admitted"]["status"] == "True"
    assert "admissionChecks" not in wl["status"]


def test_an_admitted_workload_stays_admitted_until_evicted() -> None:
    wl = workload()
    wl["status"] = ws.admit(wl, ADMISSION, 200.0, ("prov",))
    set_state(wl, "prov", "Ready")
    wl["status"] = ws.sync_checks(wl, ("prov",), 210.0)
    set_state(wl, "prov", "Retry", retryCount=1)
    assert ws.sync_checks(wl, ("prov",), 220.0) is None  # Admitted stays True


def test_eviction_resets_every_check_to_pending_and_counts_retries() -> None:
    wl = workload()
    wl["status"] = ws.admit(wl, ADMISSION, 200.0, ("a", "b", "c"))
    set_state(wl, "a", "Retry", retryCount=1, requeueAfterSeconds=60, message="no capacity")
    set_state(wl, "b", "Ready")
    wl["status"] = ws.evict(wl, "AdmissionCheck", "Evicted due to ...", 400.0)
    checks = {c["name"]: c for c in wl["status"]["admissionChecks"]}
    assert checks["a"] == {
        "name": "a",
        "state": "Pending",
        "message": "Reset to Pending after eviction. Previously: Retry",
        "lastTransitionTime": "1970-01-01T00:06:40Z",
        "requeueAfterSeconds": 60,
        "retryCount": 2,
    }
    assert checks["b"]["state"] == "Pending" and "retryCount" not in checks["b"]
    assert checks["c"]["lastTransitionTime"] == "1970-01-01T00:03:20Z"  # was Pending: kept
    evicted = by_type(wl["status"])["Evicted"]
    assert (evicted["reason"], evicted["status"]) == ("AdmissionCheck", "True")
    validate_status(wl["status"])
    wl["status"] = ws.release(wl, 410.0)
    requeued = by_type(wl["status"])["Requeued"]
    assert (requeued["status"], requeued["reason"]) == ("False", "AdmissionCheck")
    assert "admission" not in wl["status"]


@given(
    names=st.lists(st.sampled_from("abcde"), unique=True, max_size=4),
    before=st.lists(st.sampled_from("abcdef"), unique=True, max_size=4),
)
def test_the_checks_are_kept_to_those_needed(names: list[str], before: list[str]) -> None:
    status: dict[str, Any] = {
        "admissionChecks": [
            {"name": n, "state": "Ready", "message": "m", "lastTransitionTime": "t"} for n in before
        ]
    }
    changed = ws.sync_admission_checks(status, names, 0.0)
    kept = status.get("admissionChecks") or []
    assert [c["name"] for c in kept] == sorted(names)
    assert all(c["state"] == ("Ready" if c["name"] in before else "Pending") for c in kept)
    assert changed == (set(names) != set(before))
