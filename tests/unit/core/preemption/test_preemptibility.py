"""Preemptibility resolution (KAI precedence) and what it means for pods and quota."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from controller.core.preemption.preemptibility import (
    PREEMPTIBILITY_LABEL,
    Preemptibility,
    PreemptibilitySource,
    Resolution,
    may_borrow,
    protected_pods,
    resolve_preemptibility,
)

P = Preemptibility.PREEMPTIBLE
NP = Preemptibility.NON_PREEMPTIBLE
SEMI = Preemptibility.SEMI_PREEMPTIBLE
S = PreemptibilitySource


def label(value: str) -> dict[str, str]:
    return {PREEMPTIBILITY_LABEL: value, "app": "train"}


def resolve(
    spec: str | None = None,
    owners: Sequence[Mapping[str, str]] = (),
    pod: Mapping[str, str] | None = None,
    priority: int = 0,
    threshold: int | None = None,
) -> Resolution:
    return resolve_preemptibility(spec, owners, pod, priority, threshold)


# --- each level decides when everything above it is unset -----------------------------


def test_spec_wins_over_everything() -> None:
    r = resolve("semi-preemptible", [label("preemptible")], label("preemptible"), 500, 100)
    assert r == Resolution(SEMI, S.SPEC)


def test_owner_label_wins_over_pod_label_and_threshold() -> None:
    r = resolve(None, [label("non-preemptible")], label("preemptible"), 0, 100)
    assert r == Resolution(NP, S.OWNER_LABEL)


def test_nearest_owner_first() -> None:
    r = resolve(owners=[label("preemptible"), label("non-preemptible")])
    assert r == Resolution(P, S.OWNER_LABEL)


def test_owner_without_label_defers_to_the_next_owner() -> None:
    r = resolve(owners=[{"app": "x"}, {}, label("semi-preemptible")])
    assert r == Resolution(SEMI, S.OWNER_LABEL)


def test_pod_label_wins_over_threshold() -> None:
    r = resolve(owners=[{"app": "x"}], pod=label("preemptible"), priority=500, threshold=100)
    assert r == Resolution(P, S.POD_LABEL)


@pytest.mark.parametrize(
    ("priority", "expected"), [(-5, P), (99, P), (100, NP), (125, NP)], ids=str
)
def test_priority_threshold(priority: int, expected: Preemptibility) -> None:
    assert resolve(pod={}, priority=priority, threshold=100) == Resolution(
        expected, S.PRIORITY_THRESHOLD
    )


def test_default_is_preemptible_whatever_the_priority() -> None:
    assert resolve(priority=1_000_000) == Resolution(P, S.DEFAULT)
    assert resolve(owners=[{}], pod={}, priority=-1) == Resolution(P, S.DEFAULT)


def test_empty_string_means_unset_without_a_problem() -> None:
    r = resolve("", [label("")], label(""), 0, None)
    assert r == Resolution(P, S.DEFAULT, ())


# --- invalid values fall through and are reported ---------------------------------------


def test_invalid_spec_falls_through_to_owner_label() -> None:
    r = resolve("never", [label("non-preemptible")])
    assert (r.value, r.source) == (NP, S.OWNER_LABEL)
    assert len(r.problems) == 1
    assert "spec.preemptibility" in r.problems[0] and "'never'" in r.problems[0]


def test_invalid_owner_label_falls_through_to_next_owner() -> None:
    r = resolve(owners=[label("Preemptible"), label("semi-preemptible")])
    assert (r.value, r.source) == (SEMI, S.OWNER_LABEL)
    assert len(r.problems) == 1
    assert "owner 1" in r.problems[0] and "'Preemptible'" in r.problems[0]
    assert PREEMPTIBILITY_LABEL in r.problems[0]


def test_invalid_owner_labels_fall_through_to_pod_label() -> None:
    r = resolve(owners=[label("x"), label("y")], pod=label("non-preemptible"))
    assert (r.value, r.source) == (NP, S.POD_LABEL)
    assert [("owner 1" in p, "owner 2" in p) for p in r.problems] == [(True, False), (False, True)]


def test_invalid_pod_label_falls_through_to_threshold() -> None:
    r = resolve(pod=label("yes"), priority=50, threshold=100)
    assert (r.value, r.source) == (P, S.PRIORITY_THRESHOLD)
    assert len(r.problems) == 1 and "the pod" in r.problems[0] and "'yes'" in r.problems[0]


def test_invalid_pod_label_falls_through_to_default() -> None:
    r = resolve(pod=label(" preemptible"), priority=500)
    assert (r.value, r.source) == (P, S.DEFAULT)
    assert len(r.problems) == 1


def test_every_invalid_value_on_the_way_is_reported_in_order() -> None:
    r = resolve("a", [label("b")], label("c"), 200, 100)
    assert (r.value, r.source) == (NP, S.PRIORITY_THRESHOLD)
    assert ["'a'" in r.problems[0], "'b'" in r.problems[1], "'c'" in r.problems[2]] == [True] * 3


def test_sources_below_the_deciding_one_are_not_inspected() -> None:
    r = resolve("non-preemptible", [label("bogus")], label("bogus"))
    assert r == Resolution(NP, S.SPEC, ())


def test_problem_message_lists_the_valid_values() -> None:
    (problem,) = resolve("x").problems
    for value in Preemptibility:
        assert value.value in problem


# --- protected pods and borrowing --------------------------------------------------------


@pytest.mark.parametrize(
    ("preemptibility", "count", "min_count", "expected"),
    [
        (NP, 8, None, 8),
        (NP, 8, 2, 8),
        (SEMI, 8, 2, 2),
        (SEMI, 8, None, 8),
        (SEMI, 8, 0, 0),
        (SEMI, 8, 8, 8),
        (SEMI, 3, 5, 3),
        (P, 8, 2, 0),
        (P, 8, None, 0),
        (NP, 0, None, 0),
    ],
)
def test_protected_pods(
    preemptibility: Preemptibility, count: int, min_count: int | None, expected: int
) -> None:
    assert protected_pods(preemptibility, count, min_count) == expected


@pytest.mark.parametrize(("count", "min_count"), [(-1, None), (4, -1)])
def test_protected_pods_rejects_negative_counts(count: int, min_count: int | None) -> None:
    with pytest.raises(ValueError, match="-1"):
        protected_pods(P, count, min_count)


def test_only_non_preemptible_may_not_borrow() -> None:
    assert may_borrow(P)
    assert may_borrow(SEMI)
    assert not may_borrow(NP)


def test_enum_values_match_the_api_strings() -> None:
    assert [p.value for p in Preemptibility] == [
        "preemptible",
        "non-preemptible",
        "semi-preemptible",
    ]
    assert [s.value for s in PreemptibilitySource] == [
        "spec",
        "ownerLabel",
        "podLabel",
        "priorityThreshold",
        "default",
    ]
