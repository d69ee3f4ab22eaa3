"""`make bench-compare`'s plumbing (tools/bench/compare.py) without Kueue: quotagate in both
slots, each on its own fresh control plane, driven by the same live run of the smoke
scenario; and a controller that dies during its run."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from tools.bench.compare import QUOTAGATE_CRDS, CompareError, Contender, compare, quotagate, write
from tools.bench.comparison import WRITES, render_comparison
from tools.bench.scenario import SCENARIOS, load

SMOKE = SCENARIOS / "smoke.yaml"


def test_two_controllers_run_one_after_the_other_on_fresh_control_planes(tmp_path: Path) -> None:
    progress = io.StringIO()
    reports = compare(
        load(SMOKE),
        [quotagate("first"), quotagate("second")],
        tmp_path,
        progress=progress,
        timeout=180,
    )
    assert list(reports) == ["first", "second"]
    lines = progress.getvalue()
    assert (
        lines.index("[1/2] first: starting a control plane")
        < lines.index("[1/2] first: done in")
        < lines.index("[2/2] second: starting a control plane")
    )
    kubeconfigs = {
        line.split("--kubeconfig ")[1].split()[0]
        for line in lines.splitlines()
        if "--kubeconfig " in line
    }
    assert len(kubeconfigs) == 2  # a control plane each
    for label, report in reports.items():
        assert report.workloads == 58, label
        assert all(f.admitted == f.count for f in report.classes.values()), label
        assert report.overuse_events == 0, label
        assert report.cpu_s is not None and report.cpu_s > 0, label  # its own controller's
        assert report.apiserver_cpu_s is not None and report.apiserver_cpu_s > 0, label
        usage = report.usage_pct("cq")
        assert usage is not None and 0 < usage <= 100, label
        assert (tmp_path / f"{label}.log").is_file(), label  # where its log went
        # The API server's own counters: every Workload created once by the bench, admitted
        # by a status apply of the controller and finished by one of the bench's (APPLY is
        # server-side apply).
        writes = report.extra[WRITES]
        assert writes["POST workloads"] == 58, label
        assert writes["APPLY workloads/status"] >= 2 * 58, label
        assert not any(key.split()[0] in ("GET", "LIST", "WATCH") for key in writes), label
    table = render_comparison(reports)
    assert "kube-apiserver writes per Workload, by request" in table
    for figure in (
        "wall (makespan)",
        "time to admission, mean, small",
        "time to admission, p95, large",
        "ClusterQueue usage, cq",
        "preemptions",
        "quota over-use events",
        "kube-apiserver CPU per Workload",
        "controller CPU",
    ):
        assert figure in table, figure
    document, picture = write(reports, tmp_path, "smoke")
    figures = {f["figure"]: f for f in json.loads(document.read_text())["figures"]}
    wall = figures["wall (makespan)"]
    assert wall["ratio"] == pytest.approx(wall["second"] / wall["first"], abs=1e-4)
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_controller_that_exits_during_its_run_fails_the_comparison(tmp_path: Path) -> None:
    dies = Contender(
        "dies", QUOTAGATE_CRDS, lambda kubeconfig: [sys.executable, "-c", "raise SystemExit(3)"]
    )
    with pytest.raises(CompareError, match=r"dies: the controller exited with status 3"):
        compare(load(SMOKE), [dies, quotagate()], tmp_path, progress=None, setup_timeout=60)
