"""LocalQueue: a namespaced queue that points at one ClusterQueue."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from api.common import (
    Condition,
    DNSSubdomain,
    KueueModel,
    NonNegativeInt32,
    OpenModel,
    list_map,
)
from api.constants import Kind, StopPolicy
from api.objects import WIDE_AGE_COLUMN, CRDNames, KueueObject, PrinterColumn, Scope
from api.quantity import QuantityValue

__all__ = [
    "LocalQueue",
    "LocalQueueFlavorUsage",
    "LocalQueueResourceUsage",
    "LocalQueueSpec",
    "LocalQueueStatus",
]


class LocalQueueSpec(OpenModel):
    """LocalQueueSpec names the ClusterQueue that Workloads of this queue use."""

    cluster_queue: DNSSubdomain
    """The ClusterQueue that backs this queue (immutable in Kueue)."""
    stop_policy: StopPolicy = StopPolicy.NONE
    """Hold stops new admissions; HoldAndDrain also evicts admitted Workloads."""


class LocalQueueResourceUsage(KueueModel):
    name: str
    total: QuantityValue | None = None


class LocalQueueFlavorUsage(KueueModel):
    name: str
    resources: list[LocalQueueResourceUsage] | None = Field(
        default=None,
        max_length=64,
        json_schema_extra=list_map("name"),
    )


class LocalQueueStatus(OpenModel):
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
    spec: LocalQueueSpec
    status: LocalQueueStatus | None = None
