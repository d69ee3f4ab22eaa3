"""The pending queue of a ClusterQueue with admission fair sharing: one `PendingQueue`
per LocalQueue, and the head offered is the first of the LocalQueue with the lowest
usage (Kueue's `queueOrderingFunc` with admission fair sharing: LocalQueue usage first,
then the usual priority, preemption cost, creation time and UID).

A LocalQueue's usage changes between cycles (samples, entry penalties, a new weight), so
the choice is made when a head is taken (`peek`/`pop`), from the usage as it is then —
Kueue re-heapifies for the same reason. Within one LocalQueue the order never depends on
usage, so each sub-queue keeps its own runs and parking: `park_run` parks the heads in the
combined order for as long as they share the refused head's signature, a run at a time
within one sub-queue, bounded by the next head of another LocalQueue when their usages tie.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from controller.core.clusterqueues import QueueingStrategy
from controller.core.queues import OrderKey, PendingQueue
from controller.core.workloads import WorkloadKey

__all__ = ["AdmissionFairQueue"]

_Head = tuple[float, OrderKey, str]
"""(LocalQueue usage, head item, LocalQueue): smaller is offered first."""


class AdmissionFairQueue:
    """`PendingQueue`'s interface over one `PendingQueue` per LocalQueue."""

    __slots__ = ("_by_local_queue", "_local_queue_of", "_strategy", "_usage_of", "_where")

    def __init__(
        self,
        strategy: QueueingStrategy,
        local_queue_of: Callable[[WorkloadKey], str],
        usage_of: Callable[[str], float],
    ) -> None:
        """`local_queue_of(key)`: the LocalQueue (`namespace/name`) a Workload is queued
        under when pushed; `usage_of(local_queue)`: its admission fair sharing usage now."""
        self._strategy = strategy
        self._local_queue_of = local_queue_of
        self._usage_of = usage_of
        self._by_local_queue: dict[str, PendingQueue] = {}
        self._where: dict[WorkloadKey, str] = {}

    @property
    def strategy(self) -> QueueingStrategy:
        return self._strategy

    @strategy.setter
    def strategy(self, strategy: QueueingStrategy) -> None:
        self._strategy = strategy
        for queue in self._by_local_queue.values():
            queue.strategy = strategy

    def __len__(self) -> int:
        return len(self._where)

    def __contains__(self, key: WorkloadKey) -> bool:
        return key in self._where

    # -- membership --------------------------------------------------------------------------

    def _queue_for(self, key: WorkloadKey) -> PendingQueue:
        """The sub-queue of `key`'s LocalQueue (it leaves another one it was in)."""
        local_queue = self._local_queue_of(key)
        if self._where.get(key, local_queue) != local_queue:
            self.remove(key)
        self._where[key] = local_queue
        queue = self._by_local_queue.get(local_queue)
        if queue is None:
            queue = self._by_local_queue[local_queue] = PendingQueue(self._strategy)
        return queue

    def _left(self, local_queue: str) -> None:
        """Forget an emptied sub-queue (LocalQueues come and go)."""
        if not self._by_local_queue[local_queue]:
            del self._by_local_queue[local_queue]

    def push(self, item: OrderKey) -> None:
        self._queue_for(item[4]).push(item)

    def park(self, item: OrderKey) -> None:
        self._queue_for(item[4]).park(item)

    def requeue(self, item: OrderKey, inadmissible: bool) -> None:
        if inadmissible:
            self.park(item)
        else:
            self.push(item)

    def remove(self, key: WorkloadKey) -> OrderKey | None:
        local_queue = self._where.pop(key, None)
        if local_queue is None:
            return None
        removed = self._by_local_queue[local_queue].remove(key)
        self._left(local_queue)
        return removed

    # -- heads -------------------------------------------------------------------------------

    def _heads(self) -> list[_Head]:
        """Each LocalQueue's first offered head with its usage, best first."""
        heads = []
        for local_queue, queue in self._by_local_queue.items():
            head = queue.peek()
            if head is not None:
                heads.append((self._usage_of(local_queue), head, local_queue))
        heads.sort()
        return heads

    def has_heads(self) -> bool:
        return any(queue.has_heads() for queue in self._by_local_queue.values())

    def peek(self) -> OrderKey | None:
        heads = self._heads()
        return heads[0][1] if heads else None

    def pop(self) -> OrderKey | None:
        heads = self._heads()
        if not heads:
            return None
        _, _, local_queue = heads[0]
        item = self._by_local_queue[local_queue].pop()
        assert item is not None
        del self._where[item[4]]
        self._left(local_queue)
        return item

    def park_run(
        self,
        signature_of: Callable[[WorkloadKey], object],
        signature: object,
        tag: object = None,
    ) -> int:
        """Set aside the heads, in the combined order, for as long as they have `signature`
        (`PendingQueue.park_run`); returns how many."""
        parked = 0
        while True:
            heads = self._heads()
            if not heads or signature_of(heads[0][1][4]) != signature:
                return parked
            usage, _, local_queue = heads[0]
            # Another LocalQueue of equal usage interleaves by item order: park only what
            # comes before its head. A LocalQueue of higher usage comes after all of these.
            before = heads[1][1] if len(heads) > 1 and heads[1][0] == usage else None
            moved = self._by_local_queue[local_queue].park_run(signature_of, signature, tag, before)
            if not moved:
                return parked
            parked += moved

    def tag_of(self, key: WorkloadKey) -> object:
        local_queue = self._where.get(key)
        return None if local_queue is None else self._by_local_queue[local_queue].tag_of(key)

    def retry_inadmissible(self) -> int:
        return sum(queue.retry_inadmissible() for queue in self._by_local_queue.values())

    def is_inadmissible(self, key: WorkloadKey) -> bool:
        local_queue = self._where.get(key)
        return local_queue is not None and self._by_local_queue[local_queue].is_inadmissible(key)

    def inadmissible_count(self) -> int:
        return sum(queue.inadmissible_count() for queue in self._by_local_queue.values())

    def workload_keys(self) -> Iterator[WorkloadKey]:
        yield from self._where

    def ordered(self) -> list[OrderKey]:
        """Every pending item in the order heads would be offered with the usage as it is
        now (O(n log n); for tools, not the cycle)."""
        usage = {local_queue: self._usage_of(local_queue) for local_queue in self._by_local_queue}
        ranked = sorted(
            (usage[local_queue], item)
            for local_queue, queue in self._by_local_queue.items()
            for item in queue.ordered()
        )
        return [item for _, item in ranked]
