"""A failed node under a running TAS Job, on the full local control plane with fake nodes:
rack A of three 2-cpu nodes, rack B of two 1-cpu nodes (too small for the Job). The Job's
4 one-cpu pods run in rack A on two nodes.

1. One of those nodes is cordoned and one of its two pods succeeds: the Job's new pod is
   released to it and waits there unbound. The node goes NotReady: that pod is marked
   Failed (`TerminatedByKueue`, as Kueue's node controller does), though the node does not
   count as failed yet (the Job's other pod still runs there). That pod is deleted too (as
   kube-controller-manager's eviction of a not-ready node's pods would): the node counts as
   failed (Kueue's TASReplaceNodeOnPodTermination), the Workload's topologyAssignment names
   the rack's third node instead, and the Job's new pods land there, in rack A.
2. Another of the Job's nodes is deleted: rack A has no room left for its pods, so the
   Workload is evicted (NodeFailures) and requeued; it waits (no rack holds 4 pods) until
   the not-ready node is Ready again, then runs in rack A once more."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from api.constants import HOSTNAME_LABEL, POD_SET_REQUIRED_TOPOLOGY_ANNOTATION
from tests.cluster.controlplane import ControlPlane
from tests.cluster.fixtures import wait_for
from tests.cluster.nodes import RUN_SECONDS, create_node, queued_job
from tests.e2e.test_tas import BLOCK, RACK, topology
from tests.integration.kueue import (
    ControllerProcess,
    Kueue,
    cluster_queue,
    condition,
    flavor,
    local_queue,
    maybe_workload,
)

POOL = "quotagate.test/tas-failure-pool"
TAINT = {"key": "quotagate.test/tas-failure", "value": "true", "effect": "NoSchedule"}
NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
RACK_A = ["nf-a-1", "nf-a-2", "nf-a-3"]
RACK_B = ["nf-b-1", "nf-b-2"]


@pytest.fixture(scope="module")
def failure_nodes(api_client: client.ApiClient) -> Iterator[None]:
    core = client.CoreV1Api(api_client)
    for name in RACK_A + RACK_B:
        rack = name.rsplit("-", 1)[0]
        cpu = "2" if rack == "nf-a" else "1"
        create_node(core, name, cpu=cpu, labels={BLOCK: "nf", RACK: rack, POOL: "e2e"})
        core.patch_node(name, {"spec": {"taints": [TAINT]}})
    try:
        yield
    finally:
        for name in RACK_A + RACK_B:
            try:
                core.delete_node(name)
            except ApiException as exc:
                if exc.status != 404:
                    raise


def set_ready(core: client.CoreV1Api, name: str, ready: bool) -> None:
    """The node's Ready condition (a strategic merge by type keeps its others), and the
    taint kube-controller-manager's node lifecycle controller puts on a not-ready node
    (not run here), so that kube-scheduler binds no new pod there."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    condition = {
        "type": "Ready",
        "status": "True" if ready else "False",
        "reason": "KubeletReady" if ready else "KubeletNotReady",
        "message": "fake node",
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }
    core.patch_node_status(name, {"status": {"conditions": [condition]}})
    taints = [TAINT] if ready else [TAINT, NOT_READY_TAINT]
    core.patch_node(name, {"spec": {"taints": taints}})


def job_pods(core: client.CoreV1Api, namespace: str) -> list[Any]:
    pods = core.list_namespaced_pod(namespace, label_selector="job-name=mend").items
    return [p for p in pods if p.metadata.deletion_timestamp is None]


def running_pods(core: client.CoreV1Api, namespace: str) -> list[Any]:
    return [p for p in job_pods(core, namespace) if p.status.phase == "Running"]


def assignment_hosts(workload: dict[str, Any]) -> list[str]:
    [psa] = workload["status"]["admission"]["podSetAssignments"]
    out = []
    for piece in psa["topologyAssignment"]["slices"]:
        [level] = piece["valuesPerLevel"]
        if "universal" in level:
            out += [level["universal"]] * piece["domainCount"]
        else:
            individual = level["individual"]
            out += [
                f"{individual.get('prefix', '')}{root}{individual.get('suffix', '')}"
                for root in individual["roots"]
            ]
    return out


def tas_queues(
    api_client: client.ApiClient, namespace: str, pool: str, taint: dict[str, str]
) -> None:
    """A TAS flavor of the nodes labelled `pool` (tolerating their `taint`), its Topology,
    a ClusterQueue of 32 cpus and the LocalQueue `lq`."""
    kueue = Kueue(api_client)
    rf, cq, topology_name = f"{namespace}-tas", f"{namespace}-cq", f"{namespace}-topology"
    tas_flavor = flavor(rf, {pool: "e2e"}, [{**taint, "operator": "Equal"}])
    tas_flavor["spec"]["topologyName"] = topology_name
    kueue.custom.create_cluster_custom_object(
        "kueue.x-k8s.io", "v1beta2", "topologies", topology(topology_name)
    )
    kueue.apply(tas_flavor, cluster_queue(cq, {rf: {"cpu": 32}}), local_queue(namespace, "lq", cq))


def rack_job_on_pool(
    api_client: client.ApiClient,
    namespace: str,
    pool: str,
    taint: dict[str, str],
    name: str,
    pods: int,
    completions: int | None = None,
) -> None:
    """A TAS flavor of the nodes labelled `pool` (tolerating their `taint`), its Topology
    and queues, and a Job `name` of `pods` one-cpu pods in one rack, running 10 minutes
    (`completions`: `pods` unless given)."""
    tas_queues(api_client, namespace, pool, taint)
    job = queued_job(name, parallelism=pods)
    job["spec"]["template"]["metadata"]["annotations"] = {
        RUN_SECONDS: "600",
        POD_SET_REQUIRED_TOPOLOGY_ANNOTATION: RACK,
    }
    job["spec"]["backoffLimit"] = 20
    job["spec"]["completions"] = completions or pods
    client.BatchV1Api(api_client).create_namespaced_job(namespace, job)


def test_a_failed_node_is_replaced_in_its_rack_else_the_workload_is_requeued(
    full_cluster: ControlPlane,
    webhook_controller: ControllerProcess,
    failure_nodes: None,
    api_client: client.ApiClient,
    namespace: str,
) -> None:
    kueue = Kueue(api_client)
    core = client.CoreV1Api(api_client)
    # More completions than pods: a pod that succeeds is followed by a new one at once
    # (one that fails, after the Job controller's backoff).
    rack_job_on_pool(api_client, namespace, POOL, TAINT, "mend", 4, completions=8)

    def on_nodes(expected: int = 4) -> dict[str, int] | None:
        pods = running_pods(core, namespace)
        if len(pods) != expected or not all(p.spec.node_name for p in pods):
            return None
        out: dict[str, int] = {}
        for p in pods:
            out[p.spec.node_name] = out.get(p.spec.node_name, 0) + 1
        return out

    first = wait_for(on_nodes, timeout=120, what="the Job's 4 pods running")
    assert set(first) <= set(RACK_A) and len(first) == 2, first
    [spare] = [n for n in RACK_A if n not in first]
    failing, other = sorted(first)

    # 1. A pod released to the node and not yet bound when it goes NotReady is marked
    # Failed; the node is not failed while the Job's other pod runs there.
    core.patch_node(failing, {"spec": {"unschedulable": True}})  # binds no new pod there
    [leaving, staying] = [p for p in running_pods(core, namespace) if p.spec.node_name == failing]
    full_cluster.lifecycle.complete(namespace, leaving.metadata.name)  # type: ignore[attr-defined]
    pinned = wait_for(
        lambda: next(
            (
                p
                for p in job_pods(core, namespace)
                if p.status.phase == "Pending"
                and not p.spec.node_name
                and not p.spec.scheduling_gates
                and (p.spec.node_selector or {}).get(HOSTNAME_LABEL) == failing
            ),
            None,
        ),
        timeout=90,
        what=f"a new pod released to {failing}, unbound",
    )
    set_ready(core, failing, False)
    marked = wait_for(
        lambda: (
            (p := core.read_namespaced_pod(pinned.metadata.name, namespace)).status.phase
            == "Failed"
            and p
        ),
        timeout=60,
        what=f"the pod pinned to the NotReady {failing} marked Failed",
    )
    [terminated] = [c for c in marked.status.conditions if c.type == "TerminatedByKueue"]
    assert (terminated.status, terminated.reason) == ("True", "UnschedulableOnAssignedNode")
    assert terminated.message == f"Pod terminated by quotagate: its node {failing} is not Ready"
    wait_for(
        lambda: (
            core.list_namespaced_event(
                namespace,
                field_selector=f"involvedObject.name={pinned.metadata.name},"
                "reason=PodTerminatedByKueue",
            ).items
        ),
        timeout=30,
        what="the PodTerminatedByKueue Event on the pod",
    )
    workload = maybe_workload(kueue, namespace, kueue.workload_name(namespace, "Job", "mend"))
    assert workload and sorted(set(assignment_hosts(workload))) == sorted(first)
    assert (condition(workload, "Evicted") or {}).get("status") != "True"
    assert "unhealthyNodes" not in workload["status"]
    assert staying.metadata.name in {p.metadata.name for p in running_pods(core, namespace)}
    core.patch_node(failing, {"spec": {"unschedulable": False}})  # not Ready: still no pod

    # Its pods gone: replaced by the rack's third node.
    for pod in running_pods(core, namespace):
        if pod.spec.node_name == failing:
            core.delete_namespaced_pod(pod.metadata.name, namespace)
    workload = wait_for(
        lambda: (
            (w := maybe_workload(kueue, namespace, kueue.workload_name(namespace, "Job", "mend")))
            and w["status"].get("admission")
            and failing not in assignment_hosts(w)
            and w
        ),
        timeout=60,
        what=f"the topologyAssignment without {failing}",
    )
    assert sorted(assignment_hosts(workload)) == sorted({spare, other})
    assert (condition(workload, "Evicted") or {}).get("status") != "True"
    replaced = wait_for(
        lambda: (n := on_nodes()) and spare in n and n, timeout=120, what="pods on the spare node"
    )
    assert replaced == {other: 2, spare: 2}

    # 2. Another of its nodes deleted: no room in the rack, so evicted and requeued.
    core.delete_node(other)
    evicted = wait_for(
        lambda: (
            (w := maybe_workload(kueue, namespace, kueue.workload_name(namespace, "Job", "mend")))
            and (c := condition(w, "Evicted"))
            and c["status"] == "True"
            and c
        ),
        timeout=60,
        what="the Workload evicted",
    )
    assert evicted["reason"] == "NodeFailures"
    assert evicted["message"] == (
        f"Workload was evicted as there was no replacement for unhealthy node(s): {other}"
    )
    pending = wait_for(
        lambda: (
            (w := maybe_workload(kueue, namespace, kueue.workload_name(namespace, "Job", "mend")))
            and (c := condition(w, "QuotaReserved"))
            and c["status"] == "False"
            and "topology" in c["message"]
            and c
        ),
        timeout=90,
        what="the requeued Workload waiting for a rack",
    )
    assert "allows to fit only" in pending["message"]
    set_ready(core, failing, True)
    back = wait_for(
        lambda: (
            (w := maybe_workload(kueue, namespace, kueue.workload_name(namespace, "Job", "mend")))
            and (c := condition(w, "QuotaReserved"))
            and c["status"] == "True"
            and w
        ),
        timeout=90,
        what="the Workload admitted again",
    )
    assert sorted(set(assignment_hosts(back))) == sorted({failing, spare})
    final = wait_for(lambda: on_nodes(), timeout=120, what="the pods running again")
    assert final == {failing: 2, spare: 2}
