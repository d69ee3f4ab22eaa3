"""What happens after admission, on the real API server with `quotagate run` (issue 21):
waitForPodsReady's PodsReadyTimeout eviction, requeueState and its backoff, deactivation
after the limit, the recovery timeout, blockAdmission, and maximumExecutionTimeSeconds
with accumulatedPastExecutionTimeSeconds.

The Workloads are bare; the test is their job side: it writes the PodsReady condition and
acknowledges evictions as Kueue's jobframework does (server-side apply as
`kueue-admission`, `api.workload_status.release`)."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from api import workload_status as ws
from tests.cluster.fixtures import wait_for
from tests.integration.conftest import StartConfigured
from tests.integration.kueue import (
    GROUP,
    VERSION,
    ControllerProcess,
    Kueue,
    cluster_queue,
    condition,
    flavor,
    local_queue,
    wait_admitted,
    wait_pending_reason,
    workload,
)

StartController = Callable[[dict[str, Any], str], ControllerProcess]

TIMEOUTS = {
    "timeout": "2s",
    "recoveryTimeout": "2s",
    "requeuingStrategy": {"backoffLimitCount": 1, "backoffBaseSeconds": 1, "backoffMaxSeconds": 5},
}


@pytest.fixture
def start_controller(configured_controller: StartConfigured) -> StartController:
    """`quotagate run --config` with a waitForPodsReady section, managing only the test's
    namespace (there is no namespace controller here, so earlier tests' Workloads stay
    behind, and blockAdmission counts every Workload it manages)."""
    return lambda pods_ready, namespace: configured_controller(
        {"waitForPodsReady": pods_ready}, namespace
    )


def _apply_status(kueue: Kueue, wl: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    """A job side's status write: server-side apply as `kueue-admission`, with force."""
    meta = wl["metadata"]
    result: dict[str, Any] = kueue.custom.patch_namespaced_custom_object_status(
        GROUP,
        VERSION,
        meta["namespace"],
        "workloads",
        meta["name"],
        ws.apply_body(wl, status, strict=False),
        field_manager=ws.ADMISSION_FIELD_MANAGER,
        force=True,
        _content_type="application/apply-patch+yaml",
    )
    return result


def set_pods_ready(kueue: Kueue, namespace: str, name: str, ready: bool, reason: str) -> None:
    """PodsReady as Kueue's jobframework writes it (reasons PodsReady / WaitForStart /
    WaitForRecovery)."""
    wl = kueue.get_workload(namespace, name)
    status = ws.kueue_status(wl)
    status["conditions"] = ws.set_condition(
        status["conditions"], "PodsReady", ready, reason, f"test: {reason}", time.time()
    )
    _apply_status(kueue, wl, status)


def release(kueue: Kueue, namespace: str, name: str) -> dict[str, Any]:
    """The job side acknowledges an eviction: reservation cleared, Requeued set."""
    wl = kueue.get_workload(namespace, name)
    return _apply_status(kueue, wl, ws.release(wl, time.time()))


def evicted(kueue: Kueue, namespace: str, name: str) -> dict[str, Any] | None:
    wl = kueue.get_workload(namespace, name)
    found = condition(wl, "Evicted")
    return wl if found and found["status"] == "True" else None


def stays(predicate: Callable[[], bool], seconds: float, what: str) -> None:
    """Assert `predicate` holds throughout `seconds` (a negative check over a timeout)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert predicate(), what
        time.sleep(0.2)


def metric(process: ControllerProcess, name: str, **labels: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{process.metrics_port}/metrics") as response:
        text = response.read().decode()
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{"):
            continue
        if all(f'{key}="{value}"' in line for key, value in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def _queue(kueue: Kueue, namespace: str, cpu: int = 4) -> None:
    cq = f"{namespace}-cq"
    kueue.apply(
        flavor(f"{namespace}-rf"),
        cluster_queue(cq, {f"{namespace}-rf": {"cpu": cpu}}),
        local_queue(namespace, "lq", cq),
    )


def _time(text: str) -> float:
    parsed = ws.parse_rfc3339(text)
    assert parsed is not None, text
    return parsed


def test_pods_ready_timeout_requeues_after_backoff_then_deactivates_at_the_limit(
    start_controller: StartController, kueue: Kueue, namespace: str
) -> None:
    process = start_controller(TIMEOUTS, namespace)
    _queue(kueue, namespace)
    kueue.apply(workload(namespace, "slow", "lq"))
    first = wait_admitted(kueue, namespace, "slow")
    admitted_at = _time(condition(first, "Admitted")["lastTransitionTime"])  # type: ignore[index]

    # 1. Not PodsReady 2 s after admission: evicted, requeueState count 1.
    wl = wait_for(lambda: evicted(kueue, namespace, "slow"), timeout=20, what="PodsReadyTimeout")
    eviction = condition(wl, "Evicted")
    assert eviction is not None
    assert eviction["reason"] == "PodsReadyTimeout"
    assert eviction["message"] == f"Exceeded the PodsReady timeout {namespace}/slow"
    assert _time(eviction["lastTransitionTime"]) >= admitted_at + 2 - 1  # second precision
    requeue = wl["status"]["requeueState"]
    assert requeue["count"] == 1
    requeue_at = _time(requeue["requeueAt"])
    assert requeue_at >= _time(eviction["lastTransitionTime"])  # base 1 s, jittered
    assert {"reason": "PodsReadyTimeout", "underlyingCause": "WaitForStart", "count": 1} in (
        wl["status"]["schedulingStats"]["evictions"]
    )
    assert ws.has_quota_reservation(wl)  # held until the job side lets go

    # 2. The job side lets go; after the backoff it is Requeued (BackoffFinished) and
    #    admitted again, not before requeueAt.
    released = release(kueue, namespace, "slow")
    assert condition(released, "Requeued")["reason"] == "PodsReadyTimeout"  # type: ignore[index]
    again = wait_admitted(kueue, namespace, "slow")
    requeued = condition(again, "Requeued")
    assert requeued is not None and (requeued["status"], requeued["reason"]) == (
        "True",
        "BackoffFinished",
    )
    readmitted_at = _time(condition(again, "QuotaReserved")["lastTransitionTime"])  # type: ignore[index]
    assert readmitted_at >= requeue_at - 1
    assert again["status"]["requeueState"] == {"count": 1}  # requeueAt cleared

    # 3. Still not ready: count + 1 > backoffLimitCount 1, so it is deactivated.
    def deactivated() -> dict[str, Any] | None:
        wl = kueue.get_workload(namespace, "slow")
        found = condition(wl, "Evicted")
        return wl if found and found["reason"].startswith("Deactivated") else None

    wl = wait_for(deactivated, timeout=20, what="deactivation")
    assert wl["spec"]["active"] is False
    eviction = condition(wl, "Evicted")
    assert eviction is not None and eviction["status"] == "True"
    assert eviction["reason"] == "DeactivatedDueToRequeuingLimitExceeded"
    assert eviction["message"] == (
        "The workload is deactivated due to exceeding the maximum number of re-queuing retries"
    )
    assert condition(wl, "DeactivationTarget") is None
    assert "requeueState" not in wl["status"]
    assert {
        "reason": "Deactivated",
        "underlyingCause": "RequeuingLimitExceeded",
        "count": 1,
    } in wl["status"]["schedulingStats"]["evictions"]
    cq = f"{namespace}-cq"
    assert (
        metric(
            process,
            "kueue_evicted_workloads_total",
            cluster_queue=cq,
            reason="PodsReadyTimeout",
            underlying_cause="WaitForStart",
        )
        == 1
    )
    assert (
        metric(
            process,
            "kueue_evicted_workloads_total",
            cluster_queue=cq,
            reason="Deactivated",
            underlying_cause="RequeuingLimitExceeded",
        )
        == 1
    )
    # Inactive: once released it is not admitted again.
    release(kueue, namespace, "slow")
    stays(
        lambda: not ws.has_quota_reservation(kueue.get_workload(namespace, "slow")),
        3,
        "a deactivated Workload stays unadmitted",
    )


def test_a_ready_workload_is_kept_until_it_loses_readiness_for_the_recovery_timeout(
    start_controller: StartController, kueue: Kueue, namespace: str
) -> None:
    # A 3 s timeout leaves the test, as the job side, time to write PodsReady first.
    start_controller({**TIMEOUTS, "timeout": "3s"}, namespace)
    _queue(kueue, namespace)
    kueue.apply(workload(namespace, "steady", "lq"))
    wait_admitted(kueue, namespace, "steady")
    set_pods_ready(kueue, namespace, "steady", True, "PodsReady")
    stays(
        lambda: evicted(kueue, namespace, "steady") is None,
        5,
        "a PodsReady Workload is not evicted after the timeout",
    )
    lost_at = time.time()
    set_pods_ready(kueue, namespace, "steady", False, "WaitForRecovery")
    wl = wait_for(lambda: evicted(kueue, namespace, "steady"), timeout=20, what="recovery timeout")
    eviction = condition(wl, "Evicted")
    assert eviction is not None and eviction["reason"] == "PodsReadyTimeout"
    assert _time(eviction["lastTransitionTime"]) >= lost_at + 2 - 1
    assert wl["status"]["schedulingStats"]["evictions"] == [
        {"reason": "PodsReadyTimeout", "underlyingCause": "WaitForRecovery", "count": 1}
    ]
    assert wl["status"]["requeueState"]["count"] == 1


def test_block_admission_waits_for_the_admitted_workload_to_be_ready(
    start_controller: StartController, kueue: Kueue, namespace: str
) -> None:
    start_controller({"timeout": "5m", "blockAdmission": True}, namespace)
    _queue(kueue, namespace)
    kueue.apply(workload(namespace, "first", "lq"))
    wait_admitted(kueue, namespace, "first")
    kueue.apply(workload(namespace, "second", "lq"))
    reason = wait_pending_reason(kueue, namespace, "second")
    assert reason == "waiting for all admitted workloads to be in PodsReady condition"
    found = condition(kueue.get_workload(namespace, "second"), "QuotaReserved")
    assert found is not None and found["reason"] == "WaitingForPodsReady"
    set_pods_ready(kueue, namespace, "first", True, "PodsReady")
    wait_admitted(kueue, namespace, "second")


def test_maximum_execution_time_counts_past_admissions_then_deactivates(
    start_controller: StartController, kueue: Kueue, namespace: str
) -> None:
    start_controller({"timeout": "5m"}, namespace)  # PodsReady is not the subject here
    _queue(kueue, namespace)
    limited = workload(namespace, "limited", "lq")
    limited["spec"]["maximumExecutionTimeSeconds"] = 10
    kueue.apply(limited)
    first = wait_admitted(kueue, namespace, "limited")
    set_pods_ready(kueue, namespace, "limited", True, "PodsReady")
    admitted_at = _time(condition(first, "Admitted")["lastTransitionTime"])  # type: ignore[index]
    # The job side gives the admission back after at least 2 s (say, it was suspended):
    # the admitted time is added to accumulatedPastExecutionTimeSeconds.
    wait_for(lambda: time.time() >= admitted_at + 3, timeout=10, what="2 s of execution")
    wl = kueue.get_workload(namespace, "limited")
    assert evicted(kueue, namespace, "limited") is None
    wl = _apply_status(
        kueue, wl, ws.unset_quota_reservation(wl, "Pending", "suspended", time.time())
    )
    accumulated = wl["status"]["accumulatedPastExecutionTimeSeconds"]
    assert 3 <= accumulated <= 7
    again = wait_admitted(kueue, namespace, "limited")
    readmitted_at = _time(condition(again, "Admitted")["lastTransitionTime"])  # type: ignore[index]

    def deactivated() -> dict[str, Any] | None:
        wl = kueue.get_workload(namespace, "limited")
        found = condition(wl, "Evicted")
        return wl if found and found["status"] == "True" else None

    wl = wait_for(deactivated, timeout=20, what="maximum execution time")
    eviction = condition(wl, "Evicted")
    assert eviction is not None
    assert eviction["reason"] == "DeactivatedDueToMaximumExecutionTimeExceeded"
    assert eviction["message"] == (
        "The workload is deactivated due to exceeding the maximum execution time"
    )
    assert wl["spec"]["active"] is False
    # Deactivated once the remaining 10 − accumulated seconds were used up (slack for the
    # second-precision times, the once-a-second check and three writes).
    took = _time(eviction["lastTransitionTime"]) - readmitted_at
    assert 10 - accumulated - 1 <= took <= 10 - accumulated + 4
    assert "accumulatedPastExecutionTimeSeconds" not in wl["status"]  # cleared, as Kueue
    assert {
        "reason": "Deactivated",
        "underlyingCause": "MaximumExecutionTimeExceeded",
        "count": 1,
    } in wl["status"]["schedulingStats"]["evictions"]
    events = client.CoreV1Api(kueue.custom.api_client).list_namespaced_event(
        namespace, field_selector="involvedObject.name=limited"
    )
    assert any(
        e.reason == "MaximumExecutionTimeExceeded" and e.type == "Warning" for e in events.items
    )


def test_requeued_again_with_kueues_reason_once_reactivated_or_its_queue_restarted(
    controller: ControllerProcess, kueue: Kueue, namespace: str
) -> None:
    """Released with Requeued=False (Deactivated, LocalQueueStopped), a Workload gets
    Requeued=True with Kueue's reason (Reactivated, LocalQueueRestarted) once `spec.active`
    is true again or its LocalQueue runs again, and is admitted again."""
    _queue(kueue, namespace)
    kueue.apply(workload(namespace, "paused", "lq"))
    wait_admitted(kueue, namespace, "paused")

    def requeued(reason: str) -> dict[str, Any] | None:
        found = condition(kueue.get_workload(namespace, "paused"), "Requeued")
        return found if found and found["reason"] == reason else None

    patch = kueue.custom.patch_namespaced_custom_object
    patch(GROUP, VERSION, namespace, "workloads", "paused", {"spec": {"active": False}})
    wait_for(lambda: evicted(kueue, namespace, "paused"), what="evicted as deactivated")
    release(kueue, namespace, "paused")
    assert requeued("Deactivated")["status"] == "False"  # type: ignore[index]
    patch(GROUP, VERSION, namespace, "workloads", "paused", {"spec": {"active": True}})
    found = wait_for(lambda: requeued("Reactivated"), what="Requeued=True (Reactivated)")
    assert (found["status"], found["message"]) == ("True", "The workload was reactivated")
    wait_admitted(kueue, namespace, "paused")

    hold = {"spec": {"stopPolicy": "HoldAndDrain"}}
    patch(GROUP, VERSION, namespace, "localqueues", "lq", hold)
    wait_for(lambda: evicted(kueue, namespace, "paused"), what="evicted by the stopped queue")
    release(kueue, namespace, "paused")
    assert requeued("LocalQueueStopped")["status"] == "False"  # type: ignore[index]
    stays(lambda: requeued("LocalQueueStopped") is not None, 2.0, "still stopped")
    patch(GROUP, VERSION, namespace, "localqueues", "lq", {"spec": {"stopPolicy": "None"}})
    found = wait_for(lambda: requeued("LocalQueueRestarted"), what="LocalQueueRestarted")
    assert (found["status"], found["message"]) == (
        "True",
        "The LocalQueue was restarted after being stopped",
    )
    wait_admitted(kueue, namespace, "paused")
