"""`quotagate bench --simulate`: the real engine on a virtual clock."""

from __future__ import annotations

import json
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from controller.core.fairsharing.settings import FairSharing
from controller.core.model.clusterqueues import FlavorQuotas, ResourceGroup, ResourceQuota
from controller.core.model.cohorts import Cohort
from controller.core.scheduler.preemption import VictimSearches
from tools.bench.command import main
from tools.bench.report import render
from tools.bench.scenario import SCENARIOS, load, parse
from tools.bench.simulate import FLAVOR, RESOURCE, PreemptionLoop, build, lower_bound, simulate

SMOKE = SCENARIOS / "smoke.yaml"


def _scenario(
    nominal: int, borrowing: int | None, sets: list[dict[str, Any]], queues: int = 2
) -> Any:
    qs: dict[str, Any] = {
        "className": "cq",
        "count": queues,
        "nominalQuota": nominal,
        "reclaimWithinCohort": "Any",
        "withinClusterQueue": "LowerPriority",
        "workloadsSets": sets,
    }
    if borrowing is not None:
        qs["borrowingLimit"] = borrowing
    return parse({"cohorts": [{"className": "c", "count": 1, "queuesSets": [qs]}]}, "t")


def _cpu_groups(nominal: int, borrowing_limit: int | None = None) -> tuple[ResourceGroup, ...]:
    quota = ResourceQuota(nominal, borrowing_limit)
    return (ResourceGroup((RESOURCE,), (FlavorQuotas(FLAVOR, {RESOURCE: quota}),)),)


def _set(
    count: int, interval: int, name: str, request: int, runtime: int, priority: int
) -> dict[str, Any]:
    return {
        "count": count,
        "creationIntervalMs": interval,
        "workloads": [
            {"className": name, "runtimeMs": runtime, "priority": priority, "request": request}
        ],
    }


def test_smoke_runs_to_the_end_without_over_use() -> None:
    report = simulate(load(SMOKE))
    assert report.workloads == 58
    assert report.overuse_events == 0
    assert all(f.admitted == f.count for f in report.classes.values())
    assert report.lower_bound_s <= report.makespan_s
    usage = report.usage_pct("cq")
    assert usage is not None and 0 < usage <= 100
    # The large class (priority 200) preempts lower-priority work in the smoke scenario.
    assert report.preemptions > 0
    assert report.classes["large"].mean < report.classes["small"].mean


def test_lower_bound_is_the_larger_of_arrivals_and_work_over_capacity() -> None:
    # 2 queues × nominal 2 = 4 units. Work: 2 queues × 10 × 1 unit × 1 s = 20 unit·s → 5 s.
    scenario = _scenario(2, None, [_set(10, 10, "a", 1, 1000, 1)])
    _, jobs, capacity = build(scenario)
    assert capacity == {"c-0": 4000}
    assert lower_bound(jobs, capacity) == pytest.approx(5.0)
    # Sparse arrivals: the last one arrives at 10 s and runs 1 s.
    sparse = _scenario(2, None, [_set(10, 1000, "a", 1, 1000, 1)])
    _, jobs, capacity = build(sparse)
    assert lower_bound(jobs, capacity) == pytest.approx(11.0)


def test_an_uncontended_scenario_admits_at_arrival_and_meets_the_bound() -> None:
    scenario = _scenario(4, 0, [_set(5, 1000, "a", 1, 500, 1)])
    report = simulate(scenario)
    assert report.classes["a"].mean == 0.0
    assert report.preemptions == 0
    assert report.makespan_s == pytest.approx(report.lower_bound_s)


def test_a_higher_priority_arrival_preempts_and_victims_come_back() -> None:
    # One queue of 2 units: two long low-priority Workloads fill it, then a high one needs both.
    scenario = _scenario(
        2,
        0,
        [_set(2, 10, "low", 1, 5000, 1), _set(1, 100, "high", 2, 1000, 10)],
        queues=1,
    )
    report = simulate(scenario)
    assert report.preemptions == 2
    assert report.classes["low"].evictions == 2
    assert report.classes["high"].mean == 0.0
    assert report.overuse_events == 0


def test_results_are_deterministic() -> None:
    first, second = simulate(load(SMOKE)).to_json(), simulate(load(SMOKE)).to_json()
    for document in (first, second):
        document.pop("cpu_s")
    assert first == second


@pytest.mark.parametrize(
    "scenario",
    [
        load(SMOKE),
        _scenario(
            20,
            100,
            [
                _set(60, 50, "s", 1, 200, 50),
                _set(12, 250, "m", 5, 500, 100),
                _set(4, 600, "l", 20, 1000, 200),
            ],
            queues=3,
        ),
        _scenario(3, None, [_set(30, 20, "s", 1, 300, 1), _set(30, 20, "t", 2, 300, 1)]),
    ],
)
def test_parking_alike_heads_at_once_changes_no_decision(scenario: Any) -> None:
    """Step 7 of the cycle (set aside identical heads together) only saves cycles: every
    Workload is admitted at the same moment as with Kueue's one head per cycle."""

    def times(park_alike: bool) -> tuple[dict[str, Any], int]:
        report = simulate(scenario, park_alike=park_alike)
        return {k: v for k, v in report.to_json().items() if k not in ("cpu_s", "cycles")}, int(
            report.extra["cycles"]
        )

    batched, batched_cycles = times(True)
    one_by_one, one_by_one_cycles = times(False)
    assert batched == one_by_one
    assert batched_cycles <= one_by_one_cycles


def test_report_json_has_the_documented_keys() -> None:
    document = simulate(load(SMOKE)).to_json()
    for key in (
        "makespan_s",
        "lower_bound_s",
        "cpu_s",
        "cluster_queue_usage",
        "reserved_quota_pct",
        "preemptions",
        "overuse_events",
    ):
        assert key in document
    for figures in document["classes"].values():
        assert {"mean_admission_s", "p95_admission_s", "p50_admission_s"} <= figures.keys()


def test_render_compares_with_kueue_for_kueues_scenarios() -> None:
    report = simulate(load(SMOKE))
    text = render(report)
    assert "KUEUE" not in text and "time to admission" in text
    report.scenario = "baseline"
    assert "KUEUE CI MEAN" in render(report) and "215.5 s" in render(report)


def test_cli_writes_json_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, png = tmp_path / "r.json", tmp_path / "r.png"
    assert main([str(SMOKE), "--simulate", "--json", str(out), "--plot", str(png)]) == 0
    captured = capsys.readouterr()
    assert "scenario smoke (simulate)" in captured.out
    assert "finished" in captured.err  # progress
    assert json.loads(out.read_text())["workloads"] == 58
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_json_to_stdout_is_pure_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(SMOKE), "--simulate", "--json", "-", "-q"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["scenario"] == "smoke"
    assert captured.err == ""


def test_cli_writes_every_cycles_decisions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--decisions FILE`: one JSON line per cycle that decided something; every Workload
    admitted, every preemption with its victims; the same file on every run."""
    first, second = tmp_path / "1.jsonl", tmp_path / "2.jsonl"
    for out in (first, second):
        assert main([str(SMOKE), "--simulate", "-q", "--decisions", str(out)]) == 0
    capsys.readouterr()
    assert first.read_bytes() == second.read_bytes()
    lines = [json.loads(line) for line in first.read_text().splitlines()]
    assert all(line.keys() == DECISION_KEYS for line in lines)
    admitted = {a[0] for line in lines for a in line["admitted"]}
    assert len(admitted) == 58
    victims = [v for line in lines for p in line["preempting"] for v in p[2] if not v[4]]
    assert len(victims) == simulate(load(SMOKE)).preemptions == 4
    times = [line["t"] for line in lines]
    assert times == sorted(times)


def test_cli_decisions_only_with_simulate(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(SMOKE), "--live", "--decisions", "x.jsonl"]) == 2
    assert "--decisions is for --simulate" in capsys.readouterr().err


DECISION_KEYS = {"t", "admitted", "preempting", "evicted", "requeued", "inadmissible"}


def test_cli_bad_scenario_exits_2_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("cohorts:\n  - count: 1\n    queuesSets: []\n")
    assert main([str(bad), "--simulate"]) == 2
    err = capsys.readouterr().err
    assert "bad.yaml: cohorts[0].queuesSets: expected a non-empty list" in err
    assert "Traceback" not in err


# -- a tree of Cohorts and fair sharing ----------------------------------------------------


def _tree_scenario(fair_sharing: dict[str, Any] | None = None) -> Any:
    """org (2 units of its own) > eng (weight 2, borrowingLimit 1) > team-0, team-1, each
    with one queue of 2 units (weight 3); and a separate root cohort `solo-0`."""
    team = _scenario(2, None, [_set(4, 10, "a", 1, 1000, 1)], queues=1).cohort_sets[0]
    doc: dict[str, Any] = {
        "parentCohorts": [
            {"name": "org", "nominalQuota": 2},
            {"name": "eng", "parent": "org", "weight": 2, "borrowingLimit": 1},
        ],
        "cohorts": [
            {
                "className": "team",
                "count": 2,
                "parent": "eng",
                "queuesSets": [_queue_doc(team.queue_sets[0], weight=3)],
            },
            {
                "className": "solo",
                "count": 1,
                "queuesSets": [_queue_doc(team.queue_sets[0])],
            },
        ],
    }
    if fair_sharing is not None:
        doc["fairSharing"] = fair_sharing
    return parse(doc, "tree")


def _queue_doc(qs: Any, **extra: Any) -> dict[str, Any]:
    return {
        "className": qs.name,
        "count": qs.count,
        "nominalQuota": qs.nominal // 1000,
        "reclaimWithinCohort": qs.reclaim_within_cohort,
        "withinClusterQueue": qs.within_cluster_queue,
        "workloadsSets": [
            _set(ws.count, ws.interval_ms, wc.name, wc.request // 1000, wc.runtime_ms, wc.priority)
            for ws in qs.workload_sets
            for wc in ws.classes
        ],
        **extra,
    }


def test_build_puts_the_tree_and_the_weights_into_the_state() -> None:
    state, jobs, capacity = build(_tree_scenario({}))
    assert state.fair_sharing == FairSharing()
    assert state.objects.cohorts["org"] == Cohort("org", None, _cpu_groups(2000))
    assert state.objects.cohorts["eng"] == Cohort(
        "eng", "org", _cpu_groups(0, borrowing_limit=1000), Fraction(2)
    )
    assert state.objects.cohorts["team-1"] == Cohort("team-1", "eng")
    assert "solo-0" not in state.objects.cohorts  # neither parent nor weight: an implicit cohort
    assert state.objects.cluster_queues["cq-0-0-team-0"].fair_weight == 3
    assert state.objects.cluster_queues["cq-0-0-solo-0"].fair_weight == 1
    # Quota moves within a root's whole tree: its queues' and its Cohorts' own.
    assert capacity == {"org": 2000 + 2 * 2000, "solo-0": 2000}
    assert {job.root_cohort for job in jobs} == {"org", "solo-0"}
    assert build(_tree_scenario())[0].fair_sharing is None


def test_a_weight_of_zero_is_kept() -> None:
    doc: dict[str, Any] = {
        "cohorts": [
            {
                "className": "c",
                "count": 1,
                "weight": 0,
                "queuesSets": [_queue_doc(_tree_scenario().cohort_sets[1].queue_sets[0], weight=0)],
            }
        ]
    }
    state, _, _ = build(parse(doc))
    assert state.objects.cohorts["c-0"].fair_weight == 0
    assert state.objects.cluster_queues["cq-0-0-c-0"].fair_weight == 0


def test_lower_bound_is_per_root_tree() -> None:
    _, jobs, capacity = build(_tree_scenario())
    # org: 2 queues × 4 × 1 unit × 1 s = 8 unit·s over 6 units (not 4 over each team's 2).
    in_org = [job for job in jobs if job.root_cohort == "org"]
    assert lower_bound(in_org, capacity) == pytest.approx(8 / 6)
    # solo-0: 4 unit·s over its 2 units.
    assert lower_bound(jobs, capacity) == pytest.approx(2.0)


@pytest.mark.parametrize("fair_sharing", [None, {}])
def test_a_tree_runs_to_the_end_within_its_quota(fair_sharing: dict[str, Any] | None) -> None:
    report = simulate(_tree_scenario(fair_sharing))
    assert report.overuse_events == 0
    assert all(f.admitted == f.count for f in report.classes.values())
    assert report.makespan_s >= report.lower_bound_s
    assert report.nominal_total == 8000


def _loop_scenario() -> Any:
    """Four queues of one cohort, small and medium Workloads. Kueue's rules let a queue's
    medium Workload preempt its own small ones to borrow what a queue below its nominal
    quota is waiting for; that queue reclaims it at once, and so on, while no simulated
    time passes."""
    return _scenario(
        6,
        None,
        [_set(20, 150, "small", 1, 1000, 50), _set(5, 750, "medium", 4, 2000, 100)],
        queues=4,
    )


def _fair_loop_scenario() -> Any:
    """Fair sharing, one cohort: a (4 cpu, weight 2) with a large Workload, b and c (2 cpu,
    weight 1), c with small ones and a large one. c's large preempts c's small ones to
    borrow; a's large takes c's large by fair sharing, which leaves c below its nominal
    quota with its small ones pending; they reclaim a's large; c's large preempts them
    again, and so on, while no simulated time passes."""

    def queue(name: str, nominal: int, weight: int, sets: list[dict[str, Any]]) -> Any:
        return {
            "className": name,
            "count": 1,
            "nominalQuota": nominal,
            "weight": weight,
            "reclaimWithinCohort": "Any",
            "withinClusterQueue": "LowerPriority",
            "workloadsSets": sets,
        }

    large = _set(1, 100, "large", 8, 4000, 200)
    small = _set(6, 100, "small", 1, 2000, 50)
    late_large = _set(1, 200, "large", 8, 4000, 200)
    queues = [
        queue("a", 4, 2, [large]),
        queue("b", 2, 1, [_set(3, 500, "small", 1, 2000, 50)]),
        queue("c", 2, 1, [small, late_large]),
    ]
    doc = {"fairSharing": {}, "cohorts": [{"className": "co", "count": 1, "queuesSets": queues}]}
    return parse(doc, "t")


@pytest.mark.parametrize(
    ("scenario", "rule", "looping"),
    [
        # A queue below its nominal quota waits for what the preemptor would borrow.
        (_loop_scenario, "_contested", r"cq-0-\d-c-0/"),
        # The victims' going would leave their queue there, with pending Workloads.
        (_fair_loop_scenario, "_contested_after", r"c-2-0-co-0/"),
    ],
)
def test_no_preemption_loop_where_kueues_rules_go_round(
    monkeypatch: pytest.MonkeyPatch, scenario: Callable[[], Any], rule: str, looping: str
) -> None:
    """quotagate does not preempt to borrow what another queue would reclaim at once
    (`VictimSearches._contested` / `_contested_after`): the run ends, every Workload
    admitted, and no Workload is preempted over and over in one instant."""
    report = simulate(scenario())
    assert all(f.admitted == f.count for f in report.classes.values())
    assert report.overuse_events == 0
    # Without the rule — Kueue's — the engine decides forever; the run stops, naming it.
    monkeypatch.setattr(VictimSearches, rule, lambda *_: None)
    with pytest.raises(PreemptionLoop, match=rf"preemption loop at \d+\.\d{{3}} s: {looping}"):
        simulate(scenario())
