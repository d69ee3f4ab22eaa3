"""The node view: which nodes count, free capacity after the pods we do not manage and the
TAS Workloads admitted, leaves when the lowest level is not the node; and properties of
every assignment found in it (exact pod counts, no node over capacity, a required level
kept)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.tas.assignment import find_assignment, find_assignments, usage_of
from controller.core.tas.snapshot import TopologySnapshot
from tests.unit.core.tas.builders import (
    BLOCK,
    HOST,
    RACK,
    THREE_LEVELS,
    TWO_LEVELS,
    milli,
    node,
    pod_set,
    snapshot,
)


def test_leaves_sum_their_nodes_when_the_lowest_level_is_not_the_node() -> None:
    view = snapshot(
        (
            node("n1", "b1", "r1", "n1", cpu="1", pods="10"),
            node("n2", "b1", "r1", "n2", cpu="2", pods="10"),
        ),
        TWO_LEVELS,
    )
    assert list(view.leaves) == [("b1", "r1")]
    assert view.leaves[("b1", "r1")].free == milli({"cpu": "3", "pods": "20"})


def test_node_leaves_are_known_by_hostname() -> None:
    view = snapshot((node("n1", "b1", "r1", "h1", cpu="1", pods="10"),), THREE_LEVELS)
    assert list(view.leaves) == [("h1",)]
    assert view.leaves[("h1",)].id == ("b1", "r1", "h1")


def test_nodes_sharing_a_hostname_are_one_leaf_where_the_first_is() -> None:
    """As Kueue's topology tree (a leaf per hostname at the node level): Kueue's perf runner
    labels `node-<i>` in every rack; their capacities are summed under the first node's
    rack, and usage read back from an assignment (the hostname alone) lands on that leaf."""
    view = snapshot(
        (
            node("node-r1-n0", "b1", "r1", "node-0", cpu="1", pods="10"),
            node("node-r2-n0", "b1", "r2", "node-0", cpu="2", pods="10"),
            node("node-r2-n1", "b1", "r2", "node-1", cpu="4", pods="10"),
        ),
        THREE_LEVELS,
    )
    assert sorted(view.leaves) == [("node-0",), ("node-1",)]
    assert view.leaves[("node-0",)].id == ("b1", "r1", "node-0")
    assert view.leaves[("node-0",)].free == milli({"cpu": "3", "pods": "20"})
    assert view.node_count == 3
    view.add_usage(("node-0",), milli({"cpu": "3"}))
    assert view.leaves[("node-0",)].free["cpu"] == 0
    assert [d.id for d in view.domains_per_level[2].values()] == [
        ("b1", "r1", "node-0"),
        ("b1", "r2", "node-1"),
    ]


def test_free_capacity_is_allocatable_minus_non_tas_pods_minus_tas_usage() -> None:
    view = TopologySnapshot(
        "t",
        THREE_LEVELS,
        [node("n1", "b1", "r1", "h1", cpu="4", pods="10")],
        non_tas_usage={"n1": milli({"cpu": "1", "pods": "1"})},
        tas_usage={("h1",): milli({"cpu": "2", "pods": "2"})},
    )
    assert view.leaves[("h1",)].free == milli({"cpu": "1", "pods": "7"})
    assert find_assignment(view, pod_set(2, required=HOST, cpu="1")) == (
        'topology "t" allows to fit only 1 out of 2 pod(s)'
    )
    view.add_usage(("h1",), milli({"cpu": "2", "pods": "2"}), sign=-1)
    assert not isinstance(find_assignment(view, pod_set(2, required=HOST, cpu="1")), str)


def test_only_the_flavors_ready_schedulable_labelled_nodes_count() -> None:
    nodes = (
        node("ok", "b1", "r1", "ok", labels={"pool": "a"}, cpu="1", pods="1"),
        node("other-pool", "b1", "r1", "x", labels={"pool": "b"}, cpu="1", pods="1"),
        node("not-ready", "b1", "r1", "y", labels={"pool": "a"}, ready=False, cpu="1", pods="1"),
        node(
            "cordoned", "b1", "r1", "z", labels={"pool": "a"}, unschedulable=True, cpu="1", pods="1"
        ),
        node("no-rack", "b1", None, "w", labels={"pool": "a"}, cpu="1", pods="1"),
    )
    view = snapshot(nodes, THREE_LEVELS, flavor_labels={"pool": "a"})
    assert list(view.leaves) == [("ok",)]
    assert view.node_count == 1


_NODE = st.tuples(
    st.sampled_from(["b1", "b2"]),
    st.sampled_from(["r1", "r2", "r3"]),
    st.integers(min_value=0, max_value=4),  # cpu
    st.integers(min_value=0, max_value=5),  # pods
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(_NODE, min_size=1, max_size=10),
    st.integers(min_value=1, max_value=12),
    st.sampled_from(["required-block", "required-rack", "preferred-rack", "unconstrained"]),
    st.sampled_from([None, 2]),
)
def test_every_assignment_is_exact_and_within_capacity(
    spec: list[tuple[str, str, int, int]], count: int, mode: str, slice_size: int | None
) -> None:
    nodes = tuple(
        node(f"n{i}", b, r, f"n{i}", cpu=str(cpu), pods=str(pods))
        for i, (b, r, cpu, pods) in enumerate(spec)
    )
    view = snapshot(nodes, THREE_LEVELS)
    if slice_size:  # Kueue's job validation keeps a slice no larger than the pod set
        count = max(1, count // slice_size) * slice_size
    kind, _, level = mode.partition("-")
    label = {"block": BLOCK, "rack": RACK}.get(level)
    request = pod_set(
        count,
        required=label if kind == "required" else None,
        preferred=label if kind == "preferred" else None,
        unconstrained=kind == "unconstrained",
        slice_level=HOST if slice_size else None,
        slice_size=slice_size,
        cpu="1",
    )
    found, reason = find_assignments(view, [request])
    capacity = {
        n.labels[HOST]: min(n.allocatable["cpu"], n.allocatable["pods"]) // 1000 for n in nodes
    }
    placeable = sum((c // slice_size) * slice_size if slice_size else c for c in capacity.values())
    if reason is not None:
        assert found == {}
        if kind in ("preferred", "unconstrained"):
            # preferred and unconstrained fail only when the whole topology is too small
            assert placeable < count or (slice_size is not None and count % slice_size != 0)
        return
    assignment = found["main"]
    assert assignment.pod_count == count
    for (host,), pods in assignment.domains:
        assert 0 < pods <= capacity[host]
        if slice_size:
            assert pods % slice_size == 0
    if kind == "required":
        depth = THREE_LEVELS.index(label)  # type: ignore[arg-type]
        ids = {view.leaves[(host,)].id[: depth + 1] for (host,), _ in assignment.domains}
        assert len(ids) == 1
    usage = usage_of(assignment, milli({"cpu": "1"}))
    assert sum(u["pods"] for u in usage.values()) == count * 1000
