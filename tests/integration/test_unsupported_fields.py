"""Kueue fields quotagate does not implement yet, on the real API server (issue 17): the
API server accepts them (our CRDs serve Kueue's schema), and quotagate reports them on the
object (`UnsupportedFields` condition) and as a Warning Event instead of acting as if they
were absent (admission checks, implemented since: tests/integration/test_admission_checks.py)."""

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
