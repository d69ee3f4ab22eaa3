"""Kueue's topology-aware scheduling types on a Workload: a pod set's topology request and
an assignment's topology (not implemented by quotagate: the request is reported, the
assignment kept as Kueue wrote it), with the CRD rules of Kueue's schema."""

from __future__ import annotations

from typing import Annotated

from pydantic import ConfigDict, Field, StringConstraints

from api.common import KueueModel, NonNegativeInt32, PositiveInt32, atomic_list, cel

__all__ = ["PodSetTopologyRequest", "TopologyAssignment"]


class PodSetSliceConstraint(KueueModel):
    topology: str = Field(min_length=1, max_length=63)
    size: PositiveInt32


class PodSetTopologyRequest(KueueModel):
    """Kueue's topology-aware scheduling request (not implemented by quotagate: reported)."""

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
    """Kueue's topology assignment (written by Kueue's TAS, not by quotagate)."""

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
