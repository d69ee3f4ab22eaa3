"""The after-admission timers' once-a-second pass (controller/runtime/after_admission.py)
over the baseline scenario's peak: many pending Workloads, a few hundred admitted.

    .venv/bin/python -m tests.bench.bench_after_admission [--queues 30] [--pending 13000]
        [--admitted 600] [--finished 15000] [--passes 50] [--pods-ready]

A controller with `--queues` ClusterQueues holds `--finished` finished Workloads,
`--pending` pending ones and `--admitted` admitted ones (as the API serves them, through
the same `apply_event` as the watch). Prints the time of one `due` pass over the Workloads
`ClusterState.timed` lists (what the timers read) and over every unfinished one
(`ClusterState.live`, what they read before), with waitForPodsReady off (the benchmark's
configuration) or on (`--pods-ready`, 5 minutes). Figures, not assertions; the pytest
function runs a smaller size and checks that both passes find the same actions and the
same next deadline.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from controller.core.after_admission import AfterAdmission, PodsReadyPolicy, due
from controller.core.model.workloads import WorkloadKey
from controller.core.state import ClusterState
from controller.runtime.controller import Controller
from tests.bench.bench_gc import controller_with_queues
from tests.unit.runtime.workloads import admitted_status, workload_body

POLICY = PodsReadyPolicy(timeout=300.0)


def build(queues: int, pending: int, admitted: int, finished: int) -> Controller:
    controller = controller_with_queues(queues)
    n = 0
    for count, status in (
        (finished, lambda q: admitted_status(finished=True, cluster_queue=f"cq{q}")),
        (admitted, lambda q: admitted_status(cluster_queue=f"cq{q}")),
        (pending, lambda q: None),
    ):
        for _ in range(count):
            q = n % queues
            body = workload_body(f"w{n}", status=status(q), queue=f"lq{q}")
            controller.apply_event("ADDED", body)
            n += 1
    return controller


def one_pass(
    state: ClusterState, keys: Any, policy: PodsReadyPolicy | None, now: float
) -> AfterAdmission:
    records = state.cache.records
    return due((records[key].workload for key in keys), policy, now)


def measure(controller: Controller, passes: int, policy: PodsReadyPolicy | None) -> dict[str, Any]:
    state = controller.state
    figures: dict[str, Any] = {"timed": len(state.index.timed), "live": len(state.index.live)}
    for name, keys in (("timed", state.index.timed), ("live", state.index.live)):
        started = time.perf_counter()
        for n in range(passes):
            one_pass(state, keys, policy, 2000.0 + n)
        figures[f"{name}_s"] = (time.perf_counter() - started) / passes
    return figures


def test_the_timed_workloads_give_every_action_and_deadline_of_a_pass_over_all() -> None:
    controller = build(queues=6, pending=300, admitted=40, finished=100)
    state = controller.state
    assert len(state.index.timed) == 40 and len(state.index.live) == 340
    for policy, now in ((None, 2000.0), (POLICY, 1100.0), (POLICY, 1400.0)):
        over_timed = one_pass(state, state.index.timed, policy, now)
        over_live = one_pass(state, state.index.live, policy, now)
        assert over_timed == over_live
    # Past the timeout every admitted Workload is due, and nothing pending is.
    actions = one_pass(state, state.index.timed, POLICY, 1400.0).actions
    keys: set[WorkloadKey] = {action.workload_key for action in actions}
    assert keys == {key for key in state.index.live if key in state.cache.admitted}


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--queues", type=int, default=30)
    parser.add_argument("--pending", type=int, default=13_000)
    parser.add_argument("--admitted", type=int, default=600)
    parser.add_argument("--finished", type=int, default=15_000)
    parser.add_argument("--passes", type=int, default=50)
    parser.add_argument("--pods-ready", action="store_true")
    arguments = parser.parse_args()
    built = build(arguments.queues, arguments.pending, arguments.admitted, arguments.finished)
    result = measure(built, arguments.passes, POLICY if arguments.pods_ready else None)
    print(
        f"{result['live']} unfinished Workloads, {result['timed']} of them timed "
        f"(waitForPodsReady {'on' if arguments.pods_ready else 'off'}): one pass over the "
        f"timed {result['timed_s'] * 1000:.2f} ms, over every unfinished one "
        f"{result['live_s'] * 1000:.2f} ms"
    )
