"""The `kueue.x-k8s.io/admission-gated-by` annotation of a Workload (Kueue's AdmissionGatedBy,
beta and on by default): comma-separated gates that hold the Workload back until each is
removed. Its rules are Kueue's `pkg/util/webhook/validation_admissiongatedby.go`; the
controller reads the gates with `admission_gates` (controller/core/model/from_api.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from api.constants import ADMISSION_GATED_BY_ANNOTATION
from api.validation.decoded import mapping
from api.validation.field_errors import FieldError, Path, forbidden, invalid, too_long
from api.validation.names import validate_domain_prefixed_path

__all__ = ["admission_gates", "validate_gates", "validate_gates_update"]

_GATE_NAME_MAX: Final = 63
_GATES_PATH: Final = Path("metadata.annotations").key(ADMISSION_GATED_BY_ANNOTATION)


def admission_gates(value: str) -> list[str]:
    """The gates of a `kueue.x-k8s.io/admission-gated-by` value (comma-separated, trimmed;
    none for a blank value), as Kueue's `csv.Parse`."""
    if not value.strip():
        return []
    return [gate.strip() for gate in value.split(",")]


def _gates_of(obj: Mapping[str, Any]) -> str:
    annotations = mapping(mapping(obj.get("metadata")).get("annotations"))
    return str(annotations.get(ADMISSION_GATED_BY_ANNOTATION) or "")


def validate_gates(obj: Mapping[str, Any]) -> list[FieldError]:
    """`ValidateAdmissionGatedByAnnotationOnCreate`: the annotation is well formed."""
    return _validate_gates_format(_gates_of(obj))


def _validate_gates_format(value: str) -> list[FieldError]:
    """`validateAdmissionGatedByAnnotationFormat`: no empty or repeated gate, each a
    domain-prefixed path of at most 63 characters."""
    errors: list[FieldError] = []
    seen: set[str] = set()
    for gate in admission_gates(value):
        if not gate:
            errors.append(
                invalid(_GATES_PATH, value, "cannot contain empty gate names", "gates-format")
            )
            continue
        if gate in seen:
            errors.append(
                invalid(_GATES_PATH, value, f"duplicate gate name: {gate}", "gates-format")
            )
            continue
        seen.add(gate)
        errors += validate_domain_prefixed_path(_GATES_PATH, gate, "gates-format")
        if len(gate.encode()) > _GATE_NAME_MAX:
            errors.append(too_long(_GATES_PATH, _GATE_NAME_MAX, "gates-format"))
    return errors


def validate_gates_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[FieldError]:
    """`ValidateAdmissionGatedByAnnotationOnUpdate`: gates are never added after creation,
    only removed, and what is left is well formed."""
    before, after = _gates_of(old), _gates_of(new)
    errors: list[FieldError] = []
    if not before and after:
        errors.append(
            forbidden(_GATES_PATH, "cannot add admission gate after creation", "gates-only-removed")
        )
    if before and after:
        kept = admission_gates(before)
        if any(gate not in kept for gate in admission_gates(after)):
            errors.append(
                forbidden(
                    _GATES_PATH, "can only remove gates, not add new ones", "gates-only-removed"
                )
            )
    return errors + _validate_gates_format(after)
