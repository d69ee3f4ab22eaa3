"""Kueue's pod webhook rules for a queued pod (`pod_webhook.go`): `validateCommon`, which it
runs on creation and update — the `kueue.x-k8s.io/managed` label, the pod group's name and
total count, the topology annotations, a prebuilt Workload equal to the group — and the
update rules of its own: an unretriable group stays unretriable, the group's name is
immutable. Pure: the pods in, the problems out, each `field: message` as Kubernetes'
`field.Error` prints it.

Kueue's WorkloadIdentifierAnnotations gate is on (its default): a non-empty
`kueue.x-k8s.io/pod-group-name` annotation is the group's name, else the label is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from api.constants import (
    MANAGED_LABEL,
    POD_GROUP_NAME_ANNOTATION,
    POD_GROUP_NAME_LABEL,
    POD_GROUP_TOTAL_COUNT_ANNOTATION,
    RETRIABLE_IN_GROUP_ANNOTATION,
)
from api.validation import aggregate
from api.validation.field_errors import Path, forbidden, invalid, quote, required
from api.validation.tas_annotations import TemplateTopology, annotations_of, validate_templates
from controller.integrations.framework.workloads import prebuilt_workload_name
from controller.integrations.job_names import annotation_as_name_problems, label_as_name_problems
from controller.integrations.job_update import (
    object_annotations,
    object_labels,
    prebuilt_workload_path,
)

__all__ = [
    "go_atoi",
    "group_name",
    "pod_common_problems",
    "pod_group_problems",
    "pod_update_problems",
]

_META = Path("metadata")
_LABELS = _META.child("labels")
_ANNOTATIONS = _META.child("annotations")
_MANAGED_PATH = _LABELS.key(MANAGED_LABEL)
_TOTAL_COUNT_PATH = _ANNOTATIONS.key(POD_GROUP_TOTAL_COUNT_ANNOTATION)
_RETRIABLE_PATH = _ANNOTATIONS.key(RETRIABLE_IN_GROUP_ANNOTATION)
_INT64_MAX = 2**63 - 1
_UINT64_MAX = 2**64 - 1


def _name_annotation(pod: Mapping[str, Any]) -> str:
    return str(object_annotations(pod).get(POD_GROUP_NAME_ANNOTATION) or "")


def group_name(pod: Mapping[str, Any]) -> str:
    """Kueue's `GetPodGroupName`: the annotation when it is set, else the label ("" for
    a pod of no group)."""
    return _name_annotation(pod) or str(object_labels(pod).get(POD_GROUP_NAME_LABEL) or "")


def _group_name_path(pod: Mapping[str, Any]) -> Path:
    """Kueue's `getGroupNamePath`."""
    if _name_annotation(pod):
        return _ANNOTATIONS.key(POD_GROUP_NAME_ANNOTATION)
    return _LABELS.key(POD_GROUP_NAME_LABEL)


def go_atoi(text: str) -> tuple[int | None, str | None]:
    """Go's `strconv.Atoi` on a 64-bit platform: the number, or the error it prints (an
    optional sign and decimal digits only; out of range as soon as the digits read so far
    pass an unsigned 64-bit integer, then past a signed one)."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    syntax = f"strconv.Atoi: parsing {quote(text)}: invalid syntax"
    out_of_range = f"strconv.Atoi: parsing {quote(text)}: value out of range"
    if not digits:
        return None, syntax
    value = 0
    for char in digits:
        if not "0" <= char <= "9":
            return None, syntax
        value = value * 10 + ord(char) - ord("0")
        if value > _UINT64_MAX:
            return None, out_of_range
    negative = text.startswith("-")
    if value > _INT64_MAX + (1 if negative else 0):
        return None, out_of_range
    return (-value if negative else value), None


def _total_count_error(text: str) -> str | None:
    """Why Kueue's `groupTotalCount` cannot read the annotation of a pod with a group
    name (None: a positive integer)."""
    count, error = go_atoi(text)
    if error is not None:
        return error
    if count is not None and count < 1:
        return (
            f"incorrect annotation value '{POD_GROUP_TOTAL_COUNT_ANNOTATION}={text}': "
            "group total count should be greater than zero"
        )
    return None


def pod_group_problems(pod: Mapping[str, Any]) -> list[str]:
    """Kueue's `validatePodGroupMetadata`: a group name and a total count only together;
    the name (the annotation when set, else the label) a valid object name; the count a
    positive integer."""
    annotations = object_annotations(pod)
    has_count = POD_GROUP_TOTAL_COUNT_ANNOTATION in annotations
    named_by = "annotation" if _name_annotation(pod) else "label"
    detail = (
        f"both the '{POD_GROUP_TOTAL_COUNT_ANNOTATION}' annotation and the "
        f"'{POD_GROUP_NAME_LABEL}' {named_by} should be set"
    )
    problems: list[str] = []
    if not group_name(pod):
        if has_count:
            return [str(required(_group_name_path(pod), detail))]
        return []
    if _name_annotation(pod):
        problems += annotation_as_name_problems(pod, POD_GROUP_NAME_ANNOTATION)
    else:
        problems += label_as_name_problems(pod, POD_GROUP_NAME_LABEL)
    if not has_count:
        return [*problems, str(required(_TOTAL_COUNT_PATH, detail))]
    text = str(annotations[POD_GROUP_TOTAL_COUNT_ANNOTATION])
    error = _total_count_error(text)
    if error is not None:
        problems.append(str(invalid(_TOTAL_COUNT_PATH, text, error)))
    return problems


def _topology_problems(pod: Mapping[str, Any]) -> list[str]:
    """Kueue's `validateTopologyRequest`: the pod's own topology annotations."""
    topology = validate_templates([TemplateTopology(_META, annotations_of(pod))], grouping=False)
    return [aggregate(topology)] if topology else []


def pod_common_problems(pod: Mapping[str, Any]) -> list[str]:
    """Kueue's `validateCommon`, in its order: the managed label may only be "true"; the
    pod group's metadata; the topology annotations; a prebuilt Workload, on a pod of a
    group, named as the group."""
    problems: list[str] = []
    managed = object_labels(pod).get(MANAGED_LABEL)
    if MANAGED_LABEL in object_labels(pod) and managed != "true":
        problems.append(str(forbidden(_MANAGED_PATH, "managed label value can only be 'true'")))
    problems += pod_group_problems(pod)
    problems += _topology_problems(pod)
    group, prebuilt = group_name(pod), prebuilt_workload_name(pod) or ""
    if group and prebuilt and prebuilt != group:
        path = Path(prebuilt_workload_path(pod))
        problems.append(
            str(invalid(path, prebuilt, "prebuilt workload and pod group should be equal"))
        )
    return problems


def _unretriable(pod: Mapping[str, Any]) -> bool:
    return object_annotations(pod).get(RETRIABLE_IN_GROUP_ANNOTATION) == "false"


def pod_update_problems(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Kueue's pod update rules after `validateCommon`: a pod of an unretriable group
    (`kueue.x-k8s.io/retriable-in-group: "false"`) stays so
    (`validateUpdateForRetriableInGroupAnnotation`), and a pod's group name, once set, is
    immutable."""
    problems: list[str] = []
    if group_name(new) and _unretriable(old) and not _unretriable(new):
        problems.append(
            str(forbidden(_RETRIABLE_PATH, "unretriable pod group can't be converted to retriable"))
        )
    old_group, new_group = group_name(old), group_name(new)
    if old_group and new_group != old_group:
        problems.append(str(invalid(_group_name_path(new), new_group, "field is immutable")))
    return problems
