"""ResourceFlavors and whether a podset may use one (digest §1.4).

A flavor matches a podset iff every NoSchedule/NoExecute taint of the flavor is tolerated
by the podset's tolerations or the flavor's own, and the podset's nodeSelector and
required node affinity, restricted to the keys the flavor's nodeLabels define, match
those labels.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from controller.core.model.selectors import EMPTY_LABELS
from controller.core.model.workloads import PodSet, Toleration

__all__ = ["ResourceFlavor", "Taint", "mismatch_reason", "topology_mismatch"]

_EVALUATED_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass(frozen=True, slots=True)
class ResourceFlavor:
    name: str
    node_labels: Mapping[str, str] = field(default_factory=lambda: EMPTY_LABELS)
    node_taints: tuple[Taint, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    # The Topology its nodes are placed in (topology-aware scheduling); None: none.
    topology_name: str | None = None
    # What Kueue's rules find wrong with it, or None: the ClusterQueues that name an invalid
    # flavor are inactive (reason Invalid); its labels and tolerations never reach a pod.
    invalid: str | None = None


def _untolerated(flavor: ResourceFlavor, pod_set: PodSet) -> Taint | None:
    for taint in flavor.node_taints:
        if taint.effect not in _EVALUATED_EFFECTS:
            continue
        tolerations = (*pod_set.tolerations, *flavor.tolerations)
        if not any(t.tolerates(taint.key, taint.value, taint.effect) for t in tolerations):
            return taint
    return None


def _selector_mismatch(flavor: ResourceFlavor, pod_set: PodSet) -> str | None:
    labels = flavor.node_labels
    for key, value in pod_set.node_selector.items():
        if key in labels and labels[key] != value:
            return f"nodeSelector {key}={value} does not match flavor label {key}={labels[key]}"
    if not pod_set.affinity_terms:
        return None
    for term in pod_set.affinity_terms:
        relevant = [req for req in term if req.key in labels]
        if all(req.matches(labels) for req in relevant):
            return None  # a term that keeps no expression matches anything
    return "required node affinity does not match the flavor's node labels"


def mismatch_reason(flavor: ResourceFlavor, pod_set: PodSet) -> str | None:
    """Why `pod_set` cannot use `flavor`, or None when it can."""
    taint = _untolerated(flavor, pod_set)
    if taint is not None:
        shown = (
            f"{taint.key}={taint.value}:{taint.effect}"
            if taint.value
            else f"{taint.key}:{taint.effect}"
        )
        return f"flavor {flavor.name} has untolerated taint {shown}"
    selector = _selector_mismatch(flavor, pod_set)
    if selector is not None:
        return f"flavor {flavor.name}: {selector}"
    return None


def topology_mismatch(
    flavor: ResourceFlavor, pod_set: PodSet, tas_only_queue: bool, covered: frozenset[str]
) -> str | None:
    """Why a flavor cannot serve a pod set under topology-aware scheduling (Kueue's
    `checkPodSetAndFlavorMatchForTAS`), or None: a pod set asking for a topology needs a
    flavor with one (unless the flavor covers none of its resources); a pod set asking for
    none may not use a TAS flavor, except in a ClusterQueue whose flavors all have one
    (`tas_only_queue`: the topology is then implied)."""
    requested = pod_set.topology is not None and pod_set.topology.explicit
    if flavor.topology_name is None:
        if requested and any(resource in covered for resource in pod_set.requests):
            return f'Flavor "{flavor.name}" does not support TopologyAwareScheduling'
        return None
    if requested or tas_only_queue:
        return None
    return f'Flavor "{flavor.name}" supports only TopologyAwareScheduling'
