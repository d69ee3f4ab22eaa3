"""A pod's or a pod group's Workload that exists before quotagate starts is adopted by its
owner references, whatever its name: Kueue's (`pod-<name>-<hash>`, the group's name) or an
older quotagate's (`pod-<name>`, `group-<name>`). Nothing is made again beside it."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from api.constants import (
    ADMISSION_GATE,
    POD_GROUP_NAME_LABEL,
    POD_GROUP_TOTAL_COUNT_ANNOTATION,
    QUEUE_NAME_LABEL,
)
from controller.integrations.framework.workload_names import workload_name
from tests.cluster.fixtures import wait_for
from tests.integration.conftest import StartConfigured
from tests.integration.kueue import (
    Kueue,
    cluster_queue,
    flavor,
    local_queue,
    wait_admitted,
    workload,
)
from tests.integration.serving import pod_template

PODS = {"integrations": {"frameworks": ["pod"]}}


def gated_pod(name: str, group: str | None = None, total: int = 1) -> dict[str, Any]:
    """A queue-labelled pod, gated as the webhook would have gated it."""
    pod = pod_template(name)
    pod["metadata"].update(name=name, labels={QUEUE_NAME_LABEL: "lq"})
    if group is not None:
        pod["metadata"]["labels"][POD_GROUP_NAME_LABEL] = group
        pod["metadata"]["annotations"][POD_GROUP_TOTAL_COUNT_ANNOTATION] = str(total)
    pod["spec"]["schedulingGates"] = [{"name": ADMISSION_GATE}]
    return pod


def owned_by(body: dict[str, Any], pods: list[Any], unit: str | None) -> dict[str, Any]:
    body["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "Pod", "name": p.metadata.name, "uid": p.metadata.uid}
        for p in pods
    ]
    if unit is not None:  # an older quotagate's label
        body["metadata"]["labels"] = {"quotagate.x-k8s.io/unit": unit}
    return body


def queue(kueue: Kueue, namespace: str) -> None:
    kueue.apply(
        flavor(f"{namespace}-rf"),
        cluster_queue(f"{namespace}-cq", {f"{namespace}-rf": {"cpu": 2}}),
        local_queue(namespace, "lq", f"{namespace}-cq"),
    )


def ungated(core: client.CoreV1Api, namespace: str, name: str) -> bool:
    return not core.read_namespaced_pod(name, namespace).spec.scheduling_gates


@pytest.mark.parametrize("made_by", ["kueue", "an older quotagate"])
def test_a_pods_workload_is_adopted_whatever_its_name(
    made_by: str,
    configured_controller: StartConfigured,
    kueue: Kueue,
    api_client: client.ApiClient,
    namespace: str,
) -> None:
    core = client.CoreV1Api(api_client)
    queue(kueue, namespace)
    pod = core.create_namespaced_pod(namespace, gated_pod("solo"))
    name = workload_name("Pod", "", "solo", pod.metadata.uid) if made_by == "kueue" else "pod-solo"
    unit = None if made_by == "kueue" else "pod"
    kueue.apply(owned_by(workload(namespace, name, "lq"), [pod], unit))
    configured_controller(PODS, namespace)
    wait_admitted(kueue, namespace, name)
    wait_for(lambda: ungated(core, namespace, "solo"), what="the pod ungated")
    assert [w["metadata"]["name"] for w in kueue.workloads(namespace)] == [name]


def test_an_older_quotagates_pod_group_workload_is_adopted(
    configured_controller: StartConfigured,
    kueue: Kueue,
    api_client: client.ApiClient,
    namespace: str,
) -> None:
    core = client.CoreV1Api(api_client)
    queue(kueue, namespace)
    pods = [
        core.create_namespaced_pod(namespace, gated_pod(f"g-{i}", group="g", total=2))
        for i in range(2)
    ]
    kueue.apply(owned_by(workload(namespace, "group-g", "lq", count=2), pods, "group"))
    configured_controller(PODS, namespace)
    wait_admitted(kueue, namespace, "group-g")
    for i in range(2):
        wait_for(lambda i=i: ungated(core, namespace, f"g-{i}"), what=f"pod g-{i} ungated")
    assert [w["metadata"]["name"] for w in kueue.workloads(namespace)] == ["group-g"]
