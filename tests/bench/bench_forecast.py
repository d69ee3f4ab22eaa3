"""Admission wait-time estimate benchmark: how long `kubectl quotagate describe` spends
forecasting the last Workload in line.

    .venv/bin/python tests/bench/bench_forecast.py [--workloads 1000] [--priorities 50]

10 ClusterQueues in one cohort; a fifth of the Workloads are admitted, the rest pending,
every one with an expected runtime (the annotation) between 1 and 60 minutes and a random
priority out of `--priorities` (50: nearly every head is a different request, the worst
case for the engine's setting aside of alike heads; 3: priority classes as most clusters
have them). The target is the newest, lowest-priority pending Workload of one queue, so the
forecast must admit nearly everything ahead of it first. Prints the forecast's wall time,
the simulated cycles and admissions, and the estimate. A figure, not an assertion; the
pytest function runs a smaller size.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from dataclasses import replace

from api.constants import ReclaimWithinCohortPolicy, WithinClusterQueuePolicy
from api.workload_status import PodSetAssignment
from controller.core.decisions import Admit
from controller.core.forecast import Forecast, forecast
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
from controller.core.state import ClusterState

QUEUES = 10
NOW = 1_000_000.0
POLICY = PreemptionPolicy(
    within_cluster_queue=WithinClusterQueuePolicy.LOWER_PRIORITY,
    reclaim_within_cohort=ReclaimWithinCohortPolicy.LOWER_PRIORITY,
)


def build(workloads: int, priorities: int = 50, seed: int = 7) -> tuple[ClusterState, str]:
    """The state and the target's key."""
    rng = random.Random(seed)
    state = ClusterState()
    state.set_flavor(ResourceFlavor("default"))
    admitted = workloads // 5
    nominal = admitted * 1000 // QUEUES  # the admitted fifth fills every queue
    for q in range(QUEUES):
        state.set_cluster_queue(
            ClusterQueue(
                f"cq{q}",
                (
                    ResourceGroup(
                        ("cpu",), (FlavorQuotas("default", {"cpu": ResourceQuota(nominal)}),)
                    ),
                ),
                "co",
                namespace_selector=LabelSelector(),
                preemption=POLICY,
            )
        )
        state.set_local_queue(LocalQueue("ns", f"cq{q}", f"cq{q}"))
    for i in range(workloads):
        q = i % QUEUES
        workload = Workload(
            "ns",
            f"w{i}",
            f"uid-{i:06d}",
            f"cq{q}",
            (PodSet("main", 1, {"cpu": 1000}),),
            creation_timestamp=float(i),
            priority=rng.randint(1, priorities),
            expected_runtime=str(rng.randint(60, 3600)),
        )
        state.upsert_workload(workload)
        if i < admitted:
            state.apply_admit(
                Admit(
                    workload.key,
                    f"cq{q}",
                    (PodSetAssignment("main", 1, {"cpu": "default"}, {"cpu": 1000}),),
                    True,
                )
            )
            record = state.cache.records[workload.key]
            reserved = NOW - rng.randint(0, 600)
            state.upsert_workload(replace(record.workload, quota_reserved_at=reserved))
    target = Workload(
        "ns",
        "target",
        "uid-target",
        "cq0",
        (PodSet("main", 1, {"cpu": 1000}),),
        creation_timestamp=float(workloads),
        priority=0,
        expected_runtime="600",
    )
    state.upsert_workload(target)
    return state, target.key


def measure(workloads: int, priorities: int, repeats: int = 3) -> tuple[float, Forecast]:
    """(median seconds of one forecast, the last answer)."""
    times: list[float] = []
    answer: Forecast | None = None
    for r in range(repeats):
        state, key = build(workloads, priorities, seed=r)
        started = time.perf_counter()
        answer = forecast(state, key, NOW, max_cycles=1_000_000)
        times.append(time.perf_counter() - started)
    assert answer is not None and answer.admitted_at is not None, answer
    return statistics.median(times), answer


def report(workloads: int, priorities: int = 50) -> str:
    seconds, answer = measure(workloads, priorities)
    assert answer.admitted_at is not None
    return (
        f"admission forecast, {workloads} Workloads ({workloads // 5} admitted) in one cohort "
        f"of {QUEUES} ClusterQueues, {priorities} priorities, target last in line:\n"
        f"  one forecast (median of 3): {seconds:.2f} s\n"
        f"  simulated cycles: {answer.cycles}, admitted before the target: "
        f"{answer.admitted_before}, preemptions: {answer.preemptions}\n"
        f"  estimate: in {(answer.admitted_at - NOW) / 3600:.1f} h"
    )


def test_forecast_benchmark_small() -> None:
    print("\n" + report(200))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--workloads", type=int, default=1_000)
    parser.add_argument("--priorities", type=int, default=50)
    args = parser.parse_args()
    print(report(args.workloads, args.priorities))
