"""Nodes and requests for the TAS tests, written as Kueue's tests write them (quantities as
text, the three levels block / rack / hostname)."""

from __future__ import annotations

from collections.abc import Mapping

from api.constants import HOSTNAME_LABEL
from api.quantities import parse_quantity
from controller.core.model.flavors import Taint
from controller.core.model.topology import Node, TopologyRequest
from controller.core.model.workloads import Toleration
from controller.core.tas.assignment import PodSetRequest
from controller.core.tas.snapshot import TopologySnapshot

BLOCK = "cloud.com/topology-block"
RACK = "cloud.com/topology-rack"
HOST = HOSTNAME_LABEL
ONE_LEVEL = (HOST,)
TWO_LEVELS = (BLOCK, RACK)
THREE_LEVELS = (BLOCK, RACK, HOST)


def milli(resources: Mapping[str, str | int]) -> dict[str, int]:
    return {name: parse_quantity(str(value)).milli for name, value in resources.items()}


def node(
    name: str,
    block: str | None = None,
    rack: str | None = None,
    host: str | None = None,
    *,
    labels: Mapping[str, str] | None = None,
    ready: bool = True,
    unschedulable: bool = False,
    taints: tuple[Taint, ...] = (),
    **allocatable: str,
) -> Node:
    """A node; `allocatable` keys use `_` for `/` and `.` is not needed (`gpu` is
    `example.com/gpu`)."""
    all_labels = dict(labels or {})
    for key, value in ((BLOCK, block), (RACK, rack), (HOST, host)):
        if value is not None:
            all_labels[key] = value
    resources = {("example.com/gpu" if k == "gpu" else k): v for k, v in allocatable.items()}
    return Node(name, all_labels, milli(resources), ready, unschedulable, taints)


def std(
    name: str,
    block: str,
    rack: str,
    host: str,
    cpu: str = "1",
    memory: str = "1Gi",
    pods: str = "10",
) -> Node:
    return node(name, block, rack, host, cpu=cpu, memory=memory, pods=pods)


DEFAULT_NODES = (
    std("b1-r1-x3", "b1", "r1", "x3"),
    std("b1-r2-x5", "b1", "r2", "x5"),
    std("b1-r2-x1", "b1", "r2", "x1"),
    std("b1-r2-x6", "b1", "r2", "x6"),
    std("b2-r2-x2", "b2", "r1", "x2"),
    std("b2-r2-x4", "b2", "r2", "x4", cpu="2", memory="4Gi", pods="40"),
)
SCATTERED_NODES = (
    std("b1-r1-x3", "b1", "r1", "x3", cpu="4"),
    std("b1-r1-x5", "b1", "r1", "x5"),
    std("b1-r1-x1", "b1", "r1", "x1"),
    std("b2-r1-x6", "b2", "r1", "x6", cpu="2"),
    std("b2-r1-x2", "b2", "r1", "x2"),
)
BINARY_TREE_NODES = (
    std("b1-r1-x3", "b1", "r1", "x3"),
    std("b1-r1-x5", "b1", "r1", "x5"),
    std("b1-r2-x1", "b1", "r2", "x1"),
    std("b1-r2-x6", "b1", "r2", "x6"),
    std("b2-r1-x2", "b2", "r1", "x2"),
    std("b2-r1-x4", "b2", "r1", "x4"),
    std("b2-r2-x7", "b2", "r2", "x7"),
    std("b2-r2-x8", "b2", "r2", "x8"),
)


def snapshot(
    nodes: tuple[Node, ...],
    levels: tuple[str, ...],
    flavor_labels: Mapping[str, str] | None = None,
    non_tas: Mapping[str, Mapping[str, str]] | None = None,
) -> TopologySnapshot:
    return TopologySnapshot(
        "default",
        levels,
        nodes,
        flavor_labels=flavor_labels,
        non_tas_usage={name: milli(usage) for name, usage in (non_tas or {}).items()},
    )


def pod_set(
    count: int,
    name: str = "main",
    *,
    required: str | None = None,
    preferred: str | None = None,
    unconstrained: bool = False,
    slice_level: str | None = None,
    slice_size: int | None = None,
    group: str | None = None,
    implied: bool = False,
    node_selector: Mapping[str, str] | None = None,
    tolerations: tuple[Toleration, ...] = (),
    **requests: str | int,
) -> PodSetRequest:
    """A pod set; `requests` as quantities (`cpu="1"`, `gpu=1` for example.com/gpu)."""
    named = {("example.com/gpu" if k == "gpu" else k): v for k, v in requests.items()}
    topology = TopologyRequest(required, preferred, unconstrained, slice_level, slice_size, group)
    return PodSetRequest(
        name,
        count,
        milli(named),
        topology,
        node_selector=node_selector or {},
        tolerations=tolerations,
        implied=implied,
    )
