"""The parts of a `PodTemplateSpec` that admission reads: requests (per container, per init
container and the pod's own), overhead, placement.

In Python the fields quotagate needs are typed and the rest is kept as is. In the CRD the
template has Kubernetes' whole `PodTemplateSpec` schema, as Kueue's has
(api/podtemplate_schema.py), so a misspelt pod field is pruned or refused, not stored.
"""

from __future__ import annotations

import copy

from pydantic import GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

from api.common import KueueModel, Toleration
from api.podtemplate_schema import load
from api.quantity import NonNegativeQuantity

__all__ = ["Container", "PodSpec", "PodTemplateMeta", "PodTemplateSpec", "ResourceRequirements"]


class ResourceRequirements(KueueModel):
    requests: dict[str, NonNegativeQuantity] | None = None
    limits: dict[str, NonNegativeQuantity] | None = None


class Container(KueueModel):
    name: str
    resources: ResourceRequirements | None = None


class PodSpec(KueueModel):
    containers: list[Container] | None = None
    init_containers: list[Container] | None = None
    resources: ResourceRequirements | None = None
    """Pod-level requests and limits (Kubernetes' PodLevelResources): cpu, memory and
    hugepages set here count for the whole pod instead of its containers' sum."""
    overhead: dict[str, NonNegativeQuantity] | None = None
    node_selector: dict[str, str] | None = None
    tolerations: list[Toleration] | None = None
    priority_class_name: str | None = None


class PodTemplateMeta(KueueModel):
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class PodTemplateSpec(KueueModel):
    """A pod template; in the CRD, Kubernetes' own schema (see the module docstring)."""

    metadata: PodTemplateMeta | None = None
    spec: PodSpec | None = None

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return copy.deepcopy(load())
