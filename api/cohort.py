"""Cohort: a named node of Kueue's quota tree, with an optional parent, quota and limits.

A ClusterQueue's `spec.cohortName` names a cohort; a Cohort object of that name is the
explicit form of it (without one the cohort is implicit). The schema is Kueue v1beta2's,
with the API-server-side checks Kueue's webhook makes expressed as CRD rules: limits only
under a parent, a fair-sharing weight that is not negative. `status.conditions` is a
quotagate addition (Kueue's Cohort status has only `fairSharing`): it carries the
`UnsupportedFields` condition of the parts quotagate does not compute yet
(controller/core/unsupported.py).
"""

from __future__ import annotations

from typing import Any, ClassVar, Final

from pydantic import ConfigDict, Field, model_validator

from api.clusterqueue import ResourceGroup
from api.common import (
    Condition,
    DNSSubdomain,
    FairSharing,
    Int64,
    KueueModel,
    atomic_list,
    list_map,
)
from api.constants import Kind
from api.objects import CRDNames, KueueObject, Scope

__all__ = [
    "LIMITS_NEED_PARENT_MESSAGE",
    "Cohort",
    "CohortFairSharingStatus",
    "CohortResourceGroup",
    "CohortSpec",
    "CohortStatus",
    "FairSharing",
]

LIMITS_NEED_PARENT_MESSAGE: Final = (
    "borrowingLimit and lendingLimit must be nil when parentName is empty"
)
"""Kueue's webhook message for a limit on a root Cohort, as the CRD rule reports it."""

_SAME_SIZE_RULE: Final[dict[str, Any]] = {
    "rule": "self.flavors.all(x, size(x.resources) == size(self.coveredResources))",
    "message": "flavors must have the same number of resources as the coveredResources",
}
_LIMITS_NEED_PARENT_RULE: Final[dict[str, Any]] = {
    "rule": (
        "has(self.parentName) || !has(self.resourceGroups) || "
        "self.resourceGroups.all(g, g.flavors.all(f, f.resources.all(r, "
        "!has(r.borrowingLimit) && !has(r.lendingLimit))))"
    ),
    "message": LIMITS_NEED_PARENT_MESSAGE,
    "fieldPath": ".resourceGroups",
}


class CohortResourceGroup(ResourceGroup):
    """A ClusterQueue's ResourceGroup, held by a Cohort (its quota is a shared pool on
    top of its members'; its limits cap what the subtree borrows from or lends to the
    parent)."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [_SAME_SIZE_RULE]})


class CohortSpec(KueueModel):
    """CohortSpec: the Cohort's parent, its own quota and its fair-sharing weight."""

    model_config = ConfigDict(
        json_schema_extra={"x-kubernetes-validations": [_LIMITS_NEED_PARENT_RULE]}
    )

    parent_name: DNSSubdomain | None = None
    """The parent Cohort; unset: a root, a name without an object: an implicit parent."""
    resource_groups: list[CohortResourceGroup] | None = Field(
        default=None, max_length=16, json_schema_extra=atomic_list()
    )
    """Quota on top of the members' (a shared pool), with limits towards the parent."""
    fair_sharing: FairSharing | None = None

    @model_validator(mode="after")
    def _limits_need_parent(self) -> CohortSpec:
        """The CRD rule above, for manifests read without an API server (`plan`)."""
        if self.parent_name:
            return self
        for group in self.resource_groups or ():
            for flavor in group.flavors:
                for quota in flavor.resources:
                    if quota.borrowing_limit is not None or quota.lending_limit is not None:
                        raise ValueError(f"resourceGroups: {LIMITS_NEED_PARENT_MESSAGE}")
        return self


class CohortFairSharingStatus(KueueModel):
    weighted_share: Int64
    """The largest ratio of usage above nominal to lendable quota, divided by the weight."""


class CohortStatus(KueueModel):
    """CohortStatus: fair-sharing state (Kueue's) and conditions (quotagate's)."""

    fair_sharing: CohortFairSharingStatus | None = None
    conditions: list[Condition] | None = Field(
        default=None, max_length=16, json_schema_extra=list_map("type")
    )
    """quotagate's `UnsupportedFields` condition (not part of Kueue's Cohort status)."""


class Cohort(KueueObject):
    """Cohort defines the Cohorts API."""

    CRD: ClassVar[CRDNames] = CRDNames(
        plural="cohorts",
        singular="cohort",
        scope=Scope.CLUSTER,
        short_names=("co",),
        printer_columns=(),
    )

    kind: str = Kind.COHORT.value
    spec: CohortSpec = Field(default_factory=CohortSpec)
    status: CohortStatus | None = None
