"""Topology-aware victims side by side: quotagate's search split by domain against the same
search without the split — one walk in the preemption order until the pods fit anywhere,
then the walk-back (what Kueue's `preemption.go` does with `workloadFits`; this emulates it
with quotagate's own order and code, it is not Kueue) — on random full clusters: two blocks
of two racks of two 4-cpu hosts, Workloads pinned to hosts with random sizes, priorities
and costs, and a preemptor asking for a host, a rack or a block.

    .venv/bin/python tests/bench/bench_tas_victims.py [--cases N] [--seed S] [--fair-sharing]

With `--fair-sharing` both are the fair-sharing search (Kueue's fair-sharing preemption
also places the pods in its fit test).

Prints, over the cases where both find victims, the evictions and the pods evicted by
each, how often each evicts fewer Workloads, and how often the split picks victims of a
lower highest priority. Figures, not assertions; the pytest function runs a few cases.
"""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass, replace

import pytest

from api.constants import HOSTNAME_LABEL, WithinClusterQueuePolicy
from controller.core.fairsharing.settings import FairSharing
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
from controller.core.preemption.nodes import NodeRoom
from controller.core.scheduler.cycle import run_cycle
from controller.core.scheduler.flavor_assignment import assign_flavors
from controller.core.scheduler.preemption import VictimSearches, preemption_oracle
from controller.core.scheduler.topology_preemption import (
    short_of,
    topology_placements,
    topology_victims,
)
from controller.core.state import ClusterState

BLOCK, RACK = "cloud.com/topology-block", "cloud.com/topology-rack"
HOSTS = [f"b{b}-r{r}-h{h}" for b in (1, 2) for r in (1, 2) for h in (1, 2)]


def _state(rng: random.Random, fair_sharing: bool) -> ClusterState:
    state = ClusterState()
    state.fair_sharing = FairSharing() if fair_sharing else None
    state.set_flavor(ResourceFlavor("tas", {"pool": "tas"}, topology_name="default"))
    quota = FlavorQuotas("tas", {"cpu": ResourceQuota(rng.choice([16, 24, 32]) * 1000)})
    policy = PreemptionPolicy(within_cluster_queue=WithinClusterQueuePolicy.LOWER_PRIORITY)
    state.set_cluster_queue(
        ClusterQueue(
            "cq",
            (ResourceGroup(("cpu",), (quota,)),),
            namespace_selector=LabelSelector(),
            preemption=policy,
        )
    )
    state.set_local_queue(LocalQueue("ns", "cq", "cq"))
    state.set_topology(Topology("default", (BLOCK, RACK, HOSTNAME_LABEL)))
    for name in HOSTS:
        block, rack, _ = name.split("-")
        labels = {"pool": "tas", BLOCK: block, RACK: rack, HOSTNAME_LABEL: name}
        state.set_node(Node(name, labels, {"cpu": 4000, "pods": 110_000}))
    return state


def _workload(name: str, count: int, level: str, **kw: object) -> Workload:
    selector = kw.pop("selector", {})
    request = TopologyRequest(required=level)
    pod_set = PodSet("main", count, {"cpu": 1000}, selector, topology=request)  # type: ignore[arg-type]
    return replace(Workload("ns", name, f"uid-{name}", "cq", (pod_set,)), **kw)  # type: ignore[arg-type]


@dataclass
class Tally:
    cases: int = 0
    split_evictions: int = 0
    whole_evictions: int = 0
    split_pods: int = 0
    whole_pods: int = 0
    split_fewer: int = 0
    whole_fewer: int = 0
    split_lower_priority: int = 0
    whole_lower_priority: int = 0


def _case(rng: random.Random, tally: Tally, fair_sharing: bool) -> None:
    state = _state(rng, fair_sharing)
    for i in range(rng.randint(6, 16)):
        host = rng.choice(HOSTS)
        workload = _workload(
            f"w{i}",
            rng.randint(1, 4),
            HOSTNAME_LABEL,
            selector={HOSTNAME_LABEL: host},
            priority=rng.randint(0, 3),
            preemption_cost=rng.randint(0, 3),
        )
        state.upsert_workload(workload)
        while run_cycle(state, 0).changed:
            pass
        if workload.key not in state.cache.admitted:
            state.remove_workload(workload.key)
    level = rng.choice([HOSTNAME_LABEL, RACK, BLOCK])
    preemptor = _workload(
        "p", rng.randint(1, 10), level, priority=rng.randint(2, 4), creation_timestamp=1.0
    )
    state.upsert_workload(preemptor)
    cq = state.objects.cluster_queues["cq"]
    searches = VictimSearches(state, 0)
    assignment = assign_flavors(
        state.cache.quota, state.objects.flavors, cq, preemptor, preemption_oracle(state, searches)
    )
    placements = topology_placements(state, cq, preemptor, assignment)
    if placements is None or assignment.fits:
        return
    split = topology_victims(state, cq, preemptor, assignment, searches)
    whole = searches.topology_victims(
        cq,
        preemptor,
        dict(assignment.usage),
        short_of(state, assignment),
        NodeRoom(placements, state.tas.usage_of),
    )
    if not split or not whole:
        return
    tally.cases += 1
    tally.split_evictions += len(split)
    tally.whole_evictions += len(whole)
    tally.split_pods += sum(v.pods for v in split)
    tally.whole_pods += sum(v.pods for v in whole)
    tally.split_fewer += len(split) < len(whole)
    tally.whole_fewer += len(whole) < len(split)

    def top(victims: tuple) -> int:  # type: ignore[type-arg]
        return max(state.cache.priority_of(v.workload_key) for v in victims)

    tally.split_lower_priority += top(split) < top(whole)
    tally.whole_lower_priority += top(whole) < top(split)


def run(cases: int, seed: int, fair_sharing: bool = False) -> Tally:
    rng = random.Random(seed)
    tally = Tally()
    for _ in range(cases):
        _case(rng, tally, fair_sharing)
    return tally


@pytest.mark.parametrize("fair_sharing", [False, True])
def test_tas_victims_benchmark_small(fair_sharing: bool) -> None:
    tally = run(60, 1, fair_sharing)
    assert tally.cases > 0  # both searches found victims somewhere: the script still works


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--fair-sharing", action="store_true")
    args = parser.parse_args()
    t = run(args.cases, args.seed, args.fair_sharing)
    search = "fair-sharing" if args.fair_sharing else "classical"
    print(f"{args.cases} random clusters, {t.cases} where both {search} searches find victims")
    print(f"  evictions: split by domain {t.split_evictions}, one walk {t.whole_evictions}")
    print(f"  pods evicted: split by domain {t.split_pods}, one walk {t.whole_pods}")
    print(f"  fewer evictions: split by domain {t.split_fewer}, one walk {t.whole_fewer}")
    print(
        f"  lower highest victim priority: split by domain {t.split_lower_priority}, "
        f"one walk {t.whole_lower_priority}"
    )
