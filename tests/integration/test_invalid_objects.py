"""What the controller finds invalid by Kueue's rules, on the real API server: objects
written while no validating webhook answers (here: none is registered) are reported — a
queue's Active=False with reason Invalid and the webhook's message, a pending Workload's
QuotaReserved=False Misconfigured, a Cohort's Active=False, a Warning Event — and never
replaced by their previous version: a ClusterQueue made invalid stops admitting, and
admits again once fixed. Also, on the same controller: a Workload held by admission gates,
and one whose pods have pod-level resources."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
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

GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"


@pytest.fixture(autouse=True)
def _remove_invalid_objects(kueue: Kueue, namespace: str) -> Iterator[None]:
    """The cluster-scoped objects a test made (all named after its namespace) go with it:
    invalid ones must not linger into other tests."""
    yield
    for plural in ("clusterqueues", "cohorts", "resourceflavors"):
        for item in kueue.custom.list_cluster_custom_object(GROUP, VERSION, plural)["items"]:
            if item["metadata"]["name"].startswith(f"{namespace}-"):
                kueue.delete_cluster_scoped(plural, item["metadata"]["name"])


def _event(core: client.CoreV1Api, namespace: str | None, kind: str, name: str, reason: str) -> Any:
    selector = f"involvedObject.kind={kind},involvedObject.name={name}"
    events = (
        core.list_namespaced_event(namespace, field_selector=selector)
        if namespace
        else core.list_event_for_all_namespaces(field_selector=selector)
    ).items
    return next((e for e in events if e.reason == reason), None)


def _active(kueue: Kueue, name: str, reason: str) -> dict[str, Any]:
    def found() -> dict[str, Any] | None:
        active = condition(kueue.get_cluster_queue(name), "Active")
        return active if active and active["reason"] == reason else None

    result: dict[str, Any] = wait_for(found, what=f"ClusterQueue {name} Active={reason}")
    return result


def test_a_cluster_queue_made_invalid_stops_admitting_until_fixed(
    controller: ControllerProcess, kueue: Kueue, namespace: str, api_client: client.ApiClient
) -> None:
    name, rf = f"{namespace}-cq", f"{namespace}-rf"
    cq = cluster_queue(name, {rf: {"cpu": 4}}, cohort=f"{namespace}-co")
    kueue.apply(
        flavor(rf), cq, local_queue(namespace, "lq", name), workload(namespace, "first", "lq")
    )
    wait_admitted(kueue, namespace, "first")
    # lendingLimit above nominalQuota: Kueue's webhook refuses it; stored here without one.
    current = kueue.get_cluster_queue(name)
    current["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["lendingLimit"] = "5"
    kueue.custom.replace_cluster_custom_object(GROUP, VERSION, "clusterqueues", name, current)
    active = _active(kueue, name, "Invalid")
    assert active["status"] == "False"
    assert active["message"] == (
        f"ClusterQueue {name} is inactive: spec.resourceGroups[0].flavors[0].resources[0]."
        'lendingLimit: Invalid value: "5": must be less than or equal to the nominalQuota'
    )
    core = client.CoreV1Api(api_client)
    event = wait_for(
        lambda: _event(core, None, "ClusterQueue", name, "InvalidObject"), what="a Warning Event"
    )
    assert event.type == "Warning" and "must be less than or equal" in event.message
    # Not the old quota in force: nothing more is admitted, and the pending say why.
    kueue.apply(workload(namespace, "second", "lq"))
    assert wait_pending_reason(kueue, namespace, "second") == active["message"]
    fixed = kueue.get_cluster_queue(name)
    del fixed["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["lendingLimit"]
    kueue.custom.replace_cluster_custom_object(GROUP, VERSION, "clusterqueues", name, fixed)
    wait_admitted(kueue, namespace, "second")
    assert _active(kueue, name, "Ready")["status"] == "True"


def test_an_invalid_flavor_or_cohort_makes_its_queues_inactive(
    controller: ControllerProcess, kueue: Kueue, namespace: str
) -> None:
    rf, cohort = f"{namespace}-rf", f"{namespace}-co"
    bad_flavor = flavor(rf, node_labels={"zone": "a b"})  # not a label value
    bad_cohort = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Cohort",
        "metadata": {"name": cohort},
        "spec": {
            "resourceGroups": [  # a lendingLimit with no parent
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {
                            "name": rf,
                            "resources": [
                                {"name": "cpu", "nominalQuota": "4", "lendingLimit": "1"}
                            ],
                        }
                    ],
                }
            ]
        },
    }
    kueue.apply(
        bad_flavor,
        bad_cohort,
        cluster_queue(f"{namespace}-alone", {rf: {"cpu": 4}}),
        cluster_queue(f"{namespace}-team", {f"{namespace}-ok": {"cpu": 4}}, cohort=cohort),
        flavor(f"{namespace}-ok"),
    )
    alone = _active(kueue, f"{namespace}-alone", "Invalid")
    assert alone["message"].startswith(
        f"ClusterQueue {namespace}-alone is inactive: ResourceFlavor {rf} is invalid: "
        'spec.nodeLabels: Invalid value: "a b": a valid label must be'
    )
    team = _active(kueue, f"{namespace}-team", "Invalid")
    assert team["message"] == (
        f"ClusterQueue {namespace}-team is inactive: Cohort {cohort} is invalid: "
        'spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: Invalid value: "1": '
        "must be nil when parent is empty"
    )

    def cohort_active() -> dict[str, Any] | None:
        obj = kueue.custom.get_cluster_custom_object(GROUP, VERSION, "cohorts", cohort)
        return condition(obj, "Active")

    reported = wait_for(cohort_active, what="the Cohort's Active condition")
    assert (reported["status"], reported["reason"]) == ("False", "Invalid")


def test_a_workload_kueue_refuses_waits_misconfigured(
    controller: ControllerProcess, kueue: Kueue, namespace: str, api_client: client.ApiClient
) -> None:
    cq, rf = f"{namespace}-cq", f"{namespace}-rf"
    bad = workload(namespace, "bad", "lq")
    bad["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"][
        "pods"
    ] = "1"
    kueue.apply(
        flavor(rf), cluster_queue(cq, {rf: {"cpu": 4}}), local_queue(namespace, "lq", cq), bad
    )
    reason = wait_pending_reason(kueue, namespace, "bad")
    assert reason == (
        "spec.podSets[0].template.spec.containers[0].resources.requests[pods]: Invalid value: "
        '"pods": the key is reserved for internal kueue use'
    )
    assert condition(kueue.get_workload(namespace, "bad"), "QuotaReserved")["reason"] == (  # type: ignore[index]
        "Misconfigured"
    )
    core = client.CoreV1Api(api_client)
    assert wait_for(
        lambda: _event(core, namespace, "Workload", "bad", "InvalidObject"), what="a Warning Event"
    )


def test_admission_gates_hold_a_workload_until_removed(
    controller: ControllerProcess, kueue: Kueue, namespace: str, api_client: client.ApiClient
) -> None:
    cq, rf = f"{namespace}-cq", f"{namespace}-rf"
    gated = workload(namespace, "gated", "lq")
    gated["metadata"]["annotations"] = {"kueue.x-k8s.io/admission-gated-by": "example.com/a"}
    kueue.apply(
        flavor(rf), cluster_queue(cq, {rf: {"cpu": 4}}), local_queue(namespace, "lq", cq), gated
    )
    assert wait_pending_reason(kueue, namespace, "gated") == "Admission is gated by: example.com/a"
    assert condition(kueue.get_workload(namespace, "gated"), "QuotaReserved")["reason"] == (  # type: ignore[index]
        "AdmissionGated"
    )
    core = client.CoreV1Api(api_client)
    assert wait_for(
        lambda: _event(core, namespace, "Workload", "gated", "AdmissionGated"),
        what="the AdmissionGated Event",
    )
    kueue.custom.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        "workloads",
        "gated",
        {"metadata": {"annotations": {"kueue.x-k8s.io/admission-gated-by": None}}},
    )
    wait_admitted(kueue, namespace, "gated")


def test_pod_level_resources_are_counted(
    controller: ControllerProcess, kueue: Kueue, namespace: str
) -> None:
    """A pod set whose pods set their resources at the pod level (Kubernetes'
    PodLevelResources) reserves them: before, such a Workload was admitted for nothing."""
    cq, rf = f"{namespace}-cq", f"{namespace}-rf"
    big = workload(namespace, "big", "lq", count=2)
    spec: dict[str, Any] = big["spec"]["podSets"][0]["template"]["spec"]
    spec["containers"][0]["resources"] = {}
    spec["resources"] = {"requests": {"cpu": "1500m"}}
    kueue.apply(
        flavor(rf), cluster_queue(cq, {rf: {"cpu": 4}}), local_queue(namespace, "lq", cq), big
    )
    admitted = wait_admitted(kueue, namespace, "big")
    [assignment] = admitted["status"]["admission"]["podSetAssignments"]
    assert assignment["resourceUsage"] == {"cpu": "3"}
    kueue.apply(workload(namespace, "more", "lq", count=2))  # 2 more cpus: 3 + 2 > 4
    assert "insufficient quota for cpu" in wait_pending_reason(kueue, namespace, "more")
