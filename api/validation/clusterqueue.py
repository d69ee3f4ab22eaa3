"""ClusterQueue and Cohort rules: Kueue's `pkg/webhooks/clusterqueue_webhook.go` and
`cohort_webhook.go`, and the CRD rules of `apis/kueue/v1beta2/clusterqueue_types.go`
(checked here too, for objects stored before those rules were in the CRD).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from api.validation.field_errors import FieldError, Path, invalid, not_supported, rule_failed
from api.validation.names import validate_label_selector
from api.validation.quota import validate_fair_sharing, validate_resource_groups

__all__ = [
    "BORROWING_NEEDS_COHORT_MESSAGE",
    "FUNGIBILITY_PREFERENCE_MESSAGE",
    "RECLAIM_NEVER_MESSAGE",
    "validate_cluster_queue",
    "validate_cluster_queue_update",
    "validate_cohort",
]

BORROWING_NEEDS_COHORT_MESSAGE: Final = "borrowingLimit must be nil when cohort is empty"
FUNGIBILITY_PREFERENCE_MESSAGE: Final = (
    "preference can only be set when both whenCanBorrow and whenCanPreempt are TryNextFlavor"
)
RECLAIM_NEVER_MESSAGE: Final = "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never"
FIELD_IMMUTABLE: Final = "field is immutable"
"""apimachinery's `FieldImmutableErrorMsg`."""

_MAX_FLAVORS: Final = 256
_MAX_COVERED: Final = 256
_MAX_COMBINATIONS: Final = 512
_SPEC: Final = Path("spec")


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _groups(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    groups = spec.get("resourceGroups")
    if not isinstance(groups, list):
        return []
    return [group for group in groups if isinstance(group, Mapping)]


def _flavor_names(spec: Mapping[str, Any]) -> list[str]:
    names: list[str] = []
    for group in _groups(spec):
        for flavor in group.get("flavors") or ():
            if isinstance(flavor, Mapping) and str(flavor.get("name")) not in names:
                names.append(str(flavor.get("name")))
    return names


def validate_cluster_queue(obj: Mapping[str, Any]) -> list[FieldError]:
    """`ValidateClusterQueue`, with the CRD's own rules first."""
    spec = _spec(obj)
    return _cel_rules(spec) + _validate_spec(spec) + _admission_check_flavors(spec, None)


def validate_cluster_queue_update(
    old: Mapping[str, Any], new: Mapping[str, Any]
) -> list[FieldError]:
    """`ValidateClusterQueueUpdate`: the new spec, onFlavors (an unchanged list on a queue
    whose flavors did not change is let through, as Kueue does without its
    RejectUpdatesToCQWithInvalidOnFlavors gate), and concurrentAdmissionPolicy immutable."""
    old_spec, spec = _spec(old), _spec(new)
    errors = _cel_rules(spec) + _validate_spec(spec) + _admission_check_flavors(spec, old_spec)
    policy = spec.get("concurrentAdmissionPolicy")
    if policy != old_spec.get("concurrentAdmissionPolicy"):
        errors.append(
            invalid(
                _SPEC.child("concurrentAdmissionPolicy"),
                policy,
                FIELD_IMMUTABLE,
                "concurrent-admission-immutable",
            )
        )
    return errors


def _cel_rules(spec: Mapping[str, Any]) -> list[FieldError]:
    """The CRD's x-kubernetes-validations of a ClusterQueue spec (their errors as the API
    server words them: the value is the node's type)."""
    errors: list[FieldError] = []
    if not spec.get("cohortName") and _has_borrowing_limit(spec):
        errors.append(
            rule_failed(_SPEC, BORROWING_NEEDS_COHORT_MESSAGE, "cel:borrowing-needs-cohort")
        )
    fungibility = spec.get("flavorFungibility")
    if isinstance(fungibility, Mapping) and fungibility.get("preference") is not None:
        borrow = fungibility.get("whenCanBorrow", "MayStopSearch")
        preempt = fungibility.get("whenCanPreempt", "TryNextFlavor")
        if borrow != "TryNextFlavor" or preempt != "TryNextFlavor":
            errors.append(
                rule_failed(
                    _SPEC.child("flavorFungibility"),
                    FUNGIBILITY_PREFERENCE_MESSAGE,
                    "cel:fungibility-preference",
                )
            )
    preemption = spec.get("preemption")
    if isinstance(preemption, Mapping):
        borrow_within = preemption.get("borrowWithinCohort")
        if (
            preemption.get("reclaimWithinCohort", "Never") == "Never"
            and isinstance(borrow_within, Mapping)
            and borrow_within.get("policy", "Never") != "Never"
        ):
            errors.append(
                rule_failed(
                    _SPEC.child("preemption"),
                    RECLAIM_NEVER_MESSAGE,
                    "cel:reclaim-never-borrow",
                )
            )
    return errors


def _has_borrowing_limit(spec: Mapping[str, Any]) -> bool:
    return any(
        isinstance(quota, Mapping) and quota.get("borrowingLimit") is not None
        for group in _groups(spec)
        for flavor in group.get("flavors") or ()
        if isinstance(flavor, Mapping)
        for quota in flavor.get("resources") or ()
    )


def _validate_spec(spec: Mapping[str, Any]) -> list[FieldError]:
    """`validateClusterQueueSpec` (the concurrent admission policy's checks are behind a
    feature gate Kueue keeps off; quotagate reports the policy as not implemented)."""
    groups_path = _SPEC.child("resourceGroups")
    errors = validate_resource_groups(
        spec.get("resourceGroups"),
        groups_path,
        has_parent=bool(spec.get("cohortName")),
        cohort=False,
    )
    errors += validate_label_selector(
        spec.get("namespaceSelector"), _SPEC.child("namespaceSelector"), "namespace-selector"
    )
    errors += validate_fair_sharing(spec.get("fairSharing"), _SPEC.child("fairSharing"))
    groups = _groups(spec)
    flavors = sum(len(group.get("flavors") or ()) for group in groups)
    if flavors > _MAX_FLAVORS:
        errors.append(
            invalid(
                groups_path,
                flavors,
                f"total number of flavors across all resourceGroups must be ≤ {_MAX_FLAVORS}, "
                f"got {flavors}",
                "total-flavors",
            )
        )
    covered = sum(len(group.get("coveredResources") or ()) for group in groups)
    if covered > _MAX_COVERED:
        errors.append(
            invalid(
                groups_path,
                covered,
                "total number of covered resources across all resourceGroups must be ≤ "
                f"{_MAX_COVERED}, got {covered}",
                "total-covered-resources",
            )
        )
    for g, group in enumerate(groups):
        combinations = sum(
            len(flavor.get("resources") or ())
            for flavor in group.get("flavors") or ()
            if isinstance(flavor, Mapping)
        )
        if combinations > _MAX_COMBINATIONS:
            errors.append(
                invalid(
                    groups_path.index(g),
                    combinations,
                    "number of flavor-resource combinations in a resourceGroup must be ≤ "
                    f"{_MAX_COMBINATIONS}, got {combinations}",
                    "flavor-resource-combinations",
                )
            )
    return errors


def _on_flavors(spec: Mapping[str, Any]) -> dict[str, list[str]]:
    strategy = spec.get("admissionChecksStrategy")
    if not isinstance(strategy, Mapping):
        return {}
    out: dict[str, list[str]] = {}
    for check in strategy.get("admissionChecks") or ():
        if isinstance(check, Mapping):
            out[str(check.get("name"))] = [str(f) for f in check.get("onFlavors") or ()]
    return out


def _admission_check_flavors(
    spec: Mapping[str, Any], old_spec: Mapping[str, Any] | None
) -> list[FieldError]:
    """`validateAdmissionCheckOnFlavors`: an admission check's onFlavors are flavors of the
    queue. On update, a check whose onFlavors did not change, on a queue whose flavors did
    not change, is not looked at (Kueue's leniency for queues stored before the rule)."""
    strategy = spec.get("admissionChecksStrategy")
    if not isinstance(strategy, Mapping):
        return []
    flavors = _flavor_names(spec)
    lenient: dict[str, list[str]] = {}
    if old_spec is not None and set(_flavor_names(old_spec)) == set(flavors):
        lenient = _on_flavors(old_spec)
    errors = []
    path = _SPEC.child("admissionChecksStrategy", "admissionChecks")
    for i, check in enumerate(strategy.get("admissionChecks") or ()):
        if not isinstance(check, Mapping):
            continue
        on_flavors = [str(f) for f in check.get("onFlavors") or ()]
        before = lenient.get(str(check.get("name")))
        if before is not None and set(before) == set(on_flavors):
            continue
        for j, flavor in enumerate(on_flavors):
            if flavor not in flavors:
                errors.append(
                    not_supported(
                        path.index(i).child("onFlavors").index(j),
                        flavor,
                        flavors,
                        "admission-check-flavors",
                    )
                )
    return errors


def validate_cohort(obj: Mapping[str, Any]) -> list[FieldError]:
    """`validateCohort` (create and update alike): the weight, and the resource groups with
    limits only under a parent and no lendingLimit ≤ nominalQuota rule (a Cohort lends its
    whole subtree, not only its own quota)."""
    spec = _spec(obj)
    errors = validate_fair_sharing(spec.get("fairSharing"), _SPEC.child("fairSharing"))
    errors += validate_resource_groups(
        spec.get("resourceGroups"),
        _SPEC.child("resourceGroups"),
        has_parent=bool(spec.get("parentName")),
        cohort=True,
    )
    return errors
