"""Reading decoded JSON (an API object as a dict) without trusting its shape: a field of
the wrong type reads as absent, so a rule never fails on what the schema already refuses."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["mapping", "mappings"]


_EMPTY: dict[str, Any] = {}


def mapping(value: Any) -> Mapping[str, Any]:
    """`value` if it is an object, else an empty one (decoded JSON is a dict: checked
    first, as the rules read thousands of fields a second in the controller)."""
    if type(value) is dict or isinstance(value, Mapping):
        return value
    return _EMPTY


def mappings(value: Any) -> list[Mapping[str, Any]]:
    """The objects of a list (nothing if `value` is not a list)."""
    if type(value) is not list:
        return []
    return [item for item in value if type(item) is dict or isinstance(item, Mapping)]
