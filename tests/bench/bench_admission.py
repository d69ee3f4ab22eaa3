"""Admission benchmark: many ClusterQueues in cohorts, a large pending backlog.

Full run (1,000 ClusterQueues in 100 cohorts, 50,000 pending Workloads):

    .venv/bin/python tests/bench/bench_admission.py [--cluster-queues N] [--workloads N]

Prints cycle latency per admitted Workload (target ≤ 5 ms) and memory per pending
Workload measured with tracemalloc (target ≤ 2 KiB). These are figures, not assertions;
the pytest function runs a scaled-down size so the script stays working.
"""

from __future__ import annotations

import argparse
import random
import time
import tracemalloc
from dataclasses import dataclass

from api.constants import QueueingStrategy
from controller.core.model.clusterqueues import (
    ClusterQueue,
    FlavorQuotas,
    LocalQueue,
    ResourceGroup,
    ResourceQuota,
)
from controller.core.model.flavors import ResourceFlavor
from controller.core.model.selectors import LabelSelector
from controller.core.model.workloads import PodSet, Workload
from controller.core.scheduler.cycle import run_cycle
from controller.core.state import ClusterState

GI = 1 << 30


@dataclass(frozen=True)
class Figures:
    cluster_queues: int
    workloads: int
    cycles: int
    admitted: int
    cycle_seconds: float
    bytes_per_pending: float
    build_seconds: float

    @property
    def ms_per_admitted(self) -> float:
        return 1000 * self.cycle_seconds / max(1, self.admitted)

    def report(self) -> str:
        return (
            f"{self.cluster_queues} ClusterQueues, {self.workloads} pending Workloads\n"
            f"  build + queue:          {self.build_seconds:.2f} s\n"
            f"  memory per pending:     {self.bytes_per_pending:.0f} B (target <= 2048)\n"
            f"  cycles run:             {self.cycles}\n"
            f"  admitted:               {self.admitted}\n"
            f"  total cycle time:       {self.cycle_seconds:.3f} s\n"
            f"  latency per admitted:   {self.ms_per_admitted:.3f} ms (target <= 5)"
        )


def _cluster_queue(i: int, cohorts: int) -> ClusterQueue:
    def flavor(name: str, cpu: int, memory_gi: int) -> FlavorQuotas:
        return FlavorQuotas(
            name,
            {
                "cpu": ResourceQuota(cpu * 1000, borrowing_limit=cpu * 500),
                "memory": ResourceQuota(memory_gi * GI * 1000, lending_limit=memory_gi * GI * 500),
            },
        )

    strategy = QueueingStrategy.STRICT_FIFO if i % 5 == 0 else QueueingStrategy.BEST_EFFORT_FIFO
    return ClusterQueue(
        f"cq-{i}",
        (ResourceGroup(("cpu", "memory"), (flavor("on-demand", 40, 160), flavor("spot", 20, 80))),),
        cohort=f"cohort-{i % cohorts}",
        queueing_strategy=strategy,
        namespace_selector=LabelSelector(),
    )


def _workloads(n: int, cluster_queues: int, rng: random.Random) -> list[Workload]:
    shapes = [
        {"cpu": cpu * 1000, "memory": mem * GI * 1000} for cpu in (1, 2, 4, 8) for mem in (1, 4, 16)
    ]
    out = []
    for i in range(n):
        cq = i % cluster_queues
        out.append(
            Workload(
                f"ns-{cq}",
                f"wl-{i}",
                f"uid-{i:08d}",
                "lq",
                (PodSet("main", rng.choice((1, 1, 2, 4)), rng.choice(shapes)),),
                creation_timestamp=1_700_000_000.0 + i,
                priority=rng.choice((0, 0, 100, 1000)),
            )
        )
    return out


def run(
    cluster_queues: int = 1000,
    cohorts: int = 100,
    workloads: int = 50_000,
    max_cycles: int = 2000,
    seed: int = 7,
) -> Figures:
    rng = random.Random(seed)
    state = ClusterState()
    for name in ("on-demand", "spot"):
        state.set_flavor(ResourceFlavor(name))
    for i in range(cluster_queues):
        state.set_cluster_queue(_cluster_queue(i, cohorts))
        state.set_local_queue(LocalQueue(f"ns-{i}", "lq", f"cq-{i}"))

    started = time.perf_counter()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for workload in _workloads(workloads, cluster_queues, rng):
        state.upsert_workload(workload)
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    build = time.perf_counter() - started

    admitted = cycles = 0
    spent = 0.0
    for cycles in range(1, max_cycles + 1):  # noqa: B007
        t0 = time.perf_counter()
        result = run_cycle(state, 1_800_000_000.0)
        spent += time.perf_counter() - t0
        admitted += len(result.admitted)
        if not result.changed:
            break
    return Figures(
        cluster_queues, workloads, cycles, admitted, spent, (after - before) / workloads, build
    )


def test_bench_admission_scaled_down() -> None:
    figures = run(cluster_queues=50, cohorts=5, workloads=2000, max_cycles=500)
    print("\n" + figures.report())
    assert figures.admitted > 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cluster-queues", type=int, default=1000)
    parser.add_argument("--cohorts", type=int, default=100)
    parser.add_argument("--workloads", type=int, default=50_000)
    parser.add_argument("--max-cycles", type=int, default=2000)
    args = parser.parse_args()
    print(run(args.cluster_queues, args.cohorts, args.workloads, args.max_cycles).report())


if __name__ == "__main__":
    main()
