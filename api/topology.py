"""Kueue's topology-aware scheduling types (`apis/kueue/v1beta2/topology_types.go`): the
Topology kind (the node labels of each level, from the widest to the narrowest), a pod
set's topology request and an assignment's topology (v1beta2's compressed format), with the
CRD rules of Kueue's schema."""

from __future__ import annotations

from typing import Annotated, ClassVar, Final

from pydantic import ConfigDict, Field, StringConstraints

from api.common import KueueModel, NonNegativeInt32, PositiveInt32, atomic_list, cel
from api.constants import HOSTNAME_LABEL, Kind
from api.objects import CRDNames, KueueObject, Scope

__all__ = [
    "LEVELS_HOSTNAME_LOWEST",
    "LEVELS_IMMUTABLE",
    "LEVELS_UNIQUE",
    "PodSetTopologyRequest",
    "Topology",
    "TopologyAssignment",
    "TopologyLevel",
    "TopologySpec",
]

_QUALIFIED_NAME: Final = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
LEVELS_IMMUTABLE: Final = (
    "levels are mutable only when kubernetes.io/hostname is the lowest level both before "
    "and after the change"
)
LEVELS_UNIQUE: Final = "must be unique"
LEVELS_HOSTNAME_LOWEST: Final = (
    "the kubernetes.io/hostname label can only be used at the lowest level of topology"
)


class TopologyLevel(KueueModel):
    """One level of a topology: the node label whose value names a node's domain there."""

    node_label: str = Field(min_length=1, max_length=316, pattern=_QUALIFIED_NAME)


class TopologySpec(KueueModel):
    """The levels, widest first (e.g. block, rack, hostname)."""

    levels: list[TopologyLevel] = Field(
        min_length=1,
        max_length=16,
        json_schema_extra=cel(
            (
                f"self == oldSelf || (self[size(self) - 1].nodeLabel == '{HOSTNAME_LABEL}' "
                f"&& oldSelf[size(oldSelf) - 1].nodeLabel == '{HOSTNAME_LABEL}')",
                LEVELS_IMMUTABLE,
            ),
            ("size(self.filter(i, size(self.filter(j, j == i)) > 1)) == 0", LEVELS_UNIQUE),
            (
                f"size(self.filter(i, i.nodeLabel == '{HOSTNAME_LABEL}')) == 0 || "
                f"self[size(self) - 1].nodeLabel == '{HOSTNAME_LABEL}'",
                LEVELS_HOSTNAME_LOWEST,
            ),
            **atomic_list(),
        ),
    )


class Topology(KueueObject):
    """Topology is the Schema for the topology API: the levels a ResourceFlavor's
    `topologyName` places pod sets in."""

    CRD: ClassVar[CRDNames] = CRDNames(
        plural="topologies", singular="topology", scope=Scope.CLUSTER, short_names=("topo",)
    )

    kind: str = Kind.TOPOLOGY.value
    spec: TopologySpec | None = None
    """Optional in Kueue's schema; a Topology without levels places nothing."""


class PodSetSliceConstraint(KueueModel):
    topology: str = Field(min_length=1, max_length=63)
    size: PositiveInt32


class PodSetTopologyRequest(KueueModel):
    """A pod set's topology request: the level its pods must (`required`) or should
    (`preferred`) share a domain at, or none (`unconstrained`); slices of
    `podSetSliceSize` pods each in one domain of `podSetSliceRequiredTopology`; pod sets
    of one `podSetGroupName` placed in the same domain."""

    required: str | None = Field(default=None, max_length=63)
    preferred: str | None = Field(default=None, max_length=63)
    unconstrained: bool | None = None
    pod_index_label: str | None = Field(default=None, max_length=317)
    sub_group_index_label: str | None = Field(default=None, max_length=317)
    sub_group_count: NonNegativeInt32 | None = None
    pod_set_group_name: str | None = Field(default=None, max_length=256)
    pod_set_slice_required_topology: str | None = Field(default=None, max_length=63)
    pod_set_slice_size: PositiveInt32 | None = None
    podset_slice_required_topology_constraints: list[PodSetSliceConstraint] | None = Field(
        default=None,
        max_length=3,
        alias="podsetSliceRequiredTopologyConstraints",
        json_schema_extra=atomic_list(),
    )


class PodCounts(KueueModel):
    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                "has(self.universal) != has(self.individual)",
                "exactly one of the fields in [universal individual] must be set",
            )
        )
    )

    universal: PositiveInt32 | None = None
    individual: list[PositiveInt32] | None = Field(
        default=None, min_length=1, max_length=100000, json_schema_extra=atomic_list()
    )


class IndividualValues(KueueModel):
    prefix: str | None = Field(default=None, max_length=63)
    suffix: str | None = Field(default=None, max_length=63)
    roots: list[Annotated[str, StringConstraints(max_length=63)]] = Field(
        min_length=1, max_length=100000, json_schema_extra=atomic_list()
    )


class LevelValues(KueueModel):
    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                "has(self.universal) != has(self.individual)",
                "exactly one of the fields in [universal individual] must be set",
            )
        )
    )

    universal: str | None = Field(default=None, max_length=63)
    individual: IndividualValues | None = None


class TopologyAssignmentSlice(KueueModel):
    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                "!has(self.podCounts.individual) || "
                "size(self.podCounts.individual) == self.domainCount",
                "podCounts.individual must have length equal to domainCount",
            ),
            (
                "self.valuesPerLevel.all(x, !has(x.individual) || "
                "size(x.individual.roots) == self.domainCount)",
                "valuesPerLevel.individual, if set, must have roots of length equal to "
                "domainCount of this TopologyAssignmentSlice",
            ),
        )
    )

    domain_count: PositiveInt32
    pod_counts: PodCounts
    values_per_level: list[LevelValues] = Field(
        min_length=1, max_length=16, json_schema_extra=atomic_list()
    )


class TopologyAssignment(KueueModel):
    """Where a pod set's pods go: for each domain at the lowest level, its values at
    `levels` and its pod count, in v1beta2's compressed form (slices of domains sharing a
    universal value or a prefix and suffix)."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                "self.slices.all(x, size(x.valuesPerLevel) == size(self.levels))",
                "valuesPerLevel must have the same length as the number of levels in this "
                "TopologyAssignment",
            )
        )
    )

    levels: list[Annotated[str, StringConstraints(max_length=317)]] = Field(
        min_length=1, max_length=16, json_schema_extra=atomic_list()
    )
    slices: list[TopologyAssignmentSlice] = Field(max_length=1000, json_schema_extra=atomic_list())
