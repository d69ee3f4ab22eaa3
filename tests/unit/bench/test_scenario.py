"""Scenario files in the shape of Kueue's generator config."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml

from tools.bench.scenario import SCENARIOS, ScenarioError, load, parse

SCENARIOS = SCENARIOS


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
    [
        ("smoke", 2, 58),
        ("baseline", 30, 15_000),
        ("large-scale", 1_000, 50_000),
        ("fair-tree", 12, 944),
    ],
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


# -- quotagate's extension: a tree of Cohorts and fair sharing ---------------------------------


def _tree(**top: Any) -> dict[str, Any]:
    """Two departments under an org; the cohort set `team` under `eng`."""
    doc: dict[str, Any] = {
        "parentCohorts": [
            {"name": "org", "nominalQuota": 8},
            {"name": "eng", "parent": "org", "weight": 2, "borrowingLimit": 4},
            {"name": "research", "parent": "org", "weight": "500m", "lendingLimit": 2},
        ],
        **_doc(weight=3),
    }
    doc["cohorts"][0].update(className="team", count=2, parent="eng", weight="1.5")
    doc.update(top)
    return doc


def test_a_scenario_without_the_extension_has_no_tree_and_no_fair_sharing() -> None:
    scenario = load(SCENARIOS / "baseline.yaml")
    assert scenario.parent_cohorts == ()
    assert scenario.fair_sharing is None
    assert all(cs.parent is None and cs.weight is None for cs in scenario.cohort_sets)
    assert all(qs.weight is None for _, _, qs in scenario.queues())
    assert scenario.cohort_parents() == {}
    assert set(scenario.roots().values()) == {f"cohort-{c}" for c in range(5)}


def test_parent_cohorts_weights_and_roots() -> None:
    scenario = parse(_tree())
    org, eng, research = scenario.parent_cohorts
    assert (org.name, org.parent, org.nominal, org.has_quota) == ("org", None, 8000, True)
    assert (eng.parent, eng.nominal, eng.borrowing_limit, eng.weight) == ("org", None, 4000, 2)
    assert (research.lending_limit, research.weight) == (2000, Fraction(1, 2))
    [team] = scenario.cohort_sets
    assert (team.parent, team.weight, team.explicit) == ("eng", Fraction(3, 2), True)
    assert [qs.weight for _, _, qs in scenario.queues()] == [3, 3]
    assert scenario.cohort_parents() == {
        "org": None,
        "eng": "org",
        "research": "org",
        "team-0": "eng",
        "team-1": "eng",
    }
    assert set(scenario.roots().values()) == {"org"}


def test_a_weight_alone_makes_a_generated_cohort_a_root_cohort_object() -> None:
    doc = _doc()
    doc["cohorts"][0]["weight"] = 0
    scenario = parse(doc)
    assert scenario.cohort_sets[0].explicit
    assert scenario.cohort_parents() == {"c-0": None}
    assert scenario.roots() == {"c-0": "c-0"}


@pytest.mark.parametrize(
    ("section", "strategies"),
    [
        ({}, ("LessThanOrEqualToFinalShare", "LessThanInitialShare")),
        ({"preemptionStrategies": []}, ("LessThanOrEqualToFinalShare", "LessThanInitialShare")),
        ({"preemptionStrategies": ["LessThanInitialShare"]}, ("LessThanInitialShare",)),
    ],
)
def test_fair_sharing_takes_kueues_configuration_shape(
    section: dict[str, Any], strategies: tuple[str, ...]
) -> None:
    fair_sharing = parse({**_doc(), "fairSharing": section}).fair_sharing
    assert fair_sharing is not None
    assert tuple(map(str, fair_sharing.preemption_strategies)) == strategies


def test_fair_sharing_off_as_in_the_controllers_configuration() -> None:
    assert parse({**_doc(), "fairSharing": None}).fair_sharing is None
    assert parse({**_doc(), "fairSharing": {"enable": False}}).fair_sharing is None


def _with_parent_cohorts(*cohorts: Any) -> dict[str, Any]:
    return {**_doc(), "parentCohorts": list(cohorts)}


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (
            {**_doc(), "fairSharing": {"preemptionStrategies": ["LessThanInitialShare"] * 2}},
            "fairSharing.preemptionStrategies: Value error, must be one of",
        ),
        (
            {**_doc(), "fairSharing": {"preemptionStrategies": ["Sometimes"]}},
            "fairSharing.preemptionStrategies.0: Input should be",
        ),
        ({**_doc(), "fairSharing": {"strategies": []}}, "fairSharing.strategies: Extra inputs"),
        ({**_doc(), "fairSharing": "on"}, "fairSharing: Input should be a valid dictionary"),
        ({**_doc(), "parentCohorts": {"name": "org"}}, "parentCohorts: expected a list"),
        (_with_parent_cohorts({"nominalQuota": 1}), "parentCohorts[0].name: expected a non-empty"),
        (_with_parent_cohorts("org"), "parentCohorts[0]: expected a mapping"),
        (
            _with_parent_cohorts({"name": "org", "quota": 1}),
            "parentCohorts[0].quota: unknown key (known: name, parent, nominalQuota",
        ),
        (
            _with_parent_cohorts({"name": "org"}, {"name": "org"}),
            "parentCohorts[1].name: 'org' is listed twice",
        ),
        (
            _with_parent_cohorts({"name": "org", "nominalQuota": "lots"}),
            "parentCohorts[0].nominalQuota: not a quantity: 'lots'",
        ),
        (
            _with_parent_cohorts({"name": "org", "borrowingLimit": 1}),
            "parentCohorts[0].borrowingLimit: only a Cohort with a parent has limits",
        ),
        (
            _with_parent_cohorts({"name": "org", "lendingLimit": 1}),
            "parentCohorts[0].lendingLimit: only a Cohort with a parent has limits",
        ),
        (
            _with_parent_cohorts({"name": "org", "weight": -1}),
            "parentCohorts[0].weight: must be ≥ 0, got -1",
        ),
        (
            _with_parent_cohorts({"name": "org", "weight": "heavy"}),
            "parentCohorts[0].weight: not a quantity: 'heavy'",
        ),
        (
            _with_parent_cohorts({"name": "eng", "parent": "org"}),
            "parentCohorts[0].parent: unknown Cohort 'org' (not in parentCohorts)",
        ),
        (
            _with_parent_cohorts({"name": "eng", "parent": 7}),
            "parentCohorts[0].parent: expected a Cohort's name, got 7",
        ),
        (
            _with_parent_cohorts(
                {"name": "org"},
                {"name": "a", "parent": "b"},
                {"name": "b", "parent": "a"},
            ),
            "parentCohorts[1].parent: 'b' makes a cycle (a -> b -> a)",
        ),
        (
            _with_parent_cohorts({"name": "a", "parent": "a"}),
            "parentCohorts[0].parent: 'a' makes a cycle (a -> a)",
        ),
        (
            _with_parent_cohorts({"name": "c-0"}),
            "cohorts[0].className: generates cohort 'c-0', which parentCohorts lists too",
        ),
        (_tree(parentCohorts=[{"name": "org"}]), "cohorts[0].parent: unknown Cohort 'eng'"),
        (_doc(weight=-2), "cohorts[0].queuesSets[0].weight: must be ≥ 0, got -2"),
        (_doc(weight=True), "cohorts[0].queuesSets[0].weight: not a quantity: True"),
    ],
)
def test_tree_and_fair_sharing_errors_name_the_key(doc: Any, message: str) -> None:
    with pytest.raises(ScenarioError) as info:
        parse(doc)
    assert message in str(info.value)


def test_a_cohort_set_weight_is_checked_too() -> None:
    doc = _doc()
    doc["cohorts"][0]["weight"] = "-1"
    with pytest.raises(ScenarioError, match=r"cohorts\[0\].weight: must be ≥ 0"):
        parse(doc)


def test_two_sets_generating_one_cohort_must_agree_on_its_parent_and_weight() -> None:
    doc = _tree()
    other = {**doc["cohorts"][0], "queuesSets": [_queue_set(className="other")], "count": 1}
    doc["cohorts"].append({**other, "weight": 1})
    with pytest.raises(ScenarioError, match=r"cohorts\[1\]: cohort 'team-0' is also generated by"):
        parse(doc)
    doc["cohorts"][1]["weight"] = "1.5"
    assert parse(doc).cohort_parents()["team-0"] == "eng"
