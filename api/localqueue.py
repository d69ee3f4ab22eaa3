"""LocalQueue: a namespaced queue that points at one ClusterQueue."""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

from pydantic import Field

from api.common import (
    Condition,
    DNSSubdomain,
    FairSharing,
    Int64,
    KueueModel,
    NonNegativeInt32,
    cel,
    list_map,
)
from api.constants import Kind, StopPolicy
from api.objects import WIDE_AGE_COLUMN, CRDNames, KueueObject, PrinterColumn, Scope
from api.quantity import QuantityValue

__all__ = [
    "LocalQueue",
    "LocalQueueAdmissionFairSharingStatus",
    "LocalQueueFairSharingStatus",
    "LocalQueueFlavorUsage",
    "LocalQueueResourceUsage",
    "LocalQueueSpec",
    "LocalQueueStatus",
]


class LocalQueueSpec(KueueModel):
    """LocalQueueSpec names the ClusterQueue that Workloads of this queue use."""

    cluster_queue: DNSSubdomain | None = Field(
        default=None, json_schema_extra=cel(("self == oldSelf", "field is immutable"))
    )
    """The ClusterQueue that backs this queue; it cannot be changed (Kueue's schema leaves
    it optional: a LocalQueue without one admits nothing)."""
    stop_policy: StopPolicy = StopPolicy.NONE
    """Hold stops new admissions; HoldAndDrain also evicts admitted Workloads."""
    fair_sharing: FairSharing | None = None
    """The weight its recent usage is divided by under admission fair sharing."""


class LocalQueueResourceUsage(KueueModel):
    name: str
    total: QuantityValue | None = None


class LocalQueueFlavorUsage(KueueModel):
    name: DNSSubdomain
    resources: list[LocalQueueResourceUsage] = Field(
        max_length=64, json_schema_extra=list_map("name")
    )


class LocalQueueAdmissionFairSharingStatus(KueueModel):
    """The LocalQueue's recent usage, as admission fair sharing last sampled it."""

    consumed_resources: dict[str, QuantityValue]
    """Per resource, admitted usage over time with the half-life decay applied."""
    last_update: datetime
    """When consumedResources was last updated."""


class LocalQueueFairSharingStatus(KueueModel):
    weighted_share: Int64
    """Kueue's share field, required by its schema; 0 for a LocalQueue (no quota of its own)."""
    admission_fair_sharing_status: LocalQueueAdmissionFairSharingStatus | None = None


class LocalQueueStatus(KueueModel):
    """LocalQueueStatus is what the controller observed for this queue."""

    conditions: list[Condition] | None = Field(
        default=None,
        max_length=16,
        json_schema_extra=list_map("type"),
    )
    pending_workloads: NonNegativeInt32 | None = None
    reserving_workloads: NonNegativeInt32 | None = None
    admitted_workloads: NonNegativeInt32 | None = None
    flavors_reservation: list[LocalQueueFlavorUsage] | None = Field(
        default=None,
        max_length=64,
        json_schema_extra=list_map("name"),
    )
    flavors_usage: list[LocalQueueFlavorUsage] | None = Field(
        default=None,
        max_length=64,
        json_schema_extra=list_map("name"),
    )
    fair_sharing: LocalQueueFairSharingStatus | None = None
    """Admission fair sharing's record of the LocalQueue's recent usage."""


class LocalQueue(KueueObject):
    """LocalQueue is the Schema for the localqueues API."""

    CRD: ClassVar[CRDNames] = CRDNames(
        plural="localqueues",
        singular="localqueue",
        scope=Scope.NAMESPACED,
        short_names=("queue", "queues", "lq"),
        printer_columns=(
            PrinterColumn("ClusterQueue", ".spec.clusterQueue"),
            PrinterColumn("Pending Workloads", ".status.pendingWorkloads", "integer"),
            PrinterColumn("Admitted Workloads", ".status.admittedWorkloads", "integer"),
            WIDE_AGE_COLUMN,
        ),
    )

    kind: str = Kind.LOCAL_QUEUE.value
    spec: LocalQueueSpec = Field(default_factory=LocalQueueSpec)
    status: LocalQueueStatus | None = None
