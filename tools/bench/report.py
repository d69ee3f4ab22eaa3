"""What a benchmark run reports, however it ran (simulated or live): per-Workload records,
samples over time, the summary table, the JSON document and the plot."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from api.quantities import Quantity
from tools.bench.outages import render_outages
from tools.bench.recorder import ClusterQueueClass, Recorder, WorkloadClass
from tools.bench.scenario import Scenario

__all__ = [
    "KUEUE_REFERENCE",
    "NODE_OVERUSE",
    "ClassFigures",
    "Job",
    "Progress",
    "Report",
    "Sample",
    "admission_bars",
    "overuse_of",
    "plot",
    "pyplot",
    "render",
    "summarize",
    "table",
]

# Kueue's calibrated results on its CI for the same scenarios (the comments of its
# rangespec.yaml): wall seconds, ClusterQueue usage % and mean time to admission per class,
# in seconds. Other hardware: `make bench-compare` measures Kueue on this machine.
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
    root_cohort: str  # the root of its cohort tree: quota moves only within it
    request: int  # milli-units, all its pods
    runtime: float
    priority: int
    created: float
    pods: int = 1
    topology: Any = None  # a TAS scenario's TopologyRequest
    first_admitted_at: float | None = None
    finished_at: float | None = None
    epoch: int = 0  # bumps on every admission and release, so stale completions are ignored


NODE_OVERUSE = "node_overuse_events"
"""The key of a TAS live run's `extra`: admissions that put more on a node than it has."""


def overuse_of(report: Report) -> int:
    """Quota over-use events and, in a TAS live run, node over-use events."""
    return report.overuse_events + int(report.extra.get(NODE_OVERUSE) or 0)


def overuse_kinds(report: Report) -> str:
    """What `overuse_of` counted, in words: "3 quota, 9 node over-use events"."""
    kinds = [
        f"{count} {kind}"
        for kind, count in (
            ("quota", report.overuse_events),
            ("node", int(report.extra.get(NODE_OVERUSE) or 0)),
        )
        if count
    ]
    return f"{', '.join(kinds)} over-use events"


@dataclass(frozen=True)
class Sample:
    t: float
    pending: Mapping[str, int]  # per class
    reserved: Mapping[str, int]  # milli-units per class


@dataclass(frozen=True)
class ClassFigures:
    """A Workload class's figures from the recorder (times in seconds)."""

    count: int
    admitted: int
    mean: float  # Kueue's averageTimeToAdmissionMs / 1000
    p50: float
    p95: float
    evictions: int

    @classmethod
    def of(cls, figures: WorkloadClass | None) -> ClassFigures:
        if figures is None:
            return cls(0, 0, 0.0, 0.0, 0.0, 0)
        return cls(
            figures.count,
            figures.admitted,
            figures.mean_admission_ms / 1000,
            figures.p50_admission_ms / 1000,
            figures.p95_admission_ms / 1000,
            figures.evictions,
        )


@dataclass
class Report:
    """One run's figures. `cluster_queue_usage` is Kueue's ClusterQueue usage per
    ClusterQueue class (tools/bench/recorder.py); `reserved_quota_pct` is the quota
    the Workloads held, as their own events show it, over all nominal quota × the makespan
    (it does not depend on how often a controller writes ClusterQueue status)."""

    mode: str
    scenario: str
    workloads: int
    makespan_s: float
    lower_bound_s: float
    cpu_s: float | None  # the controller's (live, if measured) or the engine's (simulated)
    cluster_queue_usage: dict[str, ClusterQueueClass]
    reserved_quota_pct: float
    preemptions: int
    overuse_events: int
    classes: dict[str, ClassFigures]
    samples: list[Sample]
    nominal_total: int  # milli-units
    apiserver_cpu_s: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        return self.makespan_s / self.lower_bound_s if self.lower_bound_s else None

    @property
    def apiserver_ms_per_workload(self) -> float | None:
        if self.apiserver_cpu_s is None or not self.workloads:
            return None
        return 1000 * self.apiserver_cpu_s / self.workloads

    def usage_pct(self, cluster_queue_class: str) -> float | None:
        figures = self.cluster_queue_usage.get(cluster_queue_class)
        return None if figures is None else figures.usage_pct

    def to_json(self) -> dict[str, Any]:
        reference = KUEUE_REFERENCE.get(self.scenario)
        per_workload = self.apiserver_ms_per_workload
        return {
            "mode": self.mode,
            "scenario": self.scenario,
            "workloads": self.workloads,
            "makespan_s": round(self.makespan_s, 3),
            "lower_bound_s": round(self.lower_bound_s, 3),
            "makespan_over_bound": None if self.ratio is None else round(self.ratio, 4),
            "cpu_s": None if self.cpu_s is None else round(self.cpu_s, 3),
            "apiserver_cpu_s": None
            if self.apiserver_cpu_s is None
            else round(self.apiserver_cpu_s, 3),
            "apiserver_cpu_ms_per_workload": None
            if per_workload is None
            else round(per_workload, 3),
            "cluster_queue_usage": {
                name: {
                    "usage_pct": None if u.usage_pct is None else round(u.usage_pct, 2),
                    "queues": u.queues,
                    "nominal_quota": str(Quantity(u.nominal_quota)),
                    "average_usage": str(Quantity(u.average_usage)),
                    "monitored_s": round(u.elapsed_ms / 1000, 3),
                }
                for name, u in self.cluster_queue_usage.items()
            },
            "reserved_quota_pct": round(self.reserved_quota_pct, 2),
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


def summarize(
    *,
    mode: str,
    scenario: Scenario,
    jobs: list[Job],
    makespan: float,
    bound: float,
    cpu: float | None,
    recorder: Recorder,
    reserved_integral: float,
    preemptions: int,
    overuse: int,
    samples: list[Sample],
    nominal_total: int,
    apiserver_cpu: float | None = None,
    extra: dict[str, Any] | None = None,
) -> Report:
    """The report of a run: per-class figures from its recorder, the reserved quota from
    its integral (milli-units × seconds)."""
    workload_classes = recorder.workload_classes()
    return Report(
        mode,
        scenario.name,
        len(jobs),
        makespan,
        bound,
        cpu,
        recorder.cluster_queue_classes(),
        100 * reserved_integral / (nominal_total * makespan) if nominal_total and makespan else 0.0,
        preemptions,
        overuse,
        {name: ClassFigures.of(workload_classes.get(name)) for name in scenario.class_names()},
        samples,
        nominal_total,
        apiserver_cpu,
        extra or {},
    )


def _seconds(value: float | None) -> str:
    return "not measured" if value is None else f"{value:.1f} s"


def render(report: Report) -> str:
    """The human summary: headline figures, then one row per class, with Kueue's published
    figures (from its CI) beside ours when the scenario is one of Kueue's."""
    reference = KUEUE_REFERENCE.get(report.scenario)
    ratio = f"{report.ratio:.2f}× the bound" if report.ratio is not None else "no bound"
    wall_label = "simulated makespan" if report.mode == "simulate" else "wall (makespan)"
    lines = [
        f"scenario {report.scenario} ({report.mode}): {report.workloads} Workloads",
        f"  {wall_label:<26}{report.makespan_s:9.1f} s   ({ratio}; lower bound "
        f"{report.lower_bound_s:.1f} s)"
        + (f"   Kueue CI: {reference['wall_s']:.0f} s" if reference else ""),
    ]
    for name, usage in report.cluster_queue_usage.items():
        pct = "      n/a  " if usage.usage_pct is None else f"{usage.usage_pct:9.1f} %"
        kueue = f"   Kueue CI: {reference['cq_usage_pct']} %" if reference else ""
        lines.append(
            f"  {'ClusterQueue usage, ' + (name or '(no class)'):<26}{pct}   "
            f"(Kueue's recorder: flavorsUsage of {usage.queues} queues over "
            f"{usage.elapsed_ms / 1000:.1f} s){kueue}"
        )
    lines += [
        f"  {'quota reserved':<26}{report.reserved_quota_pct:9.1f} %   (by Workloads, on their "
        "events: of all nominal quota over the makespan)",
        f"  {'preemptions':<26}{report.preemptions:9d}",
        f"  {'quota over-use events':<26}{report.overuse_events:9d}",
    ]
    if NODE_OVERUSE in report.extra:
        lines.append(f"  {'node over-use events':<26}{report.extra[NODE_OVERUSE]:9d}")
    cpu_label = "engine CPU" if report.mode == "simulate" else "controller CPU"
    lines.append(f"  {cpu_label:<26}{_seconds(report.cpu_s):>11}")
    if report.apiserver_cpu_s is not None:
        lines.append(
            f"  {'kube-apiserver CPU':<26}{_seconds(report.apiserver_cpu_s):>11}   "
            f"({report.apiserver_ms_per_workload:.1f} ms per Workload)"
        )
    lines.append("")
    header = ["CLASS", "COUNT", "ADMITTED", "MEAN", "P50", "P95", "EVICTIONS"]
    if reference:
        header.append("KUEUE CI MEAN")
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
    lines.append("  time to admission (creation → last admission, as Kueue's recorder):")
    lines += table(rows)
    lines += render_outages(report.extra.get("api_outages"))
    return "\n".join(lines)


def table(rows: list[list[str]]) -> list[str]:
    """Rows of cells as aligned lines: the first column left, the others right."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  "
        + "  ".join(
            cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(row)
        )
        for row in rows
    ]


def plot(report: Report, path: Path) -> None:
    """Pending Workloads and reserved quota (% of all nominal quota) over time, per class,
    and the mean and p95 time to admission of each class."""
    plt = pyplot()
    times = [s.t for s in report.samples]
    figure, (top, middle, bottom) = plt.subplots(
        3, 1, figsize=(10, 10), gridspec_kw={"height_ratios": [3, 3, 2]}
    )
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
        middle.fill_between(times, base, top_edge, step="post", label=name, alpha=0.8)
        base = top_edge
    middle.axhline(100, color="black", linewidth=0.8, linestyle="--")
    middle.set_ylabel("reserved quota, % of nominal")
    middle.set_xlabel("seconds since start")
    middle.legend(loc="upper right")
    middle.grid(alpha=0.3)
    admission_bars(bottom, {report.mode: report})
    usage = ", ".join(
        f"{name or 'queues'} {u.usage_pct:.1f} %"
        for name, u in report.cluster_queue_usage.items()
        if u.usage_pct is not None
    )
    ratio = f"{report.ratio:.2f}× bound" if report.ratio else ""
    figure.suptitle(
        f"{report.scenario} ({report.mode}): makespan {report.makespan_s:.1f} s {ratio}, "
        f"ClusterQueue usage {usage or 'n/a'}, {report.preemptions} preemptions"
    )
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def pyplot() -> Any:
    """matplotlib's pyplot on the file-only backend."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - matplotlib is a declared dependency
        raise RuntimeError(
            "--plot needs matplotlib: pip install -e '.[bench]' in the checkout"
        ) from exc
    return plt


def admission_bars(axes: Any, reports: Mapping[str, Report]) -> None:
    """Mean (solid) and p95 (hatched) time to admission per class, one bar group per
    Workload class and one colour per report."""
    names = list(next(iter(reports.values())).classes)
    width = 0.8 / (2 * len(reports))
    for r, (label, report) in enumerate(reports.items()):
        for k, (statistic, hatch) in enumerate((("mean", ""), ("p95", "//"))):
            offset = (2 * r + k) * width - 0.4 + width / 2
            values = [getattr(report.classes[name], statistic) for name in names]
            axes.bar(
                [i + offset for i in range(len(names))],
                values,
                width,
                label=f"{label} {statistic}",
                color=f"C{r}",
                alpha=0.9 if k == 0 else 0.5,
                hatch=hatch,
            )
    axes.set_xticks(range(len(names)), names)
    axes.set_ylabel("time to admission, s")
    axes.legend(loc="upper right", fontsize="small")
    axes.grid(alpha=0.3, axis="y")


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
