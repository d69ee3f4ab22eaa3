"""Multi-layer slices (Kueue's `TASMultiLayerTopology`, on by default): the multi-layer
cases of Kueue's `TestFindTopologyAssignments` (pkg/cache/scheduler/tas_cache_test.go)
written again for our snapshot — the same nodes and pod sets, the same domains or the same
message — and the layer rules of Kueue's `buildSliceSizeAtLevel`."""

from __future__ import annotations

import pytest

from controller.core.model.topology import Node, TopologyRequest
from controller.core.tas.assignment import PodSetRequest, find_assignments
from tests.unit.core.tas.builders import BLOCK, HOST, RACK, THREE_LEVELS, milli, node, snapshot

DC = "cloud.com/datacenter"


def nodes(*spec: tuple[str, str]) -> tuple[Node, ...]:
    """(block-rack-host path, cpu) with pods 10; a four-part path adds a datacenter."""
    out = []
    for path, cpu in spec:
        parts = path.split("-")
        labels = {DC: parts.pop(0)} if len(parts) == 4 else {}
        block, rack, host = parts
        out.append(node(path, block, rack, host, labels=labels, cpu=cpu, pods="10"))
    return tuple(out)


def layered(count: int, required: str, *layers: tuple[str, int]) -> PodSetRequest:
    (slice_level, slice_size), *inner = layers
    topology = TopologyRequest(
        required=required,
        slice_level=slice_level,
        slice_size=slice_size,
        inner_slices=tuple(inner),
    )
    return PodSetRequest("main", count, milli({"cpu": "1"}), topology)


def place(
    spec: tuple[Node, ...], request: PodSetRequest, levels: tuple[str, ...] = THREE_LEVELS
) -> dict[str, int] | str | None:
    found, reason = find_assignments(snapshot(spec, levels), [request])
    if reason is not None:
        return reason
    return {values[-1]: n for values, n in found["main"].domains}


def test_block_required_rack_slices_of_4_host_slices_of_2() -> None:
    """x1 (1 cpu) holds no 2-pod host slice: r1 gives 4 pods only through x2; r2 gives
    2 + 2."""
    spec = nodes(("b1-r1-x1", "1"), ("b1-r1-x2", "4"), ("b1-r2-x3", "3"), ("b1-r2-x4", "4"))
    assert place(spec, layered(8, BLOCK, (RACK, 4), (HOST, 2))) == {"x2": 4, "x3": 2, "x4": 2}


def test_host_slice_rounding_makes_rack_slice_impossible() -> None:
    spec = nodes(("b1-r1-x1", "3"), ("b1-r1-x2", "3"), ("b1-r1-x3", "0"))
    assert place(spec, layered(6, BLOCK, (RACK, 6), (HOST, 2))) == (
        'topology "default" doesn\'t allow to fit; 0/1 slice(s) fit on level '
        "cloud.com/topology-rack; 2/3 slice(s) fit on level kubernetes.io/hostname. "
        'Total nodes: 3; excluded: resource "cpu": 1'
    )


def test_small_host_kills_rack_slices_despite_enough_total_capacity() -> None:
    spec = nodes(("b1-r1-x1", "7"), ("b1-r1-x2", "4"), ("b1-r2-x3", "7"), ("b1-r2-x4", "3"))
    assert place(spec, layered(16, BLOCK, (RACK, 8), (HOST, 4))) == (
        'topology "default" doesn\'t allow to fit; 1/2 slice(s) fit on level '
        "cloud.com/topology-rack; 3/4 slice(s) fit on level kubernetes.io/hostname"
    )


def test_enough_hostname_slices_but_not_enough_rack_slices() -> None:
    spec = nodes(("b1-r1-x1", "4"), ("b1-r2-x2", "4"), ("b1-r3-x3", "4"))
    assert place(spec, layered(12, BLOCK, (RACK, 6), (HOST, 2))) == (
        'topology "default" doesn\'t allow to fit; 0/2 slice(s) fit on level '
        "cloud.com/topology-rack; 6/6 slice(s) fit on level kubernetes.io/hostname"
    )


def test_three_layers_small_hosts_cascade_up() -> None:
    """x7 and x8 (1 cpu) hold no 3-pod host slice, so r4 holds no 6-pod rack slice and b2
    no 12-pod block slice."""
    spec = nodes(
        ("dc1-b1-r1-x1", "4"),
        ("dc1-b1-r1-x2", "4"),
        ("dc1-b1-r2-x3", "4"),
        ("dc1-b1-r2-x4", "4"),
        ("dc1-b2-r3-x5", "4"),
        ("dc1-b2-r3-x6", "4"),
        ("dc1-b2-r4-x7", "1"),
        ("dc1-b2-r4-x8", "1"),
    )
    request = layered(24, DC, (BLOCK, 12), (RACK, 6), (HOST, 3))
    assert place(spec, request, (DC, *THREE_LEVELS)) == (
        'topology "default" doesn\'t allow to fit; 1/2 slice(s) fit on level '
        "cloud.com/topology-block; 3/4 slice(s) fit on level cloud.com/topology-rack; "
        "6/8 slice(s) fit on level kubernetes.io/hostname"
    )


def test_without_the_inner_layer_the_same_pods_fit() -> None:
    """The rounding is the inner layer's: one layer of rack slices places the 16 pods of
    the case above (rack r1: 7 + 4 = 11 pods, 8 of them one slice)."""
    spec = nodes(("b1-r1-x1", "7"), ("b1-r1-x2", "4"), ("b1-r2-x3", "7"), ("b1-r2-x4", "3"))
    request = layered(16, BLOCK, (RACK, 8))
    placed = place(spec, request)
    assert isinstance(placed, dict) and sum(placed.values()) == 16


@pytest.mark.parametrize(
    ("layers", "reason"),
    [
        (
            ((RACK, 4), ("example.com/nope", 2)),
            "no requested topology level for additional slice layer: example.com/nope",
        ),
        (
            ((RACK, 4), (RACK, 2)),
            f"additional slice layer topology {RACK} must be at a lower level than {RACK}",
        ),
        (
            ((RACK, 4), (HOST, 3)),
            "additional slice layer size 3 must evenly divide parent layer size 4",
        ),
    ],
)
def test_layer_rules(layers: tuple[tuple[str, int], ...], reason: str) -> None:
    spec = nodes(("b1-r1-x1", "4"), ("b1-r1-x2", "4"))
    assert place(spec, layered(8, BLOCK, *layers)) == reason


def test_an_inner_layer_groups_every_level_down_to_its_own() -> None:
    """A block slice of 4 with host slices of 2 over (block, rack, host): racks too get
    pods in twos (Kueue fills the levels between two layers with the inner size)."""
    spec = nodes(("b1-r1-x1", "3"), ("b1-r2-x2", "3"), ("b1-r2-x3", "1"))
    request = layered(4, BLOCK, (BLOCK, 4), (HOST, 2))
    assert place(spec, request) == {"x1": 2, "x2": 2}


def test_without_the_gate_only_the_outermost_layer_is_placed() -> None:
    """TASMultiLayerTopology off: the inner host layer is not applied (Kueue's case gives
    the same pods the single rack-slice layer places: x1 1, x2 3, x3 3, x4 1)."""
    spec = nodes(("b1-r1-x1", "1"), ("b1-r1-x2", "4"), ("b1-r2-x3", "3"), ("b1-r2-x4", "4"))
    view = snapshot(spec, THREE_LEVELS)
    view.multi_layer = False
    found, reason = find_assignments(view, [layered(8, BLOCK, (RACK, 4), (HOST, 2))])
    assert reason is None
    assert {v[-1]: n for v, n in found["main"].domains} == {"x1": 1, "x2": 3, "x3": 3, "x4": 1}
