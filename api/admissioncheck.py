"""AdmissionCheck: a condition, evaluated by a check controller, that a Workload must meet
after its quota is reserved and before it is admitted (Kueue's two-phase admission)."""

from __future__ import annotations

from typing import ClassVar, Final

from pydantic import Field

from api.common import Condition, KueueModel, cel, list_map
from api.constants import Kind
from api.objects import CRDNames, KueueObject, Scope

__all__ = [
    "ADMISSION_CHECK_ACTIVE",
    "DNS_SUBDOMAIN_PATTERN",
    "AdmissionCheck",
    "AdmissionCheckParametersReference",
    "AdmissionCheckSpec",
    "AdmissionCheckStatus",
]

ADMISSION_CHECK_ACTIVE: Final = "Active"
"""The condition a check controller sets when it is ready to evaluate its checks."""

DNS_SUBDOMAIN_PATTERN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


class AdmissionCheckParametersReference(KueueModel):
    """The object that holds a check's parameters (e.g. a ProvisioningRequestConfig)."""

    api_group: str = Field(min_length=1, max_length=253, pattern=DNS_SUBDOMAIN_PATTERN)
    kind: str = Field(min_length=1, max_length=63, pattern=r"^(?i)[a-z]([-a-z0-9]*[a-z0-9])?$")
    name: str = Field(min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class AdmissionCheckSpec(KueueModel):
    """Which controller evaluates the check, and with which parameters."""

    controller_name: str = Field(
        min_length=1,
        max_length=253,
        json_schema_extra=cel(("self == oldSelf", "field is immutable")),
    )
    """The controller that evaluates this check (e.g. `kueue.x-k8s.io/provisioning-request`)."""
    parameters: AdmissionCheckParametersReference | None = None
    """A configuration object with the check's parameters."""


class AdmissionCheckStatus(KueueModel):
    """What the check's controller reports: `Active` once it evaluates the check."""

    conditions: list[Condition] | None = Field(
        default=None, max_length=16, json_schema_extra=list_map("type")
    )


class AdmissionCheck(KueueObject):
    """AdmissionCheck is the Schema for the admissionchecks API."""

    CRD: ClassVar[CRDNames] = CRDNames(
        plural="admissionchecks",
        singular="admissioncheck",
        scope=Scope.CLUSTER,
        short_names=("ac",),
    )

    kind: str = Kind.ADMISSION_CHECK.value
    spec: AdmissionCheckSpec | None = None
    status: AdmissionCheckStatus | None = None
