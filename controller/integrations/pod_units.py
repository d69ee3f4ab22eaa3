"""The pure logic of the pod integration (`pods.py`): which pods are managed and which
unit each belongs to, a unit's Workload (pod template, owner references, PodGroup
settings), the ungate patch, and what an admitted Workload allows. No I/O."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from api.constants import ADMISSION_GATE as GATE
from api.constants import (
    ADMISSION_GATED_BY_ANNOTATION,
    DEFAULT_POD_SET_NAME,
    GROUP,
    OWNER_PREEMPTIBILITY_ANNOTATION,
    POD_GROUP_NAME_LABEL,
    POD_GROUP_POD_INDEX_LABEL,
    POD_GROUP_SERVING_ANNOTATION,
    POD_GROUP_TOTAL_COUNT_ANNOTATION,
    POD_PREEMPTIBILITY_ANNOTATION,
    POD_SET_LABEL,
    POD_SUSPENDING_PARENT_ANNOTATION,
    PREEMPTIBILITY_LABEL,
    QUEUE_NAME_LABEL,
    ROLE_HASH_ANNOTATION,
    VERSION,
    WORKLOAD_ANNOTATION,
)
from controller.integrations.framework.generic_job import TopologyHints
from controller.integrations.framework.podset_info import implicit_topology_annotations
from controller.integrations.framework.workload_names import api_group, workload_name
from controller.integrations.framework.workloads import topology_request
from controller.integrations.job_labels import admission_gated_by, max_exec_time_seconds
from controller.integrations.job_management import JobManagement

CORE_GROUP = "scheduling.k8s.io"
PARENT = "parent"
"""The unit of pods whose Workload their parent's integration makes and names (a
StatefulSet's, a LeaderWorkerSet replica's): never created by the pod integration."""
_DISRUPTION_MODES = {"single": "Pod", "all": "PodGroup", "Pod": "Pod", "PodGroup": "PodGroup"}


@dataclass(frozen=True)
class Unit:
    """Which Workload a pod belongs to."""

    kind: str  # "pod" | "group" | "podgroup" | PARENT
    namespace: str
    name: str  # the pod's, the group's or the PodGroup's name; a parent's: its Workload's
    uid: str = ""  # a pod's

    @property
    def workload_name(self) -> str:
        """Kueue's names: a pod's `pod-<name>-<hash>` (`workload_names.py`), a pod group's
        the group's name; a parent's the one it names. A core PodGroup's (Kueue has no
        such unit) `podgroup-<name>`."""
        if self.kind in (PARENT, "group"):
            return self.name
        if self.kind == "pod":
            return workload_name("Pod", "", self.name, self.uid)
        return f"{self.kind}-{self.name}"[:253]

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.workload_name}"


def managed(
    pod: Mapping[str, Any],
    management: JobManagement | None = None,
    namespace_labels: Mapping[str, str] | None = None,
    job_kinds: Collection[tuple[str, str]] = (),
) -> bool:
    """A pod the pod integration queues: managed by `management`'s rules (default: the
    queue-labelled ones, in any namespace), not run by a Job (the Job integration queues
    those) nor by an object of an enabled job kind (`job_kinds`: (group, kind)) — unless
    a parent kind marked its template (`kueue.x-k8s.io/pod-suspending-parent`: a
    StatefulSet's, a LeaderWorkerSet's, a Deployment's pods are the pod integration's,
    whatever owns them, as the webhook decides)."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    if management is None:
        if QUEUE_NAME_LABEL not in labels:
            return False
    else:
        namespace = str(meta.get("namespace") or "")
        if not management.decide(labels, namespace, namespace_labels).managed:
            return False
    owners = meta.get("ownerReferences") or []
    if POD_SUSPENDING_PARENT_ANNOTATION not in (meta.get("annotations") or {}):
        for owner in owners:
            group = api_group(str(owner.get("apiVersion", "")))
            if (group, owner.get("kind")) in job_kinds:
                return False
    return not any(
        o.get("kind") == "Job" and str(o.get("apiVersion", "")).startswith("batch/") for o in owners
    )


PodWorkload = Callable[[Mapping[str, Any]], str | None]
"""A parent kind's answer to which of its Workloads a pod of it belongs to (None: not
known yet, e.g. a label its controller has not set)."""


def unit_of(pod: Mapping[str, Any], parents: Mapping[str, PodWorkload] | None = None) -> Unit:
    """The pod's unit. A pod whose template names a parent integration
    (`kueue.x-k8s.io/pod-suspending-parent`) that names its Workload (`parents`, by
    framework name) belongs to that Workload; otherwise its core PodGroup, pod group or
    itself."""
    meta = pod.get("metadata") or {}
    namespace = str(meta.get("namespace") or "")
    parent = (meta.get("annotations") or {}).get(POD_SUSPENDING_PARENT_ANNOTATION)
    resolve = (parents or {}).get(str(parent)) if parent else None
    if resolve is not None:
        # "": its parent has not said yet (the pod waits; it is not a unit of its own).
        return Unit(PARENT, namespace, resolve(pod) or "")
    group = ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
    if group:
        return Unit("podgroup", namespace, str(group))
    label = (meta.get("labels") or {}).get(POD_GROUP_NAME_LABEL)
    if label:
        return Unit("group", namespace, str(label))
    return Unit("pod", namespace, str(meta.get("name") or ""), str(meta.get("uid") or ""))


def terminated(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def gated(pod: Mapping[str, Any]) -> bool:
    return any(g.get("name") == GATE for g in (pod.get("spec") or {}).get("schedulingGates") or ())


def running(pod: Mapping[str, Any]) -> bool:
    """May hold resources on a node: released by us, not terminated, not being deleted."""
    meta = pod.get("metadata") or {}
    return not gated(pod) and not terminated(pod) and not meta.get("deletionTimestamp")


def role_of(pod: Mapping[str, Any]) -> str:
    """The Workload pod set a pod belongs to: its `kueue.x-k8s.io/role-hash` annotation
    (a parent kind's pods: `leader`, `worker`), else `main`."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(ROLE_HASH_ANNOTATION) or DEFAULT_POD_SET_NAME)


def serving(pods: Iterable[Mapping[str, Any]]) -> bool:
    """A serving unit (`kueue.x-k8s.io/pod-group-serving: "true"` on its pods): admitted
    and never finished; a pod that ends is replaced by its owner."""
    return any(
        ((p.get("metadata") or {}).get("annotations") or {}).get(POD_GROUP_SERVING_ANNOTATION)
        == "true"
        for p in pods
    )


def group_total(pods: Iterable[Mapping[str, Any]]) -> tuple[int | None, str | None]:
    """The group's declared total pod count, or (None, problem) when the pods disagree or
    it is not a positive integer."""
    values: set[str] = set()
    for pod in pods:
        annotations = (pod.get("metadata") or {}).get("annotations") or {}
        values.add(str(annotations.get(POD_GROUP_TOTAL_COUNT_ANNOTATION, "")))
    if len(values) != 1:
        shown = ", ".join(sorted(repr(v) for v in values))
        return None, f"the pods disagree on {POD_GROUP_TOTAL_COUNT_ANNOTATION}: {shown}"
    (value,) = values
    try:
        total = int(value)
    except ValueError:
        return None, f"{POD_GROUP_TOTAL_COUNT_ANNOTATION} must be a positive integer, not {value!r}"
    if total < 1:
        return None, f"{POD_GROUP_TOTAL_COUNT_ANNOTATION} must be a positive integer, not {value!r}"
    return total, None


def pod_template(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The podset template of a pod: its spec without what belongs to one pod instance."""
    spec = json.loads(json.dumps(pod.get("spec") or {}))
    for field in ("schedulingGates", "nodeName", "hostname", "subdomain"):
        spec.pop(field, None)
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return {"metadata": {"labels": dict(labels)}, "spec": spec}


def owner_references(
    pods: Sequence[Mapping[str, Any]], kind: str = "group"
) -> list[dict[str, Any]]:
    """A single pod's Workload is controlled by the pod (Kueue's: garbage collection
    removes it with the pod, so a pod its owner replaced or scaled away holds no quota).
    A group's: the pods' common controller if they share one, else every pod (not as
    controller)."""
    if kind == "pod" and len(pods) == 1:
        meta = pods[0].get("metadata") or {}
        return [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": meta.get("name"),
                "uid": meta.get("uid"),
                "controller": True,
            }
        ]
    controllers = {
        (o.get("uid"), o.get("kind"), o.get("name"), o.get("apiVersion"))
        for pod in pods
        for o in (pod.get("metadata") or {}).get("ownerReferences") or ()
        if o.get("controller")
    }
    every_pod_has_one = all(
        any(o.get("controller") for o in (p.get("metadata") or {}).get("ownerReferences") or ())
        for p in pods
    )
    if len(controllers) == 1 and every_pod_has_one:
        uid, kind, name, api_version = next(iter(controllers))
        return [{"apiVersion": api_version, "kind": kind, "name": name, "uid": uid}]
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": (p.get("metadata") or {}).get("name"),
            "uid": (p.get("metadata") or {}).get("uid"),
        }
        for p in pods
    ]


def copied_labels(
    pods: Sequence[Mapping[str, Any]], keys: Sequence[str]
) -> tuple[dict[str, str], str | None]:
    """The labels of `keys` (Kueue's `integrations.labelKeysToCopy`) the unit's pods carry,
    for its Workload, and why they cannot be copied: pods of one group disagreeing on a
    value (Kueue refuses to create the Workload then)."""
    copied: dict[str, str] = {}
    for pod in pods:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        for key in keys:
            if key not in labels:
                continue
            if key in copied and copied[key] != labels[key]:
                return {}, (
                    f"the pods' label {key} has different values ({copied[key]!r}, "
                    f"{labels[key]!r}): integrations.labelKeysToCopy needs one"
                )
            copied[key] = str(labels[key])
    return copied, None


def workload_for(
    unit: Unit,
    pods: Sequence[Mapping[str, Any]],
    count: int,
    *,
    min_count: int | None = None,
    priority: int | None = None,
    priority_class: str | None = None,
    workload_priority_class: str | None = None,
    disruption_mode: str | None = None,
    owner_preemptibility: list[str] | None = None,
    labels_to_copy: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The Workload describing a unit of pods (pure). Pods are sorted by name; the first
    one's spec is the template, and its annotations the pod set's `topologyRequest`
    (`podIndexLabel` `kueue.x-k8s.io/pod-group-pod-index`), as Kueue's."""
    first = sorted(pods, key=lambda p: str((p.get("metadata") or {}).get("name")))[0]
    meta = first.get("metadata") or {}
    labels = meta.get("labels") or {}
    podset: dict[str, Any] = {"name": "main", "count": count, "template": pod_template(first)}
    # Kueue's pod integration: the topology the pod's own annotations ask for, ranked
    # by `kueue.x-k8s.io/pod-group-pod-index`.
    request = topology_request(
        meta.get("annotations") or {}, TopologyHints(pod_index_label=POD_GROUP_POD_INDEX_LABEL)
    )
    if request is not None:
        podset["topologyRequest"] = request
    if min_count is not None and min_count < count:
        podset["minCount"] = min_count
    annotations: dict[str, str] = {}
    if owner_preemptibility:
        annotations[OWNER_PREEMPTIBILITY_ANNOTATION] = json.dumps(owner_preemptibility)
    if labels.get(PREEMPTIBILITY_LABEL) is not None:
        annotations[POD_PREEMPTIBILITY_ANNOTATION] = str(labels[PREEMPTIBILITY_LABEL])
    gates = admission_gated_by(first)
    if gates is not None:
        annotations[ADMISSION_GATED_BY_ANNOTATION] = gates
    body: dict[str, Any] = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Workload",
        "metadata": {
            "name": unit.workload_name,
            "namespace": unit.namespace,
            "labels": {**(labels_to_copy or {}), "quotagate.x-k8s.io/unit": unit.kind},
            "ownerReferences": owner_references(pods, unit.kind),
        },
        "spec": {"podSets": [podset]},
    }
    if labels.get(QUEUE_NAME_LABEL):  # none: managed without a queue name, not admitted
        body["spec"]["queueName"] = labels[QUEUE_NAME_LABEL]
    limit = max_exec_time_seconds(first)
    if limit is not None:
        body["spec"]["maximumExecutionTimeSeconds"] = limit
    if annotations:
        body["metadata"]["annotations"] = annotations
    # Kueue's rules: a priorityClassRef always comes with its priority (a class whose value
    # is unknown gives neither; a missing WorkloadPriorityClass makes no Workload at all).
    if priority is not None and workload_priority_class:
        body["spec"]["priorityClassRef"] = {
            "group": GROUP,
            "kind": "WorkloadPriorityClass",
            "name": workload_priority_class,
        }
    elif priority is not None and priority_class:
        body["spec"]["priorityClassRef"] = {
            "group": CORE_GROUP,
            "kind": "PriorityClass",
            "name": priority_class,
        }
    if priority is not None:
        body["spec"]["priority"] = priority
    if disruption_mode is not None:
        body["spec"]["disruptionMode"] = disruption_mode
    return body


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _add_map(
    ops: list[dict[str, Any]],
    path: str,
    current: Mapping[str, str] | None,
    extra: Mapping[str, str],
) -> None:
    """Add the entries of `extra` that `current` lacks or holds otherwise, as JSON patch."""
    missing = {k: v for k, v in extra.items() if (current or {}).get(k) != v}
    if current is None and missing:
        ops.append({"op": "add", "path": path, "value": dict(missing)})
    else:
        for key, value in missing.items():
            ops.append({"op": "add", "path": f"{path}/{_escape(key)}", "value": value})


def ungate_patch(
    pod: Mapping[str, Any],
    node_labels: Mapping[str, str],
    tolerations: Sequence[Mapping[str, Any]],
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    gate: str = GATE,
    also: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """One JSON patch: node labels and tolerations added (allowed only while the pod is
    gated), the admission checks' labels and annotations added, then `gate` (by default our
    admission gate) and those of `also` the pod has removed by index, each guarded by a
    `test` of that index. Empty if `gate` is not there."""
    spec = pod.get("spec") or {}
    meta = pod.get("metadata") or {}
    gates = spec.get("schedulingGates") or []
    index = next((i for i, g in enumerate(gates) if g.get("name") == gate), None)
    if index is None:
        return []
    removed = [(i, g.get("name")) for i, g in enumerate(gates) if g.get("name") in (gate, *also)]
    ops: list[dict[str, Any]] = []
    _add_map(ops, "/metadata/labels", meta.get("labels"), labels or {})
    _add_map(ops, "/metadata/annotations", meta.get("annotations"), annotations or {})
    _add_map(ops, "/spec/nodeSelector", spec.get("nodeSelector"), node_labels)
    present = spec.get("tolerations")
    new = [dict(t) for t in tolerations if dict(t) not in (present or [])]
    if present is None and new:
        ops.append({"op": "add", "path": "/spec/tolerations", "value": new})
    else:
        ops.extend({"op": "add", "path": "/spec/tolerations/-", "value": t} for t in new)
    for i, name in reversed(removed):  # the last first: the indexes before stay valid
        ops.append({"op": "test", "path": f"/spec/schedulingGates/{i}/name", "value": name})
        ops.append({"op": "remove", "path": f"/spec/schedulingGates/{i}"})
    return ops


def newest_first(pods: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return sorted(
        pods,
        key=lambda p: (
            str((p.get("metadata") or {}).get("creationTimestamp") or ""),
            str((p.get("metadata") or {}).get("name") or ""),
        ),
        reverse=True,
    )


def admitted_count(workload: Mapping[str, Any]) -> int:
    return sum(admitted_counts(workload).values())


def admitted_counts(workload: Mapping[str, Any]) -> dict[str, int]:
    """The admitted pod count of each pod set, by name."""
    admission = (workload.get("status") or {}).get("admission") or {}
    return {
        str(a.get("name") or DEFAULT_POD_SET_NAME): int(a.get("count", 0))
        for a in admission.get("podSetAssignments") or ()
    }


def topology_assigned(workload: Mapping[str, Any], pod_set: str) -> bool:
    """Whether the admission placed the pod set by topology (a `topologyAssignment`):
    its pods keep the topology gate until the topology ungater releases them."""
    admission = (workload.get("status") or {}).get("admission") or {}
    return any(
        str(a.get("name") or DEFAULT_POD_SET_NAME) == pod_set and a.get("topologyAssignment")
        for a in admission.get("podSetAssignments") or ()
    )


def topology_release(
    workload: Mapping[str, Any], pod_set: str, workload_name: str
) -> tuple[dict[str, str], dict[str, str]] | None:
    """The labels and annotations a pod of an admitted pod set placed by topology gets when
    its admission gate is removed (its topology gate kept): the pod set label and the
    Workload's name, by which the topology ungater finds it, and for a pod set that asked
    for no topology the unconstrained annotation (Kueue's `FromAssignment`, merged into the
    pod by its pod controller's `prepare`). None when the pod set has no topology
    assignment: its pods lose the topology gate with the admission gate."""
    if not topology_assigned(workload, pod_set):
        return None
    spec: Mapping[str, Any] = next(
        (
            ps
            for ps in (workload.get("spec") or {}).get("podSets") or ()
            if str(ps.get("name") or DEFAULT_POD_SET_NAME) == pod_set
        ),
        {},
    )
    annotations = {WORKLOAD_ANNOTATION: workload_name, **implicit_topology_annotations(spec)}
    return {POD_SET_LABEL: pod_set}, annotations


def pod_group_settings(pod_group: Mapping[str, Any]) -> dict[str, Any]:
    """minCount, priority, priorityClassName and disruption mode of a core PodGroup (pure)."""
    spec = pod_group.get("spec") or {}
    gang = (spec.get("schedulingPolicy") or {}).get("gang") or {}
    mode = spec.get("disruptionMode")
    return {
        "min_count": int(gang["minCount"]) if gang.get("minCount") is not None else None,
        "priority": int(spec["priority"]) if spec.get("priority") is not None else None,
        "priority_class": spec.get("priorityClassName") or None,
        "disruption_mode": _DISRUPTION_MODES.get(str(mode)) if mode else None,
    }
