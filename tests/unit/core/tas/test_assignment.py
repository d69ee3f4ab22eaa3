"""Kueue's `TestFindTopologyAssignments` (pkg/cache/scheduler/tas_cache_test.go), its cases
written again for our snapshot: the same nodes, levels and pod sets, the same domains and
counts or the same message. Kueue's default feature gates hold (TASProfileMixed on: an
unconstrained pod set fills the fullest nodes first); the balanced-placement cases
(an alpha gate, off by default) are not ported."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from controller.core.model.flavors import Taint
from controller.core.model.topology import Node
from controller.core.model.workloads import Toleration
from controller.core.tas.assignment import PodSetRequest, find_assignments
from tests.unit.core.tas.builders import (
    BINARY_TREE_NODES,
    BLOCK,
    DEFAULT_NODES,
    HOST,
    ONE_LEVEL,
    RACK,
    SCATTERED_NODES,
    THREE_LEVELS,
    TWO_LEVELS,
    node,
    pod_set,
    snapshot,
)

Domains = tuple[tuple[tuple[str, ...], int], ...]


@dataclass(frozen=True)
class Case:
    nodes: tuple[Node, ...]
    levels: tuple[str, ...]
    pod_sets: tuple[PodSetRequest, ...]
    # per pod set name: (levels written, domains) or the failure message
    want: dict[str, tuple[tuple[str, ...], Domains]] = field(default_factory=dict)
    reason: str | None = None
    flavor_labels: dict[str, str] | None = None
    non_tas: dict[str, dict[str, str]] | None = None


def hosts(*pairs: tuple[str, int]) -> tuple[tuple[str, ...], Domains]:
    return ONE_LEVEL, tuple(((h,), n) for h, n in pairs)


def racks(*triples: tuple[str, str, int]) -> tuple[tuple[str, ...], Domains]:
    return TWO_LEVELS, tuple(((b, r), n) for b, r, n in triples)


def blocks(*pairs: tuple[str, int]) -> tuple[tuple[str, ...], Domains]:
    return (BLOCK,), tuple(((b,), n) for b, n in pairs)


def cpu_nodes(*spec: tuple[str, str, str, str, str]) -> tuple[Node, ...]:
    """(name, block, rack, host, cpu) with pods 10."""
    return tuple(node(n, b, r, h, cpu=c, pods="10") for n, b, r, h, c in spec)


def block_nodes(*spec: tuple[str, str]) -> tuple[Node, ...]:
    return tuple(node(b, b, cpu=c, pods="10") for b, c in spec)


CASES: dict[str, Case] = {
    "minimize the number of used racks before optimizing the number of nodes": Case(
        (
            node("b1-r1-x3", "b1", "r1", "x3", cpu="2", pods="10"),
            node("b1-r2-x5", "b1", "r2", "x5", cpu="2", pods="20"),
            *cpu_nodes(
                ("b1-r3-x1", "b1", "r3", "x1", "1"),
                ("b1-r3-x6", "b1", "r3", "x6", "1"),
                ("b1-r3-x2", "b1", "r3", "x2", "1"),
                ("b1-r3-x4", "b1", "r3", "x4", "1"),
            ),
        ),
        THREE_LEVELS,
        (pod_set(4, required=BLOCK, cpu="1"),),
        {"main": hosts(("x1", 1), ("x2", 1), ("x4", 1), ("x6", 1))},
    ),
    "choose the node that can accommodate all Pods": Case(
        cpu_nodes(
            ("b1-r1-x3", "b1", "r1", "x3", "2"),
            ("b1-r1-x5", "b1", "r1", "x5", "1"),
            ("b1-r1-x1", "b1", "r1", "x1", "1"),
        ),
        THREE_LEVELS,
        (pod_set(2, required=BLOCK, cpu="1"),),
        {"main": hosts(("x3", 2))},
    ),
    "no annotation; implied unconstrained; 6 pods scattered over the datacenter": Case(
        SCATTERED_NODES,
        THREE_LEVELS,
        (pod_set(6, implied=True, cpu="1"),),
        {"main": hosts(("x1", 1), ("x3", 1), ("x5", 1), ("x2", 1), ("x6", 2))},
    ),
    "unconstrained; 6 pods scattered over the datacenter": Case(
        SCATTERED_NODES,
        THREE_LEVELS,
        (pod_set(6, unconstrained=True, cpu="1"),),
        {"main": hosts(("x1", 1), ("x3", 1), ("x5", 1), ("x2", 1), ("x6", 2))},
    ),
    "unconstrained; a single pod fits into each host (least free capacity)": Case(
        DEFAULT_NODES,
        THREE_LEVELS,
        (pod_set(1, unconstrained=True, cpu="1"),),
        {"main": hosts(("x3", 1))},
    ),
    "block required; 4 pods fit into one host each": Case(
        BINARY_TREE_NODES,
        THREE_LEVELS,
        (pod_set(4, required=BLOCK, cpu="1"),),
        {"main": hosts(("x3", 1), ("x5", 1), ("x1", 1), ("x6", 1))},
    ),
    "host required; single Pod fits in the host": Case(
        DEFAULT_NODES,
        THREE_LEVELS,
        (pod_set(1, required=HOST, cpu="1"),),
        {"main": hosts(("x3", 1))},
    ),
    "rack required; single Pod fits in a rack": Case(
        DEFAULT_NODES,
        TWO_LEVELS,
        (pod_set(1, required=RACK, cpu="1"),),
        {"main": racks(("b1", "r1", 1))},
    ),
    "rack required; multiple Pods fit in a rack": Case(
        DEFAULT_NODES,
        TWO_LEVELS,
        (pod_set(3, required=RACK, cpu="1"),),
        {"main": racks(("b1", "r2", 3))},
    ),
    "block preferred; Pods fit in 2 blocks": Case(
        (
            node("b1", "b1", cpu="2", pods="20"),
            node("b2", "b2", cpu="1", pods="10"),
            node("b3", "b3", cpu="4", pods="40"),
        ),
        (BLOCK,),
        (pod_set(5, preferred=BLOCK, cpu="1"),),
        {"main": blocks(("b2", 1), ("b3", 4))},
    ),
    "rack required; multiple Pods fit in some racks": Case(
        DEFAULT_NODES,
        TWO_LEVELS,
        (pod_set(2, required=RACK, cpu="1"),),
        {"main": racks(("b2", "r2", 2))},
    ),
    "rack required; too many pods to fit in any rack": Case(
        DEFAULT_NODES,
        TWO_LEVELS,
        (pod_set(4, required=RACK, cpu="1"),),
        reason='topology "default" allows to fit only 3 out of 4 pod(s)',
    ),
    "block required; single Pod fits in a block and a single rack": Case(
        DEFAULT_NODES,
        TWO_LEVELS,
        (pod_set(1, required=BLOCK, cpu="1"),),
        {"main": racks(("b2", "r1", 1))},
    ),
    "block required; Pods fit in a block spread across two racks": Case(
        DEFAULT_NODES,
        TWO_LEVELS,
        (pod_set(4, required=BLOCK, cpu="1"),),
        {"main": racks(("b1", "r1", 1), ("b1", "r2", 3))},
    ),
    "block required; single Pod which cannot be split": Case(
        DEFAULT_NODES,
        TWO_LEVELS,
        (pod_set(1, required=BLOCK, cpu="4"),),
        reason=(
            'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 4; '
            'excluded: resource "cpu": 4'
        ),
    ),
    "block required; too many Pods to fit requested": Case(
        DEFAULT_NODES,
        TWO_LEVELS,
        (pod_set(5, required=BLOCK, cpu="1"),),
        reason='topology "default" allows to fit only 4 out of 5 pod(s)',
    ),
    "rack required; single Pod requiring memory": Case(
        DEFAULT_NODES,
        TWO_LEVELS,
        (pod_set(4, required=RACK, memory="1024"),),
        {"main": racks(("b1", "r1", 4))},
    ),
    "rack preferred; but only block can accommodate the workload": Case(
        DEFAULT_NODES,
        TWO_LEVELS,
        (pod_set(4, preferred=RACK, cpu="1"),),
        {"main": racks(("b1", "r1", 1), ("b1", "r2", 3))},
    ),
    "rack preferred; but only multiple blocks can accommodate the workload": Case(
        DEFAULT_NODES,
        TWO_LEVELS,
        (pod_set(6, preferred=RACK, cpu="1"),),
        {"main": racks(("b1", "r1", 1), ("b1", "r2", 3), ("b2", "r2", 2))},
    ),
    "block preferred; but only multiple blocks can accommodate the workload": Case(
        DEFAULT_NODES,
        TWO_LEVELS,
        (pod_set(6, preferred=BLOCK, cpu="1"),),
        {"main": racks(("b1", "r1", 1), ("b1", "r2", 3), ("b2", "r2", 2))},
    ),
    "block preferred; but the workload cannot be accommodated in the entire topology": Case(
        DEFAULT_NODES,
        TWO_LEVELS,
        (pod_set(10, preferred=BLOCK, cpu="1"),),
        reason='topology "default" allows to fit only 7 out of 10 pod(s)',
    ),
    "only nodes with matching labels are considered; no matching node": Case(
        (node("b1-r1-x3", host="x3", labels={"zone": "zone-a"}, cpu="1", memory="1Gi", pods="10"),),
        ONE_LEVEL,
        (pod_set(1, required=HOST, cpu="1"),),
        reason="no topology domains at level: kubernetes.io/hostname",
        flavor_labels={"zone": "zone-b"},
    ),
    "only nodes with matching labels are considered; matching node is found": Case(
        (node("b1-r1-x3", host="x3", labels={"zone": "zone-a"}, cpu="1", memory="1Gi", pods="10"),),
        ONE_LEVEL,
        (pod_set(1, required=HOST, cpu="1"),),
        {"main": hosts(("x3", 1))},
        flavor_labels={"zone": "zone-a"},
    ),
    "only nodes with matching levels are considered; no host label on node": Case(
        (node("b1-r1-x3", "b1", "r1", cpu="1", memory="1Gi", pods="10"),),
        THREE_LEVELS,
        (pod_set(1, required=RACK, cpu="1"),),
        reason="no topology domains at level: cloud.com/topology-rack",
    ),
    "include usage from running non-TAS pods, blocked assignment": Case(
        (node("x3", host="x3", cpu="1", memory="1Gi", pods="10"),),
        ONE_LEVEL,
        (pod_set(1, required=HOST, cpu="600m"),),
        reason=(
            'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 1; '
            'excluded: resource "cpu": 1'
        ),
        non_tas={"x3": {"cpu": "600m", "pods": "1"}},
    ),
    "include usage from non-TAS pods; pod usage": Case(
        (node("x3", host="x3", pods="10"),),
        ONE_LEVEL,
        (pod_set(9, required=HOST, cpu="0"),),
        reason='topology "default" allows to fit only 8 out of 9 pod(s)',
        non_tas={"x3": {"pods": "2"}},
    ),
    "include usage from running non-TAS pods, found free capacity on another node": Case(
        (
            node("x3", host="x3", cpu="1", memory="1Gi", pods="10"),
            node("x5", host="x5", cpu="1", memory="1Gi", pods="10"),
        ),
        ONE_LEVEL,
        (pod_set(1, required=HOST, cpu="600m"),),
        {"main": hosts(("x5", 1))},
        non_tas={"x3": {"cpu": "600m", "pods": "1"}},
    ),
    "no assignment as node is not ready": Case(
        (node("b1-r1-x3", host="x3", ready=False, cpu="1", pods="10"),),
        ONE_LEVEL,
        (pod_set(1, required=HOST, cpu="1"),),
        reason="no topology domains at level: kubernetes.io/hostname",
    ),
    "no assignment as node is unschedulable": Case(
        (node("b1-r1-x3", host="x3", unschedulable=True, cpu="1", pods="10"),),
        ONE_LEVEL,
        (pod_set(1, required=HOST, cpu="1"),),
        reason="no topology domains at level: kubernetes.io/hostname",
    ),
    "skip node which has untolerated taint": Case(
        (
            node(
                "x3",
                host="x3",
                taints=(Taint("example.com/gpu", "present", "NoSchedule"),),
                cpu="1",
                pods="10",
            ),
        ),
        ONE_LEVEL,
        (pod_set(1, required=HOST, cpu="1"),),
        reason=(
            'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 1; '
            'excluded: taint "example.com/gpu=present:NoSchedule": 1'
        ),
    ),
    "allow to schedule on node with tolerated taint": Case(
        (
            node(
                "b1-r1-x3",
                host="x3",
                labels={"zone": "zone-a"},
                taints=(Taint("example.com/gpu", "present", "NoSchedule"),),
                cpu="1",
                memory="1Gi",
                pods="10",
            ),
        ),
        ONE_LEVEL,
        (
            pod_set(
                1,
                required=HOST,
                tolerations=(Toleration("example.com/gpu", "Equal", "present"),),
                cpu="1",
            ),
        ),
        {"main": hosts(("x3", 1))},
        flavor_labels={"zone": "zone-a"},
    ),
    "detailed failure message with exclusion stats": Case(
        (
            node(
                "x1", host="x1", taints=(Taint("key", "value", "NoSchedule"),), cpu="1", pods="10"
            ),
            node("x2", host="x2", labels={"zone": "zone-b"}, cpu="1", pods="10"),
            node("x3", host="x3", labels={"zone": "zone-b"}, cpu="2", pods="10"),
            node("x4", host="x4", labels={"zone": "zone-a"}, cpu="100m", pods="10"),
        ),
        ONE_LEVEL,
        (pod_set(1, required=HOST, node_selector={"zone": "zone-a"}, cpu="1"),),
        reason=(
            'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 4; '
            'excluded: nodeSelector: 2, resource "cpu": 1, taint "key=value:NoSchedule": 1'
        ),
    ),
    "skip node which doesn't match node selector, label value differs": Case(
        (
            node(
                "x3",
                host="x3",
                labels={"zone": "zone-a", "custom-label-1": "value-1"},
                cpu="1",
                memory="1Gi",
                pods="10",
            ),
        ),
        ONE_LEVEL,
        (pod_set(1, required=HOST, node_selector={"custom-label-1": "value-2"}, cpu="300m"),),
        reason=(
            'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 1; '
            "excluded: nodeSelector: 1"
        ),
        flavor_labels={"zone": "zone-a"},
    ),
    "allow to schedule on the node which matches the node selector": Case(
        (
            node(
                "b1-r1-x3",
                host="x3",
                labels={"zone": "zone-a", "custom-label-1": "value-1"},
                cpu="1",
                pods="10",
            ),
            node(
                "b1-r1-x5",
                host="x5",
                labels={"zone": "zone-a", "custom-label-1": "value-2"},
                cpu="1",
                pods="10",
            ),
        ),
        ONE_LEVEL,
        (pod_set(1, required=HOST, node_selector={"custom-label-1": "value-2"}, cpu="1"),),
        {"main": hosts(("x5", 1))},
        flavor_labels={"zone": "zone-a"},
    ),
    "resource exclusion picks most restrictive resource": Case(
        (node("dual-shortage", host="dual-shortage", cpu="500m", pods="10", gpu="0"),),
        ONE_LEVEL,
        (pod_set(1, required=HOST, cpu="1", gpu=1),),
        reason=(
            'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 1; '
            'excluded: resource "cpu": 1'
        ),
    ),
    "no assignment as node does not have enough allocatable pods": Case(
        (node("b1-r1-x3", host="x3", cpu="1000m", pods="1"),),
        ONE_LEVEL,
        (pod_set(1, required=HOST, cpu="300m"),),
        reason=(
            'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 1; '
            'excluded: resource "pods": 1'
        ),
        non_tas={"b1-r1-x3": {"cpu": "300m", "pods": "1"}},
    ),
    "multiple PodSets account assumed pod usage against allocatable pods": Case(
        (node("x1", host="x1", cpu="2", pods="1"),),
        ONE_LEVEL,
        (
            pod_set(1, "one", required=HOST, cpu="1"),
            pod_set(1, "two", required=HOST, cpu="1"),
        ),
        {"one": hosts(("x1", 1))},
        reason=(
            'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 1; '
            'excluded: resource "pods": 1'
        ),
    ),
    # --- slices ------------------------------------------------------------------------
    "block required for podset; host required for slices": Case(
        cpu_nodes(
            ("b1-r1-x3", "b1", "r1", "x3", "3"),
            ("b1-r1-x5", "b1", "r1", "x5", "3"),
            ("b1-r1-x1", "b1", "r1", "x1", "3"),
        ),
        THREE_LEVELS,
        (pod_set(6, required=BLOCK, slice_level=HOST, slice_size=2, cpu="1"),),
        {"main": hosts(("x1", 2), ("x3", 2), ("x5", 2))},
    ),
    "host slices; more free slice capacity first, then tight fit": Case(
        cpu_nodes(
            ("b1-r1-x3", "b1", "r1", "x3", "6"),
            ("b1-r1-x5", "b1", "r1", "x5", "5"),
            ("b1-r1-x1", "b1", "r1", "x1", "4"),
            ("b1-r1-x6", "b1", "r1", "x6", "2"),
        ),
        THREE_LEVELS,
        (pod_set(12, required=BLOCK, slice_level=HOST, slice_size=2, cpu="1"),),
        {"main": hosts(("x1", 4), ("x3", 6), ("x6", 2))},
    ),
    "host slices; select domains with tight fit": Case(
        cpu_nodes(
            ("b1-r1-x3", "b1", "r1", "x3", "3"),
            ("b1-r1-x5", "b1", "r1", "x5", "2"),
            ("b1-r1-x1", "b1", "r1", "x1", "2"),
        ),
        THREE_LEVELS,
        (pod_set(4, required=BLOCK, slice_level=HOST, slice_size=2, cpu="1"),),
        {"main": hosts(("x1", 2), ("x5", 2))},
    ),
    "block required for podset; rack required for slices": Case(
        cpu_nodes(
            ("b1-r1-x3", "b1", "r1", "x3", "1"),
            ("b1-r1-x5", "b1", "r1", "x5", "1"),
            ("b1-r2-x1", "b1", "r2", "x1", "1"),
            ("b1-r2-x6", "b1", "r2", "x6", "1"),
            ("b1-r2-x2", "b1", "r2", "x2", "1"),
            ("b2-r1-x4", "b2", "r1", "x4", "1"),
            ("b2-r1-x7", "b2", "r1", "x7", "1"),
        ),
        THREE_LEVELS,
        (pod_set(4, required=BLOCK, slice_level=RACK, slice_size=2, cpu="1"),),
        {"main": hosts(("x3", 1), ("x5", 1), ("x1", 1), ("x2", 1))},
    ),
    "block preferred for podset; rack required for slices": Case(
        DEFAULT_NODES,
        THREE_LEVELS,
        (pod_set(4, preferred=BLOCK, slice_level=RACK, slice_size=2, cpu="1"),),
        {"main": hosts(("x1", 1), ("x5", 1), ("x4", 2))},
    ),
    "host slices; optimize last domain": Case(
        cpu_nodes(
            ("b1-r1-x3", "b1", "r1", "x3", "4"),
            ("b1-r1-x5", "b1", "r1", "x5", "3"),
            ("b1-r1-x1", "b1", "r1", "x1", "2"),
        ),
        THREE_LEVELS,
        (pod_set(6, required=BLOCK, slice_level=HOST, slice_size=2, cpu="1"),),
        {"main": hosts(("x1", 2), ("x3", 4))},
    ),
    "block preferred; host slices; 2 blocks with unbalanced subdomains": Case(
        cpu_nodes(
            ("b1-r1-x3", "b1", "r1", "x3", "3"),
            ("b1-r1-x5", "b1", "r1", "x5", "3"),
            ("b1-r1-x1", "b1", "r1", "x1", "3"),
            ("b2-r1-x6", "b2", "r1", "x6", "6"),
        ),
        THREE_LEVELS,
        (pod_set(12, preferred=BLOCK, slice_level=HOST, slice_size=3, cpu="1"),),
        {"main": hosts(("x1", 3), ("x3", 3), ("x6", 6))},
    ),
    "rack slices; the pod set fits in a block, its slices in no rack": Case(
        cpu_nodes(
            ("b1-r1-x3", "b1", "r1", "x3", "2"),
            ("b1-r2-x5", "b1", "r2", "x5", "2"),
            ("b1-r3-x1", "b1", "r3", "x1", "2"),
        ),
        THREE_LEVELS,
        (pod_set(6, required=BLOCK, slice_level=RACK, slice_size=3, cpu="1"),),
        reason='topology "default" doesn\'t allow to fit any of 2 slice(s)',
    ),
    "rack slices; only 1 out of 2 slices fit": Case(
        cpu_nodes(
            ("b1-r1-x3", "b1", "r1", "x3", "3"),
            ("b1-r2-x5", "b1", "r2", "x5", "1"),
            ("b1-r3-x1", "b1", "r3", "x1", "1"),
            ("b1-r4-x6", "b1", "r4", "x6", "1"),
        ),
        THREE_LEVELS,
        (pod_set(6, required=BLOCK, slice_level=RACK, slice_size=3, cpu="1"),),
        reason='topology "default" allows to fit only 1 out of 2 slice(s)',
    ),
    "rack slices; the pod set fits in both blocks, its slices in one": Case(
        cpu_nodes(
            ("b1-r1-x3", "b1", "r1", "x3", "2"),
            ("b1-r2-x5", "b1", "r2", "x5", "2"),
            ("b1-r3-x1", "b1", "r3", "x1", "2"),
            ("b2-r4-x6", "b2", "r4", "x6", "3"),
            ("b2-r5-x2", "b2", "r5", "x2", "3"),
        ),
        THREE_LEVELS,
        (pod_set(6, required=BLOCK, slice_level=RACK, slice_size=3, cpu="1"),),
        {"main": hosts(("x6", 3), ("x2", 3))},
    ),
    "slice level above the required level": Case(
        DEFAULT_NODES,
        THREE_LEVELS,
        (pod_set(1, required=HOST, slice_level=BLOCK, slice_size=1, cpu="1"),),
        reason=(
            "podset slice topology cloud.com/topology-block is above the podset topology "
            "kubernetes.io/hostname"
        ),
    ),
    "slice size is required when slice topology is requested": Case(
        DEFAULT_NODES,
        THREE_LEVELS,
        (pod_set(1, required=BLOCK, slice_level=HOST, cpu="1"),),
        reason="slice topology requested, but slice size not provided",
    ),
    "cannot request a slice level that does not exist": Case(
        DEFAULT_NODES,
        THREE_LEVELS,
        (
            pod_set(
                1, required=BLOCK, slice_level="not-existing-topology-level", slice_size=1, cpu="1"
            ),
        ),
        reason="no requested topology level for slices: not-existing-topology-level",
    ),
    "no topology for podset; host slices": Case(
        cpu_nodes(
            ("b1-r1-x3", "b1", "r1", "x3", "3"),
            ("b1-r1-x5", "b1", "r1", "x5", "3"),
            ("b1-r1-x1", "b1", "r1", "x1", "3"),
        ),
        THREE_LEVELS,
        (pod_set(6, slice_level=HOST, slice_size=2, cpu="1"),),
        {"main": hosts(("x1", 2), ("x3", 2), ("x5", 2))},
    ),
    "no topology for podset; host slices; multiple blocks": Case(
        SCATTERED_NODES,
        THREE_LEVELS,
        (pod_set(6, slice_level=HOST, slice_size=2, cpu="1"),),
        {"main": hosts(("x3", 4), ("x6", 2))},
    ),
    "no topology for podset; rack slices; multiple blocks": Case(
        DEFAULT_NODES,
        THREE_LEVELS,
        (pod_set(4, slice_level=RACK, slice_size=2, cpu="1"),),
        {"main": hosts(("x1", 1), ("x5", 1), ("x4", 2))},
    ),
    # --- several pod sets, groups ------------------------------------------------------
    "two podsets with overlapping domain": Case(
        block_nodes(("b1", "2"), ("b2", "2"), ("b3", "2")),
        (BLOCK,),
        (
            pod_set(3, "podset1", preferred=BLOCK, cpu="1"),
            pod_set(3, "podset2", preferred=BLOCK, cpu="1"),
        ),
        {
            "podset1": blocks(("b1", 2), ("b2", 1)),
            "podset2": blocks(("b2", 1), ("b3", 2)),
        },
    ),
    "two podsets with the same group": Case(
        (
            node("b1", "b1", cpu="2", gpu="2", memory="2Gi", pods="10"),
            node("b2", "b2", cpu="5", gpu="4", pods="10"),
            node("b3", "b3", cpu="2", gpu="2", pods="10"),
        ),
        (BLOCK,),
        (
            pod_set(1, "leader", required=BLOCK, group="sameGroup", cpu="1"),
            pod_set(4, "workers", required=BLOCK, group="sameGroup", cpu="1", gpu=1),
        ),
        {"leader": blocks(("b2", 1)), "workers": blocks(("b2", 4))},
    ),
    "grouped podsets preserve worker capacity when placing the leader": Case(
        (
            node("h1", rack="r1", host="h1", cpu="2", pods="10"),
            node("h2", rack="r1", host="h2", cpu="4", pods="10"),
            node("h3", rack="r1", host="h3", cpu="3", pods="10"),
        ),
        (RACK, HOST),
        (
            pod_set(1, "leader", required=RACK, group="g", cpu="1"),
            pod_set(4, "workers", required=RACK, group="g", cpu="2"),
        ),
        {"leader": hosts(("h3", 1)), "workers": hosts(("h1", 1), ("h2", 2), ("h3", 1))},
    ),
    "sliced grouped podsets preserve worker capacity when placing the leader": Case(
        (
            node("h1", rack="r1", host="h1", cpu="2", pods="10"),
            node("h2", rack="r1", host="h2", cpu="4", pods="10"),
            node("h3", rack="r1", host="h3", cpu="3", pods="10"),
        ),
        (RACK, HOST),
        (
            pod_set(1, "leader", required=RACK, group="g", cpu="1"),
            pod_set(
                8, "workers", required=RACK, slice_level=HOST, slice_size=2, group="g", cpu="1"
            ),
        ),
        {"leader": hosts(("h3", 1)), "workers": hosts(("h1", 2), ("h2", 4), ("h3", 2))},
    ),
    "preferred grouped podsets preserve capacity across domains": Case(
        (node("h1", host="h1", cpu="8", pods="10"), node("h2", host="h2", cpu="3", pods="10")),
        ONE_LEVEL,
        (
            pod_set(1, "leader", preferred=HOST, group="g", cpu="1"),
            pod_set(5, "workers", preferred=HOST, group="g", cpu="2"),
        ),
        {"leader": hosts(("h2", 1)), "workers": hosts(("h1", 4), ("h2", 1))},
    ),
    "unconstrained grouped podsets spread leader and worker across domains": Case(
        (node("h1", host="h1", cpu="1", pods="10"), node("h2", host="h2", gpu="1", pods="10")),
        ONE_LEVEL,
        (
            pod_set(1, "leader", unconstrained=True, group="g", cpu="1"),
            pod_set(1, "workers", unconstrained=True, group="g", gpu=1),
        ),
        {"leader": hosts(("h1", 1)), "workers": hosts(("h2", 1))},
    ),
    "grouped podsets keep the leader below the slice level": Case(
        (
            node("leader-host", rack="r1", host="leader-host", cpu="1", pods="10"),
            node("worker-host", rack="r1", host="worker-host", gpu="1", pods="10"),
        ),
        (RACK, HOST),
        (
            pod_set(1, "leader", required=RACK, slice_level=RACK, slice_size=1, group="g", cpu="1"),
            pod_set(1, "workers", required=RACK, slice_level=RACK, slice_size=1, group="g", gpu=1),
        ),
        {"leader": hosts(("leader-host", 1)), "workers": hosts(("worker-host", 1))},
    ),
    "grouped podsets in domains that tightly fit leader and workers": Case(
        (
            node("b1", "b1", cpu="2", gpu="2", pods="10"),
            node("b2", "b2", cpu="8", gpu="8", pods="10"),
            node("b3", "b3", cpu="2", gpu="2", pods="10"),
        ),
        (BLOCK,),
        (
            pod_set(1, "leader", required=BLOCK, group="g", cpu="1"),
            pod_set(4, "workers", required=BLOCK, group="g", cpu="1", gpu=2),
        ),
        {"leader": blocks(("b2", 1)), "workers": blocks(("b2", 4))},
    ),
    "grouped podsets skip a domain where only the workers fit without the leader": Case(
        (
            node("small-used", "b1", "small", "small-used", cpu="2800m", pods="10"),
            node("small-free", "b1", "small", "small-free", cpu="2800m", pods="10"),
            node("large-free", "b1", "large", "large-free", cpu="6", pods="10"),
        ),
        THREE_LEVELS,
        (
            pod_set(1, "leader", required=RACK, group="g", cpu="2500m"),
            pod_set(1, "workers", required=RACK, group="g", cpu="2500m"),
        ),
        {"leader": hosts(("large-free", 1)), "workers": hosts(("large-free", 1))},
        non_tas={"small-used": {"cpu": "2500m", "pods": "1"}},
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_find_topology_assignments(name: str) -> None:
    case = CASES[name]
    view = snapshot(case.nodes, case.levels, case.flavor_labels, case.non_tas)
    found, reason = find_assignments(view, case.pod_sets)
    assert reason == case.reason
    got = {ps: (a.levels, a.domains) for ps, a in found.items()}
    assert got == case.want
