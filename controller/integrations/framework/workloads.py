"""The Workload of a job object, as Kueue's jobframework makes it (pure).

One Workload per object, named as Kueue names it (`workload_names.py`:
`<kind>-<name>-<hash of kind, group, name and uid>`), owned by the object (garbage collection removes it with the object), with the `kueue.x-k8s.io/job-uid`
label, the labels of `integrations.labelKeysToCopy`, the LocalQueue of the queue-name label,
the pod sets the adapter describes, and from the object's labels: the
WorkloadPriorityClass (else the pod sets' PriorityClass), KAI's preemptibility and
`maximumExecutionTimeSeconds`. A pod template annotated with a topology
(`kueue.x-k8s.io/podset-required-topology`, `-preferred-`, `-unconstrained-`,
`podset-slice-required-topology` with `podset-slice-size`, or the multi-layer
`podset-slice-required-topology-constraints`) gets the pod set's `topologyRequest`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from api.constants import (
    ADMISSION_GATED_BY_ANNOTATION,
    GROUP,
    JOB_UID_LABEL,
    POD_SET_GROUP_NAME_ANNOTATION,
    POD_SET_PREFERRED_TOPOLOGY_ANNOTATION,
    POD_SET_REQUIRED_TOPOLOGY_ANNOTATION,
    POD_SET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION,
    POD_SET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS_ANNOTATION,
    POD_SET_SLICE_SIZE_ANNOTATION,
    POD_SET_UNCONSTRAINED_TOPOLOGY_ANNOTATION,
    PREBUILT_WORKLOAD_LABEL,
    PREEMPTIBILITY_LABEL,
    PRIORITY_CLASS_LABEL,
    QUEUE_NAME_LABEL,
    SCHEDULING_GROUP,
    VERSION,
)
from api.validation.tas_annotations import parse_int32, parse_slice_layers
from controller.integrations.framework.generic_job import GenericJob, TopologyHints
from controller.integrations.framework.workload_names import object_workload_name
from controller.integrations.job_labels import (
    PriorityClassNotFound,
    WorkloadPriorityClassNotFound,
    admission_gated_by,
    max_exec_time_seconds,
)
from controller.kube.owners import controller_reference as owner_reference

__all__ = [
    "followed_spec",
    "new_workload",
    "object_workload",
    "owner_reference",
    "pod_sets_match",
    "prebuilt_workload_name",
    "topology_request",
    "workload_pod_set",
]

PREEMPTIBILITY_VALUES = ("preemptible", "non-preemptible", "semi-preemptible")
_LABEL_VALUE_MAX = 63


def prebuilt_workload_name(obj: Mapping[str, Any]) -> str | None:
    """The Workload the object names to run under (Kueue's `PrebuiltWorkloadNameFor` with
    WorkloadIdentifierAnnotations on, its default: the annotation, else the label)."""
    meta = obj.get("metadata") or {}
    name = (meta.get("annotations") or {}).get(PREBUILT_WORKLOAD_LABEL) or (
        meta.get("labels") or {}
    ).get(PREBUILT_WORKLOAD_LABEL)
    return str(name) if name else None


def _slice_layers(text: str | None) -> list[dict[str, Any]] | None:
    """The multi-layer slice annotation (a JSON array of 1 to 3 `{topology, size}`), read
    as the webhook reads it (Go's `json.Unmarshal`, as Kueue's builder does); None when
    absent or not of that shape (Kueue then fails to build the Workload; its webhook
    refuses such a job first)."""
    if text is None:
        return None
    layers, _ = parse_slice_layers(text)
    if layers is None or not 1 <= len(layers) <= 3:
        return None
    return [{"topology": topology, "size": size} for topology, size in layers]


def topology_request(annotations: Mapping[str, str], hints: TopologyHints) -> dict[str, Any] | None:
    """A pod set's `topologyRequest` from its template's annotations (Kueue's
    `podSetTopologyRequestBuilder.Build`), or None when none asks for a topology. Kueue,
    with topology-aware scheduling on, also writes one holding only the kind's pod index
    label; quotagate, which has none, writes one only when asked, so that the Workload's
    report names what the user asked for."""
    request: dict[str, Any] = {}
    required = annotations.get(POD_SET_REQUIRED_TOPOLOGY_ANNOTATION)
    preferred = annotations.get(POD_SET_PREFERRED_TOPOLOGY_ANNOTATION)
    unconstrained = annotations.get(POD_SET_UNCONSTRAINED_TOPOLOGY_ANNOTATION)
    if required is not None:
        request["required"] = required
    elif preferred is not None:
        request["preferred"] = preferred
    elif unconstrained is not None:
        request["unconstrained"] = unconstrained.strip().lower() in ("true", "1", "t")
    slice_topology = annotations.get(POD_SET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION)
    slice_size = annotations.get(POD_SET_SLICE_SIZE_ANNOTATION)
    layers = _slice_layers(annotations.get(POD_SET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS_ANNOTATION))
    if layers is not None:  # Kueue: the layers win over the single slice annotations
        request["podsetSliceRequiredTopologyConstraints"] = layers
    elif slice_topology is not None and slice_size is not None:
        size = parse_int32(slice_size)  # as Kueue's builder reads it; the webhook refuses < 1
        if size is not None:
            request["podSetSliceRequiredTopology"] = slice_topology
            request["podSetSliceSize"] = size
    if not request:
        return None
    if hints.pod_index_label is not None:
        request["podIndexLabel"] = hints.pod_index_label
    if hints.sub_group_index_label is not None:
        request["subGroupIndexLabel"] = hints.sub_group_index_label
    if hints.sub_group_count is not None:
        request["subGroupCount"] = hints.sub_group_count
    group = annotations.get(POD_SET_GROUP_NAME_ANNOTATION)
    if group is not None and (required is not None or preferred is not None):
        request["podSetGroupName"] = group
    return request


def workload_pod_set(pod_set: Mapping[str, Any], hints: TopologyHints) -> dict[str, Any]:
    """A Workload pod set from a kind's description of it (`name`, `count`, `template`,
    optional `minCount`): the template copied, and its `topologyRequest` when the
    template's annotations ask for a topology."""
    template = copy.deepcopy(pod_set.get("template") or {})
    (template.get("metadata") or {}).pop("creationTimestamp", None)
    entry: dict[str, Any] = {
        "name": pod_set["name"],
        "count": pod_set["count"],
        "template": template,
    }
    if pod_set.get("minCount") is not None:
        entry["minCount"] = pod_set["minCount"]
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    request = topology_request(annotations, hints)
    if request is not None:
        entry["topologyRequest"] = request
    return entry


def _pod_sets(job: GenericJob) -> list[dict[str, Any]]:
    return [
        workload_pod_set(pod_set, job.topology_hints(index))
        for index, pod_set in enumerate(job.pod_sets())
    ]


def _no_pod_classes(name: str) -> int | None:
    return None


def new_workload(
    job: GenericJob,
    *,
    priority: int | None,
    priority_of_pod_class: Callable[[str], int | None] = _no_pod_classes,
    label_keys_to_copy: Iterable[str] = (),
) -> dict[str, Any]:
    """The Workload describing `job` (Kueue's `ConstructWorkload` + `prepareWorkload`);
    `priority` is the WorkloadPriorityClass's value when its label names a known one, and
    `priority_of_pod_class` gives a PriorityClass's value. As in Kueue, a
    `priorityClassRef` always comes with its priority: a class that does not exist makes no
    Workload (WorkloadPriorityClassNotFound, PriorityClassNotFound; retried later)."""
    obj = job.obj
    return object_workload(
        obj,
        object_workload_name(obj),
        _pod_sets(job),
        priority=priority,
        pod_priority_class=job.priority_class(),
        priority_of_pod_class=priority_of_pod_class,
        label_keys_to_copy=label_keys_to_copy,
    )


def object_workload(
    obj: Mapping[str, Any],
    name: str,
    pod_sets: list[dict[str, Any]],
    *,
    priority: int | None,
    pod_priority_class: str | None,
    priority_of_pod_class: Callable[[str], int | None] = _no_pod_classes,
    label_keys_to_copy: Iterable[str] = (),
) -> dict[str, Any]:
    """A Workload named `name` with `pod_sets`, owned by `obj` and taking from its labels
    what `new_workload` takes (several Workloads of one object, such as a
    LeaderWorkerSet's one per replica, are each made here)."""
    meta = obj["metadata"]
    labels: Mapping[str, str] = meta.get("labels") or {}
    uid = str(meta.get("uid", ""))
    workload_labels = {key: labels[key] for key in label_keys_to_copy if key in labels}
    if len(uid) <= _LABEL_VALUE_MAX:
        workload_labels[JOB_UID_LABEL] = uid
    body: dict[str, Any] = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": meta["namespace"],
            "labels": workload_labels,
            "ownerReferences": [owner_reference(obj)],
        },
        "spec": {"podSets": pod_sets},
    }
    spec = body["spec"]
    if labels.get(QUEUE_NAME_LABEL):  # none: managed without a queue name, not admitted
        spec["queueName"] = labels[QUEUE_NAME_LABEL]
    if labels.get(PRIORITY_CLASS_LABEL):
        if priority is None:
            raise WorkloadPriorityClassNotFound(labels[PRIORITY_CLASS_LABEL])
        spec["priorityClassRef"] = {
            "group": GROUP,
            "kind": "WorkloadPriorityClass",
            "name": labels[PRIORITY_CLASS_LABEL],
        }
        spec["priority"] = priority
    else:
        pod_class = pod_priority_class
        if pod_class:
            pod_priority = priority_of_pod_class(pod_class)
            if pod_priority is None:
                raise PriorityClassNotFound(pod_class)
            spec["priorityClassRef"] = {
                "group": SCHEDULING_GROUP,
                "kind": "PriorityClass",
                "name": pod_class,
            }
            spec["priority"] = pod_priority
    gates = admission_gated_by(obj)
    if gates is not None:
        body["metadata"]["annotations"] = {ADMISSION_GATED_BY_ANNOTATION: gates}
    if labels.get(PREEMPTIBILITY_LABEL) in PREEMPTIBILITY_VALUES:
        spec["preemptibility"] = labels[PREEMPTIBILITY_LABEL]
    limit = max_exec_time_seconds(obj)
    if limit is not None:
        spec["maximumExecutionTimeSeconds"] = limit
    return body


def followed_spec(obj: Mapping[str, Any], workload: Mapping[str, Any]) -> dict[str, Any]:
    """What of the Workload's spec follows the object while the Workload holds no quota
    (Kueue's `handleQueueNameChange`, and its rebuild of a Workload whose
    `maximumExecutionTimeSeconds` no longer matches): a merge patch, empty when in step."""
    spec = workload.get("spec") or {}
    labels = (obj.get("metadata") or {}).get("labels") or {}
    patch: dict[str, Any] = {}
    limit = max_exec_time_seconds(obj)
    if spec.get("maximumExecutionTimeSeconds") != limit:
        patch["maximumExecutionTimeSeconds"] = limit
    queue = labels.get(QUEUE_NAME_LABEL)
    if queue and spec.get("queueName") != queue:
        patch["queueName"] = queue
    return patch


def pod_sets_match(job: GenericJob, workload: Mapping[str, Any]) -> str | None:
    """Why a prebuilt Workload does not describe `job` (None: it does): its pod sets'
    names, counts and minimum counts must be the job's (the part of Kueue's
    `EquivalentToWorkload` that decides admission)."""
    wanted = [(ps["name"], ps["count"], ps.get("minCount")) for ps in job.pod_sets()]
    have = [
        (ps.get("name"), ps.get("count", 1), ps.get("minCount"))
        for ps in (workload.get("spec") or {}).get("podSets") or ()
    ]
    if wanted == have:
        return None
    return f"the job's pod sets (name, count, minCount) are {wanted}, the Workload's {have}"
