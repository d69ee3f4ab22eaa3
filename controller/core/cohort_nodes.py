"""Explicit Cohort objects, and what today's flat quota model can compute of them.

A ClusterQueue's `cohortName` names a cohort; a `Cohort` object of that name makes it
explicit. `cohorts.QuotaTree` is flat (one level of cohorts whose members are
ClusterQueues), so an explicit Cohort with no parent, no quota of its own and no children
is exactly the implicit cohort of its name. Anything else is a tree or a pool the flat
model cannot compute: `unsupported_cohort` says which Cohort and field, and the
ClusterQueues of such a cohort stay inactive (controller/core/pending.py) rather than
borrow or lend by the wrong numbers. A fair-sharing weight is only reported
(controller/core/unsupported.py): without a parent a root's weight is compared with no
sibling, so it changes nothing.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["Cohort", "parent_cycle", "unsupported_cohort"]


@dataclass(frozen=True, slots=True)
class Cohort:
    """The parts of a Cohort object the engine judges."""

    name: str
    parent: str | None = None
    """`spec.parentName` (None: a root)."""
    has_quota: bool = False
    """`spec.resourceGroups` is set (a pool of its own, and limits towards the parent)."""


def parent_cycle(cohorts: Mapping[str, Cohort], name: str) -> tuple[str, ...] | None:
    """The cycle in the parent chain that starts at `name` (its names in order, the first
    repeated at the end), or None when the chain ends at a root or a missing Cohort."""
    seen: list[str] = []
    current: str | None = name
    while current is not None:
        if current in seen:
            return (*seen[seen.index(current) :], current)
        seen.append(current)
        cohort = cohorts.get(current)
        current = cohort.parent if cohort is not None else None
    return None


def unsupported_cohort(cohorts: Mapping[str, Cohort], name: str) -> str | None:
    """Why the flat quota model cannot compute the cohort `name` (a message naming the
    Cohort and its field), or None when it is the same as the implicit cohort."""
    cohort = cohorts.get(name)
    if cohort is not None and cohort.parent is not None:
        cycle = parent_cycle(cohorts, name)
        detail = f", a cycle ({' -> '.join(cycle)})" if cycle else ""
        return (
            f"Cohort {name} has spec.parentName {cohort.parent}{detail}: hierarchical "
            "cohorts are not implemented by quotagate yet"
        )
    children = sorted(c.name for c in cohorts.values() if c.parent == name)
    if children:
        return (
            f"Cohort {children[0]} has spec.parentName {name}: hierarchical cohorts are "
            "not implemented by quotagate yet"
        )
    if cohort is not None and cohort.has_quota:
        return (
            f"Cohort {name} has spec.resourceGroups: a Cohort's own quota and limits are "
            "not implemented by quotagate yet"
        )
    return None
