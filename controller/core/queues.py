"""Pending queues: one heap per ClusterQueue, an inadmissible set, and eviction backoff.

Order (digest §4.1): higher priority first, then higher preemption cost (unset = 0), then
older creation time (an evicted Workload keeps its creation time, so it returns to its
original place), then UID. Removal is lazy: a heap item is live only while `_live` maps
its Workload to that very item, so push/remove/pop are O(log n).

`StrictFIFO` requeues a failed head into the heap (it blocks the queue);
`BestEffortFIFO` parks it in the inadmissible set until something relevant changes
(digest §4.2).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from controller.core.clusterqueues import QueueingStrategy

__all__ = ["BackoffPolicy", "BackoffQueue", "OrderKey", "PendingQueue", "order_key"]

OrderKey = tuple[int, int, float, str, str]
"""(−priority, −preemption cost, creation time, UID, workload key): smaller is first."""


def order_key(priority: int, cost: int, created: float, uid: str, key: str) -> OrderKey:
    return (-priority, -cost, created, uid, key)


class PendingQueue:
    """The pending Workloads of one ClusterQueue."""

    __slots__ = ("_heap", "_inadmissible", "_live", "strategy")

    def __init__(self, strategy: QueueingStrategy = QueueingStrategy.BEST_EFFORT_FIFO) -> None:
        self.strategy = strategy
        self._heap: list[OrderKey] = []
        self._live: dict[str, OrderKey] = {}
        self._inadmissible: dict[str, OrderKey] = {}

    def __len__(self) -> int:
        return len(self._live) + len(self._inadmissible)

    def __contains__(self, key: str) -> bool:
        return key in self._live or key in self._inadmissible

    def push(self, item: OrderKey) -> None:
        """Add or reorder a Workload in the active heap."""
        key = item[4]
        self._inadmissible.pop(key, None)
        self._live[key] = item
        heapq.heappush(self._heap, item)
        if len(self._heap) > 2 * len(self._live) + 64:
            self._compact()

    def park(self, item: OrderKey) -> None:
        """Set a Workload aside as inadmissible (it is not offered as a head)."""
        key = item[4]
        self._live.pop(key, None)
        self._inadmissible[key] = item

    def park_run(self, same: Callable[[str], bool]) -> list[OrderKey]:
        """Set aside the heads, in order, for as long as `same(key)` holds; returns them."""
        heap, live, parked = self._heap, self._live, self._inadmissible
        out: list[OrderKey] = []
        while heap:
            item = heap[0]
            key = item[4]
            if live.get(key) is not item:
                heapq.heappop(heap)  # stale
                continue
            if not same(key):
                break
            heapq.heappop(heap)
            del live[key]
            parked[key] = item
            out.append(item)
        return out

    def requeue(self, item: OrderKey, inadmissible: bool) -> None:
        """Put a failed head back: StrictFIFO always into the heap (unless the reason is a
        namespace mismatch, `inadmissible` forced by the caller); BestEffortFIFO parks it."""
        if inadmissible:
            self.park(item)
        else:
            self.push(item)

    def remove(self, key: str) -> OrderKey | None:
        item = self._live.pop(key, None)
        parked = self._inadmissible.pop(key, None)
        return item or parked

    def has_heads(self) -> bool:
        """Whether anything is offered as a head (the heap holds a live item)."""
        return bool(self._live)

    def peek(self) -> OrderKey | None:
        heap = self._heap
        while heap:
            item = heap[0]
            if self._live.get(item[4]) is item:
                return item
            heapq.heappop(heap)
        return None

    def pop(self) -> OrderKey | None:
        """Remove and return the head of the heap (the inadmissible set is not offered)."""
        item = self.peek()
        if item is not None:
            heapq.heappop(self._heap)
            del self._live[item[4]]
        return item

    def retry_inadmissible(self) -> int:
        """Move every parked Workload back into the heap; returns how many moved."""
        moved = len(self._inadmissible)
        for item in self._inadmissible.values():
            self._live[item[4]] = item
            heapq.heappush(self._heap, item)
        self._inadmissible.clear()
        return moved

    def is_inadmissible(self, key: str) -> bool:
        return key in self._inadmissible

    def workload_keys(self) -> Iterator[str]:
        yield from self._live
        yield from self._inadmissible

    def ordered(self) -> list[OrderKey]:
        """Every pending item in queue order (O(n log n); for tools, not the cycle)."""
        return sorted((*self._live.values(), *self._inadmissible.values()))

    def _compact(self) -> None:
        self._heap = list(self._live.values())
        heapq.heapify(self._heap)


@dataclass(frozen=True, slots=True)
class BackoffPolicy:
    """Requeue delay after an eviction: ``base · 2^(count−1)`` seconds, capped at ``max``."""

    base_seconds: float = 60.0
    max_seconds: float = 3600.0

    def requeue_at(self, count: int, now: float) -> float:
        exponent = max(0, count - 1)
        delay = self.max_seconds if exponent >= 64 else self.base_seconds * (2**exponent)
        return now + min(delay, self.max_seconds)


class BackoffQueue:
    """Workloads waiting for their requeueAt; `due(now)` releases the expired ones."""

    __slots__ = ("_heap", "_live")

    def __init__(self) -> None:
        self._heap: list[tuple[float, str]] = []
        self._live: dict[str, float] = {}

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, key: str) -> bool:
        return key in self._live

    def add(self, key: str, requeue_at: float) -> None:
        self._live[key] = requeue_at
        heapq.heappush(self._heap, (requeue_at, key))

    def remove(self, key: str) -> None:
        self._live.pop(key, None)

    def requeue_at(self, key: str) -> float | None:
        return self._live.get(key)

    def due(self, now: float) -> list[str]:
        out: list[str] = []
        heap = self._heap
        while heap and heap[0][0] <= now:
            at, key = heapq.heappop(heap)
            if self._live.get(key) == at:
                del self._live[key]
                out.append(key)
        return out
