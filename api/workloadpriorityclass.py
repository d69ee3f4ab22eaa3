"""WorkloadPriorityClass: a named priority for Workloads, independent of pod priority."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from api.common import Int32
from api.constants import Kind
from api.objects import WIDE_AGE_COLUMN, CRDNames, KueueObject, PrinterColumn, Scope

__all__ = ["WorkloadPriorityClass"]


class WorkloadPriorityClass(KueueObject):
    """WorkloadPriorityClass is the Schema for the workloadpriorityclasses API."""

    CRD: ClassVar[CRDNames] = CRDNames(
        plural="workloadpriorityclasses",
        singular="workloadpriorityclass",
        scope=Scope.CLUSTER,
        short_names=("wpc",),
        printer_columns=(PrinterColumn("Value", ".value", "integer"), WIDE_AGE_COLUMN),
    )

    kind: str = Kind.WORKLOAD_PRIORITY_CLASS.value
    value: Int32
    """The priority of Workloads that name this class; higher is more important."""
    description: str | None = Field(default=None, max_length=2048)
    """What the class is for."""
