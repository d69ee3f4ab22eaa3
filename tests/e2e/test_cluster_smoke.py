"""The full local control plane schedules and runs pods: kube-scheduler binds to fake
nodes, the lifecycle helper plays the kubelet, the Job controller completes a Job."""

from __future__ import annotations

import time

from kubernetes import client

from tests.cluster.controlplane import ControlPlane
from tests.cluster.fixtures import wait_for
from tests.cluster.nodes import RUN_SECONDS


def test_pod_is_bound_and_runs(
    full_cluster: ControlPlane, api_client: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(api_client)
    core.create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": "hello"},
            "spec": {
                "containers": [
                    {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
                ]
            },
        },
    )
    pod = wait_for(
        lambda: (p := core.read_namespaced_pod("hello", namespace)).status.phase == "Running" and p,
        timeout=60,
        what="pod hello Running",
    )
    assert pod.spec.node_name in ("node-a", "node-b")


def test_job_with_two_completions_finishes(
    full_cluster: ControlPlane, api_client: client.ApiClient, namespace: str
) -> None:
    batch = client.BatchV1Api(api_client)
    started = time.monotonic()
    batch.create_namespaced_job(
        namespace,
        {
            "metadata": {"name": "two"},
            "spec": {
                "completions": 2,
                "parallelism": 2,
                "template": {
                    "metadata": {"annotations": {RUN_SECONDS: "1"}},
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            {
                                "name": "c",
                                "image": "busybox",
                                "resources": {"requests": {"cpu": "1"}},
                            }
                        ],
                    },
                },
            },
        },
    )
    job = wait_for(
        lambda: (j := batch.read_namespaced_job("two", namespace)).status.succeeded == 2 and j,
        timeout=90,
        what="Job two to succeed twice",
    )
    conditions = {c.type: c.status for c in job.status.conditions or []}
    assert conditions.get("Complete") == "True"
    print(f"\nJob with 2 completions finished in {time.monotonic() - started:.1f}s")
