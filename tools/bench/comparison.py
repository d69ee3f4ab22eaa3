"""Two live runs of one scenario side by side (Kueue's minimalkueue, then quotagate, as
`make bench-compare` runs them): one table with both columns and the ratio of the second
to the first, the JSON document and the plot. The runs themselves are tools/bench/compare.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.bench.apiserver_requests import write_rows
from tools.bench.outages import render_outages
from tools.bench.preemptions import Verdict, judge
from tools.bench.report import NODE_OVERUSE, Report, admission_bars, pyplot, table

WRITES = "apiserver_writes"
"""The key of a report's `extra` with its API server writes by request."""

__all__ = ["WRITES", "Row", "comparison_json", "plot_comparison", "render_comparison", "rows"]


@dataclass(frozen=True)
class Row:
    """One figure of both runs (None: not measured)."""

    figure: str
    unit: str
    first: float | None
    second: float | None
    digits: int = 1

    @property
    def ratio(self) -> float | None:
        """second / first, when both are measured and the first is not 0."""
        if self.first is None or self.second is None or self.first == 0:
            return None
        return self.second / self.first

    def cell(self, value: float | None) -> str:
        if value is None:
            return "-"
        return f"{value:.{self.digits}f}{' ' + self.unit if self.unit else ''}"


def rows(first: Report, second: Report) -> list[Row]:
    """The compared figures, in the order of the table."""
    out = [Row("wall (makespan)", "s", first.makespan_s, second.makespan_s)]
    for statistic in ("mean", "p95"):
        for name in first.classes:
            a, b = first.classes[name], second.classes.get(name)
            out.append(
                Row(
                    f"time to admission, {statistic}, {name}",
                    "s",
                    getattr(a, statistic),
                    None if b is None else getattr(b, statistic),
                )
            )
    for name in first.cluster_queue_usage:
        label = f"ClusterQueue usage, {name or '(no class)'}"
        out.append(Row(label, "%", first.usage_pct(name), second.usage_pct(name)))
    out += [
        Row(
            "quota reserved (Workload events)",
            "%",
            first.reserved_quota_pct,
            second.reserved_quota_pct,
        ),
        Row("preemptions", "", first.preemptions, second.preemptions, 0),
        Row("quota over-use events", "", first.overuse_events, second.overuse_events, 0),
        *(
            [
                Row(
                    "node over-use events",
                    "",
                    first.extra.get(NODE_OVERUSE),
                    second.extra.get(NODE_OVERUSE),
                    0,
                )
            ]
            if NODE_OVERUSE in first.extra
            else []
        ),
        Row("kube-apiserver CPU", "s", first.apiserver_cpu_s, second.apiserver_cpu_s),
        Row(
            "kube-apiserver CPU per Workload",
            "ms",
            first.apiserver_ms_per_workload,
            second.apiserver_ms_per_workload,
            2,
        ),
        Row("controller CPU", "s", first.cpu_s, second.cpu_s),
    ]
    return out


def render_comparison(reports: Mapping[str, Report]) -> str:
    """The table: one row per figure, a column per run and the ratio of the second run's
    figure to the first's."""
    (first_label, first), (second_label, second) = reports.items()
    header = ["FIGURE", first_label.upper(), second_label.upper(), "RATIO"]
    body = [
        [
            row.figure,
            row.cell(row.first),
            row.cell(row.second),
            "-" if row.ratio is None else f"{row.ratio:.2f}",
        ]
        for row in rows(first, second)
    ]
    lines = [
        f"scenario {first.scenario}: {first.workloads} Workloads, each controller on a fresh "
        "control plane, driven by the same `quotagate bench --live`",
        *table([header, *body]),
        f"  ratio: {second_label} / {first_label}; time to admission and ClusterQueue usage "
        "as Kueue's recorder computes them",
    ]
    lines += _writes(reports)
    for label, report in reports.items():
        outages = render_outages(report.extra.get("api_outages"))
        if outages:
            lines += [f"{label}:", *outages]
    verdicts = judge_both(reports)
    if verdicts:
        lines.append("evictions judged against the other run (needed: it admitted the same")
        lines.append("preemptor later or never; churn: as early or earlier without them)")
        lines += table(
            [
                ["RUN", "EVICTIONS", "PREEMPTORS", "NEEDED", "CHURN", "UNKNOWN", "GAINED"],
                *(
                    [
                        label,
                        str(v.evictions),
                        str(v.preemptors),
                        str(v.needed),
                        str(v.churn),
                        str(v.unknown),
                        f"{v.gained_s:.1f} s",
                    ]
                    for label, v in verdicts.items()
                ),
            ]
        )
    return "\n".join(lines)


def _writes(reports: Mapping[str, Report]) -> list[str]:
    """The API server writes per Workload of both runs by request, when both were counted
    (`extra["apiserver_writes"]`, tools/bench/compare.py)."""
    (first_label, first), (second_label, second) = reports.items()
    a, b = first.extra.get(WRITES), second.extra.get(WRITES)
    if a is None or b is None:
        return []
    body = [
        [what, f"{x:.2f}", f"{y:.2f}", "-" if x == 0 else f"{y / x:.2f}"]
        for what, x, y in write_rows(a, b, first.workloads)
    ]
    return [
        "kube-apiserver writes per Workload, by request (its apiserver_request_total, "
        "setup included)",
        *table([["REQUEST", first_label.upper(), second_label.upper(), "RATIO"], *body]),
    ]


def judge_both(reports: Mapping[str, Report]) -> dict[str, Verdict]:
    """Each run's evictions judged against the other run (tools/bench/preemptions.py);
    empty when the reports carry no preemption log."""
    (first_label, first), (second_label, second) = reports.items()
    out = {}
    for label, run, other in ((first_label, first, second), (second_label, second, first)):
        verdict = judge(run.extra, other.extra)
        if verdict is not None:
            out[label] = verdict
    return out


def comparison_json(reports: Mapping[str, Report]) -> dict[str, Any]:
    """Both reports in full, and the compared figures with their ratio."""
    (first_label, first), (second_label, second) = reports.items()
    return {
        "scenario": first.scenario,
        "workloads": first.workloads,
        "ratio_of": f"{second_label} / {first_label}",
        "figures": [
            {
                "figure": row.figure,
                "unit": row.unit,
                first_label: row.first,
                second_label: row.second,
                "ratio": None if row.ratio is None else round(row.ratio, 4),
            }
            for row in rows(first, second)
        ],
        "evictions_judged": {
            label: verdict.to_json() for label, verdict in judge_both(reports).items()
        },
        "runs": {label: report.to_json() for label, report in reports.items()},
    }


def plot_comparison(reports: Mapping[str, Report], path: Path) -> None:
    """Pending Workloads and reserved quota over time, one line per run, and the mean and
    p95 time to admission per class of both."""
    plt = pyplot()
    figure, (top, middle, bottom) = plt.subplots(
        3, 1, figsize=(10, 10), gridspec_kw={"height_ratios": [3, 3, 2]}
    )
    for r, (label, report) in enumerate(reports.items()):
        times = [s.t for s in report.samples]
        top.plot(times, [sum(s.pending.values()) for s in report.samples], f"C{r}", label=label)
        total = report.nominal_total or 1
        middle.step(
            times,
            [100 * sum(s.reserved.values()) / total for s in report.samples],
            f"C{r}",
            where="post",
            label=label,
        )
    top.set_ylabel("pending Workloads")
    middle.set_ylabel("reserved quota, % of nominal")
    middle.set_xlabel("seconds since start")
    middle.axhline(100, color="black", linewidth=0.8, linestyle="--")
    for axes in (top, middle):
        axes.legend(loc="upper right")
        axes.grid(alpha=0.3)
    admission_bars(bottom, reports)
    walls = ", ".join(f"{label} {report.makespan_s:.1f} s" for label, report in reports.items())
    first = next(iter(reports.values()))
    figure.suptitle(f"{first.scenario}, live: wall {walls}")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
