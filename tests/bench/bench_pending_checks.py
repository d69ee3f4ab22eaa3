"""What listing the checks on pending Workloads costs the scheduling loop (issue 47): the
pass `PendingReasons.sync_pending_checks` makes once a second, in its three shapes, on
15,000 pending Workloads in 100 ClusterQueues. Prints the figures; asserts nothing.

    .venv/bin/python -m tests.bench.bench_pending_checks [--workloads N] [--queues N]

Figures, not assertions; the pytest function runs a scaled-down size.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import replace

from api.constants import CheckState
from controller.core.admission_checks import checks_by_local_queue, pending_check_syncs
from controller.core.model.admission_checks import CheckRule, CheckStatus
from controller.core.model.workloads import WorkloadKey
from controller.core.state import ClusterState
from tests.unit.core.builders import add, cluster, cq, wl

RUNS = 20


def _state(workloads: int, queues: int, with_checks: bool) -> ClusterState:
    rules = (CheckRule("prov"),) if with_checks else ()
    states = (CheckStatus("prov", CheckState.PENDING),) if with_checks else ()
    cqs = [
        replace(cq(f"cq{i}", {"default": {"cpu": 0}}), admission_checks=rules)
        for i in range(queues)
    ]
    state: ClusterState = cluster(*cqs)
    for i in range(workloads):
        workload = wl(f"w{i}", queue=f"cq{i % queues}", cpu="1")
        add(state, replace(workload, admission_checks=states))
    return state


def _ms(run: Callable[[], object]) -> float:
    started = time.perf_counter()
    for _ in range(RUNS):
        run()
    return (time.perf_counter() - started) / RUNS * 1000


def run(workloads: int, queues: int) -> None:
    print(f"{workloads:,} pending Workloads in {queues} ClusterQueues, {RUNS} passes each")
    checked = _state(workloads, queues, with_checks=True)
    full = _ms(lambda: pending_check_syncs(checked))
    print(f"  every queue with a check, full pass (a queue changed, a new term): {full:.1f} ms")
    changed = [WorkloadKey(f"ns/w{i}") for i in range(50)]
    steady = _ms(lambda: pending_check_syncs(checked, (), changed, checks_by_local_queue(checked)))
    print(
        f"  the same, queues unchanged, 50 Workloads changed since the last pass: {steady:.2f} ms"
    )
    plain = _state(workloads, queues, with_checks=False)
    none = _ms(lambda: pending_check_syncs(plain, (), [], checks_by_local_queue(plain)))
    print(f"  no check anywhere: {none:.3f} ms")


def test_pending_checks_pass_runs() -> None:
    run(workloads=500, queues=10)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", type=int, default=15_000)
    parser.add_argument("--queues", type=int, default=100)
    args = parser.parse_args()
    run(args.workloads, args.queues)
