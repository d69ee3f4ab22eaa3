"""Pending queues and backoff (controller/core/queue/pending_queue.py)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.model.workloads import OrderKey, order_key
from controller.core.queue.backoff import BackoffQueue
from controller.core.queue.pending_queue import PendingQueue


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


def test_backoff_queue_releases_due_keys_once() -> None:
    queue = BackoffQueue()
    queue.add("a", 5.0)
    queue.add("b", 10.0)
    queue.add("a", 20.0)  # re-added later: the earlier entry is stale
    assert queue.due(10.0) == ["b"]
    assert queue.due(19.0) == []
    assert queue.due(20.0) == ["a"]
    assert len(queue) == 0


class _Model:
    """The queue's contract, naively: offered items in order, parked ones aside."""

    def __init__(self) -> None:
        self.items: dict[str, tuple[OrderKey, bool]] = {}

    def offered(self) -> list[OrderKey]:
        return sorted(item for item, parked in self.items.values() if not parked)

    def pop(self) -> OrderKey | None:
        heads = self.offered()
        if not heads:
            return None
        del self.items[heads[0][4]]
        return heads[0]


_KEYS = [f"w{i}" for i in range(12)]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["push", "park", "pop", "park_run", "park_before", "remove", "retry"]),
            st.sampled_from(_KEYS),
            st.integers(0, 2),  # priority
            st.integers(0, 5),  # creation time
        ),
        max_size=60,
    ),
    st.dictionaries(st.sampled_from(_KEYS), st.integers(0, 1)),
)
def test_runs_behave_like_one_sorted_queue(
    operations: list[tuple[str, str, int, int]], signatures: dict[str, int]
) -> None:
    """Parking alike in runs (and setting runs aside whole, also up to a bound) offers the
    same heads in the same order as a plain sorted queue would."""
    queue, model = PendingQueue(), _Model()

    def signature_of(key: str) -> int:
        return signatures.get(key, 0)

    for op, key, priority, created in operations:
        item = order_key(priority, 0, float(created), key, key)
        if op == "push":
            queue.push(item)
            model.items[key] = (item, False)
        elif op == "park":
            queue.park(item)
            model.items[key] = (item, True)
        elif op == "pop":
            assert queue.pop() == model.pop()
        elif op in ("park_run", "park_before"):
            # park_before: only heads before `item` (a bound an AdmissionFairQueue sets).
            bound = item if op == "park_before" else None
            wanted = signatures.get(key, 0)
            expected = []
            for head in model.offered():
                if signature_of(head[4]) != wanted or (bound is not None and not head < bound):
                    break
                expected.append(head)
                model.items[head[4]] = (head, True)
            assert queue.park_run(signature_of, wanted, tag=key, before=bound) == len(expected)
            for head in expected:
                assert queue.tag_of(head[4]) == key
        elif op == "remove":
            assert queue.remove(key) == (model.items.pop(key, (None,))[0])
        else:
            parked = [k for k, (_, p) in model.items.items() if p]
            assert queue.retry_inadmissible() == len(parked)
            for k in parked:
                model.items[k] = (model.items[k][0], False)
        assert len(queue) == len(model.items)
        assert queue.has_heads() == bool(model.offered())
        assert queue.peek() == (model.offered() or [None])[0]
        assert queue.inadmissible_count() == sum(p for _, p in model.items.values())
        for k, (_, parked_) in model.items.items():
            assert queue.is_inadmissible(k) == parked_
    assert queue.ordered() == sorted(item for item, _ in model.items.values())
