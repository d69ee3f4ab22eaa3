"""Reading decoded JSON (an API object as a dict) without trusting its shape: a field of
the wrong type reads as absent, so a rule never fails on what the schema already refuses."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["mapping", "mappings"]


def mapping(value: Any) -> Mapping[str, Any]:
    """`value` if it is an object, else an empty one."""
    return value if isinstance(value, Mapping) else {}


def mappings(value: Any) -> list[Mapping[str, Any]]:
    """The objects of a list (nothing if `value` is not a list)."""
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, Mapping)]
