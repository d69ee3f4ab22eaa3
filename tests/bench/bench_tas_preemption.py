"""Topology-aware preemption benchmark: one ClusterQueue whose quota and nodes are full
(`racks` racks of `hosts` 8-cpu nodes, two 4-pod Workloads pinned to every node, mixed
priorities and costs), then one head of higher priority asking for a whole rack, or for
one host: the cycle runs the victim search once per domain of that level
(controller/core/scheduler/topology_preemption.py).

    .venv/bin/python tests/bench/bench_tas_preemption.py [--racks N] [--hosts N]

Prints the time of the cycle that plans the preemption and the victims it picks. Figures,
not assertions; the pytest function runs a scaled-down size.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

from api.constants import HOSTNAME_LABEL, WithinClusterQueuePolicy
from controller.core.model.clusterqueues import (
    ClusterQueue,
    FlavorQuotas,
    LocalQueue,
    PreemptionPolicy,
    ResourceGroup,
    ResourceQuota,
)
from controller.core.model.flavors import ResourceFlavor
from controller.core.model.selectors import LabelSelector
from controller.core.model.topology import Node, Topology, TopologyRequest
from controller.core.model.workloads import PodSet, Workload
from controller.core.scheduler.cycle import run_cycle
from controller.core.state import ClusterState

RACK = "cloud.com/topology-rack"
CPU = 1000


def _state(racks: int, hosts: int) -> tuple[ClusterState, list[str]]:
    state = ClusterState()
    state.set_flavor(ResourceFlavor("tas", {"pool": "tas"}, topology_name="default"))
    quota = FlavorQuotas("tas", {"cpu": ResourceQuota(8 * CPU * racks * hosts)})
    policy = PreemptionPolicy(within_cluster_queue=WithinClusterQueuePolicy.LOWER_PRIORITY)
    cq = ClusterQueue(
        "cq",
        (ResourceGroup(("cpu",), (quota,)),),
        namespace_selector=LabelSelector(),
        preemption=policy,
    )
    state.set_cluster_queue(cq)
    state.set_local_queue(LocalQueue("ns", "cq", "cq"))
    state.set_topology(Topology("default", (RACK, HOSTNAME_LABEL)))
    names = []
    for r in range(racks):
        for h in range(hosts):
            name = f"r{r}-h{h}"
            labels = {"pool": "tas", RACK: f"r{r}", HOSTNAME_LABEL: name}
            state.set_node(Node(name, labels, {"cpu": 8 * CPU, "pods": 110_000}))
            names.append(name)
    return state, names


def _workload(name: str, count: int, request: TopologyRequest, **kw: object) -> Workload:
    selector = kw.pop("selector", {})
    pod_set = PodSet("main", count, {"cpu": CPU}, selector, topology=request)  # type: ignore[arg-type]
    return replace(Workload("ns", name, f"uid-{name}", "cq", (pod_set,)), **kw)  # type: ignore[arg-type]


def run(racks: int, hosts: int, level: str) -> tuple[float, int, int, int]:
    """(seconds of the preempting cycle, victims, the racks they are in, admitted before
    it)."""
    state, names = _state(racks, hosts)
    host = TopologyRequest(required=HOSTNAME_LABEL)
    for i, name in enumerate(names):
        for j in range(2):
            state.upsert_workload(
                _workload(
                    f"w{i}-{j}",
                    4,
                    host,
                    selector={HOSTNAME_LABEL: name},
                    priority=(i * 7 + j) % 5,
                    preemption_cost=(i * 3 + j) % 4,
                )
            )
    while run_cycle(state, 0).changed:
        pass
    admitted = len(state.cache.admitted)
    count = 8 * hosts if level == RACK else 8
    state.upsert_workload(
        _workload(
            "big", count, TopologyRequest(required=level), priority=10, creation_timestamp=1.0
        )
    )
    start = time.perf_counter()
    result = run_cycle(state, 0)
    seconds = time.perf_counter() - start
    victims = [v.workload_key for p in result.preempting for v in p.victims]
    in_racks = {names[int(key.split("w")[1].split("-")[0])].split("-")[0] for key in victims}
    return seconds, len(victims), len(in_racks), admitted


def test_tas_preemption_benchmark_small() -> None:
    for level in (RACK, HOSTNAME_LABEL):
        _, victims, in_racks, admitted = run(2, 4, level)
        assert admitted == 16 and victims > 0 and in_racks == 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--racks", type=int, default=10)
    parser.add_argument("--hosts", type=int, default=64)
    args = parser.parse_args()
    for level, what in ((RACK, "a whole rack"), (HOSTNAME_LABEL, "one host")):
        seconds, victims, in_racks, admitted = run(args.racks, args.hosts, level)
        print(
            f"{args.racks} racks x {args.hosts} nodes, {admitted} admitted; a head asking for "
            f"{what}: preempting cycle {seconds:.3f} s, {victims} victims in {in_racks} rack(s)"
        )
