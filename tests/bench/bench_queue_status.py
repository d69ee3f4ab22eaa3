"""The queue status refresh at large-scale sizes (controller/runtime/queue_status.py).

    .venv/bin/python -m tests.bench.bench_queue_status [--queues 1000] [--workloads 50000]
        [--finished 35000] [--refreshes 20]

A controller with `--queues` ClusterQueues and LocalQueues (10 cohorts, as Kueue's
large-scale scenario) holds `--workloads` Workloads, `--finished` of them finished (a long
run keeps them until they are deleted), the rest pending, and a few hundred admitted by
three limited cycles. Prints the time of the first refresh (every status formatted and
every gauge set), of each later one (between two of them 64 Workloads are admitted, so a
few queues change), and of the LocalQueue counts alone, next to the same counts taken by a
pass over every Workload, as the refresh took them before the engine kept its indexes.
Figures, not assertions; the pytest function runs a smaller size and checks that both
ways of counting agree and that an unchanged queue is not formatted again.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from controller.core.scheduler.cycle import run_cycle
from controller.core.state import ClusterState
from controller.runtime.controller import Controller
from controller.runtime.queue_status import QueueStatusWriter, local_queue_counts
from tests.bench.bench_gc import controller_with_queues
from tests.unit.runtime.workloads import admitted_status, workload_body


def build(queues: int, workloads: int, finished: int) -> Controller:
    controller = controller_with_queues(queues)
    for n in range(workloads):
        status = admitted_status(finished=True, cluster_queue=f"cq{n % queues}")
        body = workload_body(
            f"w{n}", status=status if n < finished else None, queue=f"lq{n % queues}"
        )
        controller.apply_event("ADDED", body)
    for n in range(3):
        run_cycle(controller.state, 1000.0 + n, admission_limit=128)
    return controller


def recount(state: ClusterState) -> tuple[dict[str, dict[str, int]], dict[str, int]]:
    """The LocalQueue counts and the finished Workloads per ClusterQueue by a pass over
    every Workload the state holds (the refresh's way before `ClusterState.live`)."""
    counts: dict[str, dict[str, int]] = {}
    finished: dict[str, int] = {}
    for key, workload in state.cache.workloads.items():
        if workload.finished:
            if workload.admission is not None:
                cq = workload.admission.cluster_queue
                finished[cq] = finished.get(cq, 0) + 1
            continue
        entry = counts.setdefault(
            f"{workload.namespace}/{workload.queue_name}",
            {"pendingWorkloads": 0, "reservingWorkloads": 0, "admittedWorkloads": 0},
        )
        held = state.cache.admitted.get(key)
        if held is None:
            entry["pendingWorkloads"] += 1
        else:
            entry["reservingWorkloads"] += 1
            entry["admittedWorkloads"] += 0 if held.evicting else 1
    return counts, finished


def _timed(call: Any) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def measure(queues: int, workloads: int, finished: int, refreshes: int) -> dict[str, float]:
    controller = build(queues, workloads, finished)
    state = controller.state
    writer = QueueStatusWriter(controller.ctx, {})
    figures = {"first_refresh_s": _timed(writer.refresh)}
    later = 0.0
    for n in range(refreshes):
        run_cycle(state, 2000.0 + n, admission_limit=64)
        later += _timed(writer.refresh)
    figures["refresh_s"] = later / refreshes
    figures["counts_s"] = _timed(lambda: local_queue_counts(state, {}))
    figures["recount_s"] = _timed(lambda: recount(state))
    return figures


def test_the_indexes_count_as_a_pass_over_every_workload() -> None:
    controller = build(queues=50, workloads=2_000, finished=1_200)
    state = controller.state
    finished: dict[str, int] = {}
    assert (local_queue_counts(state, finished), finished) == recount(state)
    writer = QueueStatusWriter(controller.ctx, {})
    writer.refresh()
    before = {key: wanted[2] for key, wanted in writer.wanted.items()}
    admitted = run_cycle(state, 3000.0, admission_limit=5).admitted
    writer.refresh()
    changed = {
        key
        for key, wanted in writer.wanted.items()
        if key.startswith("ClusterQueue/") and wanted[2] is not before[key]
    }
    assert changed == {f"ClusterQueue//{admit.cluster_queue}" for admit in admitted}


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--queues", type=int, default=1000)
    parser.add_argument("--workloads", type=int, default=50_000)
    parser.add_argument("--finished", type=int, default=35_000)
    parser.add_argument("--refreshes", type=int, default=20)
    arguments = parser.parse_args()
    result = measure(arguments.queues, arguments.workloads, arguments.finished, arguments.refreshes)
    print(
        f"{arguments.queues} ClusterQueues, {arguments.workloads} Workloads "
        f"({arguments.finished} finished): first refresh {result['first_refresh_s'] * 1000:.1f} ms, "
        f"later refreshes {result['refresh_s'] * 1000:.1f} ms each; LocalQueue counts "
        f"{result['counts_s'] * 1000:.2f} ms (a pass over every Workload: "
        f"{result['recount_s'] * 1000:.1f} ms)"
    )
