"""Kueue's visibility API served by `quotagate run` as an aggregated API, asked through the
real kube-apiserver: discovery, the pending Workloads of a ClusterQueue and of a
LocalQueue with Kueue's 0-based positions and priorities, `limit`/`offset`, NotFound, RBAC
with Kueue's viewer roles (kube-apiserver and the server's own SubjectAccessReview), and a
request that did not come through the aggregator refused."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

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
from tests.integration.visibility import (
    PREFIX,
    get,
    remove_api_service,
    start_with_visibility,
    wait_available,
)

# name, LocalQueue, priority: every priority distinct, so the order is the engine's whatever
# the creation seconds.
PENDING = [
    ("a1", "lq-a", 300),
    ("b1", "lq-b", 200),
    ("a2", "lq-a", 100),
    ("b2", "lq-b", 50),
    ("a3", "lq-a", 10),
]


def positions(summary: dict[str, Any]) -> list[tuple[str, str, int, int, int]]:
    return [
        (
            item["metadata"]["name"],
            item["localQueueName"],
            item["priority"],
            item["positionInClusterQueue"],
            item["positionInLocalQueue"],
        )
        for item in summary["items"]
    ]


@pytest.fixture
def served(
    api_client: client.ApiClient, configured_controller: StartConfigured, namespace: str
) -> Iterator[tuple[int, str]]:
    """A controller serving the visibility API for `namespace`; (port, address). The
    APIService is removed afterwards."""
    try:
        _, port, address = start_with_visibility(configured_controller, namespace)
        wait_available(api_client)
        yield port, address
    finally:
        remove_api_service(api_client)


@pytest.fixture
def queued(kueue: Kueue, namespace: str, served: tuple[int, str]) -> str:
    """A full ClusterQueue (one CPU, taken) with five pending Workloads in two LocalQueues;
    returns the ClusterQueue's name."""
    cq = f"{namespace}-cq"
    kueue.apply(
        flavor(f"{namespace}-rf"),
        cluster_queue(cq, {f"{namespace}-rf": {"cpu": 1}}),
        local_queue(namespace, "lq-a", cq),
        local_queue(namespace, "lq-b", cq),
        workload(namespace, "running", "lq-a", cpu="1", priority=1000),
    )
    wait_admitted(kueue, namespace, "running")
    kueue.apply(*(workload(namespace, n, lq, cpu="1", priority=p) for n, lq, p in PENDING))
    return cq


@pytest.fixture
def viewer_roles(api_client: client.ApiClient) -> Iterator[str]:
    """Kueue's pending-workloads viewer roles for ClusterQueues and LocalQueues
    (config/components/rbac in Kueue), bound to the user `visibility-viewer`."""
    rbac = client.RbacAuthorizationV1Api(api_client)
    user = "visibility-viewer"
    names = []
    for plural in ("clusterqueues", "localqueues"):
        name = f"test-pending-workloads-{plural}-viewer"
        names.append(name)
        rule = {
            "apiGroups": ["visibility.kueue.x-k8s.io"],
            "resources": [f"{plural}/pendingworkloads"],
            "verbs": ["get", "list", "watch"],
        }
        binding = {
            "metadata": {"name": name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": name,
            },
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        }
        rbac.create_cluster_role({"metadata": {"name": name}, "rules": [rule]})
        rbac.create_cluster_role_binding(binding)
    try:
        yield user
    finally:
        for name in names:
            rbac.delete_cluster_role_binding(name)
            rbac.delete_cluster_role(name)


def test_pending_workloads_through_the_aggregation_layer(
    api_client: client.ApiClient,
    kueue: Kueue,
    namespace: str,
    served: tuple[int, str],
    queued: str,
    viewer_roles: str,
) -> None:
    port, address = served
    cq = queued

    status, resources = get(api_client, PREFIX)
    assert status == 200
    assert {r["name"]: r["verbs"] for r in resources["resources"]} == {
        "clusterqueues": [],
        "clusterqueues/pendingworkloads": ["get"],
        "localqueues": [],
        "localqueues/pendingworkloads": ["get"],
    }

    expected = [
        ("a1", "lq-a", 300, 0, 0),
        ("b1", "lq-b", 200, 1, 0),
        ("a2", "lq-a", 100, 2, 1),
        ("b2", "lq-b", 50, 3, 1),
        ("a3", "lq-a", 10, 4, 2),
    ]

    def all_pending() -> dict[str, Any] | None:
        code, body = get(api_client, f"{PREFIX}/clusterqueues/{cq}/pendingworkloads")
        return body if code == 200 and len(body["items"]) == len(PENDING) else None

    summary = wait_for(all_pending, what="the five Workloads pending in the visibility API")
    assert summary["kind"] == "PendingWorkloadsSummary"
    assert summary["apiVersion"] == "visibility.kueue.x-k8s.io/v1beta2"
    assert positions(summary) == expected
    assert all(item["metadata"]["namespace"] == namespace for item in summary["items"])
    assert all(item["metadata"]["creationTimestamp"] for item in summary["items"])

    _, page = get(api_client, f"{PREFIX}/clusterqueues/{cq}/pendingworkloads?limit=2&offset=1")
    assert positions(page) == expected[1:3]

    lq_path = f"{PREFIX}/namespaces/{namespace}/localqueues/lq-a/pendingworkloads"
    _, in_lq = get(api_client, lq_path)
    assert positions(in_lq) == [expected[0], expected[2], expected[4]]
    _, lq_page = get(api_client, f"{lq_path}?offset=1&limit=1")
    assert positions(lq_page) == [expected[2]]

    code, missing = get(api_client, f"{PREFIX}/clusterqueues/{namespace}-nope/pendingworkloads")
    assert code == 404 and missing["reason"] == "NotFound"
    assert missing["message"] == (
        f'clusterqueue.visibility.kueue.x-k8s.io "{namespace}-nope" not found'
    )
    code, _ = get(api_client, f"{PREFIX}/namespaces/{namespace}/localqueues/nope/pendingworkloads")
    assert code == 404
    code, bad = get(api_client, f"{PREFIX}/clusterqueues/{cq}/pendingworkloads?limit=x")
    assert code == 400 and "limit" in bad["message"]

    # RBAC: kube-apiserver refuses a user without Kueue's viewer role; with it, the
    # server's own SubjectAccessReview lets the same request through.
    code, refused = get(api_client, f"{PREFIX}/clusterqueues/{cq}/pendingworkloads", "nobody")
    assert code == 403, refused
    code, seen = get(api_client, f"{PREFIX}/clusterqueues/{cq}/pendingworkloads", viewer_roles)
    assert code == 200 and positions(seen) == expected
    code, _ = get(api_client, lq_path, viewer_roles)
    assert code == 200

    # Straight to the server, not through the aggregator: no front-proxy certificate.
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    request = urllib.request.Request(
        f"https://{address}:{port}{PREFIX}/clusterqueues/{cq}/pendingworkloads",
        headers={"X-Remote-User": "system:admin", "X-Remote-Group": "system:masters"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused_direct:
        urllib.request.urlopen(request, timeout=10, context=context)
    assert refused_direct.value.code == 401
    assert json.loads(refused_direct.value.read())["reason"] == "Unauthorized"

    # Admitting the head moves everyone up.
    kueue.custom.delete_namespaced_custom_object(
        "kueue.x-k8s.io", "v1beta2", namespace, "workloads", "running"
    )

    def moved_up() -> dict[str, Any] | None:
        code, body = get(api_client, f"{PREFIX}/clusterqueues/{cq}/pendingworkloads")
        return body if code == 200 and len(body["items"]) == len(PENDING) - 1 else None

    after = wait_for(moved_up, what="a1 admitted, the rest moved up")
    assert positions(after) == [
        ("b1", "lq-b", 200, 0, 0),
        ("a2", "lq-a", 100, 1, 0),
        ("b2", "lq-b", 50, 2, 1),
        ("a3", "lq-a", 10, 3, 1),
    ]
