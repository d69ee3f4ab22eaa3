"""Shared building blocks of the API models: base classes, integer and name types,
ObjectMeta, Condition, LabelSelector, Toleration and Taint.

Every model reads and writes Kubernetes JSON (camelCase aliases, `None` omitted) and
keeps fields it does not know (`extra="allow"`), so a Kueue manifest survives a round
trip through quotagate unchanged. Whether the *CRD* keeps unknown fields is a separate,
per-model choice: models deriving from `OpenModel` are marked
`x-kubernetes-preserve-unknown-fields`, those deriving from `KueueModel` are pruned by
the API server like any structural schema.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Final

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, WithJsonSchema
from pydantic.alias_generators import to_camel

from api.constants import (
    ConditionStatus,
    LabelSelectorOperator,
    TaintEffect,
    TolerationOperator,
)
from api.quantity import NonNegativeQuantity

__all__ = [
    "PRESERVE_UNKNOWN_FIELDS",
    "Condition",
    "DNSSubdomain",
    "FairSharing",
    "FairSharingStatus",
    "Int32",
    "Int64",
    "KueueModel",
    "LabelSelector",
    "LabelSelectorRequirement",
    "NonNegativeInt32",
    "ObjectMeta",
    "OpenModel",
    "OwnerReference",
    "PositiveInt32",
    "Taint",
    "Toleration",
    "atomic_list",
    "list_map",
]

PRESERVE_UNKNOWN_FIELDS: Final = "x-kubernetes-preserve-unknown-fields"

_INT32_MIN: Final = -(2**31)
_INT32_MAX: Final = 2**31 - 1

Int32 = Annotated[int, Field(ge=_INT32_MIN, le=_INT32_MAX, json_schema_extra={"format": "int32"})]
NonNegativeInt32 = Annotated[int, Field(ge=0, le=_INT32_MAX, json_schema_extra={"format": "int32"})]
PositiveInt32 = Annotated[int, Field(ge=1, le=_INT32_MAX, json_schema_extra={"format": "int32"})]
Int64 = Annotated[
    int,
    Field(ge=-(2**63), le=2**63 - 1),
    # The API server rejects ±2^63 as schema bounds; the format says the same thing.
    WithJsonSchema({"type": "integer", "format": "int64"}),
]

DNSSubdomain = Annotated[
    str,
    StringConstraints(
        max_length=253,
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
    ),
]
"""A Kubernetes object name (RFC 1123 subdomain), as Kueue validates references."""


def list_map(*keys: str) -> dict[str, Any]:
    """CRD markers of a list keyed by `keys` (`+listType=map`, `+listMapKey=...`)."""
    return {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": list(keys)}


def atomic_list() -> dict[str, Any]:
    """CRD marker of a list replaced as a whole on merge (`+listType=atomic`)."""
    return {"x-kubernetes-list-type": "atomic"}


class KueueModel(BaseModel):
    """Base of every API model: camelCase JSON, unknown fields kept in Python."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="allow",
        use_attribute_docstrings=True,
    )

    def to_dict(self, *, exclude_unset: bool = False) -> dict[str, Any]:
        """Kubernetes JSON: camelCase keys, `None` omitted, quantities as canonical strings.

        With `exclude_unset`, fields never given (defaults) are left out too, so a
        manifest read with `load_object` comes back exactly as written.
        """
        return self.model_dump(
            mode="json", by_alias=True, exclude_none=True, exclude_unset=exclude_unset
        )


class OpenModel(KueueModel):
    """A model whose CRD schema keeps unknown fields (Kueue fields quotagate ignores)."""

    model_config = ConfigDict(json_schema_extra={PRESERVE_UNKNOWN_FIELDS: True})


class FairSharing(KueueModel):
    """A Cohort's, ClusterQueue's or LocalQueue's weight in fair sharing."""

    weight: NonNegativeQuantity | None = Field(default=None, json_schema_extra={"default": 1})
    """Usage (above nominal quota, for a ClusterQueue or Cohort) is divided by it (0: an
    infinite share); not negative."""


class OwnerReference(KueueModel):
    """`metadata.ownerReferences[]`."""

    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(KueueModel):
    """The parts of `metadata` quotagate reads; everything else is kept as is."""

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: datetime | None = None
    deletion_timestamp: datetime | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: list[OwnerReference] | None = None
    finalizers: list[str] | None = None


class Condition(KueueModel):
    """A status condition, exactly `metav1.Condition`."""

    type: Annotated[
        str,
        StringConstraints(
            max_length=316,
            pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
        ),
    ]
    """Type of condition in CamelCase, e.g. `QuotaReserved`."""
    status: ConditionStatus
    reason: Annotated[
        str,
        StringConstraints(
            min_length=1, max_length=1024, pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
        ),
    ]
    """A programmatic identifier for the last transition, in CamelCase."""
    message: Annotated[str, StringConstraints(max_length=32768)]
    """A human-readable message about the transition."""
    last_transition_time: datetime
    """When the condition last changed status."""
    observed_generation: (
        Annotated[int, Field(ge=0, json_schema_extra={"format": "int64"})] | None
    ) = None
    """The `metadata.generation` the condition was set for."""


class LabelSelectorRequirement(KueueModel):
    key: str
    operator: LabelSelectorOperator
    values: list[str] | None = None


class LabelSelector(KueueModel):
    """`metav1.LabelSelector`; `{}` selects everything."""

    match_labels: dict[str, str] | None = None
    match_expressions: list[LabelSelectorRequirement] | None = None


class Toleration(KueueModel):
    """`corev1.Toleration`."""

    key: str | None = None
    operator: TolerationOperator | None = None
    value: str | None = None
    effect: TaintEffect | None = None
    toleration_seconds: Int64 | None = None


class Taint(KueueModel):
    """`corev1.Taint`."""

    key: str
    value: str | None = None
    effect: TaintEffect
    time_added: datetime | None = None


class FairSharingStatus(KueueModel):
    """A ClusterQueue's or Cohort's share while fair sharing is on."""

    weighted_share: Int64
    """The largest ratio of usage above nominal to lendable quota (per mille), divided by
    the weight, rounded up; 9223372036854775807 with weight 0 while borrowing."""
