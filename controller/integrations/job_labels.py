"""Kueue's Job-level labels that set a Workload field (pure): today
`kueue.x-k8s.io/max-exec-time-seconds` → `spec.maximumExecutionTimeSeconds`, read from a Job
or, for pods, from the pod the Workload is made from (Kueue's jobframework)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from api.constants import MAX_EXEC_TIME_LABEL

__all__ = ["max_exec_time_problem", "max_exec_time_seconds"]

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
