"""Explicit Cohort objects (Kueue's `Cohort` kind): a parent and quota of their own.

A ClusterQueue's `cohortName` names a cohort; a `Cohort` object of that name makes it
explicit and may put it in a tree (`spec.parentName`) with quota of its own
(`spec.resourceGroups`); the arithmetic is `cohorts.QuotaTree`'s. A cycle of parents
makes every ClusterQueue of the trees it touches inactive (`unsupported_cohort`), as
Kueue does.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from controller.core.model.clusterqueues import (
    DEFAULT_WEIGHT,
    FlavorResource,
    ResourceGroup,
    ResourceQuota,
)

__all__ = ["Cohort", "invalid_cohort", "parent_cycle", "unsupported_cohort"]


@dataclass(frozen=True, slots=True)
class Cohort:
    """The parts of a Cohort object the engine judges."""

    name: str
    parent: str | None = None
    """`spec.parentName` (None: a root)."""
    resource_groups: tuple[ResourceGroup, ...] = ()
    """`spec.resourceGroups`: quota of its own, and limits towards the parent."""
    fair_weight: Fraction = DEFAULT_WEIGHT
    """`spec.fairSharing.weight` (exact), used with fair sharing."""
    invalid: str | None = None
    """What Kueue's rules find wrong with it, or None: the ClusterQueues of the trees an
    invalid Cohort is in are inactive (reason Invalid), as for a cycle."""

    @property
    def has_quota(self) -> bool:
        return bool(self.resource_groups)

    def quotas(self) -> dict[FlavorResource, ResourceQuota]:
        return {
            (flavor.name, resource): quota
            for group in self.resource_groups
            for flavor in group.flavors
            for resource, quota in flavor.resources.items()
        }


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
    """Why the quota of the cohort `name` cannot be computed (a message naming the Cohort
    and the cycle), or None. As in Kueue, the ClusterQueues of a cohort whose chain of
    parents has a cycle admit nothing."""
    cycle = parent_cycle(cohorts, name)
    if cycle is None:
        return None
    return f"Cohort {name} is in a tree with a cycle ({' -> '.join(cycle)})"


def invalid_cohort(cohorts: Mapping[str, Cohort], name: str) -> str | None:
    """The first invalid Cohort on the chain of parents from `name` (a message naming it
    and what is wrong), or None. A ClusterQueue under an invalid Cohort admits nothing:
    the quota it would borrow from or lend to is not what its owner wrote."""
    seen: set[str] = set()
    current: str | None = name
    while current is not None and current not in seen:
        seen.add(current)
        cohort = cohorts.get(current)
        if cohort is None:
            return None
        if cohort.invalid is not None:
            return f"Cohort {current} is invalid: {cohort.invalid}"
        current = cohort.parent
    return None
