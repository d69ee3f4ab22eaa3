"""A topology assignment in v1beta2's compressed form
(`status.admission.podSetAssignments[].topologyAssignment`): one slice of every domain, each
level's values either one `universal` value or `individual` roots with their common prefix
and suffix cut off, the pod counts `universal` when all equal. Kueue may also split the
domains into several slices by hostname prefix when that is shorter; both forms are valid
v1beta2 and read back the same (`decode`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from controller.core.tas.assignment import Assignment

__all__ = ["decode", "describe", "encode"]


def _common_prefix(values: Sequence[str]) -> str:
    first = values[0]
    for i, ch in enumerate(first):
        if any(len(v) <= i or v[i] != ch for v in values):
            return first[:i]
    return first


def _level_values(values: Sequence[str]) -> dict[str, Any]:
    prefix = _common_prefix(values)
    longest = max(len(v) for v in values)
    if len(prefix) == longest:
        return {"universal": prefix}
    suffix = _common_prefix([v[::-1] for v in values])[::-1]
    shortest = min(len(v) for v in values)
    if len(prefix) + len(suffix) > shortest:
        prefix = prefix[: shortest - len(suffix)]
    individual: dict[str, Any] = {}
    if prefix:
        individual["prefix"] = prefix
    if suffix:
        individual["suffix"] = suffix
    individual["roots"] = [v[len(prefix) : len(v) - len(suffix)] for v in values]
    return {"individual": individual}


def encode(assignment: Assignment) -> dict[str, Any]:
    """The v1beta2 `topologyAssignment` of `assignment` (one slice)."""
    out: dict[str, Any] = {"levels": list(assignment.levels), "slices": []}
    if not assignment.domains:
        return out
    counts = [count for _, count in assignment.domains]
    pod_counts: dict[str, Any] = (
        {"universal": counts[0]} if len(set(counts)) == 1 else {"individual": counts}
    )
    out["slices"].append(
        {
            "domainCount": len(counts),
            "podCounts": pod_counts,
            "valuesPerLevel": [
                _level_values([values[i] for values, _ in assignment.domains])
                for i in range(len(assignment.levels))
            ],
        }
    )
    return out


def _values(level: Mapping[str, Any], n: int) -> Iterable[str]:
    if level.get("universal") is not None:
        return [str(level["universal"])] * n
    individual = level.get("individual") or {}
    prefix, suffix = individual.get("prefix") or "", individual.get("suffix") or ""
    return [f"{prefix}{root}{suffix}" for root in individual.get("roots") or ()]


def decode(data: Mapping[str, Any]) -> Assignment:
    """An assignment read back from its v1beta2 form (any number of slices)."""
    levels = tuple(str(level) for level in data.get("levels") or ())
    domains: list[tuple[tuple[str, ...], int]] = []
    for piece in data.get("slices") or ():
        n = int(piece.get("domainCount") or 0)
        counts_field = piece.get("podCounts") or {}
        if counts_field.get("universal") is not None:
            counts = [int(counts_field["universal"])] * n
        else:
            counts = [int(c) for c in counts_field.get("individual") or ()]
        columns = [list(_values(level, n)) for level in piece.get("valuesPerLevel") or ()]
        for i in range(n):
            domains.append((tuple(column[i] for column in columns), counts[i]))
    return Assignment(levels, tuple(domains))


def describe(data: Mapping[str, Any]) -> str:
    """A topologyAssignment in one line, for people: each domain's values (joined by `/`)
    and its pod count, e.g. `kubernetes.io/hostname: h1×3, h2×1`."""
    assignment = decode(data)
    domains = ", ".join(f"{'/'.join(values)}×{count}" for values, count in assignment.domains)
    return f"{'/'.join(assignment.levels)}: {domains}"
