"""Kueue's admission fair sharing: the settings (the configuration's `admissionFairSharing`)
and the arithmetic of a LocalQueue's recent usage (Kueue's
`pkg/util/admissionfairsharing`).

In a ClusterQueue with `spec.admissionScope.admissionMode: UsageBasedAdmissionFairSharing`
the Workloads of its LocalQueues are ordered by their LocalQueue's recent usage (decayed
with `usageHalfLifeTime`, sampled every `usageSamplingInterval`, resources weighted by
`resourceWeights`, divided by the LocalQueue's `spec.fairSharing.weight`): the least-used
LocalQueue's Workloads go first.

Recent usage is a ranking heuristic, not quota: it is kept in floats (Kueue converts it
to float64 too), in whole units per resource name (cores, bytes, pods), summed over
flavors. Quota itself stays exact integers elsewhere.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction

__all__ = [
    "AdmissionFairSharing",
    "ResourceAmounts",
    "alpha_rate",
    "decayed",
    "resource_totals",
    "weighted_usage",
]

ResourceAmounts = Mapping[str, float]
"""Per resource name, an amount in whole units (a float: a ranking heuristic)."""


@dataclass(frozen=True, slots=True)
class AdmissionFairSharing:
    """Admission fair sharing is on (`ClusterState.admission_fair_sharing` is None when off)."""

    usage_half_life_seconds: float = 0.0
    """Time after which consumed usage has decayed by half; 0 resets it at every sample."""
    usage_sampling_interval_seconds: float = 300.0
    """How often a LocalQueue's consumed usage is folded in (Kueue's default: 5 minutes)."""
    resource_weights: Mapping[str, float] = field(default_factory=dict)
    """Per resource name, its weight in a LocalQueue's usage (unlisted: 1)."""

    def entry_penalty(self, requests: ResourceAmounts) -> dict[str, float]:
        """What admitting `requests` adds to its LocalQueue's usage until the admission is
        seen back (Kueue's `CalculateEntryPenalty`): the share of it one sample would fold
        in, so two Workloads of one LocalQueue admitted between samples do not both find
        it as idle as before."""
        alpha = alpha_rate(self.usage_sampling_interval_seconds, self.usage_half_life_seconds)
        return {name: value * alpha for name, value in requests.items()}


def alpha_rate(elapsed: float, half_life: float) -> float:
    """The weight of the newest sample after `elapsed` seconds: 1 − 0.5^(elapsed/half-life),
    0 when the half-life is 0 (Kueue's `calculateAlphaRate`)."""
    if half_life == 0:
        return 0.0
    return 1.0 - math.pow(0.5, elapsed / half_life)


def decayed(
    old: ResourceAmounts, new: ResourceAmounts, elapsed: float, half_life: float
) -> dict[str, float]:
    """Consumed usage after `elapsed` seconds during which `new` was in use:
    old × (1 − α) + new × α (Kueue's `CalculateDecayedConsumed`). Every resource of either
    side is kept, at 0 if need be: a resource once listed stays listed."""
    alpha = alpha_rate(elapsed, half_life)
    return {
        name: old.get(name, 0.0) * (1.0 - alpha) + new.get(name, 0.0) * alpha
        for name in {*old, *new}
    }


def weighted_usage(
    consumed: ResourceAmounts,
    penalty: ResourceAmounts,
    weight: Fraction,
    resource_weights: Mapping[str, float],
) -> float:
    """A LocalQueue's usage: Σ over resources of the resource's weight × (consumed +
    pending penalty), divided by the LocalQueue's weight; +inf for a weight of 0, so such
    a LocalQueue always goes last (Kueue's `CalculateUsage`). Resources are summed in name
    order, so equal inputs give bit-equal results."""
    total = 0.0
    for name in sorted({*consumed, *penalty}):
        value = consumed.get(name, 0.0) + penalty.get(name, 0.0)
        total += resource_weights.get(name, 1.0) * value
    if weight <= 0:
        return math.inf
    return total / float(weight)


def resource_totals(usage: Iterable[tuple[tuple[str, str], int]]) -> dict[str, float]:
    """Usage per (flavor, resource) in milli-units → whole units per resource name (Kueue
    flattens flavors the same way)."""
    milli: dict[str, int] = {}
    for (_, resource), value in usage:
        milli[resource] = milli.get(resource, 0) + value
    return {name: value / 1000 for name, value in milli.items()}
