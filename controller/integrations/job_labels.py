"""Kueue's Job-level labels and annotations that set a Workload field (pure):
`kueue.x-k8s.io/max-exec-time-seconds` → `spec.maximumExecutionTimeSeconds` and
`kueue.x-k8s.io/admission-gated-by` → the Workload's annotation of that name, read from a Job
or, for pods, from the pod the Workload is made from (Kueue's jobframework); and the
WorkloadPriorityClass a Workload cannot be made without."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from api.constants import ADMISSION_GATED_BY_ANNOTATION, MAX_EXEC_TIME_LABEL

__all__ = [
    "PriorityClassNotFound",
    "WorkloadPriorityClassNotFound",
    "admission_gated_by",
    "max_exec_time_problem",
    "max_exec_time_seconds",
]


class WorkloadPriorityClassNotFound(LookupError):
    """The `kueue.x-k8s.io/priority-class` label names a class that does not exist: as in
    Kueue, no Workload is made (it would need the class's priority), and the owner is
    reconciled again after a backoff."""

    reason = "WorkloadPriorityClassNotFound"

    def __init__(self, name: str) -> None:
        super().__init__(f'WorkloadPriorityClass "{name}" not found')


class PriorityClassNotFound(LookupError):
    """The pod template's `priorityClassName` names a PriorityClass that does not exist: as
    in Kueue (`GetPriorityFromPriorityClass`), no Workload is made and the owner is
    reconciled again after a backoff."""

    reason = "PriorityClassNotFound"

    def __init__(self, name: str) -> None:
        super().__init__(f'PriorityClass "{name}" not found')


def admission_gated_by(obj: Mapping[str, Any]) -> str | None:
    """The object's `kueue.x-k8s.io/admission-gated-by` annotation (None: absent or
    empty), which Kueue copies to the Workload (`PropagateAdmissionGatedByAnnotation`)."""
    value = ((obj.get("metadata") or {}).get("annotations") or {}).get(
        ADMISSION_GATED_BY_ANNOTATION
    )
    return str(value) if value else None


_INT32_MAX = 2**31 - 1


def max_exec_time_problem(obj: Mapping[str, Any]) -> str | None:
    """Why the object's max-exec-time label is invalid, field first as the API server words
    it (None: absent or valid). The webhook refuses such objects on creation."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if MAX_EXEC_TIME_LABEL not in labels:
        return None
    text = str(labels[MAX_EXEC_TIME_LABEL])
    path = f"metadata.labels[{MAX_EXEC_TIME_LABEL}]"
    digits = text.removeprefix("-")
    if not (digits.isascii() and digits.isdigit()):
        return f'{path}: Invalid value: "{text}": must be a whole number of seconds'
    value = int(text)
    if value <= 0:
        return f"{path}: Invalid value: {value}: should be greater than 0"
    if value > _INT32_MAX:
        return f"{path}: Invalid value: {value}: must be at most {_INT32_MAX}"
    return None


def max_exec_time_seconds(obj: Mapping[str, Any]) -> int | None:
    """The Workload's `spec.maximumExecutionTimeSeconds` the label asks for (None: absent
    or invalid, as Kueue reads it)."""
    if max_exec_time_problem(obj) is not None:
        return None
    labels = (obj.get("metadata") or {}).get("labels") or {}
    text = labels.get(MAX_EXEC_TIME_LABEL)
    return None if text is None else int(text)
