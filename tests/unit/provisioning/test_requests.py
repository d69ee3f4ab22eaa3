"""controller/provisioning/requests.py: Kueue's ProvisioningRequest check rules — names
and attempts, whether a request is needed, each autoscaler condition's check state with
the retry limit and backoff, and the pod set updates of a provisioned request."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from api.constants import CheckState
from controller.provisioning.requests import (
    CONSUME_ANNOTATION,
    PROVISIONING_CLASS_ANNOTATION,
    CheckUpdate,
    RetryStrategy,
    attempt_of,
    is_unused,
    next_state,
    pod_set_updates,
    pod_template_name,
    request_is_needed,
    request_name,
)


def request(*conditions: tuple[str, str], message: str = "m") -> dict[str, Any]:
    return {
        "metadata": {"name": "wl-prov-1"},
        "spec": {
            "provisioningClassName": "check-capacity.autoscaling.x-k8s.io",
            "podSets": [{"podTemplateRef": {"name": "ppt-wl-prov-1-main"}, "count": 2}],
        },
        "status": {
            "conditions": [
                {"type": t, "status": s, "reason": "R", "message": message} for t, s in conditions
            ],
            "provisioningClassDetails": {"pool": "gpu-a"},
        },
    }


@given(
    workload=st.from_regex(r"[a-z][a-z0-9-]{0,200}[a-z0-9]", fullmatch=True),
    check=st.from_regex(r"[a-z][a-z0-9-]{0,80}", fullmatch=True),
    attempt=st.integers(1, 1000),
)
def test_a_requests_name_carries_its_attempt(workload: str, check: str, attempt: int) -> None:
    name = request_name(workload, check, attempt)
    assert len(name) <= 253
    if len(f"{workload}-{check}-{attempt}") <= 247:
        assert name == f"{workload}-{check}-{attempt}"
        assert attempt_of(name, workload, check) == attempt
    assert len(pod_template_name(name, "main")) <= 253


def test_another_workloads_request_has_no_attempt() -> None:
    assert attempt_of("wl-prov-2", "wl", "prov") == 2
    assert attempt_of("wl2-prov-2", "wl", "prov") is None
    assert attempt_of("wl-prov-x", "wl", "prov") is None


def workload(requests: dict[str, str], count: int = 2, admitted: int | None = 2) -> dict[str, Any]:
    assignment: dict[str, Any] = {"name": "main", "flavors": {}}
    if admitted is not None:
        assignment["count"] = admitted
    return {
        "spec": {
            "podSets": [
                {
                    "name": "main",
                    "count": count,
                    "template": {"spec": {"containers": [{"resources": {"requests": requests}}]}},
                }
            ]
        },
        "status": {"admission": {"podSetAssignments": [assignment]}},
    }


def test_a_request_is_needed_only_for_managed_resources_with_pods_admitted() -> None:
    gpu = workload({"cpu": "1", "nvidia.com/gpu": "1"})
    cpu = workload({"cpu": "1"})
    assert request_is_needed(gpu, ["nvidia.com/gpu"])
    assert not request_is_needed(cpu, ["nvidia.com/gpu"])
    assert request_is_needed(cpu, [])  # no managed resources: every resource
    assert not request_is_needed(workload({"cpu": "1"}, admitted=0), [])
    assert request_is_needed(workload({"cpu": "1"}, admitted=None), [])


STRATEGY = RetryStrategy(backoff_limit_count=2, backoff_base_seconds=10, backoff_max_seconds=25)


def state(
    req: dict[str, Any], attempt: int = 1, retry_count: int = 0, admitted: bool = False
) -> CheckUpdate | None:
    return next_state(req, attempt, retry_count, admitted, True, STRATEGY, ({"name": "main"},))


def test_failed_retries_with_backoff_then_is_rejected() -> None:
    failed = request(("Failed", "True"), message="out of GPUs")
    assert state(failed, 1, 0) == CheckUpdate(
        CheckState.RETRY, "Retrying after failure: out of GPUs", 10
    )
    assert state(failed, 2, 1) == CheckUpdate(
        CheckState.RETRY, "Retrying after failure: out of GPUs", 20
    )
    assert state(failed, 2, 2) is None  # this attempt's retry is counted already
    assert state(failed, 3, 2) == CheckUpdate(CheckState.REJECTED, "out of GPUs")


def test_booking_expired_retries_only_before_admission() -> None:
    expired = request(("Provisioned", "True"), ("BookingExpired", "True"), message="late")
    assert state(expired, admitted=True) is None
    update = state(expired)
    assert update is not None and update.state is CheckState.RETRY
    assert update.message == "Retrying after booking expired: late"


def test_capacity_revoked_rejects_an_active_workload() -> None:
    revoked = request(("Provisioned", "True"), ("CapacityRevoked", "True"), message="gone")
    assert state(revoked) == CheckUpdate(CheckState.REJECTED, "gone")
    assert next_state(revoked, 1, 0, True, False, STRATEGY, ()) is None


def test_provisioned_is_ready_with_the_updates_and_accepted_is_pending() -> None:
    ready = state(request(("Provisioned", "True"), message="capacity is there"))
    assert ready == CheckUpdate(CheckState.READY, "capacity is there", None, ({"name": "main"},))
    eta = state(request(("Accepted", "True"), ("Provisioned", "False"), message="ETA 5m"))
    assert eta == CheckUpdate(CheckState.PENDING, "ETA 5m")
    assert state(request()) == CheckUpdate(CheckState.PENDING, "")


@pytest.mark.parametrize("with_selector", [True, False])
def test_pod_set_updates_name_the_request_and_the_details(with_selector: bool) -> None:
    selectors = (
        [
            {"key": "example.com/pool", "valueFromProvisioningClassDetail": "pool"},
            {"key": "example.com/zone", "valueFromProvisioningClassDetail": "zone"},
        ]
        if with_selector
        else []
    )
    [update] = pod_set_updates(request(("Provisioned", "True")), ["main"], selectors)
    assert update["name"] == "main"
    assert update["annotations"] == {
        CONSUME_ANNOTATION: "wl-prov-1",
        PROVISIONING_CLASS_ANNOTATION: "check-capacity.autoscaling.x-k8s.io",
    }
    if with_selector:
        assert update["nodeSelector"] == {"example.com/pool": "gpu-a"}  # zone: no detail
    else:
        assert "nodeSelector" not in update


def test_a_request_is_unused_once_its_workload_is_done_or_moved_to_a_later_attempt() -> None:
    def holder(retry_count: int, *conditions: str) -> dict[str, Any]:
        return {
            "metadata": {"name": "wl"},
            "status": {
                "conditions": [{"type": c, "status": "True"} for c in conditions],
                "admissionChecks": [
                    {"name": "prov", "state": "Pending", "retryCount": retry_count}
                ],
            },
        }

    first = {"metadata": {"name": "wl-prov-1"}}
    assert not is_unused(first, holder(0))
    assert is_unused(first, holder(1))  # the check is on attempt 2 now
    assert is_unused(first, holder(0, "Evicted"))
    assert is_unused(first, holder(0, "Finished"))
    assert is_unused(first, None)  # the Workload is gone
    assert not is_unused({"metadata": {"name": "other-prov-1"}}, holder(5))
