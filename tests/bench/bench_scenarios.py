"""Kueue's performance scenarios on the real admission engine, simulated (no API server).

    .venv/bin/python tests/bench/bench_scenarios.py [SCENARIO.yaml ...]

Prints `quotagate bench --simulate`'s report for each scenario (default: the smoke and
baseline scenarios under tests/bench/scenarios/), with Kueue's published figures beside
ours where the scenario is one of Kueue's. These are figures, not timed assertions; the
pytest function checks what must hold whatever the speed: every Workload admitted and
finished, no quota over-use, the makespan no shorter than the capacity lower bound.
"""

from __future__ import annotations

import sys
from pathlib import Path

from controller.bench.report import Report, render
from controller.bench.scenario import load
from controller.bench.simulate import simulate

SCENARIOS = Path(__file__).resolve().parent / "scenarios"
DEFAULT = (SCENARIOS / "smoke.yaml", SCENARIOS / "baseline.yaml")


def run(path: Path) -> Report:
    report = simulate(load(path), progress=sys.stderr)
    print(render(report))
    print()
    return report


def test_kueue_scenarios_simulated() -> None:
    for path in DEFAULT:
        report = run(path)
        assert report.overuse_events == 0, path.name
        for name, figures in report.classes.items():
            assert figures.admitted == figures.count, f"{path.name}: {name} not all admitted"
        assert report.makespan_s >= report.lower_bound_s, path.name
        for name, usage in report.cluster_queue_usage.items():
            assert usage.usage_pct is not None and 0 < usage.usage_pct <= 100, (path.name, name)


def main(argv: list[str]) -> int:
    for path in [Path(arg) for arg in argv] or list(DEFAULT):
        run(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
