"""ResourceFlavor: a kind of node (labels, taints) that quota is counted against."""

from __future__ import annotations

from typing import ClassVar

from pydantic import ConfigDict, Field

from api.common import DNSSubdomain, KueueModel, Taint, Toleration, cel, toleration_list
from api.constants import Kind
from api.objects import CRDNames, KueueObject, Scope

__all__ = ["ResourceFlavor", "ResourceFlavorSpec"]


class ResourceFlavorSpec(KueueModel):
    """ResourceFlavorSpec defines the nodes a flavor stands for."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                "!has(self.topologyName) || (has(self.nodeLabels) && size(self.nodeLabels) >= 1)",
                "at least one nodeLabel is required when topology is set",
            ),
            (
                "!has(oldSelf.topologyName) || (has(self.topologyName) && "
                "self.topologyName == oldSelf.topologyName)",
                "topologyName is immutable when topologyName is set",
            ),
        )
    )

    node_labels: dict[str, str] | None = Field(
        default=None, max_length=8, json_schema_extra={"x-kubernetes-map-type": "atomic"}
    )
    """Labels of the nodes of this flavor; added as node selectors to admitted pods."""
    node_taints: list[Taint] | None = Field(
        default=None,
        max_length=8,
        json_schema_extra=cel(
            (
                "self.all(x, x.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])",
                "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'",
            ),
            **{"x-kubernetes-list-type": "atomic"},
        ),
    )
    """Taints of the nodes; a podset must tolerate the NoSchedule/NoExecute ones."""
    tolerations: list[Toleration] | None = Field(
        default=None, max_length=8, json_schema_extra=toleration_list()
    )
    """Tolerations added to admitted pods (their taints are ignored at admission)."""
    topology_name: DNSSubdomain | None = None
    """Topology for topology-aware scheduling (kept, not used by quotagate)."""


class ResourceFlavor(KueueObject):
    """ResourceFlavor is the Schema for the resourceflavors API."""

    CRD: ClassVar[CRDNames] = CRDNames(
        plural="resourceflavors",
        singular="resourceflavor",
        scope=Scope.CLUSTER,
        short_names=("flavor", "flavors", "rf"),
    )

    kind: str = Kind.RESOURCE_FLAVOR.value
    spec: ResourceFlavorSpec = Field(default_factory=ResourceFlavorSpec)
