"""Rank-ordered placement on the full local control plane with fake nodes: an Indexed Job
of 12 half-cpu pods asking for one rack of three 2-cpu nodes (four pods a node). Its
pods carry `batch.kubernetes.io/job-completion-index`; quotagate releases the pod of index
i to the domain of the i-th place of the topology assignment, so indexes 0-3 share the
assignment's first node, 4-7 its second, 8-11 its third. Filling the nodes in the order
the pods are seen (or by name: `ranks-10-…` sorts before `ranks-2-…`) would mix them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from api.constants import POD_SET_REQUIRED_TOPOLOGY_ANNOTATION
from controller.core.tas.encoding import decode
from controller.core.tas.ranks import domain_of_rank
from tests.cluster.fixtures import wait_for
from tests.cluster.nodes import RUN_SECONDS, queued_job
from tests.e2e.test_tas import BLOCK, HOST, RACK, tainted_nodes
from tests.e2e.test_tas_node_failure import tas_queues
from tests.integration.kueue import ControllerProcess, Kueue, maybe_workload

POOL = "quotagate.test/tas-rank-pool"
TAINT = {"key": "quotagate.test/tas-rank", "value": "true", "effect": "NoSchedule"}
NODES = ["rank-n1", "rank-n2", "rank-n3"]
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
PODS = 12


@pytest.fixture(scope="module")
def rank_nodes(api_client: client.ApiClient) -> Iterator[list[str]]:
    labels = {name: {BLOCK: "rb", RACK: "rb-r1", POOL: "e2e"} for name in NODES}
    with tainted_nodes(api_client, labels, TAINT) as names:
        yield names


def indexed_job(name: str, pods: int) -> dict[str, Any]:
    job = queued_job(name, parallelism=pods)
    job["spec"]["completionMode"] = "Indexed"
    template = job["spec"]["template"]
    template["metadata"]["annotations"] = {
        RUN_SECONDS: "600",
        POD_SET_REQUIRED_TOPOLOGY_ANNOTATION: RACK,
    }
    template["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "500m"
    return job


def test_an_indexed_jobs_pods_land_by_completion_index_in_the_assignments_domains(
    webhook_controller: ControllerProcess,
    rank_nodes: list[str],
    api_client: client.ApiClient,
    namespace: str,
) -> None:
    kueue = Kueue(api_client)
    core = client.CoreV1Api(api_client)
    tas_queues(api_client, namespace, POOL, TAINT)
    client.BatchV1Api(api_client).create_namespaced_job(namespace, indexed_job("ranks", PODS))

    admitted = wait_for(
        lambda: (
            (w := maybe_workload(kueue, namespace, kueue.workload_name(namespace, "Job", "ranks")))
            and w.get("status", {}).get("admission")
            and w
        ),
        timeout=60,
        what="the indexed Job admitted",
    )
    [pod_set] = admitted["spec"]["podSets"]
    assert pod_set["topologyRequest"]["podIndexLabel"] == COMPLETION_INDEX
    [psa] = admitted["status"]["admission"]["podSetAssignments"]
    assignment = decode(psa["topologyAssignment"])
    assert assignment.levels == (HOST,)
    places = [values[-1] for values in domain_of_rank(assignment)]
    assert len(places) == PODS and len(set(places)) == 3, places

    def placed() -> list[Any] | None:
        pods = core.list_namespaced_pod(namespace, label_selector="job-name=ranks").items
        if len(pods) == PODS and all(p.spec.node_name for p in pods):
            return pods
        return None

    pods = wait_for(placed, timeout=120, what=f"the {PODS} pods placed")
    by_index = {int(p.metadata.labels[COMPLETION_INDEX]): p.spec.node_name for p in pods}
    assert by_index == dict(enumerate(places)), by_index
    # consecutive ranks together: each node holds one run of indexes
    for node in set(places):
        indexes = sorted(i for i, n in by_index.items() if n == node)
        assert indexes == list(range(indexes[0], indexes[0] + 4)), (node, indexes)
