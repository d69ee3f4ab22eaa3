"""Two runs side by side (tools/bench/comparison.py) and the checks `make
bench-compare` makes of its arguments (tools/bench/compare.py), without a cluster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.bench.compare import (
    KUEUE_CRD_FILES,
    CompareError,
    check_kueue_crds,
    check_minimalkueue,
    main,
    write,
)
from tools.bench.comparison import comparison_json, render_comparison, rows
from tools.bench.report import Report
from tools.bench.scenario import SCENARIOS, load
from tools.bench.simulate import simulate

SMOKE = SCENARIOS / "smoke.yaml"


@pytest.fixture(scope="module")
def reports() -> dict[str, Report]:
    """The smoke scenario simulated twice: victims releasing at once, and 500 ms late."""
    scenario = load(SMOKE)
    return {"prompt": simulate(scenario), "late": simulate(scenario, ack_delay_ms=500)}


def test_rows_hold_both_figures_and_their_ratio(reports: dict[str, Report]) -> None:
    prompt, late = reports["prompt"], reports["late"]
    by_figure = {row.figure: row for row in rows(prompt, late)}
    wall = by_figure["wall (makespan)"]
    assert (wall.first, wall.second) == (prompt.makespan_s, late.makespan_s)
    assert wall.ratio == pytest.approx(late.makespan_s / prompt.makespan_s)
    for name in ("small", "medium", "large"):
        mean = by_figure[f"time to admission, mean, {name}"]
        p95 = by_figure[f"time to admission, p95, {name}"]
        assert (mean.first, p95.second) == (prompt.classes[name].mean, late.classes[name].p95)
    usage = by_figure["ClusterQueue usage, cq"]
    assert (usage.first, usage.second) == (prompt.usage_pct("cq"), late.usage_pct("cq"))
    # Simulated: no API server, so its CPU is not measured and has no ratio.
    assert by_figure["kube-apiserver CPU"].ratio is None
    assert by_figure["quota over-use events"].ratio is None  # 0 in the first run


def test_the_table_and_json_name_both_runs(reports: dict[str, Report], tmp_path: Path) -> None:
    text = render_comparison(reports)
    header = text.splitlines()[1].split()
    assert header == ["FIGURE", "PROMPT", "LATE", "RATIO"]
    assert "time to admission, p95, small" in text and "ratio: late / prompt" in text
    document = comparison_json(reports)
    assert document["ratio_of"] == "late / prompt"
    assert document["runs"].keys() == {"prompt", "late"}
    wall = document["figures"][0]
    assert wall["figure"] == "wall (makespan)" and set(wall) >= {"prompt", "late", "ratio"}
    path, picture = write(reports, tmp_path, "smoke")
    assert json.loads(path.read_text())["scenario"] == "smoke"
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_minimalkueue_must_be_kueues(tmp_path: Path) -> None:
    with pytest.raises(CompareError, match="MINIMALKUEUE is not set"):
        check_minimalkueue("")
    with pytest.raises(CompareError, match="no such file"):
        check_minimalkueue(str(tmp_path / "missing"))
    plain = tmp_path / "plain"
    plain.write_text("#!/bin/sh\n")
    with pytest.raises(CompareError, match="not executable"):
        check_minimalkueue(str(plain))
    plain.chmod(0o755)
    with pytest.raises(CompareError, match="not Kueue's minimalkueue"):
        check_minimalkueue(str(plain))
    # A binary whose usage lists minimalkueue's flags (as Go's flag package prints them).
    lookalike = tmp_path / "minimalkueue"
    lookalike.write_text("#!/bin/sh\necho '  -kubeconfig string' '  -metricsPort int' >&2\n")
    lookalike.chmod(0o755)
    assert check_minimalkueue(str(lookalike)) == lookalike


def test_kueue_crds_must_be_kueues_v1beta2_crds(tmp_path: Path) -> None:
    with pytest.raises(CompareError, match="KUEUE_CRDS is not set"):
        check_kueue_crds("")
    with pytest.raises(CompareError, match="no such directory"):
        check_kueue_crds(str(tmp_path / "missing"))
    with pytest.raises(CompareError, match="not Kueue's CRD directory"):
        check_kueue_crds(str(tmp_path))
    for name in KUEUE_CRD_FILES:
        (tmp_path / name).write_text("versions:\n  - name: v1beta1\n")
    with pytest.raises(CompareError, match=r"does not serve kueue\.x-k8s\.io/v1beta2"):
        check_kueue_crds(str(tmp_path))
    (tmp_path / "kueue.x-k8s.io_workloads.yaml").write_text("versions:\n  - name: v1beta2\n")
    assert check_kueue_crds(str(tmp_path)) == tmp_path


def test_bad_arguments_exit_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(SMOKE), "--kueue-crds", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bench-compare: MINIMALKUEUE is not set") and err.count("\n") == 1
    assert main([str(tmp_path / "none.yaml"), "--minimalkueue", "/bin/true"]) == 2
    assert "none.yaml: cannot read" in capsys.readouterr().err


def test_over_use_is_named_by_kind(reports: dict[str, Report]) -> None:
    """bench-compare's exit message says whether a run over-used quota or nodes."""
    from dataclasses import replace

    from tools.bench.report import NODE_OVERUSE, overuse_kinds, overuse_of

    [one, *_] = reports.values()
    nodes = replace(one, overuse_events=0, extra={NODE_OVERUSE: 9})
    assert (overuse_of(nodes), overuse_kinds(nodes)) == (9, "9 node over-use events")
    both = replace(one, overuse_events=2, extra={NODE_OVERUSE: 1})
    assert overuse_kinds(both) == "2 quota, 1 node over-use events"
