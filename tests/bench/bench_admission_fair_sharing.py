"""Admission fair sharing benchmark: what ordering by LocalQueue usage costs a cycle.

One ClusterQueue (usage-based admission mode) with many LocalQueues and a pending backlog
spread over them; cycles run until nothing changes (one admission per cycle, each
pushing an entry penalty that re-ranks its LocalQueue), with admission fair sharing off and
on. Full run:

    .venv/bin/python tests/bench/bench_admission_fair_sharing.py [--local-queues N ...]

Prints the time per cycle for each. Figures, not assertions; the pytest function runs a
scaled-down size so the script stays working.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

from api.constants import AdmissionMode
from controller.core.afs.usage import AdmissionFairSharing
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


@dataclass(frozen=True)
class Figures:
    local_queues: int
    fair: bool
    cycles: int
    admitted: int
    seconds: float

    def report(self) -> str:
        mode = "on " if self.fair else "off"
        return (
            f"  {self.local_queues:5d} LocalQueues, admission fair sharing {mode}: "
            f"{self.cycles} cycles, {self.admitted} admitted, "
            f"{1e6 * self.seconds / self.cycles:.0f} us per cycle"
        )


def run(local_queues: int, fair: bool, workloads: int = 10_000, capacity: int = 2_000) -> Figures:
    state = ClusterState()
    if fair:
        state.admission_fair_sharing = AdmissionFairSharing(600.0, 60.0)
    state.set_flavor(ResourceFlavor("default"))
    state.set_cluster_queue(
        ClusterQueue(
            "cq",
            (
                ResourceGroup(
                    ("cpu",), (FlavorQuotas("default", {"cpu": ResourceQuota(capacity * 1000)}),)
                ),
            ),
            namespace_selector=LabelSelector(),
            admission_mode=AdmissionMode.USAGE_BASED_ADMISSION_FAIR_SHARING,
        )
    )
    for i in range(local_queues):
        state.set_local_queue(LocalQueue("ns", f"lq-{i}", "cq"))
    for i in range(workloads):
        state.upsert_workload(
            Workload(
                "ns",
                f"wl-{i}",
                f"uid-{i:08d}",
                f"lq-{i % local_queues}",
                (PodSet("main", 1, {"cpu": 1000}),),
                creation_timestamp=float(i),
            )
        )
    cycles = admitted = 0
    started = time.perf_counter()
    while True:
        result = run_cycle(state, 0.0)
        cycles += 1
        admitted += len(result.admitted)
        if not result.changed:
            break
    return Figures(local_queues, fair, cycles, admitted, time.perf_counter() - started)


def test_bench_admission_fair_sharing_scaled_down() -> None:
    for fair in (False, True):
        figures = run(local_queues=50, fair=fair, workloads=1000, capacity=200)
        print("\n" + figures.report())
        assert figures.admitted == 200


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--local-queues", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--workloads", type=int, default=10_000)
    parser.add_argument("--capacity", type=int, default=2_000, help="cpus (1 per Workload)")
    args = parser.parse_args()
    print(f"{args.workloads} pending Workloads of 1 cpu, {args.capacity} cpus of quota")
    for local_queues in args.local_queues:
        for fair in (False, True):
            print(run(local_queues, fair, args.workloads, args.capacity).report())


if __name__ == "__main__":
    main()
