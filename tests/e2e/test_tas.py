"""Topology-aware scheduling on the full local control plane: eight fake nodes labelled
block / rack / hostname (tainted, so only the TAS flavor's pods go there), a Topology, a
TAS ResourceFlavor. A Job asking for one rack is admitted with a topologyAssignment, its
pods start held by the topology gate, quotagate releases each with its domain's node
selector, and kube-scheduler places every pod in that one rack. A Job larger than any rack
waits, its Workload naming the level and the largest free domain."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from api.constants import POD_SET_REQUIRED_TOPOLOGY_ANNOTATION, TOPOLOGY_SCHEDULING_GATE
from tests.cluster.fixtures import wait_for
from tests.cluster.nodes import RUN_SECONDS, create_node, queued_job
from tests.integration.kueue import (
    ControllerProcess,
    Kueue,
    cluster_queue,
    condition,
    flavor,
    local_queue,
    maybe_workload,
)

BLOCK, RACK, HOST = "cloud.com/topology-block", "cloud.com/topology-rack", "kubernetes.io/hostname"
POOL = "quotagate.test/tas-pool"
TAINT = {"key": "quotagate.test/tas", "value": "true", "effect": "NoSchedule"}
NODES = [f"tas-{b}-{r}-{h}" for b in ("b1", "b2") for r in ("r1", "r2") for h in ("h1", "h2")]


@pytest.fixture(scope="module")
def tas_nodes(api_client: client.ApiClient) -> Iterator[list[str]]:
    core = client.CoreV1Api(api_client)
    for name in NODES:
        _, block, rack, _ = name.split("-")
        create_node(
            core, name, cpu="2", labels={BLOCK: block, RACK: f"{block}-{rack}", POOL: "e2e"}
        )
        core.patch_node(name, {"spec": {"taints": [TAINT]}})
    try:
        yield NODES
    finally:
        for name in NODES:
            try:
                core.delete_node(name)
            except ApiException as exc:
                if exc.status != 404:
                    raise


def topology(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Topology",
        "metadata": {"name": name},
        "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": HOST}]},
    }


def rack_job(name: str, pods: int) -> dict[str, Any]:
    job = queued_job(name, parallelism=pods)
    job["spec"]["template"]["metadata"]["annotations"] = {
        RUN_SECONDS: "30",
        POD_SET_REQUIRED_TOPOLOGY_ANNOTATION: RACK,
    }
    return job


def test_a_rack_job_runs_in_one_rack_and_a_larger_one_waits_naming_the_domain(
    webhook_controller: ControllerProcess,
    tas_nodes: list[str],
    api_client: client.ApiClient,
    namespace: str,
) -> None:
    kueue = Kueue(api_client)
    core, batch = client.CoreV1Api(api_client), client.BatchV1Api(api_client)
    rf, cq = f"{namespace}-tas", f"{namespace}-cq"
    tas_flavor = flavor(rf, {POOL: "e2e"}, [{**TAINT, "operator": "Equal"}])
    tas_flavor["spec"]["topologyName"] = f"{namespace}-topology"
    kueue.custom.create_cluster_custom_object(
        "kueue.x-k8s.io", "v1beta2", "topologies", topology(f"{namespace}-topology")
    )
    kueue.apply(
        tas_flavor,
        cluster_queue(cq, {rf: {"cpu": 32}}),
        local_queue(namespace, "lq", cq),
    )
    batch.create_namespaced_job(namespace, rack_job("fits", 4))
    admitted = wait_for(
        lambda: (
            (w := maybe_workload(kueue, namespace, "job-fits"))
            and w.get("status", {}).get("admission")
            and w
        ),
        timeout=60,
        what="the rack Job admitted",
    )
    [psa] = admitted["status"]["admission"]["podSetAssignments"]
    assert psa["topologyAssignment"]["levels"] == [HOST]

    def placed() -> list[Any] | None:
        pods = core.list_namespaced_pod(namespace, label_selector="job-name=fits").items
        if len(pods) == 4 and all(p.spec.node_name for p in pods):
            return pods
        return None

    pods = wait_for(placed, timeout=90, what="the 4 pods placed")
    racks = {core.read_node(p.spec.node_name).metadata.labels[RACK] for p in pods}
    assert len(racks) == 1, racks
    for p in pods:
        assert not any(g.name == TOPOLOGY_SCHEDULING_GATE for g in p.spec.scheduling_gates or ())
        assert p.spec.node_selector[HOST] == p.spec.node_name

    # A rack holds 4 one-cpu pods (2 nodes of 2 cpus): 5 fit the quota and no rack.
    batch.create_namespaced_job(namespace, rack_job("too-big", 5))
    pending = wait_for(
        lambda: (
            (w := maybe_workload(kueue, namespace, "job-too-big"))
            and (c := condition(w, "QuotaReserved"))
            and c["status"] == "False"
            and "topology" in c["message"]
            and c
        ),
        timeout=60,
        what="the larger Job pending on topology",
    )
    assert "allows to fit only 4 out of 5 pod(s)" in pending["message"]
    assert f"the largest free domain at level {RACK} is" in pending["message"]
