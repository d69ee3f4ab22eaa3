"""The cyclic garbage collector at large-scale sizes: Python's default thresholds against
`quotagate run`'s (controller/collector.py `GC_THRESHOLDS`).

    .venv/bin/python -m tests.bench.bench_gc [--queues 1000] [--workloads 50000]

A controller with `--queues` ClusterQueues (10 cohorts, as Kueue's large-scale scenario)
applies `--workloads` pending Workloads as the informer's list would, then runs 40 cycles
of at most 64 admissions each, releasing what they admit. Prints, for each setting, the
wall time and the time in the collector (measured with `gc.callbacks`) of both phases, and
how many collections of each generation ran. Figures, not assertions; the pytest function
runs a smaller size and checks only that the thresholds make young collections rarer.
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from controller.collector import GC_THRESHOLDS
from controller.config import ControllerConfig
from controller.core.scheduler.cycle import run_cycle
from controller.runtime.controller import Controller
from tests.unit.runtime.workloads import workload_body

DEFAULT = (700, 10, 10)


@dataclass
class Collector:
    """Time spent in the collector and collections per generation, from `gc.callbacks`."""

    seconds: float = 0.0
    collections: list[int] = field(default_factory=lambda: [0, 0, 0])
    _started: float = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._started
            self.collections[info["generation"]] += 1


@contextmanager
def thresholds(values: tuple[int, int, int]) -> Iterator[Collector]:
    before = gc.get_threshold()
    collector = Collector()
    gc.collect()
    gc.set_threshold(*values)
    gc.callbacks.append(collector)
    try:
        yield collector
    finally:
        gc.callbacks.remove(collector)
        gc.set_threshold(*before)


def _cluster_queue(q: int) -> dict[str, Any]:
    quota = {"name": "cpu", "nominalQuota": "20", "borrowingLimit": "100"}
    return {
        "kind": "ClusterQueue",
        "metadata": {"name": f"cq{q}"},
        "spec": {
            "cohortName": f"cohort{q % 10}",
            "namespaceSelector": {},
            "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
            "resourceGroups": [
                {"coveredResources": ["cpu"], "flavors": [{"name": "rf", "resources": [quota]}]}
            ],
        },
    }


def controller_with_queues(queues: int) -> Controller:
    """A controller without an API holding one flavor and `queues` ClusterQueues `cq<q>`
    (in 10 cohorts, as Kueue's large-scale scenario), each with a LocalQueue `ns/lq<q>`."""
    controller = Controller(None, ControllerConfig())  # type: ignore[arg-type]
    controller.apply_event("ADDED", {"kind": "ResourceFlavor", "metadata": {"name": "rf"}})
    for q in range(queues):
        controller.apply_event("ADDED", _cluster_queue(q))
        controller.apply_event(
            "ADDED",
            {
                "kind": "LocalQueue",
                "metadata": {"name": f"lq{q}", "namespace": "ns"},
                "spec": {"clusterQueue": f"cq{q}"},
            },
        )
    return controller


def measure(queues: int, workloads: int, values: tuple[int, int, int]) -> dict[str, Any]:
    controller = controller_with_queues(queues)
    bodies = [workload_body(f"w{n}", queue=f"lq{n % queues}") for n in range(workloads)]
    figures: dict[str, Any] = {}
    with thresholds(values) as collector:
        started = time.perf_counter()
        for body in bodies:
            controller.apply_event("ADDED", body)
        figures["list_s"] = time.perf_counter() - started
        figures["list_gc_s"] = collector.seconds
        collector.seconds = 0.0
        state = controller.state
        started = time.perf_counter()
        admitted = 0
        for n in range(40):
            result = run_cycle(state, 1000.0 + n, admission_limit=64)
            admitted += len(result.admitted)
            for admit in result.admitted:
                state.release(admit.workload_key)
        figures["cycles_s"] = time.perf_counter() - started
        figures["cycles_gc_s"] = collector.seconds
        figures["collections"] = list(collector.collections)
        figures["admitted"] = admitted
    return figures


def report(queues: int, workloads: int) -> dict[str, dict[str, Any]]:
    results = {}
    for label, values in (("default", DEFAULT), ("quotagate run", GC_THRESHOLDS)):
        figures = measure(queues, workloads, values)
        results[label] = figures
        print(
            f"{label:14} {values}: list {figures['list_s']:.2f} s "
            f"(collector {figures['list_gc_s']:.2f} s), 40 cycles {figures['cycles_s']:.2f} s "
            f"(collector {figures['cycles_gc_s']:.2f} s), {figures['admitted']} admitted, "
            f"collections per generation {figures['collections']}"
        )
    return results


def test_the_run_thresholds_make_young_collections_rarer() -> None:
    results = report(queues=100, workloads=5_000)
    default, tuned = results["default"], results["quotagate run"]
    assert default["admitted"] == tuned["admitted"] > 0
    assert tuned["collections"][0] * 10 < default["collections"][0]


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--queues", type=int, default=1000)
    parser.add_argument("--workloads", type=int, default=50_000)
    arguments = parser.parse_args()
    report(arguments.queues, arguments.workloads)
