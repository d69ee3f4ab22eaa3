"""Configuration sections quotagate reads under Kueue's names and with Kueue's rules:
`resources` (exclusions, transformations, quotaCheckStrategy) and
`managedJobsNamespaceSelector` (which namespaces' jobs are managed). Used by
`controller/config.py`, in quotagate's own format and in Kueue's (`kueue_config.py`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from api.quantities import InvalidQuantity, exact_value
from controller.core.model.api_fields import FieldReader
from controller.core.model.resource_rules import (
    QuotaCheckStrategy,
    ResourceRules,
    Strategy,
    Transformation,
)
from controller.core.model.selectors import LabelSelector

__all__ = [
    "SYSTEM_NAMESPACE",
    "ResourceTransformation",
    "Resources",
    "default_namespace_selector",
    "parse_namespace_selector",
]

SYSTEM_NAMESPACE = "kube-system"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class ResourceTransformation(_Section):
    """Kueue's `resources.transformations[]`."""

    input: str = Field(min_length=1, description="the resource a pod requests")
    strategy: Strategy = Field(
        Strategy.RETAIN, description="Retain keeps the input beside its outputs; Replace drops it"
    )
    multiply_by: str = Field(
        "",
        alias="multiplyBy",
        description="a resource whose request multiplies the input before the outputs are computed",
    )
    outputs: dict[str, str | int | float] = Field(
        default_factory=dict, description="output resources and their quantity per unit of input"
    )

    @field_validator("outputs")
    @classmethod
    def _quantities(cls, value: dict[str, Any]) -> dict[str, Any]:
        for name, quantity in value.items():
            try:
                exact_value(quantity)
            except (InvalidQuantity, ValueError) as exc:
                raise ValueError(f"{name}: {exc}") from None
        return value

    def core(self) -> Transformation:
        outputs = {name: exact_value(q) for name, q in self.outputs.items()}
        return Transformation(self.input, outputs, self.strategy, self.multiply_by)


class Resources(_Section):
    """Kueue's `resources`: which requests quota sees, and how undeclared ones are checked."""

    exclude_resource_prefixes: list[str] = Field(
        default_factory=list,
        alias="excludeResourcePrefixes",
        description="resources whose name starts with one of these are not counted",
    )
    transformations: list[ResourceTransformation] = Field(default_factory=list)
    quota_check_strategy: QuotaCheckStrategy | None = Field(
        None,
        alias="quotaCheckStrategy",
        description="BlockUndeclared (unset): a resource no ClusterQueue covers blocks "
        "admission; IgnoreUndeclared: it is neither checked nor charged",
    )

    @model_validator(mode="after")
    def _kueue_rules(self) -> Resources:
        seen: set[str] = set()
        for index, transformation in enumerate(self.transformations):
            if transformation.input in seen:
                raise ValueError(
                    f"transformations[{index}].input: Duplicate value: {transformation.input!r}"
                )
            seen.add(transformation.input)
        if (
            self.quota_check_strategy is QuotaCheckStrategy.IGNORE_UNDECLARED
            and self.exclude_resource_prefixes
        ):
            raise ValueError(
                "quotaCheckStrategy: excludeResourcePrefixes is not allowed when "
                "quotaCheckStrategy is IgnoreUndeclared"
            )
        return self

    def core(self) -> ResourceRules:
        return ResourceRules(
            tuple(self.exclude_resource_prefixes),
            tuple(t.core() for t in self.transformations),
            self.quota_check_strategy or QuotaCheckStrategy.BLOCK_UNDECLARED,
        )


def default_namespace_selector(own_namespace: str) -> dict[str, Any]:
    """Kueue's default `managedJobsNamespaceSelector`: every namespace but kube-system and
    the controller's own."""
    return {
        "matchExpressions": [
            {
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": [SYSTEM_NAMESPACE, own_namespace],
            }
        ]
    }


def parse_namespace_selector(raw: Any, own_namespace: str) -> LabelSelector:
    """A `managedJobsNamespaceSelector` as the engine matches it; ValueError naming the
    problem when Kueue would refuse it: malformed, or matching kube-system or the
    controller's own namespace (Kueue's `validateManagedJobsNamespaceSelector`)."""
    reader = FieldReader()
    selector = reader.selector(raw if raw is not None else {}, "managedJobsNamespaceSelector")
    if reader.problems:
        raise ValueError("; ".join(f"{path}: {message}" for path, message in reader.problems))
    assert selector is not None
    for namespace in (SYSTEM_NAMESPACE, own_namespace):
        if selector.matches({"kubernetes.io/metadata.name": namespace}):
            raise ValueError(f"should not match the {namespace!r} namespace")
    return selector
