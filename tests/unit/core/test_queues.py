"""Pending queues and backoff (controller/core/queues.py)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.clusterqueues import QueueingStrategy
from controller.core.queues import BackoffQueue, OrderKey, PendingQueue, order_key


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


def test_a_workload_placed_alike_to_refused_heads_joins_them_until_the_next_retry() -> None:
    """Kueue's scheduling equivalence hashing (`PushOrUpdate`): under BestEffortFIFO a
    Workload that arrives with the signature of heads refused alike since the last retry
    is parked with them, with their reason, and never offered as a head meanwhile."""
    queue = PendingQueue()
    small = [order_key(0, 0, float(t), f"s{t}", f"s{t}") for t in range(4)]
    signature = {f"s{t}": "small" for t in range(4)} | {"big": "big"}
    for head in small[:2]:
        queue.push(head)
    head = queue.pop()
    assert head == small[0]
    queue.requeue(head, inadmissible=True)  # the refused head itself
    assert queue.park_run(signature.__getitem__, "small", tag="no room for 1 cpu") == 1

    assert queue.place(small[2], "small") is True  # arrives: parked, not offered
    assert queue.is_inadmissible("s2") and queue.tag_of("s2") == "no room for 1 cpu"
    assert not queue.has_heads()
    big = order_key(0, 0, 9.0, "big", "big")
    assert queue.place(big, "big") is False  # another signature: offered
    assert queue.pop() == big
    earlier = order_key(5, 0, 0.0, "s3", "s3")  # ahead of the parked run in queue order
    assert queue.place(earlier, "small") is True
    assert queue.inadmissible_count() == 4

    assert queue.retry_inadmissible() == 4  # a quota change: all offered again, in order
    assert [queue.pop() for _ in range(4)] == [earlier, *small[:3]]
    assert queue.place(small[3], "small") is False  # nothing refused since the retry
    assert queue.pop() == small[3]


def test_a_strict_fifo_queue_never_parks_what_is_placed() -> None:
    queue = PendingQueue(QueueingStrategy.STRICT_FIFO)
    first, second = (order_key(0, 0, float(t), f"w{t}", f"w{t}") for t in range(2))
    queue.push(first)
    queue.park_run(lambda key: "same", "same", tag="no room")
    assert queue.place(second, "same") is False
    assert queue.has_heads()


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
        self.refused: dict[int, str] = {}  # signature refused alike since the last retry → tag

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
            st.sampled_from(
                ["push", "place", "park", "pop", "park_run", "park_before", "remove", "retry"]
            ),
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
    same heads in the same order as a plain sorted queue would; a Workload placed with a
    signature refused since the last retry is parked with that refusal's tag."""
    queue, model = PendingQueue(), _Model()

    def signature_of(key: str) -> int:
        return signatures.get(key, 0)

    for op, key, priority, created in operations:
        item = order_key(priority, 0, float(created), key, key)
        if op == "push":
            queue.push(item)
            model.items[key] = (item, False)
        elif op == "place":
            wanted = signature_of(key)
            joins = key not in model.items and wanted in model.refused
            assert queue.place(item, wanted) is joins
            model.items[key] = (item, joins)
            if joins:
                assert queue.tag_of(key) == model.refused[wanted]
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
            model.refused[wanted] = key
            for head in expected:
                assert queue.tag_of(head[4]) == key
        elif op == "remove":
            assert queue.remove(key) == (model.items.pop(key, (None,))[0])
        else:
            parked = [k for k, (_, p) in model.items.items() if p]
            assert queue.retry_inadmissible() == len(parked)
            model.refused.clear()
            for k in parked:
                model.items[k] = (model.items[k][0], False)
        assert len(queue) == len(model.items)
        assert queue.has_heads() == bool(model.offered())
        assert queue.peek() == (model.offered() or [None])[0]
        assert queue.inadmissible_count() == sum(p for _, p in model.items.values())
        for k, (_, parked_) in model.items.items():
            assert queue.is_inadmissible(k) == parked_
    assert queue.ordered() == sorted(item for item, _ in model.items.values())
