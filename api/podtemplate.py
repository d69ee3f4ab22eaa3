"""The parts of a `PodTemplateSpec` that admission reads: requests, overhead, placement.

The CRD keeps a pod template free-form (`x-kubernetes-preserve-unknown-fields`): the pod
API is large, validated by Kubernetes itself when pods are created, and changes with
every release. In Python the fields quotagate needs are typed; the rest is kept as is.
"""

from __future__ import annotations

from typing import Any

from pydantic import GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

from api.common import PRESERVE_UNKNOWN_FIELDS, KueueModel, Toleration
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
    overhead: dict[str, NonNegativeQuantity] | None = None
    node_selector: dict[str, str] | None = None
    tolerations: list[Toleration] | None = None
    priority_class_name: str | None = None


class PodTemplateMeta(KueueModel):
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class PodTemplateSpec(KueueModel):
    """A pod template; free-form in the CRD (see the module docstring)."""

    metadata: PodTemplateMeta | None = None
    spec: PodSpec | None = None

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        free_form: dict[str, Any] = {
            "type": "object",
            "description": "template is the Pod template (free-form; validated by Kubernetes"
            " when pods are created).",
            PRESERVE_UNKNOWN_FIELDS: True,
        }
        return free_form
