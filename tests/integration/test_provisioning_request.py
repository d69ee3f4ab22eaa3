"""The ProvisioningRequest admission check on the real API server, with the cluster
autoscaler played by a stand-in provisioner in the test (it writes the conditions the
autoscaler writes): the check turns Active once its ProvisioningRequestConfig exists; a
reservation gets its pod templates and ProvisioningRequest (the config's class and
parameters); Provisioned makes the check Ready with the pods' updates (the request to
consume, the node selector from the class details) and admits the Workload; Failed
retries with a new request until the config's retry limit, then rejects it. The CRD is
installed from tests/integration/crds (written from the API's Go types)."""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.cluster.fixtures import install_crds, wait_for
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
    workload,
)
from tests.integration.test_admission_checks import checks_of, wait_reserved_with_checks

CLASS = "check-capacity.autoscaling.x-k8s.io"
CONSUME = "autoscaling.x-k8s.io/consume-provisioning-request"


@pytest.fixture(scope="module")
def provisioning_crd(api_client: client.ApiClient) -> list[str]:
    return install_crds(api_client, Path(__file__).parent / "crds")


def gpu_workload(namespace: str, name: str, count: int = 1) -> dict[str, Any]:
    """A Workload whose pod template is a valid PodTemplate (an image), as a job's is."""
    body = workload(namespace, name, "lq", count=count)
    body["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["image"] = "busybox"
    return body


def setup(
    kueue: Kueue,
    namespace: str,
    *,
    cpu: int = 2,
    merge_policy: str | None = None,
    node_labels: dict[str, str] | None = None,
) -> str:
    check = f"{namespace}-prov"
    config = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ProvisioningRequestConfig",
        "metadata": {"name": f"{namespace}-prc"},
        "spec": {
            "provisioningClassName": CLASS,
            "parameters": {"ValidUntilSeconds": "60"},
            "retryStrategy": {
                "backoffLimitCount": 1,
                "backoffBaseSeconds": 1,
                "backoffMaxSeconds": 2,
            },
            "podSetUpdates": {
                "nodeSelector": [
                    {"key": "example.com/pool", "valueFromProvisioningClassDetail": "pool"}
                ]
            },
        },
    }
    ac = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "AdmissionCheck",
        "metadata": {"name": check},
        "spec": {
            "controllerName": "kueue.x-k8s.io/provisioning-request",
            "parameters": {
                "apiGroup": "kueue.x-k8s.io",
                "kind": "ProvisioningRequestConfig",
                "name": f"{namespace}-prc",
            },
        },
    }
    if merge_policy is not None:
        config["spec"]["podSetMergePolicy"] = merge_policy
    cq = cluster_queue(f"{namespace}-cq", {f"{namespace}-rf": {"cpu": cpu}})
    cq["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": check}]}
    kueue.apply(
        flavor(f"{namespace}-rf", node_labels),
        config,
        ac,
        cq,
        local_queue(namespace, "lq", f"{namespace}-cq"),
    )
    return check


def get_request(kueue: Kueue, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = kueue.custom.get_namespaced_custom_object(
            "autoscaling.x-k8s.io", "v1", namespace, "provisioningrequests", name
        )
        return found
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def provisioner_says(
    kueue: Kueue,
    namespace: str,
    name: str,
    type_: str,
    message: str,
    details: dict[str, str] | None = None,
) -> None:
    """What the cluster autoscaler writes on a request."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    status: dict[str, Any] = {
        "conditions": [
            {
                "type": type_,
                "status": "True",
                "reason": type_,
                "message": message,
                "lastTransitionTime": now,
            }
        ]
    }
    if details:
        status["provisioningClassDetails"] = details
    kueue.custom.patch_namespaced_custom_object_status(
        "autoscaling.x-k8s.io", "v1", namespace, "provisioningrequests", name, {"status": status}
    )


def test_provisioned_capacity_admits_the_workload_with_the_pods_updates(
    provisioning_crd: list[str],  # installed first: the controller finds it at start
    controller: ControllerProcess,
    kueue: Kueue,
    namespace: str,
    api_client: client.ApiClient,
) -> None:
    check = setup(kueue, namespace)
    active = wait_for(
        lambda: condition(
            kueue.custom.get_cluster_custom_object(GROUP, VERSION, "admissionchecks", check),
            "Active",
        ),
        what="the check Active",
    )
    assert active["status"] == "True"
    body = gpu_workload(namespace, "w", count=2)
    body["metadata"]["annotations"] = {"provreq.kueue.x-k8s.io/MaxRunDurationSeconds": "60"}
    kueue.apply(body)
    wait_reserved_with_checks(kueue, namespace, "w")
    name = f"w-{check}-1"
    request = wait_for(lambda: get_request(kueue, namespace, name), what="the ProvisioningRequest")
    assert request["spec"]["provisioningClassName"] == CLASS
    assert request["spec"]["parameters"] == {
        "ValidUntilSeconds": "60",
        "MaxRunDurationSeconds": "60",  # from the Workload's provreq.kueue.x-k8s.io/ annotation
    }
    [pod_set] = request["spec"]["podSets"]
    assert pod_set["count"] == 2
    template = client.CoreV1Api(api_client).read_namespaced_pod_template(
        pod_set["podTemplateRef"]["name"], namespace
    )
    assert template.template.spec.containers[0].resources.requests == {"cpu": "1"}
    assert [o["kind"] for o in request["metadata"]["ownerReferences"]] == ["Workload"]
    # The template handed over to its request, as Kueue does.
    [template_owner] = template.metadata.owner_references
    assert (template_owner.kind, template_owner.name, template_owner.controller) == (
        "ProvisioningRequest",
        name,
        True,
    )
    assert template_owner.uid == request["metadata"]["uid"]
    assert (condition(kueue.get_workload(namespace, "w"), "Admitted") or {}).get(
        "status"
    ) == "False"

    provisioner_says(kueue, namespace, name, "Provisioned", "capacity is there", {"pool": "gpu-a"})
    admitted = wait_admitted(kueue, namespace, "w")
    state = checks_of(admitted)[check]
    assert (state["state"], state["message"]) == ("Ready", "capacity is there")
    [update] = state["podSetUpdates"]
    assert update["name"] == "main"
    assert update["annotations"][CONSUME] == name
    assert update["nodeSelector"] == {"example.com/pool": "gpu-a"}


def test_failed_is_retried_with_a_new_request_then_rejected(
    provisioning_crd: list[str],  # installed first: the controller finds it at start
    controller: ControllerProcess,
    kueue: Kueue,
    namespace: str,
    api_client: client.ApiClient,
) -> None:
    check = setup(kueue, namespace)
    kueue.apply(gpu_workload(namespace, "f"))
    wait_reserved_with_checks(kueue, namespace, "f")
    first = f"f-{check}-1"
    wait_for(lambda: get_request(kueue, namespace, first), what="the first request")
    provisioner_says(kueue, namespace, first, "Failed", "out of GPUs")

    def evicted() -> dict[str, Any] | None:
        wl = kueue.get_workload(namespace, "f")
        return wl if (condition(wl, "Evicted") or {}).get("status") == "True" else None

    wl = wait_for(evicted, what="f evicted for a retry")
    assert condition(wl, "Evicted")["reason"] == "AdmissionCheck"
    assert checks_of(wl)[check]["retryCount"] == 1
    # Evicted: its request is deleted with its pod template (Kueue's cleanup on eviction).
    wait_for(lambda: get_request(kueue, namespace, first) is None, what="the first request deleted")
    templates = client.CoreV1Api(api_client).list_namespaced_pod_template(namespace).items
    assert not [t.metadata.name for t in templates if first in t.metadata.name]
    kueue.acknowledge_eviction(namespace, "f")  # its owner releases the quota
    second = f"f-{check}-2"
    wait_for(lambda: get_request(kueue, namespace, second), what="the second attempt's request")
    provisioner_says(kueue, namespace, second, "Failed", "still out of GPUs")

    def deactivated() -> dict[str, Any] | None:
        wl = kueue.get_workload(namespace, "f")
        evicted = condition(wl, "Evicted") or {}
        done = wl["spec"].get("active") is False and evicted.get("status") == "True"
        return wl if done else None

    wl = wait_for(deactivated, what="f deactivated and evicted after the retry limit")
    evicted = condition(wl, "Evicted")
    assert evicted is not None and evicted["reason"] == "DeactivatedDueToAdmissionCheck"
    assert "still out of GPUs" in evicted["message"]


def test_identical_pod_sets_share_one_entry_whose_template_has_the_flavors_node_labels(
    provisioning_crd: list[str],  # installed first: the controller finds it at start
    controller: ControllerProcess,
    kueue: Kueue,
    namespace: str,
    api_client: client.ApiClient,
) -> None:
    """`podSetMergePolicy: IdenticalPodTemplates`: pod sets a and b (the same template)
    are one entry of the request with both counts, c (other requests) its own; each
    PodTemplate carries the assigned flavor's node labels, as Kueue's `createPodTemplate`
    merges them in. Only the first pod set of an entry gets the request's updates, as in
    Kueue."""
    check = setup(
        kueue, namespace, cpu=8, merge_policy="IdenticalPodTemplates", node_labels={"pool": "gpu"}
    )
    body = gpu_workload(namespace, "m")
    main = body["spec"]["podSets"][0]
    other = copy.deepcopy(main)
    other["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"
    body["spec"]["podSets"] = [
        {**copy.deepcopy(main), "name": "a", "count": 2},
        {**copy.deepcopy(main), "name": "b", "count": 1},
        {**other, "name": "c", "count": 1},
    ]
    kueue.apply(body)
    wait_reserved_with_checks(kueue, namespace, "m")
    name = f"m-{check}-1"
    request = wait_for(lambda: get_request(kueue, namespace, name), what="the ProvisioningRequest")
    entries = [(p["podTemplateRef"]["name"], p["count"]) for p in request["spec"]["podSets"]]
    assert entries == [(f"ppt-{name}-a", 3), (f"ppt-{name}-c", 1)]
    core = client.CoreV1Api(api_client)
    for template_name, _ in entries:
        template = core.read_namespaced_pod_template(template_name, namespace).template
        assert template.spec.node_selector == {"pool": "gpu"}
    names = {t.metadata.name for t in core.list_namespaced_pod_template(namespace).items}
    assert f"ppt-{name}-b" not in names

    provisioner_says(kueue, namespace, name, "Provisioned", "capacity is there")
    admitted = wait_admitted(kueue, namespace, "m")
    updates = checks_of(admitted)[check]["podSetUpdates"]
    assert [u["name"] for u in updates] == ["a", "c"]


def test_a_request_provisioned_while_the_controller_was_down_is_seen_after_its_restart(
    provisioning_crd: list[str],
    controller: ControllerProcess,
    kueue: Kueue,
    namespace: str,
    api_client: client.ApiClient,
) -> None:
    """The requests are watched, not polled: a controller that restarts lists them again
    and resyncs every check, so the autoscaler's answer given meanwhile is not lost, and
    the request it made before is used, not made again."""
    check = setup(kueue, namespace)
    kueue.apply(gpu_workload(namespace, "d"))
    name = f"d-{check}-1"
    wait_for(lambda: get_request(kueue, namespace, name), what="the ProvisioningRequest")
    controller.stop()
    try:
        provisioner_says(kueue, namespace, name, "Provisioned", "capacity came", {"pool": "b"})
    finally:
        controller.start()
    admitted = wait_admitted(kueue, namespace, "d")
    state = checks_of(admitted)[check]
    assert (state["state"], state["message"]) == ("Ready", "capacity came")
    assert state["podSetUpdates"][0]["nodeSelector"] == {"example.com/pool": "b"}
    requests = kueue.custom.list_namespaced_custom_object(
        "autoscaling.x-k8s.io", "v1", namespace, "provisioningrequests"
    )["items"]
    assert [r["metadata"]["name"] for r in requests] == [name]
