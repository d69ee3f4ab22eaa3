"""The visibility API's answers (controller/core/queue/visibility.py), as Kueue's
pkg/visibility/storage tests state them: 0-based positions in the ClusterQueue and in the
LocalQueue, the base priority, limit/offset bounded as Kueue's, NotFound as None."""

from __future__ import annotations

from controller.core.model.clusterqueues import LocalQueue
from controller.core.queue.visibility import (
    MAX_LIMIT,
    PendingOrder,
    bounded_limit_offset,
    pending_in_cluster_queue,
    pending_in_local_queue,
)
from controller.core.state import ClusterState
from tests.unit.core.builders import add, cluster, cq, wl


def two_local_queues() -> ClusterState:
    """Kueue's "single ClusterQueue and two LocalQueue setup with four workloads"."""
    state = cluster(cq("cq", {"default": {"cpu": "0"}}))
    state.set_local_queue(LocalQueue("ns", "lqA", "cq"))
    state.set_local_queue(LocalQueue("ns", "lqB", "cq"))
    add(
        state,
        wl("lqA-high", "lqA", priority=100, created=1.0, cpu=1),
        wl("lqA-low", "lqA", priority=50, created=1.0, cpu=1),
        wl("lqB-high", "lqB", priority=100, created=2.0, cpu=1),
        wl("lqB-low", "lqB", priority=50, created=2.0, cpu=1),
    )
    return state


def rows(items: object) -> list[tuple[str, int, int, int]]:
    return [
        (i.name, i.priority, i.position_in_cluster_queue, i.position_in_local_queue)
        for i in items  # type: ignore[attr-defined]
    ]


def test_cluster_queue_positions_as_kueue() -> None:
    items = pending_in_cluster_queue(two_local_queues(), "cq")
    assert rows(items) == [
        ("lqA-high", 100, 0, 0),
        ("lqB-high", 100, 1, 0),
        ("lqA-low", 50, 2, 1),
        ("lqB-low", 50, 3, 1),
    ]


def test_cluster_queue_limit_and_offset_keep_the_local_queue_positions() -> None:
    state = two_local_queues()
    assert rows(pending_in_cluster_queue(state, "cq", limit=2, offset=1)) == [
        ("lqB-high", 100, 1, 0),
        ("lqA-low", 50, 2, 1),
    ]
    assert pending_in_cluster_queue(state, "cq", limit=0) == []
    assert pending_in_cluster_queue(state, "cq", offset=10) == []


def test_local_queue_positions_as_kueue() -> None:
    state = two_local_queues()
    assert rows(pending_in_local_queue(state, "ns", "lqB")) == [
        ("lqB-high", 100, 1, 0),
        ("lqB-low", 50, 3, 1),
    ]
    assert rows(pending_in_local_queue(state, "ns", "lqB", limit=1, offset=1)) == [
        ("lqB-low", 50, 3, 1)
    ]


def test_not_found_and_a_local_queue_without_its_cluster_queue() -> None:
    state = two_local_queues()
    assert pending_in_cluster_queue(state, "nope") is None
    assert pending_in_local_queue(state, "ns", "nope") is None
    state.set_local_queue(LocalQueue("ns", "orphan", "missing-cq"))
    assert pending_in_local_queue(state, "ns", "orphan") == []


def test_bounded_limit_offset() -> None:
    assert bounded_limit_offset(-1, -5) == (0, 0)
    assert bounded_limit_offset(MAX_LIMIT + 1, 3) == (MAX_LIMIT, 3)


def test_a_kept_order_answers_as_a_fresh_one_until_the_pending_workloads_change() -> None:
    from controller.core.scheduler.cycle import run_cycle

    state = two_local_queues()
    orders = PendingOrder()
    fresh = rows(pending_in_cluster_queue(state, "cq"))
    assert rows(pending_in_cluster_queue(state, "cq", limit=2, orders=orders)) == fresh[:2]
    assert rows(pending_in_cluster_queue(state, "cq", offset=2, orders=orders)) == fresh[2:]
    assert rows(pending_in_local_queue(state, "ns", "lqB", orders=orders)) == [
        ("lqB-high", 100, 1, 0),
        ("lqB-low", 50, 3, 1),
    ]
    assert orders.sorts == orders.new_orders == 1
    run_cycle(state, 0.0)  # pops the heads and parks them again: the same items
    assert rows(pending_in_cluster_queue(state, "cq", orders=orders)) == fresh
    assert orders.new_orders == 1
    add(state, wl("lqB-top", "lqB", priority=200, created=3.0, cpu=1))
    assert rows(pending_in_local_queue(state, "ns", "lqB", orders=orders)) == [
        ("lqB-top", 200, 0, 0),
        ("lqB-high", 100, 2, 1),
        ("lqB-low", 50, 4, 2),
    ]
    assert rows(pending_in_cluster_queue(state, "cq", orders=orders)) == rows(
        pending_in_cluster_queue(state, "cq")
    )
    assert orders.new_orders == 2
    state.remove_workload(next(iter(state.queues["cq"].workload_keys())))
    assert len(pending_in_cluster_queue(state, "cq", orders=orders) or []) == 4
