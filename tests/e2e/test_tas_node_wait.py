"""A TAS Workload waiting for a failed node's replacement (Kueue's
`TASFailedNodeReplacementFailFast: false`), on the full local control plane with fake
nodes of 1 cpu: rack A of two, rack B of one (too small for the Job). The Job's 2 one-cpu
pods run in rack A, one on each node (one pod per failure: the Job controller's backoff
before it makes a new pod grows with every failed pod).

1. One node is deleted (its pod with it, as the pod garbage collector would): no room is
   left in rack A, so the Workload keeps its quota and `status.unhealthyNodes` names the
   node, as Kueue's node controller writes it; the Job's new pod stays gated.
2. The controller is restarted: nothing about the deleted node reaches the new one but
   that status. A third node joins rack A, and the new controller replaces the failed node
   with it: the topologyAssignment names it, `unhealthyNodes` is gone, the pod runs there.
3. The other original node gets a NoExecute taint the Job does not tolerate
   (TASReplaceNodeOnNodeTaints) and its pod goes (as the taint eviction would): again no
   room, so `unhealthyNodes` names that node, which is still Ready; the topology ungater
   keeps the Job's new pod gated rather than release it there. The taint is removed:
   the node is healthy again, `unhealthyNodes` is cleared and the pod runs there.
4. The controller is stopped, the third node deleted (its pod with it), the controller
   started: no event of the node reaches it, but the node is missing from the nodes it
   lists, so `unhealthyNodes` names it (no room left in rack A)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from api.constants import TOPOLOGY_SCHEDULING_GATE
from tests.cluster.controlplane import ControlPlane
from tests.cluster.fixtures import wait_for
from tests.cluster.nodes import create_node
from tests.e2e.conftest import webhook_controller_running
from tests.e2e.test_tas import BLOCK, RACK
from tests.e2e.test_tas_node_failure import assignment_hosts, rack_job_on_pool
from tests.integration.kueue import (
    ControllerProcess,
    Kueue,
    condition,
    maybe_workload,
)

POOL = "quotagate.test/tas-wait-pool"
TAINT = {"key": "quotagate.test/tas-wait", "value": "true", "effect": "NoSchedule"}
BROKEN = {"key": "quotagate.test/broken", "value": "true", "effect": "NoExecute"}
FIRST, SECOND, THIRD, SMALL = "nw-a-1", "nw-a-2", "nw-a-3", "nw-b-1"


@pytest.fixture(scope="module")
def waiting_controller(
    full_cluster: ControlPlane,
    kubeconfig_path: str,
    crds_installed: list[str],
    api_client: client.ApiClient,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ControllerProcess]:
    """The controller with its webhook, a failed node without replacement kept waiting."""
    config = {
        "integrations": {"frameworks": ["batch/job", "pod"]},
        "featureGates": {"TASFailedNodeReplacementFailFast": False},
    }
    directory: Path = tmp_path_factory.mktemp("tas-wait")
    with webhook_controller_running(
        kubeconfig_path, api_client, directory, "tas-wait", config
    ) as process:
        yield process


def add_node(core: client.CoreV1Api, name: str) -> None:
    rack = name.rsplit("-", 1)[0]
    create_node(core, name, cpu="1", labels={BLOCK: "nw", RACK: rack, POOL: "e2e"})
    core.patch_node(name, {"spec": {"taints": [TAINT]}})


@pytest.fixture(scope="module")
def wait_nodes(api_client: client.ApiClient) -> Iterator[None]:
    core = client.CoreV1Api(api_client)
    for name in (FIRST, SECOND, SMALL):
        add_node(core, name)
    try:
        yield
    finally:
        for name in (FIRST, SECOND, THIRD, SMALL):
            try:
                core.delete_node(name)
            except ApiException as exc:
                if exc.status != 404:
                    raise


def job_pods(core: client.CoreV1Api, namespace: str) -> list[Any]:
    pods = core.list_namespaced_pod(namespace, label_selector="job-name=wait").items
    return [p for p in pods if p.metadata.deletion_timestamp is None]


def running_on(core: client.CoreV1Api, namespace: str) -> dict[str, int] | None:
    """Where the Job's 2 pods run, once both do."""
    pods = [p for p in job_pods(core, namespace) if p.status.phase == "Running"]
    if len(pods) != 2 or not all(p.spec.node_name for p in pods):
        return None
    out: dict[str, int] = {}
    for p in pods:
        out[p.spec.node_name] = out.get(p.spec.node_name, 0) + 1
    return out


def gated(core: client.CoreV1Api, namespace: str) -> list[Any]:
    return [
        p
        for p in job_pods(core, namespace)
        if p.status.phase == "Pending"
        and any(g.name == TOPOLOGY_SCHEDULING_GATE for g in p.spec.scheduling_gates or ())
    ]


def remove_pods_on(core: client.CoreV1Api, namespace: str, node: str) -> None:
    """The Job's pods on `node` deleted at once (the pod garbage collector's or the taint
    eviction's part; neither runs here)."""
    for pod in job_pods(core, namespace):
        if pod.spec.node_name == node:
            core.delete_namespaced_pod(pod.metadata.name, namespace, grace_period_seconds=0)


def test_a_workload_waits_for_a_replacement_across_a_restart_and_a_tainted_node(
    waiting_controller: ControllerProcess,
    wait_nodes: None,
    api_client: client.ApiClient,
    namespace: str,
) -> None:
    kueue = Kueue(api_client)
    core = client.CoreV1Api(api_client)
    rack_job_on_pool(api_client, namespace, POOL, TAINT, "wait", 2)

    def workload() -> dict[str, Any] | None:
        return maybe_workload(kueue, namespace, kueue.workload_name(namespace, "Job", "wait"))

    def waiting_for(node: str) -> dict[str, Any] | None:
        w = workload()
        return w if w and w["status"].get("unhealthyNodes") == [{"name": node}] else None

    def holds_quota(w: dict[str, Any]) -> bool:
        evicted = (condition(w, "Evicted") or {}).get("status") == "True"
        return (condition(w, "QuotaReserved") or {}).get("status") == "True" and not evicted

    first = wait_for(lambda: running_on(core, namespace), timeout=120, what="2 pods running")
    assert first == {FIRST: 1, SECOND: 1}

    # 1. A node deleted, no room in the rack: it waits, and says for which node.
    core.delete_node(FIRST)
    remove_pods_on(core, namespace, FIRST)
    w = wait_for(lambda: waiting_for(FIRST), timeout=60, what=f"unhealthyNodes [{FIRST}]")
    assert holds_quota(w) and FIRST in assignment_hosts(w)
    wait_for(lambda: len(gated(core, namespace)) == 1, timeout=60, what="a new pod, gated")

    # 2. A restart: only the status tells the new controller; a node joins the rack.
    waiting_controller.stop()
    waiting_controller.start()
    add_node(core, THIRD)
    w = wait_for(
        lambda: (w := workload()) and THIRD in assignment_hosts(w) and w,
        timeout=90,
        what=f"{FIRST} replaced by {THIRD} after the restart",
    )
    assert sorted(assignment_hosts(w)) == [SECOND, THIRD]
    assert "unhealthyNodes" not in w["status"] and holds_quota(w)
    placed = wait_for(
        lambda: (n := running_on(core, namespace)) and THIRD in n and n,
        timeout=120,
        what=f"pods running on {THIRD}",
    )
    assert placed == {SECOND: 1, THIRD: 1}

    # 3. A taint the Job does not tolerate on a Ready node: it waits for that node, and the
    # ungater keeps the new pods off it.
    core.patch_node(SECOND, {"spec": {"taints": [TAINT, BROKEN]}})
    remove_pods_on(core, namespace, SECOND)
    w = wait_for(lambda: waiting_for(SECOND), timeout=60, what=f"unhealthyNodes [{SECOND}]")
    assert holds_quota(w) and sorted(assignment_hosts(w)) == [SECOND, THIRD]
    wait_for(lambda: len(gated(core, namespace)) == 1, timeout=60, what="a new pod, gated")
    time.sleep(2)  # the ungater had its chance to release it: still gated
    assert len(gated(core, namespace)) == 1
    core.patch_node(SECOND, {"spec": {"taints": [TAINT]}})
    w = wait_for(
        lambda: (w := workload()) and "unhealthyNodes" not in w["status"] and w,
        timeout=60,
        what="unhealthyNodes cleared",
    )
    assert holds_quota(w) and sorted(assignment_hosts(w)) == [SECOND, THIRD]
    final = wait_for(
        lambda: (n := running_on(core, namespace)) and SECOND in n and n,
        timeout=120,
        what=f"pods running on {SECOND} again",
    )
    assert final == {SECOND: 1, THIRD: 1}

    # 4. A node deleted while no controller runs: no event of it ever comes; the new
    # controller finds it missing from the nodes it lists, and the Workload waits for it.
    waiting_controller.stop()
    core.delete_node(THIRD)
    remove_pods_on(core, namespace, THIRD)
    waiting_controller.start()
    w = wait_for(lambda: waiting_for(THIRD), timeout=90, what=f"unhealthyNodes [{THIRD}]")
    assert holds_quota(w) and sorted(assignment_hosts(w)) == [SECOND, THIRD]
