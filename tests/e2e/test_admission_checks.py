"""Admission checks' pod set updates reaching real pods on the full local control plane:
a Job and a pod group in a ClusterQueue with an admission check get QuotaReserved and stay
suspended (gated) until the check is Ready; then the Job's pods and the group's pods carry
the check's labels, annotations and node selector (the test plays the check's controller)
and kube-scheduler places them by that selector."""

from __future__ import annotations

import time
from typing import Any

from kubernetes import client

from tests.cluster.fixtures import wait_for
from tests.cluster.nodes import queued_job
from tests.e2e.test_pods import _pod_template
from tests.integration.kueue import (
    ControllerProcess,
    Kueue,
    cluster_queue,
    condition,
    flavor,
    local_queue,
)
from tests.integration.test_admission_checks import activate, admission_check, checks_of

ZONE = "topology.kubernetes.io/zone"


def _ready_with_updates(kueue: Kueue, namespace: str, name: str, check: str) -> None:
    """The check's controller: Ready, with what the pods need to land on its nodes."""
    wl = kueue.get_workload(namespace, name)
    update = {
        "name": "main",
        "labels": {"example.com/provisioned": "yes"},
        "annotations": {"example.com/request": f"{name}-req"},
        "nodeSelector": {ZONE: "node-b"},
    }
    checks = [
        {
            **c,
            "state": "Ready",
            "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "podSetUpdates": [update],
        }
        if c["name"] == check
        else c
        for c in wl["status"]["admissionChecks"]
    ]
    kueue.patch_workload_status(namespace, name, {"admissionChecks": checks})


def _reserved_with_checks(kueue: Kueue, namespace: str, name: str) -> dict[str, Any] | None:
    wl = next((w for w in kueue.workloads(namespace) if w["metadata"]["name"] == name), None)
    if wl is None or (condition(wl, "QuotaReserved") or {}).get("status") != "True":
        return None
    return wl if checks_of(wl) else None


def _setup(kueue: Kueue, namespace: str) -> str:
    check = f"{namespace}-prov"
    kueue.apply(flavor(f"{namespace}-rf"), admission_check(check))
    activate(kueue, check)
    cq = cluster_queue(f"{namespace}-cq", {f"{namespace}-rf": {"cpu": 4}})
    cq["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": check}]}
    kueue.apply(cq, local_queue(namespace, "lq", f"{namespace}-cq"))
    return check


def test_a_jobs_pods_carry_the_checks_updates(
    webhook_controller: ControllerProcess, api_client: client.ApiClient, namespace: str
) -> None:
    kueue = Kueue(api_client)
    batch = client.BatchV1Api(api_client)
    core = client.CoreV1Api(api_client)
    check = _setup(kueue, namespace)
    batch.create_namespaced_job(namespace, queued_job("checked", parallelism=2))
    wait_for(
        lambda: _reserved_with_checks(
            kueue, namespace, kueue.workload_name(namespace, "Job", "checked")
        ),
        what="reserved",
    )
    assert batch.read_namespaced_job("checked", namespace).spec.suspend is True
    assert not core.list_namespaced_pod(namespace).items
    _ready_with_updates(kueue, namespace, kueue.workload_name(namespace, "Job", "checked"), check)

    def placed() -> list[Any] | None:
        pods = core.list_namespaced_pod(namespace).items
        return pods if len(pods) == 2 and all(p.spec.node_name for p in pods) else None

    for pod in wait_for(placed, timeout=60, what="the Job's pods placed"):
        assert pod.metadata.labels["example.com/provisioned"] == "yes"
        assert (
            pod.metadata.annotations["example.com/request"]
            == f"{kueue.workload_name(namespace, 'Job', 'checked')}-req"
        )
        assert pod.spec.node_selector == {ZONE: "node-b"}
        assert pod.spec.node_name == "node-b"


def test_a_pod_groups_pods_carry_the_checks_updates(
    webhook_controller: ControllerProcess, api_client: client.ApiClient, namespace: str
) -> None:
    kueue = Kueue(api_client)
    core = client.CoreV1Api(api_client)
    check = _setup(kueue, namespace)
    for i in range(2):
        template = _pod_template("train", 2, 600)
        core.create_namespaced_pod(
            namespace,
            {"metadata": {"name": f"train-{i}", **template["metadata"]}, "spec": template["spec"]},
        )
    wait_for(lambda: _reserved_with_checks(kueue, namespace, "train"), what="reserved")
    assert all(p.spec.scheduling_gates for p in core.list_namespaced_pod(namespace).items)
    _ready_with_updates(kueue, namespace, "train", check)

    def placed() -> list[Any] | None:
        pods = core.list_namespaced_pod(namespace).items
        return pods if len(pods) == 2 and all(p.spec.node_name for p in pods) else None

    for pod in wait_for(placed, timeout=60, what="the group's pods ungated and placed"):
        assert not pod.spec.scheduling_gates
        assert pod.metadata.labels["example.com/provisioned"] == "yes"
        assert pod.metadata.annotations["example.com/request"] == "train-req"
        assert pod.spec.node_selector == {ZONE: "node-b"}
