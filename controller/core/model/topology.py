"""Topology-aware scheduling's objects as the engine sees them: a Topology (its levels'
node labels, widest first), a pod set's topology request, and a node (labels, allocatable
capacity in milli-units, whether it takes pods, its taints)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # flavors import workloads, which import this module
    from controller.core.model.flavors import Taint

__all__ = ["Node", "Topology", "TopologyRequest", "is_tas_pod"]


@dataclass(frozen=True, slots=True)
class Topology:
    name: str
    levels: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TopologyRequest:
    """A pod set's `topologyRequest` (at most one of required, preferred, unconstrained):
    its pods must (`required`) or should (`preferred`) share one domain of that level;
    slices of `slice_size` pods each share one domain of `slice_level`, and within them
    the `inner_slices` layers ((level, size), each at a lower level and dividing the size
    above; Kueue's multi-layer `podsetSliceRequiredTopologyConstraints`); pod sets of one
    `group` are placed together."""

    required: str | None = None
    preferred: str | None = None
    unconstrained: bool = False
    slice_level: str | None = None
    slice_size: int | None = None
    group: str | None = None
    inner_slices: tuple[tuple[str, int], ...] = ()

    @property
    def explicit(self) -> bool:
        """Whether it asks for a topology (Kueue's `IsExplicitlyRequestingTAS`)."""
        return (
            self.required is not None
            or self.preferred is not None
            or self.unconstrained
            or self.slice_level is not None
        )


@dataclass(frozen=True, slots=True)
class Node:
    """A node as the TAS view reads it (milli-units)."""

    name: str
    labels: Mapping[str, str]
    allocatable: Mapping[str, int]
    ready: bool = True
    unschedulable: bool = False
    taints: tuple[Taint, ...] = field(default=())
    # When a node that is not ready became so (its Ready condition's lastTransitionTime,
    # seconds since the epoch); None when ready, or when it has no Ready condition or no
    # time (Kueue treats a node without a Ready condition as failed at once).
    not_ready_since: float | None = None


_TAS_POD_ANNOTATIONS = (
    "kueue.x-k8s.io/podset-required-topology",
    "kueue.x-k8s.io/podset-preferred-topology",
    "kueue.x-k8s.io/podset-unconstrained-topology",
    "kueue.x-k8s.io/podset-slice-required-topology",
    "kueue.x-k8s.io/podset-slice-required-topology-constraints",
)


def is_tas_pod(pod: Mapping[str, Any]) -> bool:
    """Whether a pod is placed by topology-aware scheduling (Kueue's `IsTAS`: its
    template asked for a topology), so that its usage is the admission's, not the node's."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    return any(key in annotations for key in _TAS_POD_ANNOTATIONS)
