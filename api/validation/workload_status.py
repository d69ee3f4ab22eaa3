"""Workload status rules (Kueue's `pkg/webhooks/workload_webhook.go` on `workloads/status`).

quotagate's webhook is not on the status path, which every admission write takes; the
controller checks these on every Workload it reads (controller/runtime/sync.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from api.quantities import InvalidQuantity, Quantity
from api.validation.decoded import mapping, mappings
from api.validation.field_errors import (
    FieldError,
    Path,
    invalid,
    not_found,
    not_supported,
    required,
)
from api.validation.names import validate_annotations, validate_labels
from api.validation.quota import quantity_text
from api.validation.resourceflavor import validate_tolerations

__all__ = ["conditions_true", "has_quota_reservation", "validate_status"]

_STATUS: Final = Path("status")
_ADMISSION: Final = _STATUS.child("admission")


def conditions_true(obj: Mapping[str, Any], type_: str) -> bool:
    return any(
        c.get("type") == type_ and c.get("status") == "True"
        for c in mappings(mapping(obj.get("status")).get("conditions"))
    )


def has_quota_reservation(obj: Mapping[str, Any]) -> bool:
    """Kueue's `HasQuotaReservation`: the QuotaReserved condition is True."""
    return conditions_true(obj, "QuotaReserved")


def _validate_admission(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[FieldError]:
    """`validateAdmission` (while QuotaReserved is True): an admission is there (unless the
    Workload was already without one), its assignments name pod sets, and each usage is a
    whole multiple of the assignment's count (cpu in milli-units, the rest in units)."""
    admission = mapping(obj.get("status")).get("admission")
    if not isinstance(admission, Mapping):
        if (
            old is not None
            and has_quota_reservation(old)
            and mapping(old.get("status")).get("admission") is None
        ):
            return []
        return [
            required(
                _ADMISSION,
                "must be set while the QuotaReserved condition is true",
                "admission-present",
            )
        ]
    pod_sets = mappings(mapping(obj.get("spec")).get("podSets"))
    errors = []
    for i, assignment in enumerate(mappings(admission.get("podSetAssignments"))):
        name = str(assignment.get("name", "main"))
        if not any(str(ps.get("name", "main")) == name for ps in pod_sets):
            at = _ADMISSION.child("podSetAssignments").index(i).child("name")
            errors.append(not_found(at, name, "assignment-names-pod-set"))
        count = assignment.get("count")
        if type(count) is not int or count <= 1:  # anything is a multiple of 1
            continue
        for resource, value in mapping(assignment.get("resourceUsage")).items():
            try:
                quantity = Quantity.parse(value)
            except (InvalidQuantity, TypeError, ValueError):
                continue
            units = quantity.milli if resource == "cpu" else quantity.value
            if units % count:
                at = _ADMISSION.child("podSetAssignments").index(i)
                errors.append(
                    invalid(
                        at.child("resourceUsage").key(str(resource)),
                        quantity_text(value),
                        f"is not a multiple of {count}",
                        "usage-multiple-of-count",
                    )
                )
    return errors


def validate_status(
    obj: Mapping[str, Any], old: Mapping[str, Any] | None, reserved: bool | None = None
) -> list[FieldError]:
    """The status rules (not sent to quotagate's webhook: the controller checks them);
    `reserved`: whether QuotaReserved is True, if the caller knows."""
    status = mapping(obj.get("status"))
    if not status:
        return []
    spec = mapping(obj.get("spec"))
    if reserved is None:
        reserved = has_quota_reservation(obj)
    errors = _validate_admission(obj, old) if reserved else []
    if not status.get("reclaimablePods") and not status.get("admissionChecks"):
        return errors
    pod_sets = {str(ps.get("name", "main")): ps for ps in mappings(spec.get("podSets"))}
    for item in mappings(status.get("reclaimablePods")):
        name = str(item.get("name"))
        at = _STATUS.child("reclaimablePods").key(name)
        pod_set = pod_sets.get(name)
        if pod_set is None:
            errors.append(not_supported(at.child("name"), name, list(pod_sets), "reclaimable-pods"))
        elif isinstance(item.get("count"), int) and item["count"] > pod_set.get("count", 1):
            errors.append(
                invalid(
                    at.child("count"),
                    item["count"],
                    f"should be less or equal to {pod_set.get('count', 1)}",
                    "reclaimable-pods",
                )
            )
    for i, check in enumerate(mappings(status.get("admissionChecks"))):
        for j, update in enumerate(mappings(check.get("podSetUpdates"))):
            at = _STATUS.child("admissionChecks").index(i).child("podSetUpdates").index(j)
            name = str(update.get("name"))
            if name not in pod_sets:
                errors.append(
                    not_supported(at.child("name"), name, sorted(pod_sets), "pod-set-updates")
                )
            errors += validate_tolerations(update.get("tolerations"), at.child("tolerations"))
            errors += validate_annotations(
                mapping(update.get("annotations")), at.child("annotations"), "pod-set-updates"
            )
            errors += validate_labels(
                mapping(update.get("nodeSelector")), at.child("nodeSelector"), "pod-set-updates"
            )
            errors += validate_labels(
                mapping(update.get("labels")), at.child("labels"), "pod-set-updates"
            )
    return errors
