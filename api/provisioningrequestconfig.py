"""ProvisioningRequestConfig: the parameters of a `kueue.x-k8s.io/provisioning-request`
admission check (the class and parameters of the cluster autoscaler's ProvisioningRequest,
the resources it manages, its retries and the pod set updates it yields)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, ClassVar, Final

from pydantic import Field, StringConstraints

from api.admissioncheck import DNS_SUBDOMAIN_PATTERN
from api.common import KueueModel, NonNegativeInt32, list_map, set_list
from api.constants import Kind
from api.objects import CRDNames, KueueObject, Scope

__all__ = [
    "PROVISIONING_REQUEST_CONTROLLER_NAME",
    "PodSetMergePolicy",
    "ProvisioningRequestConfig",
    "ProvisioningRequestConfigSpec",
    "ProvisioningRequestPodSetUpdates",
    "ProvisioningRequestPodSetUpdatesNodeSelector",
    "ProvisioningRequestRetryStrategy",
]

PROVISIONING_REQUEST_CONTROLLER_NAME: Final = "kueue.x-k8s.io/provisioning-request"

_QUALIFIED_NAME_PATTERN: Final = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)

Parameter = Annotated[str, StringConstraints(max_length=255)]


class PodSetMergePolicy(StrEnum):
    """How pod sets are merged before they reach the cluster autoscaler."""

    IDENTICAL_POD_TEMPLATES = "IdenticalPodTemplates"
    IDENTICAL_WORKLOAD_SCHEDULING_REQUIREMENTS = "IdenticalWorkloadSchedulingRequirements"


class ProvisioningRequestRetryStrategy(KueueModel):
    """How often, and after how long, a failed ProvisioningRequest is tried again."""

    backoff_limit_count: NonNegativeInt32 | None = Field(
        default=None, json_schema_extra={"default": 3}
    )
    """Retries before the Workload is deactivated (0: none)."""
    backoff_base_seconds: NonNegativeInt32 | None = Field(
        default=None, json_schema_extra={"default": 60}
    )
    """The first retry's pause; each next one doubles it."""
    backoff_max_seconds: NonNegativeInt32 | None = Field(
        default=None, json_schema_extra={"default": 1800}
    )
    """The longest pause between retries."""


class ProvisioningRequestPodSetUpdatesNodeSelector(KueueModel):
    """A node selector added to the pods, its value read from the request's status."""

    key: str = Field(min_length=1, max_length=317, pattern=_QUALIFIED_NAME_PATTERN)
    value_from_provisioning_class_detail: str = Field(min_length=1, max_length=32768)


class ProvisioningRequestPodSetUpdates(KueueModel):
    """Updates to the pods that target the provisioned nodes."""

    node_selector: list[ProvisioningRequestPodSetUpdatesNodeSelector] | None = Field(
        default=None, max_length=8, json_schema_extra=list_map("key")
    )


class ProvisioningRequestConfigSpec(KueueModel):
    """The ProvisioningRequest a check creates for a Workload with reserved quota."""

    provisioning_class_name: str = Field(
        min_length=1, max_length=253, pattern=DNS_SUBDOMAIN_PATTERN
    )
    """The request's `provisioningClassName` (e.g. `check-capacity.autoscaling.x-k8s.io`)."""
    parameters: dict[str, Parameter] | None = Field(
        default=None, json_schema_extra={"maxProperties": 100}
    )
    """The request's `parameters`."""
    managed_resources: list[str] | None = Field(
        default=None, max_length=100, json_schema_extra=set_list()
    )
    """Only pod sets asking for one of these go into the request (empty: all)."""
    retry_strategy: ProvisioningRequestRetryStrategy | None = Field(
        default=None,
        json_schema_extra={
            "default": {"backoffLimitCount": 3, "backoffBaseSeconds": 60, "backoffMaxSeconds": 1800}
        },
    )
    pod_set_updates: ProvisioningRequestPodSetUpdates | None = None
    pod_set_merge_policy: PodSetMergePolicy | None = None


class ProvisioningRequestConfig(KueueObject):
    """ProvisioningRequestConfig is the Schema for the provisioningrequestconfig API."""

    CRD: ClassVar[CRDNames] = CRDNames(
        plural="provisioningrequestconfigs",
        singular="provisioningrequestconfig",
        scope=Scope.CLUSTER,
        short_names=("prc",),
    )

    kind: str = Kind.PROVISIONING_REQUEST_CONFIG.value
    spec: ProvisioningRequestConfigSpec | None = None
