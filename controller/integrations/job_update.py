"""Kueue's update rules for a job object or a pod (`jobframework.ValidateJobOnUpdate`),
which every job integration's webhook and the pod webhook run on an update, beside the
kind's create checks on the new object. Pure: the two objects in, the problems out, each
`field: message` as Kubernetes' `field.Error` prints it.

What the rules keep: the queue of a running job (`metadata.labels[kueue.x-k8s.io/queue-name]`),
never emptied in a namespace with a LocalQueue named `default`; the prebuilt Workload of a
running job; the max-exec-time label unless the job stays suspended; a WorkloadPriorityClass
not added to a running job, never removed; the elastic-job annotation; admission gates only
removed (`kueue.x-k8s.io/admission-gated-by`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from api.constants import (
    ADMISSION_GATE,
    ELASTIC_JOB_ANNOTATION,
    MAX_EXEC_TIME_LABEL,
    PREBUILT_WORKLOAD_LABEL,
    PRIORITY_CLASS_LABEL,
    QUEUE_NAME_LABEL,
)
from api.validation.admission_gates import validate_gates_update
from controller.integrations.framework.workloads import prebuilt_workload_name

__all__ = [
    "immutable",
    "job_update_problems",
    "metadata_map",
    "object_annotations",
    "object_labels",
    "pod_suspended",
    "prebuilt_workload_path",
    "prebuilt_workload_source",
    "priority_class_update_problems",
]

_QUEUE_PATH = f"metadata.labels[{QUEUE_NAME_LABEL}]"
_MAX_EXEC_PATH = f"metadata.labels[{MAX_EXEC_TIME_LABEL}]"
_PRIORITY_CLASS_PATH = f"metadata.labels[{PRIORITY_CLASS_LABEL}]"
_ELASTIC_PATH = f"metadata.annotations[{ELASTIC_JOB_ANNOTATION}]"


def immutable(path: str, value: Any) -> str:
    """`apivalidation.ValidateImmutableField`'s error, the new value printed as Go's
    `%#v`-like rendering of `field.Invalid` (strings quoted, booleans bare)."""
    return f"{path}: Invalid value: {json.dumps(value, sort_keys=True)}: field is immutable"


def object_labels(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """`metadata.labels` of a job object or a pod (empty when it has none)."""
    return metadata_map(obj, "labels")


def object_annotations(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """`metadata.annotations` of a job object or a pod (empty when it has none)."""
    return metadata_map(obj, "annotations")


def metadata_map(obj: Mapping[str, Any], which: str) -> Mapping[str, Any]:
    """`metadata.<which>` ("labels" or "annotations"), empty when missing."""
    return (obj.get("metadata") or {}).get(which) or {}


def _elastic(obj: Mapping[str, Any]) -> bool:
    """`workloadslicing.Enabled` (Kueue's `ElasticJobsViaWorkloadSlices` gate, on by default)."""
    return object_annotations(obj).get(ELASTIC_JOB_ANNOTATION) == "true"


def prebuilt_workload_source(obj: Mapping[str, Any]) -> str:
    """Where Kueue reads the prebuilt Workload's name (WorkloadIdentifierAnnotations on):
    "annotations" when the annotation is set, else "labels"."""
    return "annotations" if object_annotations(obj).get(PREBUILT_WORKLOAD_LABEL) else "labels"


def prebuilt_workload_path(obj: Mapping[str, Any]) -> str:
    """Kueue's `GetPrebuiltWorkloadPath`: the annotation when it is set, else the label."""
    return f"metadata.{prebuilt_workload_source(obj)}[{PREBUILT_WORKLOAD_LABEL}]"


def pod_suspended(pod: Mapping[str, Any]) -> bool:
    """Kueue's `podSuspended`: a pod is suspended while it has finished or is held by the
    `kueue.x-k8s.io/admission` scheduling gate."""
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return True
    gates = (pod.get("spec") or {}).get("schedulingGates") or ()
    return any(gate.get("name") == ADMISSION_GATE for gate in gates)


def priority_class_update_problems(
    old: Mapping[str, Any], new: Mapping[str, Any], *, suspended: bool
) -> list[str]:
    """Kueue's `ValidateUpdateForWorkloadPriorityClassName`: a WorkloadPriorityClass is not
    added to an object that is not `suspended`, and never removed."""
    old_class = str(object_labels(old).get(PRIORITY_CLASS_LABEL) or "")
    new_class = str(object_labels(new).get(PRIORITY_CLASS_LABEL) or "")
    if not suspended and not old_class and new_class:
        return [
            f'{_PRIORITY_CLASS_PATH}: Invalid value: "{new_class}": WorkloadPriorityClass '
            "cannot be added to a non-suspended workload"
        ]
    if old_class and not new_class:
        return [
            f'{_PRIORITY_CLASS_PATH}: Invalid value: "": WorkloadPriorityClass cannot be '
            "removed from a workload"
        ]
    return []


def job_update_problems(
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    *,
    old_suspended: bool,
    new_suspended: bool,
    prebuilt_on_create: Callable[[Mapping[str, Any]], list[str]],
    default_queue_exists: Callable[[str], bool],
) -> list[str]:
    """Kueue's `ValidateJobOnUpdate`, in its order. `prebuilt_on_create`: the kind's
    create check of the prebuilt Workload, which Kueue runs instead of immutability while
    the new object is suspended or the old one elastic; `default_queue_exists`: whether a
    namespace has a LocalQueue named `default`."""
    problems: list[str] = []
    old_queue = str(object_labels(old).get(QUEUE_NAME_LABEL) or "")
    new_queue = str(object_labels(new).get(QUEUE_NAME_LABEL) or "")
    # validateUpdateForQueueName
    if not new_suspended and new_queue != old_queue:
        problems.append(immutable(_QUEUE_PATH, new_queue))
    namespace = str((old.get("metadata") or {}).get("namespace") or "")
    if not new_queue and old_queue and default_queue_exists(namespace):
        problems.append(
            f'{_QUEUE_PATH}: Invalid value: "": queue-name must not be empty in namespace '
            "with default queue"
        )
    # validateUpdateForPrebuiltWorkload
    if new_suspended or _elastic(old):
        problems.extend(prebuilt_on_create(new))
    else:
        old_name = prebuilt_workload_name(old) or ""
        new_name = prebuilt_workload_name(new) or ""
        if new_name != old_name:
            problems.append(immutable(prebuilt_workload_path(new), new_name))
    # validateUpdateForMaxExecTime
    if not new_suspended or not old_suspended:
        old_limit = str(object_labels(old).get(MAX_EXEC_TIME_LABEL) or "")
        new_limit = str(object_labels(new).get(MAX_EXEC_TIME_LABEL) or "")
        if new_limit != old_limit:
            problems.append(immutable(_MAX_EXEC_PATH, new_limit))
    problems.extend(priority_class_update_problems(old, new, suspended=new_suspended))
    # validatedUpdateForEnabledWorkloadSlice
    if _elastic(old) != _elastic(new):
        problems.append(immutable(_ELASTIC_PATH, _elastic(new)))
    # ValidateAdmissionGatedByAnnotationOnUpdate (AdmissionGatedBy, on by default)
    problems.extend(str(error) for error in validate_gates_update(old, new))
    return problems
