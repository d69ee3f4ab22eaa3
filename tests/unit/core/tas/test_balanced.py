"""Balanced placement (Kueue's alpha `TASBalancedPlacement`, behind the same gate): the
balanced cases of Kueue's `TestFindTopologyAssignments` (pkg/cache/scheduler/
tas_cache_test.go) written again for our snapshot with the gate on — the same nodes and pod
sets, the same domains and counts — and that with the gate off (Kueue's default) nothing
changes."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from controller.core.model.topology import Node, TopologyRequest
from controller.core.tas.assignment import PodSetRequest, find_assignments
from tests.unit.core.tas.builders import BLOCK, HOST, RACK, THREE_LEVELS, milli, node, snapshot

SUB_BLOCK = "cloud.com/topology-subblock"
FOUR_LEVELS = (BLOCK, SUB_BLOCK, RACK, HOST)


def gpu_nodes(pods: int, *spec: tuple[str, int]) -> tuple[Node, ...]:
    """(block-[subblock-]rack-host path, gpus) with `pods` pods each."""
    out = []
    for path, gpus in spec:
        parts = path.split("-")
        labels = {SUB_BLOCK: parts.pop(1)} if len(parts) == 4 else {}
        if len(parts) == 2:  # rack-host
            out.append(node(path, None, *parts, gpu=str(gpus), pods=str(pods)))
            continue
        block, rack, host = parts
        out.append(node(path, block, rack, host, labels=labels, gpu=str(gpus), pods=str(pods)))
    return tuple(out)


def request(
    count: int,
    name: str = "main",
    *,
    preferred: str = RACK,
    slice_level: str | None = None,
    slice_size: int | None = None,
    group: str | None = None,
    gpu: int = 1,
) -> PodSetRequest:
    topology = TopologyRequest(
        preferred=preferred, slice_level=slice_level, slice_size=slice_size, group=group
    )
    return PodSetRequest(name, count, milli({"example.com/gpu": gpu}), topology)


SUB_BLOCK_NODES = gpu_nodes(
    20,
    ("b1-sb1-r1-x1", 18),
    ("b1-sb1-r2-x2", 8),
    ("b1-sb2-r3-x3", 15),
    ("b1-sb2-r4-x4", 9),
    ("b1-sb2-r4-x5", 7),
)


@dataclass(frozen=True)
class Case:
    nodes: tuple[Node, ...]
    pod_sets: tuple[PodSetRequest, ...]
    want: dict[str, dict[str, int]]  # pod set → leaf value → pods
    levels: tuple[str, ...] = THREE_LEVELS


CASES = {
    "basic": Case(
        gpu_nodes(25, ("b1-r1-x1", 15), ("b1-r2-x2", 15)),
        (request(25),),
        {"main": {"x1": 13, "x2": 12}},
    ),
    "select optimal set of domains": Case(
        gpu_nodes(23, ("b1-r1-x1", 15), ("b1-r1-x2", 13), ("b1-r1-x3", 10)),
        (request(23),),
        {"main": {"x1": 12, "x2": 11}},
    ),
    "select optimal set of domains; with slices": Case(
        gpu_nodes(25, ("b1-r1-x1", 20), ("b1-r1-x2", 15), ("b1-r1-x3", 10)),
        (request(25, slice_level=HOST, slice_size=5),),
        {"main": {"x2": 15, "x3": 10}},
    ),
    "select correct block": Case(
        gpu_nodes(22, ("b1-r1-x1", 20), ("b1-r1-x2", 10), ("b2-r2-x3", 15), ("b2-r2-x4", 15)),
        (request(22),),
        {"main": {"x3": 11, "x4": 11}},
    ),
    "cannot choose domains from different blocks": Case(
        gpu_nodes(25, ("b1-r1-x1", 14), ("b1-r1-x2", 11), ("b2-r2-x3", 15), ("b2-r2-x4", 10)),
        (request(25),),
        {"main": {"x1": 14, "x2": 11}},
    ),
    "select correct block; prefer blocks with single rack; with slices": Case(
        gpu_nodes(25, ("b1-r1-x1", 15), ("b1-r2-x2", 15), ("b1-r3-x3", 15), ("b1-r3-x4", 15)),
        (request(25, slice_level=HOST, slice_size=5),),
        {"main": {"x3": 15, "x4": 10}},
    ),
    "four level topology; slice two levels below balanced level": Case(
        SUB_BLOCK_NODES,
        (request(20, preferred=SUB_BLOCK, slice_level=HOST, slice_size=2),),
        {"main": {"x3": 10, "x4": 8, "x5": 2}},
        FOUR_LEVELS,
    ),
    "four level topology; slice one level below balanced level": Case(
        SUB_BLOCK_NODES,
        (request(20, preferred=SUB_BLOCK, slice_level=RACK, slice_size=2),),
        {"main": {"x3": 10, "x4": 3, "x5": 7}},
        FOUR_LEVELS,
    ),
    "three level topology; balance on the same level as slice": Case(
        gpu_nodes(
            22,
            ("b1-r1-x1", 15),
            ("b1-r1-x2", 13),
            ("b1-r1-x3", 10),
            ("b1-r2-x4", 20),
            ("b1-r2-x5", 8),
        ),
        (request(22, preferred=HOST, slice_level=HOST, slice_size=2),),
        {"main": {"x2": 12, "x3": 10}},
    ),
    "three level topology; balance on the lowest level": Case(
        gpu_nodes(
            22,
            ("b1-r1-x1", 20),
            ("b1-r1-x2", 8),
            ("b1-r2-x3", 15),
            ("b1-r2-x4", 13),
            ("b1-r2-x5", 10),
        ),
        (request(22, preferred=HOST),),
        {"main": {"x3": 11, "x4": 11}},
    ),
    "leader worker set": Case(
        gpu_nodes(24, ("b1-r1-x1", 20), ("b1-r1-x2", 15), ("b1-r1-x3", 12)),
        (
            request(1, "leader", slice_level=HOST, group="same"),
            request(25, "workers", slice_level=HOST, slice_size=5, group="same"),
        ),
        {"leader": {"x3": 1}, "workers": {"x2": 15, "x3": 10}},
    ),
    "prioritize (using entropy) balanced domains; second rack wins": Case(
        gpu_nodes(
            20,
            ("b1-r1-x1", 10),
            ("b1-r1-x2", 5),
            ("b1-r2-x3", 5),
            ("b1-r2-x4", 5),
            ("b1-r2-x5", 5),
        ),
        (request(15),),
        {"main": {"x3": 5, "x4": 5, "x5": 5}},
    ),
    "prioritize (using entropy) balanced domains; first rack wins": Case(
        gpu_nodes(
            24,
            ("b1-r1-x1", 8),
            ("b1-r1-x2", 8),
            ("b1-r1-x3", 8),
            ("b1-r2-x4", 16),
            ("b1-r2-x5", 8),
        ),
        (request(24),),
        {"main": {"x1": 8, "x2": 8, "x3": 8}},
    ),
    "two level topology; balance on the highest level": Case(
        gpu_nodes(22, ("r1-x1", 21), ("r1-x2", 9), ("r2-x3", 11), ("r2-x4", 10), ("r2-x5", 10)),
        (request(23),),
        {"main": {"x1": 12, "x3": 11}},
        (RACK, HOST),
    ),
    "select correct block taking into account pruning": Case(
        gpu_nodes(
            20,
            ("b1-r1-x1", 5),
            ("b1-r1-x2", 5),
            ("b1-r2-x3", 5),
            ("b1-r2-x4", 5),
            ("b2-r3-x5", 10),
            ("b2-r3-x6", 4),
            ("b2-r3-x7", 4),
            ("b2-r3-x8", 4),
            ("b2-r4-x9", 5),
            ("b2-r5-x10", 5),
        ),
        (request(20),),
        {"main": {"x1": 5, "x2": 5, "x3": 5, "x4": 5}},
    ),
    "should not prune domain": Case(
        gpu_nodes(24, ("b1-r1-x1", 6), ("b1-r1-x2", 5)),
        (
            request(1, "leader", slice_level=HOST, group="same"),
            request(10, "workers", group="same"),
        ),
        {"leader": {"x1": 1}, "workers": {"x1": 5, "x2": 5}},
    ),
    "leader worker set does not reserve leader space on every node": Case(
        gpu_nodes(12, ("b1-r1-x1", 7), ("b1-r1-x2", 5)),
        (
            request(1, "leader", slice_level=HOST, group="same"),
            request(10, "workers", group="same"),
        ),
        {"leader": {"x1": 1}, "workers": {"x1": 5, "x2": 5}},
    ),
    "fall back to best fit when a leader worker set cannot meet the threshold": Case(
        gpu_nodes(12, ("b1-r1-x1", 3), ("b1-r2-x2", 3), ("b1-r3-x3", 8), ("b2-r1-x4", 11)),
        (
            request(1, "leader", preferred=BLOCK, slice_level=HOST, group="same", gpu=5),
            request(7, "workers", preferred=BLOCK, group="same"),
        ),
        {"leader": {"x3": 1}, "workers": {"x1": 3, "x2": 1, "x3": 3}},
    ),
    "four level topology; balance on rack level; slice not on the lowest level": Case(
        gpu_nodes(
            20,
            ("b1-sb1-r1-x1", 18),
            ("b1-sb1-r2-x2", 8),
            ("b1-sb2-r3-x3", 15),
            ("b1-sb2-r4-x4", 15),
        ),
        (request(20, preferred=SUB_BLOCK, slice_level=RACK, slice_size=2),),
        {"main": {"r3": 10, "r4": 10}},
        (BLOCK, SUB_BLOCK, RACK),
    ),
}


def place(case: Case, balanced: bool) -> dict[str, dict[str, int]] | str:
    view = snapshot(case.nodes, case.levels)
    view.balanced_placement = balanced
    found, reason = find_assignments(view, case.pod_sets)
    if reason is not None:
        return reason
    return {name: {v[-1]: n for v, n in a.domains} for name, a in found.items()}


@pytest.mark.parametrize("name", sorted(CASES))
def test_balanced_placement(name: str) -> None:
    case = CASES[name]
    assert place(case, balanced=True) == case.want


def test_without_the_gate_the_roomiest_domains_are_filled() -> None:
    """Kueue's default: the basic case fills x1 first (best fit at the rack level, then
    the most room)."""
    case = CASES["basic"]
    assert place(case, balanced=False) == {"main": {"x1": 15, "x2": 10}}
