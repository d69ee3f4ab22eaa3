"""Kinds that run through their pods (Kueue's Deployment, StatefulSet and LeaderWorkerSet
integrations): what they share, pure.

Such a kind is never suspended. Its webhook marks each pod template of a managed object
(`mark_template`): the queue-name label when it has one (the pod webhook selects on it), the
WorkloadPriorityClass label, `kueue.x-k8s.io/managed`, and the annotation
`kueue.x-k8s.io/pod-suspending-parent: <framework>`, so that every pod its controller
creates is gated and queued by the pod integration. A Deployment's pods are single pods,
each a Workload of its own. A StatefulSet's pods, and each LeaderWorkerSet replica's, are
one Workload made by the kind's integration (`PodParent.workloads`, reconciled by
`parent_workloads.py`); the pods are a *serving* unit of it (`pod-group-serving`: admitted,
never finished), each pod in the pod set its `kueue.x-k8s.io/role-hash` names.

The webhook also refuses what the pod integration could not honour, as Kueue's do
(`queue_update_problems`, `shape_problems`): the queue changed while pods are ready, a
WorkloadPriorityClass added to a running object or removed, and — for the kinds whose
Workload describes the pod template — a change of the template's shape (requests, ports,
node selector, affinity, tolerations, …: Kueue's `SpecShape`) while queued.
"""

from __future__ import annotations

import copy
import json
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

from api.constants import (
    MANAGED_LABEL,
    MAX_EXEC_TIME_LABEL,
    POD_GROUP_SERVING_ANNOTATION,
    POD_SUSPENDING_PARENT_ANNOTATION,
    PRIORITY_CLASS_LABEL,
    QUEUE_NAME_LABEL,
    ROLE_HASH_ANNOTATION,
)
from controller.integrations.framework.admission import ObjectAdmission
from controller.integrations.framework.generic_job import TopologyHints
from controller.integrations.job_update import priority_class_update_problems

__all__ = [
    "ParentAdmission",
    "PodParent",
    "controller_of",
    "mark_template",
    "marked_by",
    "queue_update_problems",
    "shape_problems",
    "spec_shape",
]

_QUEUE_PATH = f"metadata.labels[{QUEUE_NAME_LABEL}]"


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def mark_template(
    template: dict[str, Any],
    obj: Mapping[str, Any],
    framework: str,
    *,
    serving: bool,
    role: str | None = None,
    copy_max_exec_time: bool = False,
) -> None:
    """Mark a pod template of the managed `obj` for the pod integration (in place;
    Kueue's webhooks' `Default`): the object's queue and WorkloadPriorityClass labels,
    `kueue.x-k8s.io/managed`, the parent annotation, and for a serving unit the serving
    annotation and the pod set its pods belong to (`role`)."""
    source = _labels(obj)
    meta = template.setdefault("metadata", {})
    labels = meta.setdefault("labels", {})
    if source.get(QUEUE_NAME_LABEL):  # none: managed without a queue name
        labels[QUEUE_NAME_LABEL] = source[QUEUE_NAME_LABEL]
    labels[MANAGED_LABEL] = "true"
    if source.get(PRIORITY_CLASS_LABEL):
        labels[PRIORITY_CLASS_LABEL] = source[PRIORITY_CLASS_LABEL]
    if copy_max_exec_time and source.get(MAX_EXEC_TIME_LABEL):
        labels[MAX_EXEC_TIME_LABEL] = source[MAX_EXEC_TIME_LABEL]
    annotations = meta.setdefault("annotations", {})
    annotations[POD_SUSPENDING_PARENT_ANNOTATION] = framework
    if serving:
        annotations[POD_GROUP_SERVING_ANNOTATION] = "true"
    if role is not None:
        annotations[ROLE_HASH_ANNOTATION] = role


def marked_by(template: Mapping[str, Any]) -> str | None:
    """The framework that marked a pod template (None: unmarked)."""
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    value = annotations.get(POD_SUSPENDING_PARENT_ANNOTATION)
    return str(value) if value else None


def controller_of(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The object's controller owner reference."""
    owners = (obj.get("metadata") or {}).get("ownerReferences") or ()
    return next((o for o in owners if o.get("controller")), None)


# -- refusals on update ----------------------------------------------------------------------


def _immutable(path: str, value: Any) -> str:
    return f"{path}: Invalid value: {json.dumps(value, sort_keys=True)}: field is immutable"


def queue_update_problems(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Kueue's update rules for the serving kinds: the queue may change only while no pod
    is ready (`status.readyReplicas` 0) and may never be removed; a WorkloadPriorityClass
    may not be added while pods are ready, nor ever removed."""
    problems: list[str] = []
    suspended = not int((old.get("status") or {}).get("readyReplicas") or 0)
    old_queue, new_queue = _labels(old).get(QUEUE_NAME_LABEL), _labels(new).get(QUEUE_NAME_LABEL)
    if (not suspended or not new_queue) and new_queue != old_queue:
        problems.append(_immutable(_QUEUE_PATH, new_queue or ""))
    return problems + priority_class_update_problems(old, new, suspended=suspended)


class _Shape(dict[str, Any]):
    """A map the shape is made of (compared key by key); any other value, a node
    selector or a container's requests, is compared whole, as Kueue's `SpecShape` is."""


def _containers_shape(containers: Any) -> list[_Shape]:
    return [
        _Shape(
            resources=_Shape(requests=(c.get("resources") or {}).get("requests")),
            ports=c.get("ports"),
        )
        for c in containers or ()
    ]


def spec_shape(spec: Mapping[str, Any]) -> dict[str, Any]:
    """What of a pod spec decides its quota and placement (Kueue's `SpecShape`): requests
    and ports of every container, node selector, affinity, tolerations, runtime class,
    priority, topology spread, overhead, resource claims, and pod-level requests when
    set."""
    shape = _Shape(
        {
            "initContainers": _containers_shape(spec.get("initContainers")),
            "containers": _containers_shape(spec.get("containers")),
            "nodeSelector": spec.get("nodeSelector"),
            "affinity": spec.get("affinity"),
            "tolerations": spec.get("tolerations"),
            "runtimeClassName": spec.get("runtimeClassName"),
            "priority": spec.get("priority"),
            "topologySpreadConstraints": spec.get("topologySpreadConstraints"),
            "overhead": spec.get("overhead"),
            "resourceClaims": spec.get("resourceClaims"),
        }
    )
    if spec.get("resources") is not None:
        shape["resources"] = (spec.get("resources") or {}).get("requests")
    return shape


def _shape_problems(new: Any, old: Any, path: str) -> list[str]:
    if isinstance(new, _Shape) and isinstance(old, _Shape):
        return [
            problem
            for key in sorted(new.keys() | old.keys())
            for problem in _shape_problems(new.get(key), old.get(key), f"{path}.{key}")
        ]
    if (
        isinstance(new, list)
        and isinstance(old, list)
        and len(new) == len(old)
        and all(isinstance(item, _Shape) for item in (*new, *old))
    ):
        return [
            problem
            for index, (item_new, item_old) in enumerate(zip(new, old, strict=True))
            for problem in _shape_problems(item_new, item_old, f"{path}[{index}]")
        ]
    return [] if new == old else [_immutable(path, new)]


def shape_problems(
    new: Mapping[str, Any] | None, old: Mapping[str, Any] | None, path: str
) -> list[str]:
    """Kueue's `ValidateImmutablePodGroupPodSpec` on two pod templates at `path`: each
    part of the spec's shape that changed; a template added or removed is itself the
    change."""
    if new is None or old is None:
        return [] if new is old else [_immutable(path, new)]
    return _shape_problems(
        spec_shape(new.get("spec") or {}), spec_shape(old.get("spec") or {}), f"{path}.spec"
    )


# -- the kinds ------------------------------------------------------------------------------


class ParentAdmission(ObjectAdmission, ABC):
    """The webhook of a kind that runs through its pods: its templates marked on creation
    and update, the queue and priority-class rules on update, and `refusals` of its own."""

    operations = ("CREATE", "UPDATE")
    framework: ClassVar[str]
    serving: ClassVar[bool] = True
    """Its pods are one serving unit per Workload (a Deployment's are single pods)."""
    copy_max_exec_time: ClassVar[bool] = False
    """The object's max-exec-time label goes onto its pods (a Deployment's: each pod's
    Workload reads it there)."""

    @abstractmethod
    def templates(self, obj: dict[str, Any]) -> list[tuple[dict[str, Any], str | None]]:
        """The object's pod templates (to change in place) and the pod set (role) each
        one's pods belong to, when it names one."""

    def markers(self, obj: Mapping[str, Any]) -> set[str]:
        """The frameworks that marked the object's templates."""
        found = (marked_by(t) for t, _ in self.templates(copy.deepcopy(dict(obj))))
        return {marker for marker in found if marker is not None}

    def managed_by_another(self, obj: Mapping[str, Any]) -> bool:
        """An object whose templates another framework marked (a LeaderWorkerSet's
        StatefulSets): left to that framework."""
        return bool(self.markers(obj) - {self.framework})

    def default(self, obj: dict[str, Any]) -> None:
        if self.managed_by_another(obj):
            return
        for template, role in self.templates(obj):
            mark_template(
                template,
                obj,
                self.framework,
                serving=self.serving,
                role=role,
                copy_max_exec_time=self.copy_max_exec_time,
            )

    def validate_update(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
        if self.managed_by_another(new):
            return []
        problems = queue_update_problems(old, new)
        if QUEUE_NAME_LABEL in _labels(new):
            problems.extend(self.refusals(old, new))
        return problems

    def refusals(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
        """The kind's own refusals of an update of a queued object."""
        return []


class PodParent(ABC):
    """A kind whose integration makes the Workloads of its pods, on one object (a copy:
    pure). `workloads` says which Workloads the object should have now; the reconciler
    creates the missing ones, deletes the others, and keeps each in step."""

    framework: ClassVar[str]

    def __init__(self, obj: dict[str, Any]) -> None:
        self.obj = obj

    @property
    def spec(self) -> Mapping[str, Any]:
        spec: Mapping[str, Any] = self.obj.get("spec") or {}
        return spec

    @abstractmethod
    def workloads(self) -> dict[str, list[dict[str, Any]]]:
        """The Workloads the object should have: name → pod sets (`name`, `count`,
        `template`), in Kueue's names and counts."""

    def topology_hints(self, pod_set: str) -> TopologyHints:
        """What the kind adds to a pod set's topology request."""
        return TopologyHints()

    def pod_selector(self, workload: str) -> str | None:
        """The label selector of the pods of one of its Workloads (None: its pods cannot
        be told apart); they must be gone before that Workload, scaled away, is deleted."""
        return None

    def priority_class(self) -> str | None:
        """The PriorityClass of the Workloads when no WorkloadPriorityClass label names
        one: the first pod set's `priorityClassName` (Kueue's default)."""
        for pod_sets in self.workloads().values():
            for pod_set in pod_sets:
                name = ((pod_set.get("template") or {}).get("spec") or {}).get("priorityClassName")
                if name:
                    return str(name)
        return None
