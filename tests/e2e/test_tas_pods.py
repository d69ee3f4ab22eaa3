"""Topology-aware scheduling of the pod integration's units on the full local control plane
with fake nodes (three racks of two 2-cpu nodes): four one-cpu pods annotated
`podset-required-topology: <rack>`, as one `kueue.x-k8s.io/pod-group-name` group, then as a
StatefulSet's replicas (run by the real kube-controller-manager); and a LeaderWorkerSet
group (the real LeaderWorkerSet controller) of a leader and three workers. The Workload asks for one
rack, the webhook holds each pod by the topology gate as well, and quotagate releases the
pods into the assignment's nodes by their index: a group's from the label its pods'
`kueue.x-k8s.io/pod-group-pod-index-label` annotation names (copied by the webhook into
`kueue.x-k8s.io/pod-group-pod-index`), a StatefulSet's from `apps.kubernetes.io/pod-index`,
a LeaderWorkerSet's workers' from `leaderworkerset.sigs.k8s.io/worker-index` less one.
Without the topology request the scheduler spreads them over the racks.

A pod asking for no topology is held by the topology gate too (Kueue's webhook): in a
ClusterQueue whose flavor has a topology it is placed as unconstrained and released into
its domain, fullest node first (where kube-scheduler alone would pick the emptiest); in
one whose flavor has none it loses both gates at once and starts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from api.constants import (
    ADMISSION_GATE,
    POD_GROUP_NAME_LABEL,
    POD_GROUP_POD_INDEX_LABEL,
    POD_GROUP_POD_INDEX_LABEL_ANNOTATION,
    POD_GROUP_TOTAL_COUNT_ANNOTATION,
    POD_SET_REQUIRED_TOPOLOGY_ANNOTATION,
    POD_SET_UNCONSTRAINED_TOPOLOGY_ANNOTATION,
    QUEUE_NAME_LABEL,
    TOPOLOGY_SCHEDULING_GATE,
    WORKLOAD_ANNOTATION,
)
from controller.core.tas.encoding import decode
from controller.core.tas.ranks import domain_of_rank
from tests.cluster.controlplane import ControlPlane
from tests.cluster.fixtures import wait_for
from tests.cluster.nodes import RUN_SECONDS
from tests.cluster.operators import LeaderWorkerSetController
from tests.e2e.conftest import webhook_controller_running
from tests.e2e.test_tas import BLOCK, HOST, RACK, tainted_nodes, with_admission
from tests.e2e.test_tas_node_failure import tas_queues
from tests.integration.kueue import (
    ControllerProcess,
    Kueue,
    cluster_queue,
    flavor,
    local_queue,
)
from tests.integration.serving import LWS, leaderworkerset, statefulset

POOL = "quotagate.test/tas-pod-pool"
TAINT = {"key": "quotagate.test/tas-pod", "value": "true", "effect": "NoSchedule"}
NODES = [f"podg-{r}-{h}" for r in ("r1", "r2", "r3") for h in ("h1", "h2")]
RANK = "quotagate.test/rank"
SS_INDEX = "apps.kubernetes.io/pod-index"
WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
PODS = 4
IMPLICIT_POOL = "quotagate.test/tas-implicit-pool"
IMPLICIT_NODES = ["podi-h1", "podi-h2"]


@pytest.fixture(scope="module")
def pods_quotagate(
    full_cluster: ControlPlane,
    lws_controller: LeaderWorkerSetController,
    kubeconfig_path: str,
    crds_installed: list[str],
    api_client: client.ApiClient,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ControllerProcess]:
    """quotagate with its webhook, queueing pods, StatefulSets and LeaderWorkerSets."""
    directory: Path = tmp_path_factory.mktemp("tas-pods")
    frameworks = ["pod", "statefulset", "leaderworkerset.x-k8s.io/leaderworkerset"]
    config = {"integrations": {"frameworks": frameworks}}
    with webhook_controller_running(
        kubeconfig_path, api_client, directory, "tas-pods", config
    ) as process:
        yield process


@pytest.fixture(scope="module")
def pod_nodes(api_client: client.ApiClient) -> Iterator[list[str]]:
    labels = {}
    for name in NODES:
        _, rack, _ = name.split("-")
        labels[name] = {BLOCK: "pb", RACK: f"pb-{rack}", POOL: "e2e"}
    with tainted_nodes(api_client, labels, TAINT) as names:
        yield names


def grouped_pod(name: str, rank: int) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": {QUEUE_NAME_LABEL: "lq", POD_GROUP_NAME_LABEL: "train", RANK: str(rank)},
            "annotations": {
                POD_GROUP_TOTAL_COUNT_ANNOTATION: str(PODS),
                POD_SET_REQUIRED_TOPOLOGY_ANNOTATION: RACK,
                POD_GROUP_POD_INDEX_LABEL_ANNOTATION: RANK,
                RUN_SECONDS: "600",
            },
        },
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
            ],
        },
    }


def test_a_pod_group_asking_for_a_rack_lands_in_one_rack_by_pod_index(
    pods_quotagate: ControllerProcess,
    pod_nodes: list[str],
    api_client: client.ApiClient,
    namespace: str,
) -> None:
    core = client.CoreV1Api(api_client)
    tas_queues(api_client, namespace, POOL, TAINT)
    # Names sort against the ranks (w-0 has rank 3): filling the nodes by name would
    # put ranks 3 and 2 first.
    for rank in range(PODS):
        core.create_namespaced_pod(namespace, grouped_pod(f"w-{PODS - 1 - rank}", rank))
    for pod in core.list_namespaced_pod(namespace).items:
        gates = [g.name for g in pod.spec.scheduling_gates or ()]
        assert TOPOLOGY_SCHEDULING_GATE in gates, (pod.metadata.name, gates)
        assert pod.metadata.labels[POD_GROUP_POD_INDEX_LABEL] == pod.metadata.labels[RANK]

    pods = placed_by_rank(api_client, namespace, "train", RANK, POD_GROUP_POD_INDEX_LABEL)
    assert {p.metadata.name for p in pods} == {f"w-{i}" for i in range(PODS)}


def admitted(api_client: client.ApiClient, namespace: str, workload: str) -> dict[str, Any]:
    return with_admission(Kueue(api_client), namespace, workload)


def places_of(workload: dict[str, Any], pod_set: str) -> list[str]:
    """The node of each rank of the pod set's assignment."""
    [psa] = [
        a for a in workload["status"]["admission"]["podSetAssignments"] if a["name"] == pod_set
    ]
    return [values[-1] for values in domain_of_rank(decode(psa["topologyAssignment"]))]


def bound_pods(api_client: client.ApiClient, namespace: str, selector: str | None) -> list[Any]:
    """Wait for the PODS pods bound; check each was released to its node by the topology
    gate (no gate left, its node selector naming the node)."""
    core = client.CoreV1Api(api_client)

    def placed() -> list[Any] | None:
        pods = core.list_namespaced_pod(namespace, label_selector=selector).items
        if len(pods) == PODS and all(p.spec.node_name for p in pods):
            return pods
        return None

    pods: list[Any] = wait_for(placed, timeout=120, what=f"the {PODS} pods placed")
    for p in pods:
        assert not p.spec.scheduling_gates, (p.metadata.name, p.spec.scheduling_gates)
        assert p.spec.node_selector[HOST] == p.spec.node_name
    return pods


def racks_of(api_client: client.ApiClient, pods: list[Any]) -> set[str]:
    core = client.CoreV1Api(api_client)
    return {core.read_node(p.spec.node_name).metadata.labels[RACK] for p in pods}


def placed_by_rank(
    api_client: client.ApiClient,
    namespace: str,
    workload: str,
    rank_label: str,
    index_label: str,
    selector: str | None = None,
) -> list[Any]:
    """Wait for `workload` admitted asking for one rack (ranked by `index_label`) and its
    PODS pods bound; check they share a rack, each on the node of its rank's place."""
    found = admitted(api_client, namespace, workload)
    [pod_set] = found["spec"]["podSets"]
    assert pod_set["topologyRequest"] == {"required": RACK, "podIndexLabel": index_label}
    places = places_of(found, pod_set["name"])
    assert len(places) == PODS and len(set(places)) == 2, places
    pods = bound_pods(api_client, namespace, selector)
    assert len(racks_of(api_client, pods)) == 1, racks_of(api_client, pods)
    by_rank = {int(p.metadata.labels[rank_label]): p.spec.node_name for p in pods}
    assert by_rank == dict(enumerate(places)), by_rank
    return pods


def test_a_statefulset_asking_for_a_rack_lands_in_one_rack_by_pod_index(
    pods_quotagate: ControllerProcess,
    pod_nodes: list[str],
    api_client: client.ApiClient,
    namespace: str,
) -> None:
    tas_queues(api_client, namespace, POOL, TAINT)
    body = statefulset("db", PODS)
    body["spec"]["template"]["metadata"]["annotations"][POD_SET_REQUIRED_TOPOLOGY_ANNOTATION] = RACK
    client.AppsV1Api(api_client).create_namespaced_stateful_set(namespace, body)
    db = Kueue(api_client).workload_name(namespace, "StatefulSet", "db")
    placed_by_rank(api_client, namespace, db, SS_INDEX, SS_INDEX, selector="app=db")


def test_a_leaderworkersets_workers_land_in_one_rack_by_worker_index(
    pods_quotagate: ControllerProcess,
    pod_nodes: list[str],
    api_client: client.ApiClient,
    namespace: str,
) -> None:
    tas_queues(api_client, namespace, POOL, TAINT)
    body = leaderworkerset("tl", replicas=1, size=PODS)
    lwt = body["spec"]["leaderWorkerTemplate"]
    for template in (lwt["leaderTemplate"], lwt["workerTemplate"]):
        template["metadata"]["annotations"][POD_SET_REQUIRED_TOPOLOGY_ANNOTATION] = RACK
    client.CustomObjectsApi(api_client).create_namespaced_custom_object(
        *LWS[:2], namespace, LWS[2], body
    )
    found = admitted(api_client, namespace, "leaderworkerset-tl-0")
    requests = {ps["name"]: ps["topologyRequest"] for ps in found["spec"]["podSets"]}
    assert requests == {
        "leader": {"required": RACK},
        "worker": {"required": RACK, "podIndexLabel": WORKER_INDEX},
    }
    places = places_of(found, "worker")
    assert len(places) == PODS - 1, places
    pods = bound_pods(api_client, namespace, "leaderworkerset.sigs.k8s.io/name=tl")
    workers = [p for p in pods if p.metadata.labels[WORKER_INDEX] != "0"]
    assert len(racks_of(api_client, workers)) == 1, racks_of(api_client, workers)
    # worker-index 1 … 3 are the worker pod set's ranks 0 … 2
    by_rank = {int(p.metadata.labels[WORKER_INDEX]) - 1: p.spec.node_name for p in workers}
    assert by_rank == dict(enumerate(places)), by_rank


@pytest.fixture
def implicit_nodes(api_client: client.ApiClient) -> Iterator[list[str]]:
    """One rack of two 2-cpu nodes, for one test alone."""
    labels = {name: {BLOCK: "pi", RACK: "pi-r1", IMPLICIT_POOL: "e2e"} for name in IMPLICIT_NODES}
    with tainted_nodes(api_client, labels, TAINT) as names:
        yield names


def plain_pod(name: str) -> dict[str, Any]:
    """A queued one-cpu pod asking for no topology, running 10 minutes."""
    return {
        "metadata": {
            "name": name,
            "labels": {QUEUE_NAME_LABEL: "lq"},
            "annotations": {RUN_SECONDS: "600"},
        },
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
            ],
        },
    }


def create_gated(api_client: client.ApiClient, namespace: str, name: str) -> None:
    """Create `plain_pod(name)`; check the webhook held it by both gates."""
    created = client.CoreV1Api(api_client).create_namespaced_pod(namespace, plain_pod(name))
    gates = [g.name for g in created.spec.scheduling_gates or ()]
    assert gates == [ADMISSION_GATE, TOPOLOGY_SCHEDULING_GATE], gates


def bound(api_client: client.ApiClient, namespace: str, name: str) -> Any:
    core = client.CoreV1Api(api_client)
    return wait_for(
        lambda: (p := core.read_namespaced_pod(name, namespace)).spec.node_name and p,
        timeout=120,
        what=f"pod {name} bound",
    )


def test_a_pod_asking_for_no_topology_in_a_tas_queue_lands_in_its_assigned_domain(
    pods_quotagate: ControllerProcess,
    implicit_nodes: list[str],
    api_client: client.ApiClient,
    namespace: str,
) -> None:
    tas_queues(api_client, namespace, IMPLICIT_POOL, TAINT)
    nodes = []
    for name in ("first", "second"):
        create_gated(api_client, namespace, name)
        workload = Kueue(api_client).workload_name(namespace, "Pod", name)
        found = admitted(api_client, namespace, workload)
        [pod_set] = found["spec"]["podSets"]
        assert "topologyRequest" not in pod_set  # placed as unconstrained: a TAS-only queue
        [place] = places_of(found, pod_set["name"])
        pod = bound(api_client, namespace, name)
        assert not pod.spec.scheduling_gates, pod.spec.scheduling_gates
        assert pod.spec.node_selector[HOST] == place, pod.spec.node_selector
        assert pod.spec.node_name == place
        assert pod.metadata.annotations[POD_SET_UNCONSTRAINED_TOPOLOGY_ANNOTATION] == "true"
        assert pod.metadata.annotations[WORKLOAD_ANNOTATION] == workload
        nodes.append(pod.spec.node_name)
    # Unconstrained placement takes the fullest node that fits: the first pod's, counted
    # once (by its admission, not again as a pod on the node); kube-scheduler alone would
    # have spread the second pod to the empty node.
    assert nodes[0] == nodes[1], nodes


def test_a_pod_asking_for_no_topology_in_a_queue_without_one_starts(
    pods_quotagate: ControllerProcess,
    pod_nodes: list[str],
    api_client: client.ApiClient,
    namespace: str,
) -> None:
    rf, cq = f"{namespace}-plain", f"{namespace}-cq"
    Kueue(api_client).apply(
        flavor(rf, {POOL: "e2e"}, [{**TAINT, "operator": "Equal"}]),
        cluster_queue(cq, {rf: {"cpu": 4}}),
        local_queue(namespace, "lq", cq),
    )
    create_gated(api_client, namespace, "p")
    found = admitted(api_client, namespace, Kueue(api_client).workload_name(namespace, "Pod", "p"))
    [psa] = found["status"]["admission"]["podSetAssignments"]
    assert "topologyAssignment" not in psa
    pod = bound(api_client, namespace, "p")
    assert not pod.spec.scheduling_gates, pod.spec.scheduling_gates  # both gone at once
    assert pod.spec.node_selector == {POOL: "e2e"}
    assert pod.spec.node_name in pod_nodes
    assert POD_SET_UNCONSTRAINED_TOPOLOGY_ANNOTATION not in (pod.metadata.annotations or {})
