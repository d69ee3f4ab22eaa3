"""Kueue fields quotagate accepts but does not implement yet, found in an API object, and
those the controller's configuration turns off (a fair-sharing weight without fairSharing,
an admission scope or LocalQueue weight without admissionFairSharing).

quotagate serves Kueue's schema, so a Kueue manifest applies unchanged; a field whose
behaviour is missing must then be *reported*, never admitted as if it were absent. Each
finding is (field path, what quotagate does instead). The controller turns them into a
Warning Event and an `UnsupportedFields` condition on the object, `quotagate plan` prints
them, and the README's compatibility table lists them. An AdmissionCheck for MultiKueue is
reported: no controller of quotagate's makes it `Active`, so a ClusterQueue naming it stays
inactive (`AdmissionCheckInactive`, as Kueue's while its controller is not running).

Pure: dicts in, findings out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = [
    "UNSUPPORTED_CONDITION",
    "Finding",
    "findings_message",
    "unsupported_fields",
]

Finding = tuple[str, str]

UNSUPPORTED_CONDITION: Final = "UnsupportedFields"
"""The condition type that lists an object's findings (status True while there are any)."""

_NOT_IMPLEMENTED: Final = "not implemented by quotagate yet"


_FAIR_SHARING_OFF: Final = (
    "fair sharing is off in the controller configuration (no fairSharing section): the "
    "weight has no effect, heads are ordered by borrowing, priority and creation time"
)


_ADMISSION_FAIR_SHARING_OFF: Final = (
    "admission fair sharing is off in the controller configuration (no admissionFairSharing "
    "section): {what} has no effect, Workloads of all LocalQueues are ordered together by "
    "priority and creation time"
)


def _cluster_queue(
    spec: Mapping[str, Any], fair_sharing: bool, admission_fair_sharing: bool
) -> list[Finding]:
    found: list[Finding] = []
    if spec.get("fairSharing") is not None and not fair_sharing:
        found.append(("spec.fairSharing", _FAIR_SHARING_OFF))
    if spec.get("admissionScope") is not None and not admission_fair_sharing:
        found.append(
            (
                "spec.admissionScope",
                _ADMISSION_FAIR_SHARING_OFF.format(what="the admission mode"),
            )
        )
    if spec.get("concurrentAdmissionPolicy") is not None:
        found.append(
            (
                "spec.concurrentAdmissionPolicy",
                f"concurrent admission is {_NOT_IMPLEMENTED}: one admission per Workload",
            )
        )
    return found


def _local_queue(spec: Mapping[str, Any], admission_fair_sharing: bool) -> list[Finding]:
    """A LocalQueue's weight counts only in admission fair sharing (Kueue: "only relevant if
    AdmissionFairSharing is enabled in the Kueue configuration")."""
    if spec.get("fairSharing") is None or admission_fair_sharing:
        return []
    return [("spec.fairSharing", _ADMISSION_FAIR_SHARING_OFF.format(what="the weight"))]


def _workload(spec: Mapping[str, Any], status: Mapping[str, Any]) -> list[Finding]:
    found: list[Finding] = []
    if spec.get("preemptionGates"):
        found.append(
            (
                "spec.preemptionGates",
                f"preemption gates are {_NOT_IMPLEMENTED}: the Workload may preempt while "
                "its gates are closed",
            )
        )
    if status.get("reclaimablePods"):
        found.append(
            (
                "status.reclaimablePods",
                f"reclaimable pods are {_NOT_IMPLEMENTED}: the quota of finished pods is "
                "held until the whole Workload finishes",
            )
        )
    return found


def _cohort(spec: Mapping[str, Any], fair_sharing: bool) -> list[Finding]:
    if spec.get("fairSharing") is not None and not fair_sharing:
        return [("spec.fairSharing", _FAIR_SHARING_OFF)]
    return []


MULTIKUEUE_CONTROLLER_NAME: Final = "kueue.x-k8s.io/multikueue"


def _admission_check(spec: Mapping[str, Any]) -> list[Finding]:
    if spec.get("controllerName") != MULTIKUEUE_CONTROLLER_NAME:
        return []
    return [
        (
            "spec.controllerName",
            f"MultiKueue is {_NOT_IMPLEMENTED}: no controller makes this check Active, so a "
            "ClusterQueue that names it stays inactive (AdmissionCheckInactive)",
        )
    ]


def unsupported_fields(
    obj: Mapping[str, Any], *, fair_sharing: bool = False, admission_fair_sharing: bool = False
) -> list[Finding]:
    """The Kueue fields of `obj` quotagate does not implement yet, or that have no effect
    under the controller's configuration (`fair_sharing`, `admission_fair_sharing`: whether
    those sections are on), with what it does instead."""
    kind = obj.get("kind")
    spec = obj.get("spec") or {}
    if not isinstance(spec, Mapping):
        return []
    if kind == "ClusterQueue":
        return _cluster_queue(spec, fair_sharing, admission_fair_sharing)
    if kind == "LocalQueue":
        return _local_queue(spec, admission_fair_sharing)
    if kind == "Workload":
        status = obj.get("status") or {}
        return _workload(spec, status if isinstance(status, Mapping) else {})
    if kind == "Cohort":
        return _cohort(spec, fair_sharing)
    if kind == "AdmissionCheck":
        return _admission_check(spec)
    return []


def findings_message(findings: list[Finding]) -> str:
    """One line listing the findings, for an Event or a condition message."""
    return "; ".join(f"{path}: {message}" for path, message in findings)
