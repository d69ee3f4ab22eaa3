"""Pending queues and backoff (controller/core/queues.py)."""

from __future__ import annotations

from controller.core.queues import BackoffPolicy, BackoffQueue, PendingQueue, order_key


def test_order_priority_then_cost_then_age_then_uid() -> None:
    queue = PendingQueue()
    items = [
        order_key(0, 0, 1.0, "u1", "old-low"),
        order_key(5, 0, 9.0, "u2", "new-high"),
        order_key(5, 3000, 9.0, "u3", "costly"),
        order_key(0, 0, 1.0, "u0", "same-time-lower-uid"),
    ]
    for item in items:
        queue.push(item)
    popped = [queue.pop() for _ in items]
    assert [p[4] for p in popped if p] == ["costly", "new-high", "same-time-lower-uid", "old-low"]
    assert queue.pop() is None


def test_remove_reorder_park_and_retry() -> None:
    queue = PendingQueue()
    a, b = order_key(0, 0, 1.0, "a", "a"), order_key(0, 0, 2.0, "b", "b")
    queue.push(a)
    queue.push(b)
    queue.push(order_key(9, 0, 2.0, "b", "b"))  # reordered
    assert queue.peek() is not None and queue.peek()[4] == "b"  # type: ignore[index]
    queue.remove("b")
    assert len(queue) == 1
    head = queue.pop()
    assert head == a
    queue.requeue(a, inadmissible=True)
    assert queue.pop() is None and queue.is_inadmissible("a")
    assert queue.retry_inadmissible() == 1
    assert queue.pop() == a


def test_many_updates_stay_compact() -> None:
    queue = PendingQueue()
    for i in range(10_000):
        queue.push(order_key(i % 7, 0, float(i), str(i), "same"))
    assert len(queue) == 1
    assert len(queue._heap) < 200


def test_backoff_policy_doubles_and_caps() -> None:
    policy = BackoffPolicy(base_seconds=10, max_seconds=60)
    assert [policy.requeue_at(n, 0) for n in (1, 2, 3, 4, 100)] == [10, 20, 40, 60, 60]


def test_backoff_queue_releases_due_keys_once() -> None:
    queue = BackoffQueue()
    queue.add("a", 5.0)
    queue.add("b", 10.0)
    queue.add("a", 20.0)  # re-added later: the earlier entry is stale
    assert queue.due(10.0) == ["b"]
    assert queue.due(19.0) == []
    assert queue.due(20.0) == ["a"]
    assert len(queue) == 0
