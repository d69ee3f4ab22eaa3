"""Preemption benchmark: one preemptor facing N admitted candidates in one cohort.

    .venv/bin/python tests/bench/bench_preemption.py [--candidates 10000]

10 ClusterQueues in one cohort, every one borrowing, N small admitted Workloads of mixed
priority and cost; a high-priority preemptor needs a quarter of its queue's quota. Prints
the time of one victim search (target ≤ 50 ms at 10,000 candidates) and the victims'
count. A figure, not an assertion; the pytest function runs a smaller size.
"""

from __future__ import annotations

import argparse
import random
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

QUEUES = 10
POLICY = PreemptionPolicy(
    within_cluster_queue=WithinClusterQueuePolicy.LOWER_PRIORITY,
    reclaim_within_cohort=ReclaimWithinCohortPolicy.ANY,
)


def build(candidates: int, seed: int = 7) -> ClusterState:
    rng = random.Random(seed)
    state = ClusterState()
    state.set_flavor(ResourceFlavor("default"))
    per_queue = candidates // QUEUES
    nominal = per_queue * 1000 // 2  # half the work fits in nominal: every queue borrows
    for q in range(QUEUES):
        quotas = {"cpu": ResourceQuota(nominal)}
        state.set_cluster_queue(
            ClusterQueue(
                f"cq{q}",
                (ResourceGroup(("cpu",), (FlavorQuotas("default", quotas),)),),
                "co",
                namespace_selector=LabelSelector(),
                preemption=POLICY,
            )
        )
        state.set_local_queue(LocalQueue("ns", f"cq{q}", f"cq{q}"))
    for i in range(candidates):
        q = i % QUEUES
        workload = Workload(
            "ns",
            f"w{i}",
            f"uid-{i:06d}",
            f"cq{q}",
            (PodSet("main", 1, {"cpu": 500}),),
            creation_timestamp=float(i),
            priority=rng.randint(0, 50),
            preemption_cost=rng.randint(0, 5) * 1000,
        )
        state.upsert_workload(workload)
        state.apply_admit(
            Admit(
                workload.key,
                f"cq{q}",
                (PodSetAssignment("main", 1, {"cpu": "default"}, {"cpu": 500}),),
                True,
            )
        )
    return state


def measure(candidates: int, repeats: int = 5) -> tuple[float, float, int]:
    """(cold seconds, warm seconds, victims): cold = the first preemption on a fresh state,
    warm = the same search again once the state has cached its view of the candidates."""
    cold: list[float] = []
    warm: list[float] = []
    victims = 0
    for r in range(repeats):
        state = build(candidates, seed=r)
        need = candidates * 1000 // QUEUES // 2 // 4  # a quarter of a queue's nominal
        preemptor = Workload(
            "ns",
            "preemptor",
            "uid-p",
            "cq0",
            (PodSet("main", 1, {"cpu": need}),),
            creation_timestamp=1e9,
            priority=1000,
        )
        state.upsert_workload(preemptor)
        for timings in (cold, warm):
            started = time.perf_counter()
            result = run_cycle(state, 1e9)
            timings.append(time.perf_counter() - started)
            assert len(result.preempting) == 1, "the preemptor must find victims"
            victims = len(result.preempting[0].victims)
            # Undo the nomination so the next round searches again from the same state.
            state.drop_nomination("ns/preemptor")
            for victim in result.preempting[0].victims:
                state.cache.admitted[victim.workload_key].evicting = False
    return statistics.median(cold), statistics.median(warm), victims


def report(candidates: int) -> str:
    cold, warm, victims = measure(candidates)
    return (
        f"victim search, {candidates} admitted candidates in one cohort of {QUEUES} ClusterQueues:\n"
        f"  one cycle with the preemption, first time (median of 5): {1000 * cold:.1f} ms\n"
        f"  the same with the candidates' view cached (median of 5):  {1000 * warm:.1f} ms (target <= 50)\n"
        f"  victims chosen: {victims}"
    )


def test_preemption_benchmark_small() -> None:
    print("\n" + report(1000))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--candidates", type=int, default=10_000)
    print(report(parser.parse_args().candidates))
