"""Topology rules: the CRD rules of Kueue's `apis/kueue/v1beta2/topology_types.go` (Kueue has
no Topology webhook; its schema holds every rule): levels unique, `kubernetes.io/hostname`
only as the lowest level, levels kept unless the hostname level is the lowest before and
after the change."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from api.constants import HOSTNAME_LABEL
from api.topology import LEVELS_HOSTNAME_LOWEST, LEVELS_IMMUTABLE, LEVELS_UNIQUE
from api.validation.field_errors import FieldError, Path, rule_failed

__all__ = ["validate_topology", "validate_topology_update"]

_LEVELS: Final = Path("spec").child("levels")


def _levels(obj: Mapping[str, Any]) -> list[Any]:
    spec = obj.get("spec")
    levels = spec.get("levels") if isinstance(spec, Mapping) else None
    return levels if isinstance(levels, list) else []


def _labels(levels: list[Any]) -> list[Any]:
    return [level.get("nodeLabel") if isinstance(level, Mapping) else level for level in levels]


def validate_topology(obj: Mapping[str, Any]) -> list[FieldError]:
    """The levels' rules on one Topology (unique; the hostname label only last)."""
    labels = _labels(_levels(obj))
    errors: list[FieldError] = []
    if len(set(map(repr, labels))) != len(labels):
        errors.append(rule_failed(_LEVELS, LEVELS_UNIQUE, "cel:levels-unique"))
    if HOSTNAME_LABEL in labels and labels[-1] != HOSTNAME_LABEL:
        errors.append(rule_failed(_LEVELS, LEVELS_HOSTNAME_LOWEST, "cel:hostname-lowest"))
    return errors


def validate_topology_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[FieldError]:
    """The new Topology, and its levels changed only between two lists that both end at the
    hostname level (the API server checks the transition rule first)."""
    before, after = _labels(_levels(old)), _labels(_levels(new))
    errors = validate_topology(new)
    changed = before != after
    both_hostname = bool(before) and bool(after) and before[-1] == after[-1] == HOSTNAME_LABEL
    if changed and not both_hostname:
        errors.insert(0, rule_failed(_LEVELS, LEVELS_IMMUTABLE, "cel:levels-immutable"))
    return errors
