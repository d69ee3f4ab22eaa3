"""Refused heads: the cycle of a full cohort, as Kueue's large-scale scenario makes them.

    .venv/bin/python tests/bench/bench_refused_heads.py [--queues 100]

One full cohort of `--queues` ClusterQueues (nominal 20 cpus, borrowingLimit 100, reclaim
Any, withinClusterQueue LowerPriority, as the scenario's): half of them borrow (six 5-cpu
Workloads at priority 100 each), half lend (two each), and every borrowing queue has a
pending head, a small Workload (1 cpu, the lowest priority) that cannot fit and has nobody
it may preempt: it would have to borrow, and may only take from its own queue, where
nobody has a lower priority. Prints the time of one cycle that assesses every head (median
of 5) and what the cycle decided. A figure, not an assertion; the pytest function runs a
smaller size.
"""

from __future__ import annotations

import argparse
import statistics
import time

from api.constants import ReclaimWithinCohortPolicy, WithinClusterQueuePolicy
from api.workload_status import PodSetAssignment
from controller.core.decisions import Admit
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
from controller.core.model.workloads import PodSet, Workload
from controller.core.scheduler.cycle import run_cycle
from controller.core.state import ClusterState

POLICY = PreemptionPolicy(
    within_cluster_queue=WithinClusterQueuePolicy.LOWER_PRIORITY,
    reclaim_within_cohort=ReclaimWithinCohortPolicy.ANY,
)


def build(queues: int) -> ClusterState:
    """Even queues hold six Workloads of 5 cpus at priority 100 (borrowing 10), odd ones
    two (lending 10): the cohort is full."""
    state = ClusterState()
    state.set_flavor(ResourceFlavor("rf"))
    quota = ResourceQuota(20_000, 100_000)
    for q in range(queues):
        state.set_cluster_queue(
            ClusterQueue(
                f"cq{q}",
                (ResourceGroup(("cpu",), (FlavorQuotas("rf", {"cpu": quota}),)),),
                "co",
                namespace_selector=LabelSelector(),
                preemption=POLICY,
            )
        )
        state.set_local_queue(LocalQueue("ns", f"cq{q}", f"cq{q}"))
    for q in range(queues):
        for i in range(6 if q % 2 == 0 else 2):
            workload = Workload(
                "ns",
                f"w{q}-{i}",
                f"uid-{q}-{i}",
                f"cq{q}",
                (PodSet("main", 1, {"cpu": 5_000}),),
                creation_timestamp=float(i),
                priority=100,
            )
            state.upsert_workload(workload)
            state.apply_admit(
                Admit(
                    workload.key,
                    f"cq{q}",
                    (PodSetAssignment("main", 1, {"cpu": "rf"}, {"cpu": 5_000}),),
                    True,
                )
            )
    return state


def measure(queues: int, repeats: int = 5) -> tuple[float, int, int]:
    """(median seconds of one cycle over every refused head, heads refused, preemptions)."""
    timings: list[float] = []
    refused = preempting = 0
    for r in range(repeats):
        state = build(queues)
        for q in range(0, queues, 2):
            state.upsert_workload(
                Workload(
                    "ns",
                    f"small-{q}-{r}",
                    f"uid-small-{q}-{r}",
                    f"cq{q}",
                    (PodSet("main", 1, {"cpu": 1_000}),),
                    creation_timestamp=1e6,
                    priority=50,
                )
            )
        started = time.perf_counter()
        result = run_cycle(state, 1e6)
        timings.append(time.perf_counter() - started)
        refused, preempting = len(result.inadmissible), len(result.preempting)
    return statistics.median(timings), refused, preempting


def report(queues: int) -> str:
    return render(queues, *measure(queues))


def render(queues: int, seconds: float, refused: int, preempting: int) -> str:
    heads = (queues + 1) // 2
    return (
        f"refused heads: one full cohort of {queues} ClusterQueues ({queues * 4} admitted "
        f"Workloads), a small head that cannot fit in each of the {heads} borrowing ones:\n"
        f"  one cycle over every head (median of 5): {1000 * seconds:.1f} ms "
        f"({1e6 * seconds / heads:.0f} µs a head)\n"
        f"  heads refused: {refused}, preemptions: {preempting}"
    )


def test_refused_heads_benchmark_small() -> None:
    seconds, refused, preempting = measure(20)
    print("\n" + render(20, seconds, refused, preempting))
    assert (refused, preempting) == (10, 0)  # every head refused, nothing preempted


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--queues", type=int, default=100)
    print(report(parser.parse_args().queues))
