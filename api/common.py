"""Shared building blocks of the API models: base classes, integer and name types,
ObjectMeta, Condition, LabelSelector, Toleration and Taint.

Every model reads and writes Kubernetes JSON (camelCase aliases, `None` omitted) and
keeps fields it does not know in Python (`extra="allow"`), so a manifest read by `plan`
survives a round trip unchanged. The CRDs are strict: every field of Kueue's schema is
declared, so the API server prunes an unknown field (and refuses it under strict field
validation, kubectl's default) instead of storing it unread. Kueue's CRD rules ride on the
models as `x-kubernetes-validations` (`cel`), with Kueue's messages.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Final

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, WithJsonSchema
from pydantic.alias_generators import to_camel

from api.constants import ConditionStatus
from api.quantity import QuotaQuantity

__all__ = [
    "Condition",
    "DNSLabel",
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
    "OwnerReference",
    "PositiveInt32",
    "Taint",
    "Toleration",
    "atomic_list",
    "cel",
    "list_map",
    "toleration_list",
]

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

DNSLabel = Annotated[
    str, StringConstraints(max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
]
"""An RFC 1123 label: a pod set's name."""


def list_map(*keys: str) -> dict[str, Any]:
    """CRD markers of a list keyed by `keys` (`+listType=map`, `+listMapKey=...`)."""
    return {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": list(keys)}


def atomic_list() -> dict[str, Any]:
    """CRD marker of a list replaced as a whole on merge (`+listType=atomic`)."""
    return {"x-kubernetes-list-type": "atomic"}


def set_list() -> dict[str, Any]:
    """CRD marker of a list of unique scalars (`+listType=set`)."""
    return {"x-kubernetes-list-type": "set"}


def cel(*rules: tuple[str, str], **markers: Any) -> dict[str, Any]:
    """CRD validation rules (`+kubebuilder:validation:XValidation`): (CEL rule, message)
    pairs, with any other schema markers given alongside (`x-kubernetes-list-type`...)."""
    validations = [{"rule": rule, "message": message} for rule, message in rules]
    return {**markers, "x-kubernetes-validations": validations}


# The CRD rules of every toleration list Kueue validates (ResourceFlavor `tolerations`, a
# Workload's admission-check pod set updates), with Kueue's messages
# (api/validation/resourceflavor.py checks the same in Python).
_TOLERATION_RULES: Final = (
    (
        "self.all(x, (has(x.key) && x.key != '') || (has(x.operator) && x.operator == 'Exists'))",
        "operator must be Exists when 'key' is empty, which means 'match all values and all keys'",
    ),
    (
        "self.all(x, !has(x.tolerationSeconds) || (has(x.effect) && x.effect == 'NoExecute'))",
        "effect must be 'NoExecute' when 'tolerationSeconds' is set",
    ),
    (
        "self.all(x, !has(x.operator) || x.operator == 'Equal' || x.operator == 'Exists')",
        "supported toleration values: 'Equal'(default), 'Exists'",
    ),
    (
        "self.all(x, !(has(x.operator) && x.operator == 'Exists') || !has(x.value))",
        "a value must be empty when 'operator' is 'Exists'",
    ),
    (
        "self.all(x, !has(x.effect) || x.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])",
        "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'",
    ),
)


def toleration_list() -> dict[str, Any]:
    """Markers of a toleration list: atomic, at most 8, Kueue's rules."""
    return cel(*_TOLERATION_RULES, **atomic_list())


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


class FairSharing(KueueModel):
    """A Cohort's, ClusterQueue's or LocalQueue's weight in fair sharing."""

    weight: QuotaQuantity | None = Field(default=None, json_schema_extra={"default": 1})
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
    """A selector requirement; its operator and values are checked by the webhook
    (api/validation/names.py), as Kueue's `ValidateLabelSelector` does."""

    key: str
    operator: str
    """In, NotIn, Exists or DoesNotExist."""
    values: list[str] | None = Field(default=None, json_schema_extra=atomic_list())


class LabelSelector(KueueModel):
    """`metav1.LabelSelector`; `{}` selects everything."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-map-type": "atomic"})

    match_labels: dict[str, str] | None = None
    match_expressions: list[LabelSelectorRequirement] | None = Field(
        default=None, json_schema_extra=atomic_list()
    )


class Toleration(KueueModel):
    """`corev1.Toleration`; its operator and effect are checked by the list's rules
    (`toleration_list`)."""

    key: str | None = None
    operator: str | None = None
    """Equal (the default) or Exists."""
    value: str | None = None
    effect: str | None = None
    """NoSchedule, PreferNoSchedule or NoExecute; unset: every effect."""
    toleration_seconds: Int64 | None = None


class Taint(KueueModel):
    """`corev1.Taint`; its effect is checked by the list's rule."""

    key: str
    value: str | None = None
    effect: str
    """NoSchedule, PreferNoSchedule or NoExecute."""
    time_added: datetime | None = None


class FairSharingStatus(KueueModel):
    """A ClusterQueue's or Cohort's share while fair sharing is on."""

    weighted_share: Int64
    """The largest ratio of usage above nominal to lendable quota (per mille), divided by
    the weight, rounded up; 9223372036854775807 with weight 0 while borrowing."""
