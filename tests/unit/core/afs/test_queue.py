"""controller/core/afs/queue.py: the head offered is the first Workload of the
LocalQueue with the lowest usage, ties by the usual order; parking and runs behave as one
queue sorted by (usage, order) would."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from api.constants import QueueingStrategy
from controller.core.afs.queue import AdmissionFairQueue
from controller.core.model.workloads import OrderKey, WorkloadKey, order_key
from controller.core.queue.pending_queue import PendingQueue


def fair_queue(local_queue_of: dict[str, str], usage: dict[str, float]) -> AdmissionFairQueue:
    return AdmissionFairQueue(
        QueueingStrategy.BEST_EFFORT_FIFO,
        lambda key: local_queue_of[key],
        lambda local_queue: usage.get(local_queue, 0.0),
    )


def item(key: str, priority: int = 0, created: float = 0.0) -> OrderKey:
    return order_key(priority, 0, created, key, WorkloadKey(key))


def test_the_least_used_local_queue_goes_first_whatever_the_priority() -> None:
    usage = {"a": 8.0, "b": 2.0}
    queue = fair_queue({"a1": "a", "a2": "a", "b1": "b"}, usage)
    queue.push(item("a1", priority=100, created=0))
    queue.push(item("a2", priority=0, created=1))
    queue.push(item("b1", priority=0, created=2))
    assert queue.peek() == item("b1", created=2)
    assert queue.ordered() == [item("b1", created=2), item("a1", 100, 0), item("a2", 0, 1)]
    usage["b"] = 9.0  # usage changes between cycles: the queue is told, and ranks b again
    queue.usage_changed("b")
    popped = queue.pop()
    assert popped is not None and popped[4] == "a1"
    assert len(queue) == 2 and "a1" not in queue and "b1" in queue


def test_equal_usage_falls_back_to_priority_then_time() -> None:
    queue = fair_queue({"a1": "a", "b1": "b", "b2": "b"}, {"a": 4.0, "b": 4.0})
    queue.push(item("a1", created=5))
    queue.push(item("b1", created=3))
    queue.push(item("b2", priority=1, created=9))
    assert [queue.pop() for _ in range(3)] == [
        item("b2", 1, 9),
        item("b1", created=3),
        item("a1", created=5),
    ]


def test_a_zero_weight_local_queue_is_last() -> None:
    queue = fair_queue({"z1": "z", "a1": "a"}, {"z": math.inf, "a": 1e12})
    queue.push(item("z1", priority=10))
    queue.push(item("a1"))
    assert [k[4] for k in (queue.pop(), queue.pop()) if k] == ["a1", "z1"]


def test_a_workload_moved_to_another_local_queue_leaves_the_first() -> None:
    where = {"w": "a"}
    queue = fair_queue(where, {"a": 0.0, "b": 5.0})
    queue.push(item("w"))
    where["w"] = "b"
    queue.park(item("w"))
    assert len(queue) == 1 and queue.is_inadmissible("w") and not queue.has_heads()
    assert queue.inadmissible_count() == 1
    assert queue.retry_inadmissible() == 1
    assert queue.remove(WorkloadKey("w")) == item("w")
    assert queue.remove(WorkloadKey("w")) is None
    assert len(queue) == 0 and queue.pop() is None


def test_parking_alike_stops_at_another_local_queues_head_of_equal_usage() -> None:
    """Equal usage interleaves the LocalQueues by item order: parking what shares the
    refused head's signature stops before b's head (another signature), though a's next
    Workload shares it."""
    queue = fair_queue({"a1": "a", "a2": "a", "b1": "b"}, {"a": 1.0, "b": 1.0})
    for key, created in (("a1", 0), ("b1", 1), ("a2", 2)):
        queue.push(item(key, created=created))
    signature = {"a1": "big", "a2": "big", "b1": "small"}
    assert queue.park_run(lambda k: signature[k], "big", tag="no quota") == 1
    assert queue.tag_of(WorkloadKey("a1")) == "no quota"
    assert queue.peek() == item("b1", created=1)
    # With b's usage higher, all of a comes first: both of a's are parked together.
    queue.retry_inadmissible()
    queue2 = fair_queue({"a1": "a", "a2": "a", "b1": "b"}, {"a": 1.0, "b": 2.0})
    for key, created in (("a1", 0), ("b1", 1), ("a2", 2)):
        queue2.push(item(key, created=created))
    assert queue2.park_run(lambda k: signature[k], "big") == 2
    assert queue2.peek() == item("b1", created=1)


class _Model:
    """The contract, naively: items offered in (usage of their LocalQueue, order) order."""

    def __init__(self, usage: dict[str, float], where: dict[str, str]) -> None:
        self.usage, self.where = usage, where
        self.items: dict[str, tuple[OrderKey, bool, str]] = {}

    def rank(self, entry: tuple[OrderKey, bool, str]) -> tuple[float, OrderKey]:
        return (self.usage[entry[2]], entry[0])

    def offered(self) -> list[OrderKey]:
        entries = sorted((e for e in self.items.values() if not e[1]), key=self.rank)
        return [e[0] for e in entries]

    def put(self, item: OrderKey, parked: bool) -> None:
        self.items[item[4]] = (item, parked, self.where[item[4]])


_KEYS = [f"w{i}" for i in range(10)]
_LQS = ["a", "b", "c"]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(
                ["push", "park", "pop", "park_run", "remove", "retry", "usage", "move"]
            ),
            st.sampled_from(_KEYS),
            st.integers(0, 2),  # priority
            st.integers(0, 5),  # creation time
            st.sampled_from(_LQS),
            st.sampled_from([0.0, 1.0, 2.0, math.inf]),
        ),
        max_size=60,
    ),
    st.dictionaries(st.sampled_from(_KEYS), st.integers(0, 1)),
)
def test_behaves_like_one_queue_sorted_by_usage_then_order(
    operations: list[tuple[str, str, int, int, str, float]], signatures: dict[str, int]
) -> None:
    usage = dict.fromkeys(_LQS, 0.0)
    where = dict.fromkeys(_KEYS, "a")
    queue, model = fair_queue(where, usage), _Model(usage, where)

    def signature_of(key: str) -> int:
        return signatures.get(key, 0)

    for op, key, priority, created, local_queue, amount in operations:
        entry = item(key, priority, float(created))
        if op == "push":
            queue.push(entry)
            model.put(entry, False)
        elif op == "park":
            queue.park(entry)
            model.put(entry, True)
        elif op == "pop":
            heads = model.offered()
            assert queue.pop() == (heads[0] if heads else None)
            if heads:
                del model.items[heads[0][4]]
        elif op == "park_run":
            wanted = signature_of(key)
            expected = []
            for head in model.offered():
                if signature_of(head[4]) != wanted:
                    break
                expected.append(head)
                model.items[head[4]] = (head, True, model.items[head[4]][2])
            assert queue.park_run(signature_of, wanted, tag=key) == len(expected)
            for head in expected:
                assert queue.tag_of(head[4]) == key
        elif op == "remove":
            found = model.items.pop(key, None)
            assert queue.remove(WorkloadKey(key)) == (found[0] if found else None)
        elif op == "retry":
            parked = [k for k, e in model.items.items() if e[1]]
            assert queue.retry_inadmissible() == len(parked)
            for k in parked:
                model.put(model.items[k][0], False)
        elif op == "usage":
            usage[local_queue] = amount
            queue.usage_changed(local_queue)
        else:  # the Workload moves to another LocalQueue: it is queued again there
            where[key] = local_queue
            if key in model.items:
                queued, parked, _ = model.items[key]
                queue.requeue(queued, inadmissible=parked)
                model.put(queued, parked)
        assert len(queue) == len(model.items)
        assert set(queue.workload_keys()) == set(model.items)
        assert queue.has_heads() == bool(model.offered())
        assert queue.peek() == (model.offered() or [None])[0]
        assert queue.inadmissible_count() == sum(e[1] for e in model.items.values())
        for k, e in model.items.items():
            assert queue.is_inadmissible(WorkloadKey(k)) == e[1]
    assert queue.ordered() == [e[0] for e in sorted(model.items.values(), key=model.rank)]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(_KEYS), st.integers(0, 2), st.integers(0, 5), st.sampled_from(_LQS)
        ),
        max_size=30,
        unique_by=lambda t: t[0],
    ),
    st.fixed_dictionaries({lq: st.floats(0, 10, allow_nan=False) for lq in _LQS}),
)
def test_pops_what_a_plain_queue_pops_lower_usage_first(
    pushed: list[tuple[str, int, int, str]], usage: dict[str, float]
) -> None:
    """Emptied, the fair queue yields the same Workloads as a plain PendingQueue, and a
    Workload of a LocalQueue with strictly lower usage always comes before one of a
    LocalQueue with higher usage."""
    where = {key: local_queue for key, _, _, local_queue in pushed}
    fair, plain = fair_queue(where, usage), PendingQueue()
    for key, priority, created, _ in pushed:
        fair.push(item(key, priority, float(created)))
        plain.push(item(key, priority, float(created)))
    from_fair = [fair.pop() for _ in pushed]
    from_plain = [plain.pop() for _ in pushed]
    assert fair.pop() is None and plain.pop() is None
    assert sorted(k for k in from_fair if k) == sorted(k for k in from_plain if k)
    lqs = [usage[where[k[4]]] for k in from_fair if k]
    assert lqs == sorted(lqs)
