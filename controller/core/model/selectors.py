"""Kubernetes label selectors and node-selector requirements, matched against label maps.

Used for a ClusterQueue's `namespaceSelector` (against Namespace labels) and for a
podset's node affinity (against a ResourceFlavor's `nodeLabels`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

__all__ = ["EMPTY_LABELS", "InvalidSelector", "LabelSelector", "Requirement"]

EMPTY_LABELS: Final[Mapping[str, str]] = MappingProxyType({})

_SET_OPERATORS: Final = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})
_NODE_OPERATORS: Final = _SET_OPERATORS | {"Gt", "Lt"}


class InvalidSelector(ValueError):
    """A selector operator or value list Kubernetes would reject; the message names it."""


@dataclass(frozen=True, slots=True)
class Requirement:
    """`{key, operator, values}`: a label-selector or node-selector requirement."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.operator not in _NODE_OPERATORS:
            raise InvalidSelector(
                f"invalid operator {self.operator!r} for key {self.key!r}: "
                f"expected one of {', '.join(sorted(_NODE_OPERATORS))}"
            )
        if self.operator in ("In", "NotIn") and not self.values:
            raise InvalidSelector(f"operator {self.operator} for key {self.key!r} needs values")
        if self.operator in ("Gt", "Lt") and (len(self.values) != 1 or not _is_int(self.values[0])):
            raise InvalidSelector(
                f"operator {self.operator} for key {self.key!r} needs one integer value"
            )

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op == "Exists":
            return self.key in labels
        if op == "DoesNotExist":
            return self.key not in labels
        value = labels.get(self.key)
        if op == "In":
            return value is not None and value in self.values
        if op == "NotIn":
            return value is None or value not in self.values
        if value is None or not _is_int(value):
            return False
        if op == "Gt":
            return int(value) > int(self.values[0])
        return int(value) < int(self.values[0])


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A metav1.LabelSelector; the empty selector matches everything."""

    match_labels: Mapping[str, str] = field(default_factory=lambda: EMPTY_LABELS)
    match_expressions: tuple[Requirement, ...] = ()

    def __post_init__(self) -> None:
        for requirement in self.match_expressions:
            if requirement.operator not in _SET_OPERATORS:
                raise InvalidSelector(
                    f"invalid operator {requirement.operator!r} in a label selector"
                )

    def matches(self, labels: Mapping[str, str]) -> bool:
        for key, value in self.match_labels.items():
            if labels.get(key) != value:
                return False
        return all(req.matches(labels) for req in self.match_expressions)
