"""Quota checks shared by ClusterQueues and Cohorts: resource groups, limits and the
fair-sharing weight (Kueue's `pkg/webhooks/clusterqueue_webhook.go` `validateResourceGroups`,
`pkg/webhooks/common.go`, and the CRD rule every ResourceGroup carries).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from fractions import Fraction
from typing import Any, Final

from api.quantities import InvalidQuantity, Quantity, exact_value
from api.validation.field_errors import FieldError, Path, duplicate, invalid, rule_failed
from api.validation.names import is_qualified_name

__all__ = [
    "IS_NEGATIVE",
    "SAME_SIZE_MESSAGE",
    "validate_fair_sharing",
    "validate_resource_groups",
]

IS_NEGATIVE: Final = "must be greater than or equal to 0"
"""apimachinery's `IsNegativeErrorMsg`."""
SAME_SIZE_MESSAGE: Final = "flavors must have the same number of resources as the coveredResources"
"""The CRD rule on every ResourceGroup (`self.flavors.all(x, size(x.resources) ==
size(self.coveredResources))`)."""
_LENDING_ABOVE_NOMINAL: Final = "must be less than or equal to the nominalQuota"
_ONE_NANO: Final = Fraction(1, 10**9)


def _items(value: Any) -> Iterator[tuple[int, Mapping[str, Any]]]:
    if isinstance(value, list):
        for i, item in enumerate(value):
            if isinstance(item, Mapping):
                yield i, item


def quantity_text(value: Any) -> str:
    """A quantity as Kubernetes prints it (`Quantity.String()`); unparsable text as given."""
    try:
        quantity = Quantity.parse(value)
        if exact_value(value) * 1000 != quantity.milli:  # finer than a milli-unit: as written
            return str(value)
        return str(quantity)
    except (InvalidQuantity, TypeError, ValueError):
        return str(value)


def _exact(value: Any) -> Fraction | None:
    try:
        return exact_value(value)
    except (InvalidQuantity, TypeError, ValueError):
        return None


def _not_negative(value: Any, path: Path) -> list[FieldError]:
    exact = _exact(value)
    if exact is not None and exact < 0:
        return [invalid(path, quantity_text(value), IS_NEGATIVE, "quota-not-negative")]
    return []


def validate_resource_groups(
    groups: Any, path: Path, *, has_parent: bool, cohort: bool
) -> list[FieldError]:
    """`validateResourceGroups`: covered resources valid and in one group only, flavors in
    one group only, each flavor's resources named as the covered ones in order, quotas not
    negative, limits only under a parent (a cohort for a ClusterQueue, a parent for a
    Cohort) and, for a ClusterQueue only, lendingLimit ≤ nominalQuota. The CRD's rule that
    every flavor lists as many resources as the group covers is checked too (for objects
    stored without it)."""
    errors: list[FieldError] = []
    seen_resources: set[str] = set()
    seen_flavors: set[str] = set()
    for g, group in _items(groups):
        gpath = path.index(g)
        covered = [str(name) for name in group.get("coveredResources") or ()]
        for j, name in enumerate(covered):
            cpath = gpath.child("coveredResources").index(j)
            errors.extend(
                invalid(cpath, name, message, "resource-name")
                for message in is_qualified_name(name)
            )
            if name in seen_resources:
                errors.append(duplicate(cpath, name, "resource-in-one-group"))
            else:
                seen_resources.add(name)
        flavors = list(_items(group.get("flavors")))
        if any(len(flavor.get("resources") or ()) != len(covered) for _, flavor in flavors):
            errors.append(rule_failed(gpath, SAME_SIZE_MESSAGE, "cel:flavor-resources-size"))
        for f, flavor in flavors:
            fpath = gpath.child("flavors").index(f)
            errors.extend(
                _flavor_quotas(flavor, covered, fpath, has_parent=has_parent, cohort=cohort)
            )
            name = str(flavor.get("name") or "")
            if name in seen_flavors:
                errors.append(duplicate(fpath.child("name"), name, "flavor-in-one-group"))
            else:
                seen_flavors.add(name)
    return errors


def _flavor_quotas(
    flavor: Mapping[str, Any], covered: Sequence[str], path: Path, *, has_parent: bool, cohort: bool
) -> list[FieldError]:
    """`validateFlavorQuotas`: only the first len(coveredResources) entries are looked at,
    as Kueue's loop does (the size rule reports the rest)."""
    errors: list[FieldError] = []
    for i, quota in _items(flavor.get("resources")):
        if i >= len(covered):
            break
        qpath = path.child("resources").index(i)
        name = str(quota.get("name") or "")
        if name != covered[i]:
            errors.append(
                invalid(
                    qpath.child("name"),
                    name,
                    "must match the name in coveredResources",
                    "resource-matches-covered",
                )
            )
        errors.extend(_not_negative(quota.get("nominalQuota"), qpath.child("nominalQuota")))
        borrowing = quota.get("borrowingLimit")
        if borrowing is not None:
            errors.extend(_limit(borrowing, qpath.child("borrowingLimit"), has_parent, cohort))
            errors.extend(_not_negative(borrowing, qpath.child("borrowingLimit")))
        lending = quota.get("lendingLimit")
        if lending is not None:
            lpath = qpath.child("lendingLimit")
            errors.extend(_not_negative(lending, lpath))
            errors.extend(_limit(lending, lpath, has_parent, cohort))
            if not cohort:
                lend, nominal = _exact(lending), _exact(quota.get("nominalQuota"))
                if lend is not None and nominal is not None and lend > nominal:
                    errors.append(
                        invalid(
                            lpath,
                            quantity_text(lending),
                            _LENDING_ABOVE_NOMINAL,
                            "lending-within-nominal",
                        )
                    )
    return errors


def _limit(value: Any, path: Path, has_parent: bool, cohort: bool) -> list[FieldError]:
    """`validateLimit`: a limit needs something to borrow from or lend to."""
    if has_parent:
        return []
    parent = "parent" if cohort else "cohort"
    return [
        invalid(
            path, quantity_text(value), f"must be nil when {parent} is empty", "limit-needs-parent"
        )
    ]


def validate_fair_sharing(fair_sharing: Any, path: Path) -> list[FieldError]:
    """`validateFairSharing`: the weight is not negative, and not so small (at most 1n,
    but not 0) that it would collapse."""
    if not isinstance(fair_sharing, Mapping) or fair_sharing.get("weight") is None:
        return []
    weight = fair_sharing["weight"]
    exact = _exact(weight)
    if exact is None:
        return []
    errors = []
    if exact < 0:
        errors.append(invalid(path, quantity_text(weight), IS_NEGATIVE, "weight-not-negative"))
    if 0 < exact <= _ONE_NANO:
        errors.append(
            invalid(
                path, quantity_text(weight), "When not 0, weight must be > 10e-9", "weight-not-tiny"
            )
        )
    return errors
