"""Topology-aware scheduling on the full local control plane: eight fake nodes labelled
block / rack / hostname (tainted, so only the TAS flavor's pods go there), a Topology, a
TAS ResourceFlavor. A Job asking for one rack is admitted with a topologyAssignment, its
pods start held by the topology gate, quotagate releases each with its domain's node
selector, and kube-scheduler places every pod in that one rack. A Job larger than any rack
waits, its Workload naming the level and the largest free domain. A preemptor keeps the
rack it evicted for while its victim terminates. A Job asking for no topology is placed
as unconstrained and its pods released into the assignment's nodes."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from api.constants import (
    POD_SET_REQUIRED_TOPOLOGY_ANNOTATION,
    POD_SET_UNCONSTRAINED_TOPOLOGY_ANNOTATION,
    TOPOLOGY_SCHEDULING_GATE,
)
from controller.core.tas.encoding import decode
from tests.cluster.fixtures import wait_for
from tests.cluster.nodes import RUN_SECONDS, create_node, queued_job
from tests.integration.kueue import (
    ControllerProcess,
    Kueue,
    cluster_queue,
    condition,
    flavor,
    is_admitted,
    local_queue,
    maybe_workload,
    wait_admitted,
    workload,
)

BLOCK, RACK, HOST = "cloud.com/topology-block", "cloud.com/topology-rack", "kubernetes.io/hostname"
POOL = "quotagate.test/tas-pool"
TAINT = {"key": "quotagate.test/tas", "value": "true", "effect": "NoSchedule"}
NODES = [f"tas-{b}-{r}-{h}" for b in ("b1", "b2") for r in ("r1", "r2") for h in ("h1", "h2")]


@contextmanager
def tainted_nodes(
    api_client: client.ApiClient,
    labels: dict[str, dict[str, str]],
    taint: dict[str, str] = TAINT,
) -> Iterator[list[str]]:
    """2-cpu fake nodes with these labels (by name), tainted so only TAS pods go there;
    deleted afterwards."""
    core = client.CoreV1Api(api_client)
    for name, node_labels in labels.items():
        create_node(core, name, cpu="2", labels=node_labels)
        core.patch_node(name, {"spec": {"taints": [taint]}})
    try:
        yield list(labels)
    finally:
        for name in labels:
            try:
                core.delete_node(name)
            except ApiException as exc:
                if exc.status != 404:
                    raise


@pytest.fixture(scope="module")
def tas_nodes(api_client: client.ApiClient) -> Iterator[list[str]]:
    labels = {}
    for name in NODES:
        _, block, rack, _ = name.split("-")
        labels[name] = {BLOCK: block, RACK: f"{block}-{rack}", POOL: "e2e"}
    with tainted_nodes(api_client, labels) as names:
        yield names


def topology(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Topology",
        "metadata": {"name": name},
        "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": HOST}]},
    }


def tas_queue(
    kueue: Kueue, namespace: str, pool: str, cpu: int, preemption: dict[str, str] | None = None
) -> None:
    """A Topology, a TAS flavor of the `pool` nodes (tolerating their taint), the
    ClusterQueue `<namespace>-cq` with `cpu` of it and the LocalQueue `lq`."""
    rf, cq = f"{namespace}-tas", f"{namespace}-cq"
    tas_flavor = flavor(rf, {POOL: pool}, [{**TAINT, "operator": "Equal"}])
    tas_flavor["spec"]["topologyName"] = f"{namespace}-topology"
    kueue.custom.create_cluster_custom_object(
        "kueue.x-k8s.io", "v1beta2", "topologies", topology(f"{namespace}-topology")
    )
    kueue.apply(
        tas_flavor,
        cluster_queue(cq, {rf: {"cpu": cpu}}, preemption=preemption),
        local_queue(namespace, "lq", cq),
    )


def rack_job(name: str, pods: int) -> dict[str, Any]:
    job = queued_job(name, parallelism=pods)
    job["spec"]["template"]["metadata"]["annotations"] = {
        RUN_SECONDS: "30",
        POD_SET_REQUIRED_TOPOLOGY_ANNOTATION: RACK,
    }
    return job


def with_admission(kueue: Kueue, namespace: str, name: str) -> dict[str, Any]:
    """The Workload `name` once it has an admission (quota reserved)."""
    found: dict[str, Any] = wait_for(
        lambda: (
            (w := maybe_workload(kueue, namespace, name))
            and w.get("status", {}).get("admission")
            and w
        ),
        timeout=60,
        what=f"{name} admitted",
    )
    return found


def placed_job_pods(core: client.CoreV1Api, namespace: str, job: str, count: int) -> list[Any]:
    """The `count` pods of Job `job`, once all are bound to a node."""

    def placed() -> list[Any] | None:
        pods = core.list_namespaced_pod(namespace, label_selector=f"job-name={job}").items
        if len(pods) == count and all(p.spec.node_name for p in pods):
            return pods
        return None

    found: list[Any] = wait_for(placed, timeout=90, what=f"the {count} pods of {job} placed")
    return found


def test_a_rack_job_runs_in_one_rack_and_a_larger_one_waits_naming_the_domain(
    webhook_controller: ControllerProcess,
    tas_nodes: list[str],
    api_client: client.ApiClient,
    namespace: str,
) -> None:
    kueue = Kueue(api_client)
    core, batch = client.CoreV1Api(api_client), client.BatchV1Api(api_client)
    tas_queue(kueue, namespace, "e2e", 32)
    batch.create_namespaced_job(namespace, rack_job("fits", 4))
    admitted = with_admission(kueue, namespace, kueue.workload_name(namespace, "Job", "fits"))
    [psa] = admitted["status"]["admission"]["podSetAssignments"]
    assert psa["topologyAssignment"]["levels"] == [HOST]

    pods = placed_job_pods(core, namespace, "fits", 4)
    racks = {core.read_node(p.spec.node_name).metadata.labels[RACK] for p in pods}
    assert len(racks) == 1, racks
    for p in pods:
        assert not any(g.name == TOPOLOGY_SCHEDULING_GATE for g in p.spec.scheduling_gates or ())
        assert p.spec.node_selector[HOST] == p.spec.node_name

    # A rack holds 4 one-cpu pods (2 nodes of 2 cpus): 5 fit the quota and no rack.
    batch.create_namespaced_job(namespace, rack_job("too-big", 5))
    pending = wait_for(
        lambda: (
            (
                w := maybe_workload(
                    kueue, namespace, kueue.workload_name(namespace, "Job", "too-big")
                )
            )
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


HOLD_POOL = "e2e-hold"
HOLD_NODES = [f"hold-{r}-{h}" for r in ("r1", "r2") for h in ("h1", "h2")]


@pytest.fixture
def hold_nodes(api_client: client.ApiClient) -> Iterator[list[str]]:
    """One block of two racks of two nodes, for this test alone."""
    labels = {}
    for name in HOLD_NODES:
        _, rack, _ = name.split("-")
        labels[name] = {BLOCK: "hb", RACK: f"hb-{rack}", POOL: HOLD_POOL}
    with tainted_nodes(api_client, labels) as names:
        yield names


def tas_workload(
    namespace: str, name: str, pods: int, priority: int, level: str, host: str | None = None
) -> dict[str, Any]:
    """A bare Workload of `pods` one-cpu pods asking for one domain at `level` (pinned to a
    host when given). Nobody runs it: an eviction lasts until the test acknowledges it."""
    body = workload(namespace, name, "lq", count=pods, priority=priority)
    [pod_set] = body["spec"]["podSets"]
    pod_set["topologyRequest"] = {"required": level}
    if host is not None:
        pod_set["template"]["spec"]["nodeSelector"] = {HOST: host}
    return body


def hosts_of(admitted: dict[str, Any]) -> dict[str, int]:
    [psa] = admitted["status"]["admission"]["podSetAssignments"]
    return {values[-1]: n for values, n in decode(psa["topologyAssignment"]).domains}


def test_a_preemptor_keeps_the_rack_it_evicted_for_while_its_victim_terminates(
    webhook_controller: ControllerProcess,
    hold_nodes: list[str],
    api_client: client.ApiClient,
    namespace: str,
) -> None:
    """Rack hb-r1 has one free node and one running priority-1 Workload; rack hb-r2 two
    priority-5 ones. A 4-pod Workload asking for one rack (priority 10) evicts the
    priority-1 one. While that eviction is not acknowledged (its owner has not stopped it),
    a priority-0 Workload asking for one node arrives: the free node of hb-r1 is the
    preemptor's, so it waits; once the victim is gone the preemptor runs in hb-r1."""
    kueue = Kueue(api_client)
    tas_queue(kueue, namespace, HOLD_POOL, 64, {"withinClusterQueue": "LowerPriority"})
    running = {"victim": ("hold-r1-h1", 1), "r2a": ("hold-r2-h1", 5), "r2b": ("hold-r2-h2", 5)}
    for name, (host, priority) in running.items():
        kueue.apply(tas_workload(namespace, name, 2, priority, HOST, host))
        assert hosts_of(wait_admitted(kueue, namespace, name)) == {host: 2}

    kueue.apply(tas_workload(namespace, "big", 4, 10, RACK))
    wait_for(
        lambda: (
            (c := condition(kueue.get_workload(namespace, "victim"), "Evicted"))
            and c["status"] == "True"
        ),
        timeout=60,
        what="the priority-1 Workload evicted",
    )
    assert not is_admitted(kueue.get_workload(namespace, "big"))

    kueue.apply(tas_workload(namespace, "late", 2, 0, HOST))
    decided = wait_for(
        lambda: condition(kueue.get_workload(namespace, "late"), "QuotaReserved"),
        timeout=60,
        what="the late Workload decided",
    )
    assert decided["status"] == "False", "the late Workload took the preemptor's node"
    assert "is held for preempting Workloads" in decided["message"], decided
    assert not is_admitted(kueue.get_workload(namespace, "big"))

    kueue.acknowledge_eviction(namespace, "victim")
    assert hosts_of(wait_admitted(kueue, namespace, "big", timeout=60)) == {
        "hold-r1-h1": 2,
        "hold-r1-h2": 2,
    }
    assert not is_admitted(kueue.get_workload(namespace, "late"))


def test_a_job_asking_for_no_topology_in_a_tas_queue_runs_in_its_assigned_domains(
    webhook_controller: ControllerProcess,
    tas_nodes: list[str],
    api_client: client.ApiClient,
    namespace: str,
) -> None:
    """A TAS-only ClusterQueue places a Job that asks for no topology as unconstrained
    (Kueue's implicit TAS): its pods start held by the topology gate, marked unconstrained,
    and each is released to a node of the assignment, as many on each as it says."""
    kueue = Kueue(api_client)
    core = client.CoreV1Api(api_client)
    tas_queue(kueue, namespace, "e2e", 32)
    job = queued_job("plain", parallelism=3)
    job["spec"]["template"]["metadata"]["annotations"] = {RUN_SECONDS: "30"}
    client.BatchV1Api(api_client).create_namespaced_job(namespace, job)
    admitted = with_admission(kueue, namespace, kueue.workload_name(namespace, "Job", "plain"))
    [pod_set] = admitted["spec"]["podSets"]
    assert "topologyRequest" not in pod_set
    hosts = hosts_of(admitted)
    assert sum(hosts.values()) == 3, hosts

    pods = placed_job_pods(core, namespace, "plain", 3)
    for p in pods:
        assert not p.spec.scheduling_gates, p.spec.scheduling_gates
        assert p.spec.node_selector[HOST] == p.spec.node_name
        assert p.metadata.annotations[POD_SET_UNCONSTRAINED_TOPOLOGY_ANNOTATION] == "true"
    on_nodes: dict[str, int] = {}
    for p in pods:
        on_nodes[p.spec.node_name] = on_nodes.get(p.spec.node_name, 0) + 1
    assert on_nodes == hosts, (on_nodes, hosts)
