"""What a benchmark run reports, however it ran (simulated or live): per-Workload records,
samples over time, the summary table, the JSON document and the plot."""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from controller.bench.scenario import Scenario

__all__ = [
    "KUEUE_REFERENCE",
    "ClassFigures",
    "Job",
    "Progress",
    "Report",
    "Sample",
    "plot",
    "render",
    "summarize",
]

# Kueue's calibrated results on its CI for the same scenarios (issue 10): wall seconds,
# ClusterQueue usage % and mean time to admission per class, in seconds.
KUEUE_REFERENCE: dict[str, dict[str, Any]] = {
    "baseline": {
        "wall_s": 351.0,
        "cq_usage_pct": 55.9,
        "mean_admission_s": {"large": 16.5, "medium": 76.8, "small": 215.5},
    },
    "large-scale": {
        "wall_s": 1179.0,
        "cq_usage_pct": 38.6,
        "mean_admission_s": {"large": 105.6, "medium": 256.4, "small": 700.4},
    },
}


@dataclass
class Job:
    """One Workload of the scenario and what happened to it (times in seconds from the
    start of the run)."""

    key: str  # namespace/name
    class_name: str
    cluster_queue: str
    cohort: str
    request: int  # milli-units
    runtime: float
    priority: int
    created: float
    first_admitted_at: float | None = None
    admitted_at: float | None = None  # the last admission
    finished_at: float | None = None
    evictions: int = 0
    epoch: int = 0  # bumps on every admission and release, so stale completions are ignored

    @property
    def time_to_admission(self) -> float | None:
        """Kueue's recorder: creation to the last admission."""
        return None if self.admitted_at is None else self.admitted_at - self.created


@dataclass(frozen=True)
class Sample:
    t: float
    pending: Mapping[str, int]  # per class
    reserved: Mapping[str, int]  # milli-units per class


@dataclass(frozen=True)
class ClassFigures:
    count: int
    admitted: int
    mean: float
    p50: float
    p95: float
    evictions: int


@dataclass
class Report:
    mode: str
    scenario: str
    workloads: int
    makespan_s: float
    lower_bound_s: float
    cpu_s: float
    cq_usage_pct: float
    preemptions: int
    overuse_events: int
    classes: dict[str, ClassFigures]
    samples: list[Sample]
    nominal_total: int  # milli-units
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        return self.makespan_s / self.lower_bound_s if self.lower_bound_s else None

    def to_json(self) -> dict[str, Any]:
        reference = KUEUE_REFERENCE.get(self.scenario)
        return {
            "mode": self.mode,
            "scenario": self.scenario,
            "workloads": self.workloads,
            "makespan_s": round(self.makespan_s, 3),
            "lower_bound_s": round(self.lower_bound_s, 3),
            "makespan_over_bound": None if self.ratio is None else round(self.ratio, 4),
            "cpu_s": round(self.cpu_s, 3),
            "cq_usage_pct": round(self.cq_usage_pct, 2),
            "preemptions": self.preemptions,
            "overuse_events": self.overuse_events,
            "classes": {
                name: {
                    "count": f.count,
                    "admitted": f.admitted,
                    "mean_admission_s": round(f.mean, 3),
                    "p50_admission_s": round(f.p50, 3),
                    "p95_admission_s": round(f.p95, 3),
                    "evictions": f.evictions,
                }
                for name, f in self.classes.items()
            },
            **self.extra,
            "kueue_reference": reference,
        }


def _percentile(ordered: list[float], q: float) -> float:
    """Nearest-rank percentile of sorted values (0 for none)."""
    if not ordered:
        return 0.0
    rank = max(1, -(-len(ordered) * q // 1))
    return ordered[min(len(ordered), int(rank)) - 1]


def summarize(
    *,
    mode: str,
    scenario: Scenario,
    jobs: list[Job],
    makespan: float,
    bound: float,
    cpu: float,
    usage_pct: float,
    preemptions: int,
    overuse: int,
    samples: list[Sample],
    nominal_total: int,
    extra: dict[str, Any] | None = None,
) -> Report:
    classes: dict[str, ClassFigures] = {}
    for name in scenario.class_names():
        members = [job for job in jobs if job.class_name == name]
        waits = sorted(w for job in members if (w := job.time_to_admission) is not None)
        classes[name] = ClassFigures(
            len(members),
            len(waits),
            statistics.fmean(waits) if waits else 0.0,
            _percentile(waits, 0.5),
            _percentile(waits, 0.95),
            sum(job.evictions for job in members),
        )
    return Report(
        mode,
        scenario.name,
        len(jobs),
        makespan,
        bound,
        cpu,
        usage_pct,
        preemptions,
        overuse,
        classes,
        samples,
        nominal_total,
        extra or {},
    )


def render(report: Report) -> str:
    """The human summary: headline figures, then one row per class, with Kueue's published
    figures beside ours when the scenario is one of Kueue's."""
    reference = KUEUE_REFERENCE.get(report.scenario)
    ratio = f"{report.ratio:.2f}× the bound" if report.ratio is not None else "no bound"
    wall_label = "simulated makespan" if report.mode == "simulate" else "wall (makespan)"
    lines = [
        f"scenario {report.scenario} ({report.mode}): {report.workloads} Workloads",
        f"  {wall_label:<22}{report.makespan_s:9.1f} s   ({ratio}; lower bound "
        f"{report.lower_bound_s:.1f} s)"
        + (f"   Kueue: {reference['wall_s']:.0f} s" if reference else ""),
        f"  {'ClusterQueue usage':<22}{report.cq_usage_pct:9.1f} %"
        + (
            f"                                Kueue: {reference['cq_usage_pct']} %"
            if reference
            else ""
        ),
        f"  {'preemptions':<22}{report.preemptions:9d}",
        f"  {'quota over-use events':<22}{report.overuse_events:9d}",
        f"  {'CPU':<22}{report.cpu_s:9.1f} s",
        "",
    ]
    header = ["CLASS", "COUNT", "ADMITTED", "MEAN", "P50", "P95", "EVICTIONS"]
    if reference:
        header.append("KUEUE MEAN")
    rows = [header]
    for name, f in report.classes.items():
        row = [
            name,
            str(f.count),
            str(f.admitted),
            f"{f.mean:.1f} s",
            f"{f.p50:.1f} s",
            f"{f.p95:.1f} s",
            str(f.evictions),
        ]
        if reference:
            kueue = reference["mean_admission_s"].get(name)
            row.append("-" if kueue is None else f"{kueue:.1f} s")
        rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines.append("  time to admission (creation → last admission):")
    for row in rows:
        lines.append(
            "  "
            + "  ".join(
                cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i])
                for i, cell in enumerate(row)
            )
        )
    return "\n".join(lines)


def plot(report: Report, path: Path) -> None:
    """Pending Workloads and reserved quota (% of all nominal quota) over time, per class."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - matplotlib is a declared dependency
        raise RuntimeError("--plot needs matplotlib: pip install 'quotagate[bench]'") from exc
    times = [s.t for s in report.samples]
    figure, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(10, 7))
    for name in report.classes:
        top.plot(times, [s.pending.get(name, 0) for s in report.samples], label=name)
    top.set_ylabel("pending Workloads")
    top.legend(loc="upper right")
    top.grid(alpha=0.3)
    total = report.nominal_total or 1
    base = [0.0] * len(times)
    for name in report.classes:
        layer = [100 * s.reserved.get(name, 0) / total for s in report.samples]
        top_edge = [b + v for b, v in zip(base, layer, strict=True)]
        bottom.fill_between(times, base, top_edge, step="post", label=name, alpha=0.8)
        base = top_edge
    bottom.axhline(100, color="black", linewidth=0.8, linestyle="--")
    bottom.set_ylabel("reserved quota, % of nominal")
    bottom.set_xlabel("seconds since start")
    bottom.legend(loc="upper right")
    bottom.grid(alpha=0.3)
    ratio = f"{report.ratio:.2f}× bound" if report.ratio else ""
    figure.suptitle(
        f"{report.scenario} ({report.mode}): makespan {report.makespan_s:.1f} s {ratio}, "
        f"usage {report.cq_usage_pct:.1f} %, {report.preemptions} preemptions"
    )
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


class Progress:
    """A one-line progress display on a terminal stream, at most once a second."""

    def __init__(
        self,
        stream: TextIO | None,
        total: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        unit: str = "elapsed",
    ) -> None:
        self.stream = stream
        self.total = total
        self.clock = clock
        self.unit = unit
        self.started = time.monotonic()
        self.next_at = self.started + 1.0

    def _line(self, t: float, counters: Mapping[str, int]) -> str:
        parts = "  ".join(f"{name} {value:6d}" for name, value in counters.items())
        return (
            f"  {self.unit} {t:7.1f}s  {parts}  of {self.total}  "
            f"(real {time.monotonic() - self.started:5.1f}s)"
        )

    def update(self, t: float, counters: Mapping[str, int]) -> None:
        if self.stream is None or time.monotonic() < self.next_at:
            return
        self.next_at = time.monotonic() + 1.0
        end = "\r" if self.stream.isatty() else "\n"
        self.stream.write(self._line(t, counters) + end)
        self.stream.flush()

    def done(self, t: float, counters: Mapping[str, int]) -> None:
        if self.stream is not None:
            self.stream.write(self._line(t, counters) + "\n")
            self.stream.flush()


def stderr_if_wanted(quiet: bool) -> TextIO | None:
    return None if quiet else sys.stderr
