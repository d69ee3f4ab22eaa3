"""Kueue's admission fair sharing: the settings (the configuration's `admissionFairSharing`).

In a ClusterQueue with `spec.admissionScope.admissionMode: UsageBasedAdmissionFairSharing`
the Workloads of its LocalQueues are ordered by their LocalQueue's recent usage (decayed
with `usageHalfLifeTime`, sampled every `usageSamplingInterval`, resources weighted by
`resourceWeights`, divided by the LocalQueue's `spec.fairSharing.weight`): the least-used
LocalQueue's Workloads go first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["AdmissionFairSharing"]


@dataclass(frozen=True, slots=True)
class AdmissionFairSharing:
    """Admission fair sharing is on (`ClusterState.admission_fair_sharing` is None when off)."""

    usage_half_life_seconds: float = 0.0
    """Time after which consumed usage has decayed by half; 0 resets it at every sample."""
    usage_sampling_interval_seconds: float = 300.0
    """How often a LocalQueue's consumed usage is folded in (Kueue's default: 5 minutes)."""
    resource_weights: Mapping[str, float] = field(default_factory=dict)
    """Per resource name, its weight in a LocalQueue's usage (unlisted: 1)."""
