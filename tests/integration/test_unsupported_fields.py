"""Kueue fields quotagate does not implement yet, on the real API server (issue 17): the
API server accepts them (our CRDs serve Kueue's schema), and quotagate reports them on the
object (`UnsupportedFields` condition) and as a Warning Event instead of acting as if they
were absent; a ClusterQueue with admission checks admits nothing."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from tests.cluster.fixtures import wait_for
from tests.integration.kueue import (
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


def _warning(core: client.CoreV1Api, namespace: str | None, kind: str, name: str) -> Any:
    selector = f"involvedObject.kind={kind},involvedObject.name={name}"
    events = (
        core.list_namespaced_event(namespace, field_selector=selector)
        if namespace
        else core.list_event_for_all_namespaces(field_selector=selector)
    ).items
    return next(
        (e for e in events if e.type == "Warning" and e.reason == "UnsupportedFields"), None
    )


def test_a_workload_with_min_count_is_admitted_partially_and_its_preemption_gates_reported(
    controller: ControllerProcess, kueue: Kueue, namespace: str, api_client: client.ApiClient
) -> None:
    """`minCount` is implemented (partial admission: 2 of 4 pods fit); preemption gates
    are not, and are reported."""
    cq = f"{namespace}-cq"
    limited = workload(namespace, "limited", "lq", count=4)
    limited["spec"]["podSets"][0]["minCount"] = 1
    limited["spec"]["preemptionGates"] = [{"name": "example.com/gate"}]
    kueue.apply(
        flavor(f"{namespace}-rf"),
        cluster_queue(cq, {f"{namespace}-rf": {"cpu": 2}}),
        local_queue(namespace, "lq", cq),
        limited,
    )
    admitted = wait_admitted(kueue, namespace, "limited")
    [assignment] = admitted["status"]["admission"]["podSetAssignments"]
    assert (assignment["count"], assignment["resourceUsage"]["cpu"]) == (2, "2")
    reported = wait_for(
        lambda: condition(kueue.get_workload(namespace, "limited"), "UnsupportedFields"),
        what="the UnsupportedFields condition",
    )
    assert (reported["status"], reported["reason"]) == ("True", "NotImplemented")
    assert reported["message"].startswith("spec.preemptionGates: ")
    assert "minCount" not in reported["message"]
    core = client.CoreV1Api(api_client)
    event = wait_for(
        lambda: _warning(core, namespace, "Workload", "limited"), what="a Warning Event"
    )
    assert "spec.preemptionGates" in event.message


def test_a_cluster_queue_with_admission_checks_is_inactive_and_admits_nothing(
    controller: ControllerProcess, kueue: Kueue, namespace: str, api_client: client.ApiClient
) -> None:
    cq = cluster_queue(f"{namespace}-checked", {f"{namespace}-rf": {"cpu": 2}})
    cq["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": "provisioning"}]}
    kueue.apply(
        flavor(f"{namespace}-rf"),
        cq,
        local_queue(namespace, "lq", f"{namespace}-checked"),
        workload(namespace, "waits", "lq"),
    )
    active = wait_for(
        lambda: condition(kueue.get_cluster_queue(f"{namespace}-checked"), "Active"),
        what="the ClusterQueue's Active condition",
    )
    assert (active["status"], active["reason"]) == ("False", "AdmissionCheckNotFound")
    reported = wait_for(
        lambda: condition(kueue.get_cluster_queue(f"{namespace}-checked"), "UnsupportedFields"),
        what="the ClusterQueue's UnsupportedFields condition",
    )
    assert reported["message"].startswith("spec.admissionChecksStrategy: ")
    assert wait_for(
        lambda: _warning(
            client.CoreV1Api(api_client), None, "ClusterQueue", f"{namespace}-checked"
        ),
        what="a Warning Event on the ClusterQueue",
    )
    # The Workload is told why and is never admitted without its checks.
    reason = wait_pending_reason(kueue, namespace, "waits")
    assert reason == (
        f"ClusterQueue {namespace}-checked is inactive: admission check provisioning not found "
        "(quotagate runs no admission checks and admits nothing without them)"
    )
    pending = kueue.get_workload(namespace, "waits")
    assert "admission" not in pending.get("status", {})
    assert (condition(pending, "QuotaReserved") or {}).get("status") != "True"
