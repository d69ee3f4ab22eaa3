"""What an admission puts into a pod set's pod template, and how eviction takes it out
(pure; Kueue's `pkg/podset`).

`PodSetInfo` is the admitted shape of one pod set: its count, the node selector and
tolerations of the flavors it was assigned, and the labels and annotations that go with
them (the pod set's name as `kueue.x-k8s.io/podset`). `merge` adds it to a pod template, as
Kueue's `podset.Merge` does: a key the template already has with another value is a
conflict, and the job cannot start (`PodSetInfoError`). `restore` puts back the template
the Workload was made from (`from_pod_set`), as `podset.RestorePodSpec` does.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from api.constants import (
    POD_SET_LABEL,
    POD_SET_UNCONSTRAINED_TOPOLOGY_ANNOTATION,
    TOPOLOGY_SCHEDULING_GATE,
    WORKLOAD_ANNOTATION,
)

__all__ = [
    "FlavorPlacement",
    "PodSetInfo",
    "PodSetInfoError",
    "from_admission",
    "from_assignment",
    "from_pod_set",
    "implicit_topology_annotations",
    "merge",
    "restore",
]


class PodSetInfoError(ValueError):
    """The admission cannot be put into the job (Kueue's permanent `ErrInvalidPodsetInfo`
    and `ErrInvalidPodSetUpdate`): the Workload is finished as failed to start."""


@dataclass(frozen=True, slots=True)
class FlavorPlacement:
    """A ResourceFlavor's node labels and tolerations, as a pod spec writes them."""

    node_labels: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()


@dataclass(slots=True)
class PodSetInfo:
    """One pod set's admitted (or original) scheduling shape."""

    name: str
    count: int
    annotations: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: list[dict[str, Any]] = field(default_factory=list)
    scheduling_gates: list[dict[str, Any]] = field(default_factory=list)


def from_admission(
    workload: Mapping[str, Any], placement: Callable[[str], FlavorPlacement | None]
) -> list[PodSetInfo]:
    """Per pod set of an admitted Workload, in `status.admission.podSetAssignments` order:
    the admitted count (the pod set's count when the assignment omits it), the node
    labels and tolerations of its flavors (each flavor once, as Kueue's `FromAssignment`),
    the pod set label, the Workload's name as `kueue.x-k8s.io/workload` (on every pod
    set's pods, as Kueue's `getPodSetsInfoFromStatus` while TopologyAwareScheduling is on:
    here it always is), and for a pod set with a topology assignment the topology gate. A
    flavor that no longer exists adds nothing."""
    pod_sets = {str(ps.get("name")): ps for ps in (workload.get("spec") or {}).get("podSets") or ()}
    admission = (workload.get("status") or {}).get("admission") or {}
    infos = []
    for assignment in admission.get("podSetAssignments") or ():
        name = str(assignment.get("name"))
        info = from_assignment(pod_sets.get(name) or {}, assignment, placement)
        info.labels[POD_SET_LABEL] = name
        # named after their Workload: the ungater releases each into its domain
        info.annotations[WORKLOAD_ANNOTATION] = str((workload.get("metadata") or {}).get("name"))
        _apply_check_updates(info, workload)
        infos.append(info)
    return infos


def from_assignment(
    pod_set: Mapping[str, Any],
    assignment: Mapping[str, Any],
    placement: Callable[[str], FlavorPlacement | None],
) -> PodSetInfo:
    """One pod set's assignment as Kueue's `podset.FromAssignment` reads it: the admitted
    count (the pod set's when the assignment omits it), the node labels and tolerations of
    its flavors (each flavor once; one that no longer exists adds nothing), and for a
    topology assignment the topology gate (a pod set placed without asking, in a TAS-only
    ClusterQueue, marked unconstrained)."""
    count = assignment.get("count")
    info = PodSetInfo(
        str(assignment.get("name")),
        int(count if count is not None else pod_set.get("count", 1)),
        labels={},
    )
    seen: set[str] = set()
    for flavor in (assignment.get("flavors") or {}).values():
        if flavor in seen:
            continue
        seen.add(flavor)
        found = placement(str(flavor))
        if found is None:
            continue
        info.node_selector.update(found.node_labels)
        info.tolerations.extend(dict(t) for t in found.tolerations)
    if assignment.get("topologyAssignment"):
        info.scheduling_gates.append({"name": TOPOLOGY_SCHEDULING_GATE})
        info.annotations.update(implicit_topology_annotations(pod_set))
    return info


def implicit_topology_annotations(pod_set: Mapping[str, Any]) -> dict[str, str]:
    """What a pod set placed by topology adds to its pods' annotations (Kueue's
    `FromAssignment`): `kueue.x-k8s.io/podset-unconstrained-topology: "true"` when its
    `topologyRequest` asks for no topology (placed as unconstrained by a ClusterQueue whose
    flavors all have one), so that its pods count as TAS pods; nothing otherwise."""
    request = pod_set.get("topologyRequest") or {}
    keys = ("required", "preferred", "unconstrained")
    if any(request.get(k) is not None for k in keys):
        return {}
    return {POD_SET_UNCONSTRAINED_TOPOLOGY_ANNOTATION: "true"}


def with_check_updates(
    workload: Mapping[str, Any],
    pod_set: str,
    node_labels: Mapping[str, str],
    tolerations: Iterable[Mapping[str, Any]],
) -> PodSetInfo:
    """A pod set's flavor placement (`node_labels`, `tolerations`) with the admission
    checks' podSetUpdates merged in, for pods ungated one by one
    (controller/integrations/pods.py); a conflict raises `PodSetInfoError`."""
    info = PodSetInfo(
        pod_set, 1, node_selector=dict(node_labels), tolerations=[dict(t) for t in tolerations]
    )
    _apply_check_updates(info, workload)
    return info


def _apply_check_updates(info: PodSetInfo, workload: Mapping[str, Any]) -> None:
    """Merge the admission checks' `podSetUpdates` for this pod set (Kueue's
    `getPodSetsInfoFromStatus`): labels, annotations and node selectors key by key — a
    different value for a key already there refuses the start (`PodSetInfoError`, Kueue's
    `ErrInvalidPodSetUpdate`) — and tolerations not already present."""
    for check in (workload.get("status") or {}).get("admissionChecks") or ():
        for update in check.get("podSetUpdates") or ():
            if update.get("name") != info.name:
                continue
            for what, current, extra in (
                ("annotations", info.annotations, update.get("annotations") or {}),
                ("labels", info.labels, update.get("labels") or {}),
                ("nodeSelector", info.node_selector, update.get("nodeSelector") or {}),
            ):
                for key, value in extra.items():
                    if key in current and current[key] != value:
                        raise PodSetInfoError(
                            f"in admission check {check.get('name')!r}: invalid admission "
                            f"check PodSetUpdate: conflict for {what}: {key} is "
                            f"{current[key]!r}, the update sets {value!r}"
                        )
                    current[key] = value
            for toleration in update.get("tolerations") or ():
                if toleration not in info.tolerations:
                    info.tolerations.append(dict(toleration))
            break


def from_pod_set(pod_set: Mapping[str, Any]) -> PodSetInfo:
    """The shape a Workload's pod set was made with (Kueue's `FromPodSet`): what eviction
    restores."""
    template = pod_set.get("template") or {}
    meta = template.get("metadata") or {}
    spec = template.get("spec") or {}
    return PodSetInfo(
        str(pod_set.get("name")),
        int(pod_set.get("count", 1)),
        dict(meta.get("annotations") or {}),
        dict(meta.get("labels") or {}),
        dict(spec.get("nodeSelector") or {}),
        copy.deepcopy(list(spec.get("tolerations") or ())),
        copy.deepcopy(list(spec.get("schedulingGates") or ())),
    )


def _merge_map(into: dict[str, Any], key: str, extra: Mapping[str, str], what: str) -> None:
    current = dict(into.get(key) or {})
    for name, value in extra.items():
        if name in current and current[name] != value:
            raise PodSetInfoError(
                f"conflict for {what}: {name} is {current[name]!r} in the pod template, "
                f"{value!r} in the admission"
            )
        current[name] = value
    if current:
        into[key] = current


def merge(template: dict[str, Any], info: PodSetInfo) -> None:
    """Add `info` to a pod template in place (Kueue's `podset.Merge`): labels,
    annotations and node selector key by key (a different value for a key already there is
    a `PodSetInfoError`), tolerations and scheduling gates not already present."""
    meta = template.setdefault("metadata", {})
    spec = template.setdefault("spec", {})
    _merge_map(meta, "annotations", info.annotations, "annotations")
    _merge_map(meta, "labels", info.labels, "labels")
    _merge_map(spec, "nodeSelector", info.node_selector, "nodeSelector")
    for key, extra in (
        ("tolerations", info.tolerations),
        ("schedulingGates", info.scheduling_gates),
    ):
        current = list(spec.get(key) or ())
        current.extend(copy.deepcopy(item) for item in extra if item not in current)
        if current:
            spec[key] = current


def _set(into: dict[str, Any], key: str, value: Any) -> bool:
    """Set `into[key]` to `value` (an empty value removes the key); whether it changed."""
    before = into.get(key) or type(value)()
    if before == value:
        return False
    if value:
        into[key] = copy.deepcopy(value)
    else:
        into.pop(key, None)
    return True


def restore(template: dict[str, Any], info: PodSetInfo) -> bool:
    """Put a pod template's labels, annotations, node selector, tolerations and scheduling
    gates back to `info` (Kueue's `podset.RestorePodSpec`); whether anything changed. An
    empty map or list is left out, as the API server leaves it out."""
    meta = template.get("metadata") or {}
    spec = template.get("spec") or {}
    changed = _set(meta, "annotations", info.annotations)
    changed = _set(meta, "labels", info.labels) or changed
    changed = _set(spec, "nodeSelector", info.node_selector) or changed
    changed = _set(spec, "tolerations", info.tolerations) or changed
    changed = _set(spec, "schedulingGates", info.scheduling_gates) or changed
    if changed:
        for key, part in (("metadata", meta), ("spec", spec)):
            if part or key in template:
                template[key] = part
    return changed
