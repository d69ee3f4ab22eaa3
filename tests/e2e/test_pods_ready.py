"""The Workload's PodsReady condition on the full control plane (issue 21): with
waitForPodsReady configured, the Job and pod integrations keep it as Kueue's job side does
(`WaitForStart` → `Started`, `WaitForRecovery` → `Recovered`), written only when it
changes, and the ready wait-time histograms are observed once per start. The fake
kubelet's readiness annotations play pods that are slow or fail to become ready."""

from __future__ import annotations

import contextlib
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from controller.kubectl.plugin import main
from tests.cluster.controlplane import ControlPlane, free_port
from tests.cluster.fixtures import wait_for
from tests.cluster.nodes import NOT_READY, READY_AFTER_SECONDS, PodLifecycle, queued_job
from tests.e2e.conftest import _registered
from tests.integration.kueue import (
    ControllerProcess,
    Kueue,
    cluster_queue,
    condition,
    delete_webhook_configurations,
    flavor,
    local_queue,
)

GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"


@pytest.fixture(scope="module")
def pods_ready_controller(
    full_cluster: ControlPlane,
    kubeconfig_path: str,
    crds_installed: list[str],
    api_client: client.ApiClient,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ControllerProcess]:
    """The controller with its webhook and `waitForPodsReady: {enable: true}`."""
    with contextlib.suppress(ApiException):
        client.CoreV1Api(api_client).create_namespace({"metadata": {"name": "quotagate-system"}})
    directory = tmp_path_factory.mktemp("podsready")
    config = directory / "config.yaml"
    config.write_text(
        "waitForPodsReady:\n  enable: true\nintegrations:\n  frameworks: [batch/job, pod]\n"
    )
    port, metrics_port = free_port(), free_port()
    process = ControllerProcess(
        kubeconfig_path,
        directory,
        "podsready",
        "podsready-e2e",
        [
            "--config",
            str(config),
            "--metrics-port",
            str(metrics_port),
            "--webhook-address",
            f"127.0.0.1:{port}",
            "--webhook-manage-config",
        ],
    ).start()
    process.metrics_port = metrics_port
    admission = client.AdmissionregistrationV1Api(api_client)
    try:
        wait_for(
            lambda: _registered(admission), timeout=40, what="the MutatingWebhookConfiguration"
        )
        yield process
    finally:
        process.stop()
        delete_webhook_configurations(api_client)
        print("\n" + "\n".join(process.log().splitlines()[-10:]))


def _queue(kueue: Kueue, namespace: str, cpu: int) -> str:
    cq = f"{namespace}-cq"
    kueue.apply(
        flavor(f"{namespace}-rf"),
        cluster_queue(cq, {f"{namespace}-rf": {"cpu": cpu}}),
        local_queue(namespace, "lq", cq),
    )
    return cq


def _pods_ready(kueue: Kueue, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        return condition(kueue.get_workload(namespace, name), "PodsReady")
    except ApiException:
        return None


def _wait_pods_ready(
    kueue: Kueue, namespace: str, name: str, status: str, reason: str, timeout: float = 60
) -> dict[str, Any]:
    def reached() -> dict[str, Any] | None:
        found = _pods_ready(kueue, namespace, name)
        if found and found["status"] == status and found["reason"] == reason:
            return found
        return None

    result: dict[str, Any] = wait_for(
        reached, timeout=timeout, what=f"{name}: PodsReady={status} ({reason})"
    )
    return result


def _running_pods(core: client.CoreV1Api, namespace: str, count: int) -> list[str]:
    def running() -> list[str] | None:
        pods = core.list_namespaced_pod(namespace).items
        names = sorted(p.metadata.name for p in pods if p.status.phase == "Running")
        return names if len(names) >= count else None

    found: list[str] = wait_for(running, timeout=60, what=f"{count} running pods")
    return found


def _pods_ready_writes(
    kueue: Kueue, namespace: str, name: str, since: str, until_reason: str
) -> list[tuple[str, str, str]]:
    """The PodsReady (status, reason, lastTransitionTime) of every change of the Workload after resourceVersion
    `since`, up to the one whose PodsReady reason is `until_reason`."""
    seen: list[tuple[str, str, str]] = []
    stream = watch.Watch()
    for event in stream.stream(
        kueue.custom.list_namespaced_custom_object,
        GROUP,
        VERSION,
        namespace,
        "workloads",
        field_selector=f"metadata.name={name}",
        resource_version=since,
        timeout_seconds=60,
    ):
        found = condition(event["object"], "PodsReady") or {}
        seen.append(
            (
                str(found.get("status")),
                str(found.get("reason")),
                str(found.get("lastTransitionTime")),
            )
        )
        if found.get("reason") == until_reason:
            stream.stop()
            break
    return seen


def _histogram_count(
    controller: ControllerProcess, name: str, cq: str | None, *labels: str
) -> float:
    """The observations of histogram `name` (of ClusterQueue `cq`, with `labels`, each
    `key="value"`), summed over its other labels."""
    url = f"http://127.0.0.1:{controller.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    wanted = [*labels, *([f'cluster_queue="{cq}"'] if cq is not None else [])]
    total = 0.0
    for line in text.splitlines():
        if line.startswith(f"{name}_count{{") and all(label in line for label in wanted):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_job_pods_ready_start_and_recovery(
    pods_ready_controller: ControllerProcess,
    full_cluster: ControlPlane,
    api_client: client.ApiClient,
    namespace: str,
) -> None:
    kueue = Kueue(api_client)
    batch, core = client.BatchV1Api(api_client), client.CoreV1Api(api_client)
    lifecycle: PodLifecycle = full_cluster.lifecycle  # type: ignore[attr-defined]
    cq = _queue(kueue, namespace, cpu=4)
    job = queued_job("slow", parallelism=2)
    template_meta = job["spec"]["template"]["metadata"]
    template_meta["annotations"] = {NOT_READY: "true"}  # Running, never Ready by itself
    batch.create_namespaced_job(namespace, job)

    # Admitted and running, but the pods are not ready: False WaitForStart.
    pods = _running_pods(core, namespace, 2)
    waiting = _wait_pods_ready(
        kueue, namespace, kueue.workload_name(namespace, "Job", "slow"), "False", "WaitForStart"
    )
    assert waiting["message"] == "Not all pods are ready or succeeded"
    workload = kueue.get_workload(namespace, kueue.workload_name(namespace, "Job", "slow"))
    assert condition(workload, "Admitted")["status"] == "True"
    [entry] = [
        m
        for m in workload["metadata"]["managedFields"]
        if m["manager"] == "kueue-job-controller-PodsReady"
    ]
    assert (entry["operation"], entry.get("subresource")) == ("Apply", "status")
    since = workload["metadata"]["resourceVersion"]

    # Events that make the integration reconcile but change nothing write nothing: a
    # label on the Job, and one pod of two becoming ready.
    for i in range(3):
        batch.patch_namespaced_job("slow", namespace, {"metadata": {"labels": {"touch": str(i)}}})
    lifecycle.set_ready(namespace, pods[0], True)
    wait_for(
        lambda: batch.read_namespaced_job("slow", namespace).status.ready == 1,
        what="the Job counting one ready pod",
    )
    lifecycle.set_ready(namespace, pods[1], True)
    started = _wait_pods_ready(
        kueue, namespace, kueue.workload_name(namespace, "Job", "slow"), "True", "Started"
    )
    assert started["message"] == "All pods reached readiness and the workload is running"
    assert started["lastTransitionTime"] >= waiting["lastTransitionTime"]
    assert _pods_ready_writes(
        kueue, namespace, kueue.workload_name(namespace, "Job", "slow"), since, "Started"
    ) == [("True", "Started", started["lastTransitionTime"])]
    wait_for(
        lambda: (
            _histogram_count(
                pods_ready_controller, "kueue_admitted_until_ready_wait_time_seconds", cq
            )
            == 1
        ),
        what="one admitted-until-ready observation",
    )
    assert _histogram_count(pods_ready_controller, "kueue_ready_wait_time_seconds", cq) == 1
    # The job integration created the Job's Workload: Kueue's creation latency, by kind.
    created = "kueue_workload_creation_latency_seconds"
    assert _histogram_count(pods_ready_controller, created, None, 'job_kind="Job"') >= 1

    # A ready pod loses readiness: WaitForRecovery; ready again: Recovered.
    lifecycle.set_ready(namespace, pods[0], False)
    recovering = _wait_pods_ready(
        kueue, namespace, kueue.workload_name(namespace, "Job", "slow"), "False", "WaitForRecovery"
    )
    assert recovering["message"] == "At least one pod has failed, waiting for recovery"
    lifecycle.set_ready(namespace, pods[0], True)
    _wait_pods_ready(
        kueue, namespace, kueue.workload_name(namespace, "Job", "slow"), "True", "Recovered"
    )
    # A recovery is not a start: the histograms are not observed again.
    assert (
        _histogram_count(pods_ready_controller, "kueue_admitted_until_ready_wait_time_seconds", cq)
        == 1
    )


def test_pod_group_pods_ready(
    pods_ready_controller: ControllerProcess,
    full_cluster: ControlPlane,
    api_client: client.ApiClient,
    namespace: str,
) -> None:
    kueue = Kueue(api_client)
    core = client.CoreV1Api(api_client)
    lifecycle: PodLifecycle = full_cluster.lifecycle  # type: ignore[attr-defined]
    cq = _queue(kueue, namespace, cpu=4)
    for i in range(2):
        core.create_namespaced_pod(
            namespace,
            {
                "metadata": {
                    "name": f"member-{i}",
                    "labels": {
                        "kueue.x-k8s.io/queue-name": "lq",
                        "kueue.x-k8s.io/pod-group-name": "gang",
                    },
                    "annotations": {
                        "kueue.x-k8s.io/pod-group-total-count": "2",
                        READY_AFTER_SECONDS: "3",
                    },
                },
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
                    ],
                },
            },
        )
    # Pending, then admitted: WaitForStart until both pods are ready 3 seconds after
    # they started, then Started.
    waiting = _wait_pods_ready(kueue, namespace, "gang", "False", "WaitForStart")
    since = kueue.get_workload(namespace, "gang")["metadata"]["resourceVersion"]
    started = _wait_pods_ready(kueue, namespace, "gang", "True", "Started")
    assert started["lastTransitionTime"] >= waiting["lastTransitionTime"]
    writes = _pods_ready_writes(kueue, namespace, "gang", since, "Started")
    # The admission may change the Workload meanwhile; PodsReady is written once: every
    # earlier version carries the same WaitForStart, with its first transition time.
    assert writes[-1] == ("True", "Started", started["lastTransitionTime"])
    assert all(w == ("False", "WaitForStart", waiting["lastTransitionTime"]) for w in writes[:-1])
    # Both members' admission gates were removed once the group was admitted.
    gate = ('name="kueue.x-k8s.io/admission"', 'is_group="true"')
    removals = "kueue_pod_scheduling_gate_removal_seconds"
    assert _histogram_count(pods_ready_controller, removals, cq, *gate) == 2

    # One member loses readiness: the gang is waiting for recovery.
    lifecycle.set_ready(namespace, "member-1", False)
    _wait_pods_ready(kueue, namespace, "gang", "False", "WaitForRecovery")
    lifecycle.set_ready(namespace, "member-1", True)
    _wait_pods_ready(kueue, namespace, "gang", "True", "Recovered")


def test_a_pod_that_never_becomes_ready_waits_for_start(
    pods_ready_controller: ControllerProcess,
    api_client: client.ApiClient,
    namespace: str,
    kubeconfig_path: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    kueue = Kueue(api_client)
    core = client.CoreV1Api(api_client)
    _queue(kueue, namespace, cpu=2)
    core.create_namespaced_pod(
        namespace,
        {
            "metadata": {
                "name": "stuck",
                "labels": {"kueue.x-k8s.io/queue-name": "lq"},
                "annotations": {NOT_READY: "true"},
            },
            "spec": {
                "containers": [
                    {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
                ]
            },
        },
    )
    _running_pods(core, namespace, 1)
    found = _wait_pods_ready(
        kueue, namespace, kueue.workload_name(namespace, "Pod", "stuck"), "False", "WaitForStart"
    )
    workload = kueue.get_workload(namespace, kueue.workload_name(namespace, "Pod", "stuck"))
    assert condition(workload, "Admitted")["status"] == "True"
    assert found["message"] == "Not all pods are ready or succeeded"
    # `kubectl quotagate describe` shows it.
    capsys.readouterr()
    code = main(
        [
            "describe",
            "workload",
            kueue.workload_name(namespace, "Pod", "stuck"),
            "-n",
            namespace,
            "--kubeconfig",
            kubeconfig_path,
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert f"Pods ready:       False (WaitForStart) since {found['lastTransitionTime']}" in out, out


def test_an_evicted_workload_waits_for_a_new_start(
    pods_ready_controller: ControllerProcess, api_client: client.ApiClient, namespace: str
) -> None:
    """A ready Job preempted by a higher-priority one: once its Workload has given its quota
    back, PodsReady reads WaitForStart again, and the preemptor starts on its own."""
    kueue = Kueue(api_client)
    batch = client.BatchV1Api(api_client)
    cq, rf = f"{namespace}-cq", f"{namespace}-rf"
    kueue.apply(
        flavor(rf),
        cluster_queue(cq, {rf: {"cpu": 2}}, preemption={"withinClusterQueue": "LowerPriority"}),
        local_queue(namespace, "lq", cq),
    )
    for name, value in (("low", 10), ("high", 1000)):
        kueue.custom.create_cluster_custom_object(
            GROUP,
            VERSION,
            "workloadpriorityclasses",
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": f"{namespace}-{name}"},
                "value": value,
            },
        )
    low = queued_job("low", parallelism=2)
    low["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = f"{namespace}-low"
    low["spec"]["template"]["metadata"]["annotations"] = {}  # runs until stopped
    batch.create_namespaced_job(namespace, low)
    _wait_pods_ready(
        kueue, namespace, kueue.workload_name(namespace, "Job", "low"), "True", "Started"
    )

    high = queued_job("high", parallelism=2)
    high["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = f"{namespace}-high"
    high["spec"]["template"]["metadata"]["annotations"] = {}
    batch.create_namespaced_job(namespace, high)

    def released() -> dict[str, Any] | None:
        workload = kueue.get_workload(namespace, kueue.workload_name(namespace, "Job", "low"))
        reserved = condition(workload, "QuotaReserved") or {}
        found = condition(workload, "PodsReady") or {}
        if reserved.get("status") == "False" and found.get("reason") == "WaitForStart":
            return workload
        return None

    evicted = wait_for(released, timeout=90, what="job-low evicted, released, WaitForStart")
    assert condition(evicted, "Evicted")["reason"] == "Preempted"
    assert condition(evicted, "PodsReady")["status"] == "False"
    _wait_pods_ready(
        kueue,
        namespace,
        kueue.workload_name(namespace, "Job", "high"),
        "True",
        "Started",
        timeout=90,
    )
