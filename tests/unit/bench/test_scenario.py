"""Scenario files in the shape of Kueue's generator config."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.bench.scenario import ScenarioError, load, parse

SCENARIOS = Path(__file__).resolve().parents[2] / "bench" / "scenarios"


def _queue_set(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "className": "cq",
        "count": 1,
        "nominalQuota": 4,
        "workloadsSets": [
            {
                "count": 3,
                "creationIntervalMs": 100,
                "workloads": [{"className": "a", "runtimeMs": 10, "priority": 1, "request": 1}],
            }
        ],
    }
    base.update(overrides)
    return base


def _doc(**overrides: Any) -> dict[str, Any]:
    return {"cohorts": [{"className": "c", "count": 1, "queuesSets": [_queue_set(**overrides)]}]}


@pytest.mark.parametrize(
    ("name", "queues", "workloads"),
    [("smoke", 2, 58), ("baseline", 30, 15_000), ("large-scale", 1_000, 50_000)],
)
def test_shipped_scenarios_have_the_published_sizes(name: str, queues: int, workloads: int) -> None:
    scenario = load(SCENARIOS / f"{name}.yaml")
    assert scenario.name == name
    assert scenario.total_queues() == queues
    assert scenario.total_workloads() == workloads


def test_baseline_matches_kueues_numbers() -> None:
    scenario = load(SCENARIOS / "baseline.yaml")
    [cohorts] = scenario.cohort_sets
    [queues] = cohorts.queue_sets
    assert (cohorts.count, queues.count) == (5, 6)
    assert (queues.nominal, queues.borrowing_limit) == (20_000, 100_000)
    assert (queues.reclaim_within_cohort, queues.within_cluster_queue) == ("Any", "LowerPriority")
    shape = [
        (ws.count, ws.interval_ms, wc.name, wc.request, wc.runtime_ms, wc.priority)
        for ws in queues.workload_sets
        for wc in ws.classes
    ]
    assert shape == [
        (350, 100, "small", 1_000, 200, 50),
        (100, 500, "medium", 5_000, 500, 100),
        (50, 1200, "large", 20_000, 1000, 200),
    ]


def test_queue_names_follow_kueues_generator() -> None:
    scenario = load(SCENARIOS / "smoke.yaml")
    assert [name for name, _, _ in scenario.queues()] == ["cq-0-0-cohort-0", "cq-0-1-cohort-0"]
    assert {cohort for _, cohort, _ in scenario.queues()} == {"cohort-0"}


def test_arrivals_wait_one_interval_before_each_workload() -> None:
    doc = _doc()
    doc["cohorts"][0]["queuesSets"][0]["workloadsSets"][0]["workloads"].append(
        {"className": "b", "runtimeMs": 10, "request": "500m"}
    )
    [(_, _, qs)] = parse(doc).queues()
    arrivals = [(at, wc.name, i) for at, wc, i in qs.workload_sets[0].arrivals()]
    assert arrivals == [
        (0.1, "a", 0),
        (0.2, "b", 0),
        (0.3, "a", 1),
        (0.4, "b", 1),
        (0.5, "a", 2),
        (0.6, "b", 2),
    ]
    assert qs.workload_sets[0].classes[1].request == 500


def test_a_bare_list_of_cohort_sets_is_accepted() -> None:
    assert parse(_doc()["cohorts"]).total_workloads() == 3


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"queues": []}, "cohorts: required"),
        ({"cohorts": []}, "cohorts: expected a non-empty list"),
        (_doc(reclaimWithinCohort="Sometimes"), "cohorts[0].queuesSets[0].reclaimWithinCohort"),
        (_doc(nominalQuota="lots"), "cohorts[0].queuesSets[0].nominalQuota: not a quantity"),
        (_doc(nominalQuota=None), "cohorts[0].queuesSets[0].nominalQuota: required"),
        (_doc(borrowingLimit=-1), "borrowingLimit: must be ≥ 0"),
        (_doc(count=0), "cohorts[0].queuesSets[0].count: expected an integer ≥ 1"),
        (_doc(workloadsSets=[]), "cohorts[0].queuesSets[0].workloadsSets: expected a non-empty"),
        (
            _doc(
                workloadsSets=[
                    {
                        "count": 1,
                        "creationIntervalMs": 1,
                        "workloads": [{"className": "a", "runtimeMs": 1}],
                    }
                ]
            ),
            "workloadsSets[0].workloads[0].request: required",
        ),
        (
            _doc(
                workloadsSets=[
                    {
                        "count": 1,
                        "creationIntervalMs": 1,
                        "workloads": [{"className": "a", "runtimeMs": 0, "request": 1}],
                    }
                ]
            ),
            "workloads[0].runtimeMs: expected an integer ≥ 1",
        ),
    ],
)
def test_errors_name_the_key(doc: Any, message: str) -> None:
    with pytest.raises(ScenarioError) as info:
        parse(doc)
    assert message in str(info.value)


def test_load_reports_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("cohorts: [\n")
    with pytest.raises(ScenarioError, match=r"bad\.yaml: invalid YAML"):
        load(bad)
    with pytest.raises(ScenarioError, match=r"missing\.yaml: cannot read"):
        load(tmp_path / "missing.yaml")
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text(yaml.safe_dump(_doc(count="two")))
    with pytest.raises(ScenarioError, match=r"wrong\.yaml: cohorts\[0\].queuesSets\[0\].count"):
        load(wrong)
