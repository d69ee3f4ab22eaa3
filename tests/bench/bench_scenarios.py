"""Kueue's performance scenarios on the real admission engine, simulated (no API server).

    .venv/bin/python tests/bench/bench_scenarios.py [SCENARIO.yaml ...]

Prints `quotagate bench --simulate`'s report for each scenario (default: the smoke,
baseline and fair-tree scenarios under tools/bench/scenarios/), with Kueue's published
figures beside ours where the scenario is one of Kueue's. These are figures, not timed
assertions; the pytest function checks what must hold whatever the speed: every Workload
admitted and finished, no quota over-use, the makespan no shorter than the capacity lower
bound (fair-tree: with fair sharing, as shipped, and without it).
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from tools.bench.report import Report, render
from tools.bench.scenario import SCENARIOS, Scenario, load
from tools.bench.simulate import simulate

DEFAULT = (SCENARIOS / "smoke.yaml", SCENARIOS / "baseline.yaml", SCENARIOS / "fair-tree.yaml")


def run(scenario: Scenario) -> Report:
    report = simulate(scenario, progress=sys.stderr)
    print(render(report))
    print()
    return report


def _scenarios() -> list[Scenario]:
    """The default scenarios, and fair-tree's tree without fair sharing too."""
    scenarios = [load(path) for path in DEFAULT]
    fair_tree = scenarios[-1]
    return [
        *scenarios,
        dataclasses.replace(fair_tree, name="fair-tree, no fairSharing", fair_sharing=None),
    ]


def test_kueue_scenarios_simulated() -> None:
    for scenario in _scenarios():
        report = run(scenario)
        name = scenario.name
        assert report.overuse_events == 0, name
        for class_name, figures in report.classes.items():
            assert figures.admitted == figures.count, f"{name}: {class_name} not all admitted"
        assert report.makespan_s >= report.lower_bound_s, name
        assert 0 < report.reserved_quota_pct <= 100, name
        # Kueue's ClusterQueue usage is over the queues' own nominal quota: queues borrowing
        # a Cohort's own quota (fair-tree's org) can use more than 100 % of it.
        borrowable = any(pc.nominal for pc in scenario.parent_cohorts)
        for queue_class, usage in report.cluster_queue_usage.items():
            assert usage.usage_pct is not None and usage.usage_pct > 0, (name, queue_class)
            assert borrowable or usage.usage_pct <= 100, (name, queue_class)
        if scenario.fair_sharing is not None:
            assert report.preemptions > 0, name


def main(argv: list[str]) -> int:
    for scenario in [load(Path(arg)) for arg in argv] or _scenarios():
        run(scenario)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
