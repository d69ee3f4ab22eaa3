"""The topology-aware part of a scenario, in the shape of Kueue's TAS generator config
(kueue `test/performance/scheduler/configs/tas/generator.yaml`):

    topology:
      name: default-topology
      levels:                          # widest first; node counts multiply down the levels
        - {name: block, count: 1, nodeLabel: cloud.provider.com/topology-block}
        - {name: rack, count: 10, nodeLabel: cloud.provider.com/topology-rack}
        - {name: node, count: 64, nodeLabel: kubernetes.io/hostname,
           capacity: {cpu: "96", memory: 256Gi}}
    resourceFlavor: {name: tas-flavor, nodeLabel: tas-node-group, topologyName: default-topology}

and on a Workload template: `podCount` (pods of `request` each), `tasConstraint`
(`required`, `preferred`, or `balanced`: Kueue's generator writes that as a slice
topology at `tasLevel` with `sliceSize`), `tasLevel`, `sliceSize`. Nodes are named and
labelled as Kueue's generator labels them (`<level name>-<i>` at each level, the flavor's
node label `tas`), each with 110 pods allocatable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from api.constants import HOSTNAME_LABEL
from api.quantities import InvalidQuantity, Quantity
from controller.core.model.topology import Node, TopologyRequest

__all__ = ["PODS_PER_NODE", "TASSetup", "parse_class_topology", "parse_setup"]

PODS_PER_NODE = 110  # Kueue's generator: 110 pods allocatable per node


class TASScenarioError(ValueError):
    pass


@dataclass(frozen=True)
class TASSetup:
    topology: str
    levels: tuple[tuple[str, int, str], ...]  # (name, count, node label)
    capacity: dict[str, int]  # per node, milli-units
    flavor: str
    flavor_label: str

    def nodes(self) -> list[Node]:
        out: list[Node] = []

        def walk(depth: int, values: list[str]) -> None:
            if depth == len(self.levels):
                labels = {self.flavor_label: "tas"}
                labels.update(
                    {label: v for (_, _, label), v in zip(self.levels, values, strict=True)}
                )
                name = "-".join(values)
                if self.levels[-1][2] == HOSTNAME_LABEL:
                    labels[HOSTNAME_LABEL] = name
                out.append(Node(name, labels, {**self.capacity, "pods": PODS_PER_NODE * 1000}))
                return
            level_name, count, _ = self.levels[depth]
            for i in range(count):
                walk(depth + 1, [*values, f"{level_name}-{i}"])

        walk(0, [])
        return out


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TASScenarioError(f"{where}: expected a mapping")
    return value


def _text(data: dict[str, Any], key: str, where: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise TASScenarioError(f"{where}.{key}: required (a string)")
    return value


def parse_setup(topology: Any, flavor: Any) -> TASSetup:
    """The `topology` and `resourceFlavor` sections."""
    top = _mapping(topology, "topology")
    rf = _mapping(flavor, "resourceFlavor")
    levels = []
    capacity: dict[str, int] = {}
    raw_levels = top.get("levels")
    if not isinstance(raw_levels, list) or not raw_levels:
        raise TASScenarioError("topology.levels: required (a non-empty list)")
    for i, raw in enumerate(raw_levels):
        level = _mapping(raw, f"topology.levels[{i}]")
        count = level.get("count")
        if not isinstance(count, int) or count < 1:
            raise TASScenarioError(f"topology.levels[{i}].count: a positive integer")
        levels.append(
            (
                _text(level, "name", f"topology.levels[{i}]"),
                count,
                _text(level, "nodeLabel", f"topology.levels[{i}]"),
            )
        )
        for resource, value in (level.get("capacity") or {}).items():
            try:
                capacity[str(resource)] = Quantity.parse(value).milli
            except InvalidQuantity as exc:
                raise TASScenarioError(f"topology.levels[{i}].capacity.{resource}: {exc}") from None
    if not capacity:
        raise TASScenarioError("topology.levels[-1].capacity: required (each node's capacity)")
    name = _text(top, "name", "topology")
    if rf.get("topologyName", name) != name:
        raise TASScenarioError(f"resourceFlavor.topologyName: not the topology's name {name!r}")
    return TASSetup(
        name,
        tuple(levels),
        capacity,
        _text(rf, "name", "resourceFlavor"),
        _text(rf, "nodeLabel", "resourceFlavor"),
    )


def parse_class_topology(wc: dict[str, Any], where: str) -> tuple[int, TopologyRequest | None]:
    """A Workload template's pod count and topology request (None: no `tasLevel`)."""
    pods = wc.get("podCount", 1)
    if not isinstance(pods, int) or pods < 1:
        raise TASScenarioError(f"{where}.podCount: a positive integer")
    level = wc.get("tasLevel")
    if level is None:
        return pods, None
    constraint = wc.get("tasConstraint")
    if constraint == "required":
        return pods, TopologyRequest(required=level)
    if constraint == "preferred":
        return pods, TopologyRequest(preferred=level)
    if constraint == "balanced":
        size = wc.get("sliceSize") or 1
        return pods, TopologyRequest(slice_level=level, slice_size=int(size))
    raise TASScenarioError(
        f"{where}.tasConstraint: {constraint!r} is not one of required, preferred, balanced"
    )
