"""Label selectors (controller/core/model/selectors.py)."""

from __future__ import annotations

import pytest

from controller.core.model.selectors import InvalidSelector, LabelSelector, Requirement


@pytest.mark.parametrize(
    ("requirement", "labels", "expected"),
    [
        (Requirement("a", "In", ("x", "y")), {"a": "y"}, True),
        (Requirement("a", "In", ("x",)), {}, False),
        (Requirement("a", "NotIn", ("x",)), {}, True),
        (Requirement("a", "NotIn", ("x",)), {"a": "x"}, False),
        (Requirement("a", "Exists"), {"a": ""}, True),
        (Requirement("a", "DoesNotExist"), {"a": ""}, False),
        (Requirement("n", "Gt", ("3",)), {"n": "4"}, True),
        (Requirement("n", "Lt", ("3",)), {"n": "x"}, False),
    ],
)
def test_requirements(requirement: Requirement, labels: dict[str, str], expected: bool) -> None:
    assert requirement.matches(labels) is expected


def test_empty_selector_matches_everything_and_labels_are_anded() -> None:
    assert LabelSelector().matches({})
    selector = LabelSelector({"team": "a"}, (Requirement("env", "Exists"),))
    assert selector.matches({"team": "a", "env": "dev"})
    assert not selector.matches({"team": "a"})


def test_invalid_operators_are_rejected_with_the_value() -> None:
    with pytest.raises(InvalidSelector, match="Near"):
        Requirement("a", "Near")
    with pytest.raises(InvalidSelector, match="Gt"):
        LabelSelector(match_expressions=(Requirement("a", "Gt", ("1",)),))
    with pytest.raises(InvalidSelector, match="needs values"):
        Requirement("a", "In")
