"""Cohort: a named node of Kueue's quota tree, with an optional parent, quota and limits.

A ClusterQueue's `spec.cohortName` names a cohort; a Cohort object of that name is the
explicit form of it (without one the cohort is implicit). The schema is Kueue v1beta2's;
the checks Kueue's webhook makes (limits only under a parent, a weight that is not
negative) are the validating webhook's (api/validation/clusterqueue.py). `status.conditions`
is a quotagate addition (Kueue's Cohort status has only `fairSharing`): it carries the
`UnsupportedFields` condition of the parts quotagate does not compute yet
(controller/core/model/unsupported.py) and `Active=False` while the Cohort is invalid.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from api.clusterqueue import ResourceGroup
from api.common import (
    Condition,
    DNSSubdomain,
    FairSharing,
    FairSharingStatus,
    KueueModel,
    atomic_list,
    list_map,
)
from api.constants import Kind
from api.objects import CRDNames, KueueObject, Scope

__all__ = [
    "Cohort",
    "CohortFairSharingStatus",
    "CohortResourceGroup",
    "CohortSpec",
    "CohortStatus",
    "FairSharing",
]


class CohortResourceGroup(ResourceGroup):
    """A ClusterQueue's ResourceGroup, held by a Cohort (its quota is a shared pool on
    top of its members'; its limits cap what the subtree borrows from or lends to the
    parent)."""


class CohortSpec(KueueModel):
    """CohortSpec: the Cohort's parent, its own quota and its fair-sharing weight."""

    parent_name: DNSSubdomain | None = None
    """The parent Cohort; unset: a root, a name without an object: an implicit parent."""
    resource_groups: list[CohortResourceGroup] | None = Field(
        default=None, max_length=16, json_schema_extra=atomic_list()
    )
    """Quota on top of the members' (a shared pool), with limits towards the parent."""
    fair_sharing: FairSharing | None = None


CohortFairSharingStatus = FairSharingStatus  # the name earlier releases exported


class CohortStatus(KueueModel):
    """CohortStatus: fair-sharing state (Kueue's) and conditions (quotagate's)."""

    fair_sharing: FairSharingStatus | None = None
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
