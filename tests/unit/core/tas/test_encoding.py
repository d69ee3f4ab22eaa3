"""v1beta2's compressed topology assignment: the cases of Kueue's `bothWaysTestCases`
(pkg/util/tas/tas_assignment_test.go), written again, read back the same; any assignment
survives the round trip and fits Kueue's schema."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from api.topology import TopologyAssignment
from controller.core.tas.assignment import Assignment
from controller.core.tas.encoding import decode, encode

CASES: list[tuple[str, Assignment, dict[str, Any]]] = [
    ("empty", Assignment(("a", "b"), ()), {"levels": ["a", "b"], "slices": []}),
    (
        "one domain",
        Assignment(("a", "b"), ((("a1", "b1"), 1),)),
        {
            "levels": ["a", "b"],
            "slices": [
                {
                    "domainCount": 1,
                    "podCounts": {"universal": 1},
                    "valuesPerLevel": [{"universal": "a1"}, {"universal": "b1"}],
                }
            ],
        },
    ),
    (
        "multiple domains, same counts, no common prefix",
        Assignment(("a", "b"), ((("a1", "b1"), 1), (("a2", "b2"), 1))),
        {
            "levels": ["a", "b"],
            "slices": [
                {
                    "domainCount": 2,
                    "podCounts": {"universal": 1},
                    "valuesPerLevel": [
                        {"individual": {"prefix": "a", "roots": ["1", "2"]}},
                        {"individual": {"prefix": "b", "roots": ["1", "2"]}},
                    ],
                }
            ],
        },
    ),
    (
        "multiple domains, different counts, common prefix and suffix",
        Assignment(("a", "b"), ((("p.a1.s", "p.b1.s"), 1), (("p.a2.s", "p.b2.s"), 2))),
        {
            "levels": ["a", "b"],
            "slices": [
                {
                    "domainCount": 2,
                    "podCounts": {"individual": [1, 2]},
                    "valuesPerLevel": [
                        {"individual": {"prefix": "p.a", "suffix": ".s", "roots": ["1", "2"]}},
                        {"individual": {"prefix": "p.b", "suffix": ".s", "roots": ["1", "2"]}},
                    ],
                }
            ],
        },
    ),
    (
        "multiple domains, universal value",
        Assignment(("a", "b"), ((("a1", "x"), 1), (("a1", "y"), 2))),
        {
            "levels": ["a", "b"],
            "slices": [
                {
                    "domainCount": 2,
                    "podCounts": {"individual": [1, 2]},
                    "valuesPerLevel": [
                        {"universal": "a1"},
                        {"individual": {"roots": ["x", "y"]}},
                    ],
                }
            ],
        },
    ),
    (
        "multiple domains, same counts, shrinking prefix",
        Assignment(("a",), ((("a123",), 1), (("a12",), 1), (("a1",), 1), (("a13",), 1))),
        {
            "levels": ["a"],
            "slices": [
                {
                    "domainCount": 4,
                    "podCounts": {"universal": 1},
                    "valuesPerLevel": [
                        {"individual": {"prefix": "a1", "roots": ["23", "2", "", "3"]}}
                    ],
                }
            ],
        },
    ),
]


@pytest.mark.parametrize(("name", "internal", "v1beta2"), CASES, ids=[c[0] for c in CASES])
def test_both_ways(name: str, internal: Assignment, v1beta2: dict[str, Any]) -> None:
    assert encode(internal) == v1beta2
    assert decode(v1beta2) == internal


def test_a_prefix_and_suffix_never_overlap() -> None:
    """ "aba" and "aba"+"ba": the prefix "ab" and suffix "ba" would overlap in the shorter."""
    internal = Assignment(("h",), ((("aba",), 1), (("ababa",), 1)))
    assert decode(encode(internal)) == internal


_VALUE = st.text(alphabet="ab-.1", min_size=1, max_size=8)


@given(
    st.integers(min_value=1, max_value=3).flatmap(
        lambda levels: st.lists(
            st.tuples(st.tuples(*[_VALUE] * levels), st.integers(min_value=1, max_value=5)),
            min_size=1,
            max_size=12,
        )
    )
)
def test_round_trip_and_schema(domains: list[tuple[tuple[str, ...], int]]) -> None:
    levels = tuple(f"l{i}" for i in range(len(domains[0][0])))
    internal = Assignment(levels, tuple(domains))
    encoded = encode(internal)
    assert decode(encoded) == internal
    TopologyAssignment.model_validate(encoded)
    for piece in encoded["slices"]:
        assert len(piece["valuesPerLevel"]) == len(encoded["levels"])
