"""The pending queue of a ClusterQueue with admission fair sharing: one `PendingQueue`
per LocalQueue, and the head offered is the first of the LocalQueue with the lowest
usage (Kueue's `queueOrderingFunc` with admission fair sharing: LocalQueue usage first,
then the usual priority, preemption cost, creation time and UID).

A LocalQueue's usage changes between cycles (samples, entry penalties, a new weight), so
the choice is made when a head is taken (`peek`/`pop`), from the usage as it is then —
Kueue re-heapifies for the same reason. The LocalQueues' heads are kept in a heap of
(usage, head): an entry is redone when the LocalQueue's head may have changed (any change
to its sub-queue) or its usage may have (`usage_changed`, which the state calls whenever
the usage ledger or the LocalQueue's weight changes), and older entries are skipped. Taking
a head is then O(log n) in LocalQueues, not a scan of them.

Within one LocalQueue the order never depends on usage, so each sub-queue keeps its own
runs and parking: `park_run` parks the heads in the combined order for as long as they share
the refused head's signature, a run at a time within one sub-queue, bounded by the next
head of another LocalQueue when their usages tie.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator

from api.constants import QueueingStrategy
from controller.core.model.workloads import OrderKey, WorkloadKey
from controller.core.queue.pending_queue import PendingQueue

__all__ = ["AdmissionFairQueue"]

_Head = tuple[float, OrderKey, int, str]
"""(LocalQueue usage, head item, entry stamp, LocalQueue): smaller is offered first. The
stamp, unique per entry, also keeps two entries from ever comparing their LocalQueues."""


class AdmissionFairQueue:
    """`PendingQueue`'s interface over one `PendingQueue` per LocalQueue."""

    __slots__ = (
        "_by_local_queue",
        "_dirty",
        "_heads",
        "_local_queue_of",
        "_parked_in",
        "_seq",
        "_stamps",
        "_strategy",
        "_usage_of",
        "_where",
    )

    def __init__(
        self,
        strategy: QueueingStrategy,
        local_queue_of: Callable[[WorkloadKey], str],
        usage_of: Callable[[str], float],
    ) -> None:
        """`local_queue_of(key)`: the LocalQueue (`namespace/name`) a Workload is queued
        under when pushed; `usage_of(local_queue)`: its admission fair sharing usage now
        (the queue must be told when it may have changed: `usage_changed`)."""
        self._strategy = strategy
        self._local_queue_of = local_queue_of
        self._usage_of = usage_of
        self._by_local_queue: dict[str, PendingQueue] = {}
        self._where: dict[WorkloadKey, str] = {}
        self._heads: list[_Head] = []
        self._stamps: dict[str, int] = {}  # LocalQueue → the stamp of its live entry
        self._dirty: set[str] = set()  # LocalQueues whose entry must be redone
        self._parked_in: set[str] = set()  # LocalQueues with parked Workloads
        self._seq = 0

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

    def usage_changed(self, local_queue: str) -> None:
        """The LocalQueue's usage may have changed: its head is ranked again."""
        if local_queue in self._by_local_queue:
            self._dirty.add(local_queue)

    # -- membership --------------------------------------------------------------------------

    def _queue_for(self, key: WorkloadKey) -> PendingQueue:
        """The sub-queue of `key`'s LocalQueue (it leaves another one it was in)."""
        local_queue = self._local_queue_of(key)
        if self._where.get(key, local_queue) != local_queue:
            self.remove(key)
        self._where[key] = local_queue
        self._dirty.add(local_queue)
        queue = self._by_local_queue.get(local_queue)
        if queue is None:
            queue = self._by_local_queue[local_queue] = PendingQueue(self._strategy)
        return queue

    def _left(self, local_queue: str) -> None:
        """Forget an emptied sub-queue (LocalQueues come and go)."""
        if not self._by_local_queue[local_queue]:
            del self._by_local_queue[local_queue]
            self._stamps.pop(local_queue, None)
            self._dirty.discard(local_queue)
            self._parked_in.discard(local_queue)

    def push(self, item: OrderKey) -> None:
        self._queue_for(item[4]).push(item)

    def park(self, item: OrderKey) -> None:
        queue = self._queue_for(item[4])
        queue.park(item)
        self._parked_in.add(self._where[item[4]])

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
        self._dirty.add(local_queue)
        self._left(local_queue)
        return removed

    # -- heads -------------------------------------------------------------------------------

    def _refresh(self) -> None:
        """Redo the entries of the LocalQueues marked dirty."""
        for local_queue in self._dirty:
            self._seq += 1
            self._stamps[local_queue] = self._seq
            head = self._by_local_queue[local_queue].peek()
            if head is not None:
                entry = (self._usage_of(local_queue), head, self._seq, local_queue)
                heapq.heappush(self._heads, entry)
        self._dirty.clear()
        if len(self._heads) > 2 * len(self._by_local_queue) + 64:
            live = [e for e in self._heads if self._stamps.get(e[3]) == e[2]]
            heapq.heapify(live)
            self._heads = live

    def _best(self) -> _Head | None:
        """The live entry ranked first (stale ones are dropped on the way)."""
        self._refresh()
        heads = self._heads
        while heads and self._stamps.get(heads[0][3]) != heads[0][2]:
            heapq.heappop(heads)
        return heads[0] if heads else None

    def _runner_up(self) -> _Head | None:
        """The live entry ranked right after `_best()`'s."""
        best = heapq.heappop(self._heads)
        try:
            return self._best()
        finally:
            heapq.heappush(self._heads, best)

    def has_heads(self) -> bool:
        return self._best() is not None

    def peek(self) -> OrderKey | None:
        best = self._best()
        return best[1] if best is not None else None

    def pop(self) -> OrderKey | None:
        best = self._best()
        if best is None:
            return None
        local_queue = best[3]
        item = self._by_local_queue[local_queue].pop()
        assert item is not None
        del self._where[item[4]]
        self._dirty.add(local_queue)
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
            best = self._best()
            if best is None or signature_of(best[1][4]) != signature:
                return parked
            usage, _, _, local_queue = best
            # Another LocalQueue of equal usage interleaves by item order: park only what
            # comes before its head. A LocalQueue of higher usage comes after all of these.
            runner_up = self._runner_up()
            before = runner_up[1] if runner_up is not None and runner_up[0] == usage else None
            moved = self._by_local_queue[local_queue].park_run(signature_of, signature, tag, before)
            self._dirty.add(local_queue)
            self._parked_in.add(local_queue)
            if not moved:
                return parked
            parked += moved

    def tag_of(self, key: WorkloadKey) -> object:
        local_queue = self._where.get(key)
        return None if local_queue is None else self._by_local_queue[local_queue].tag_of(key)

    def retry_inadmissible(self) -> int:
        moved = 0
        for local_queue in self._parked_in:
            moved += self._by_local_queue[local_queue].retry_inadmissible()
            self._dirty.add(local_queue)
        self._parked_in.clear()
        return moved

    def is_inadmissible(self, key: WorkloadKey) -> bool:
        local_queue = self._where.get(key)
        return local_queue is not None and self._by_local_queue[local_queue].is_inadmissible(key)

    def inadmissible_count(self) -> int:
        return sum(self._by_local_queue[lq].inadmissible_count() for lq in self._parked_in)

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
