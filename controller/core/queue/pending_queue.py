"""Pending queues: one heap per ClusterQueue and an inadmissible set.

Order (`OrderKey`, digest §4.1): higher priority first, then higher preemption cost (unset = 0), then
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
from typing import Protocol

from api.constants import QueueingStrategy
from controller.core.model.workloads import OrderKey, WorkloadKey

__all__ = ["PendingQueue", "WorkloadQueue"]


class _Run:
    """Pending Workloads kept together, in queue order: one heap entry for all of them.

    A run is either offered (on the heap, keyed by its first live item) or parked. Parking
    the heads that were refused alike, and offering them again after a quota change, then
    costs one step per run instead of one heap operation per Workload. An item is live in
    the run while `PendingQueue._members` maps its key to (that very item, this run)."""

    __slots__ = ("items", "last", "live", "parked", "signature", "start", "tag")

    def __init__(
        self, items: list[OrderKey], parked: bool, signature: object | None = None
    ) -> None:
        self.items = items
        self.start = 0  # items before it have left the run
        self.last = items[-1]
        self.live = len(items)
        self.parked = parked
        self.signature = signature  # shared by every item, when the run was parked alike
        self.tag: object = None  # what the caller parked it with (the refusal reason)


class WorkloadQueue(Protocol):
    """A ClusterQueue's pending Workloads as the state, the cycle and the tools use them:
    a `PendingQueue`, or with admission fair sharing an `AdmissionFairQueue`
    (controller/core/afs/queue.py)."""

    strategy: QueueingStrategy

    def __len__(self) -> int: ...
    def __contains__(self, key: WorkloadKey) -> bool: ...
    def push(self, item: OrderKey) -> None: ...
    def park(self, item: OrderKey) -> None: ...
    def park_run(
        self, signature_of: Callable[[WorkloadKey], object], signature: object, tag: object = None
    ) -> int: ...
    def tag_of(self, key: WorkloadKey) -> object: ...
    def requeue(self, item: OrderKey, inadmissible: bool) -> None: ...
    def remove(self, key: WorkloadKey) -> OrderKey | None: ...
    def has_heads(self) -> bool: ...
    def peek(self) -> OrderKey | None: ...
    def pop(self) -> OrderKey | None: ...
    def retry_inadmissible(self) -> int: ...
    def is_inadmissible(self, key: WorkloadKey) -> bool: ...
    def inadmissible_count(self) -> int: ...
    def workload_keys(self) -> Iterator[WorkloadKey]: ...
    def ordered(self) -> list[OrderKey]: ...


class PendingQueue:
    """The pending Workloads of one ClusterQueue."""

    __slots__ = ("_active", "_heap", "_members", "_parked", "_seq", "strategy")

    def __init__(self, strategy: QueueingStrategy = QueueingStrategy.BEST_EFFORT_FIFO) -> None:
        self.strategy = strategy
        # (key of the run's first item when pushed, tie-breaker, run); a run's first item
        # only moves forward, so a stored key is never after the run's real first item.
        self._heap: list[tuple[OrderKey, int, _Run]] = []
        self._members: dict[WorkloadKey, tuple[OrderKey, _Run]] = {}
        self._parked: list[_Run] = []
        self._active = 0  # live items in offered runs
        self._seq = 0

    def __len__(self) -> int:
        return len(self._members)

    def __contains__(self, key: WorkloadKey) -> bool:
        return key in self._members

    # -- membership --------------------------------------------------------------------------

    def _leave(self, key: WorkloadKey) -> tuple[OrderKey, _Run] | None:
        member = self._members.pop(key, None)
        if member is not None:
            run = member[1]
            run.live -= 1
            if not run.parked:
                self._active -= 1
        return member

    def _offer(self, run: _Run) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (run.items[run.start], self._seq, run))
        if len(self._heap) > 2 * len(self._members) + 64:
            self._compact()

    def _first(self, run: _Run) -> OrderKey | None:
        """The run's first live item (dead ones before it are skipped for good)."""
        items, members = run.items, self._members
        for i in range(run.start, len(items)):
            item = items[i]
            member = members.get(item[4])
            if member is not None and member[0] is item and member[1] is run:
                run.start = i
                return item
        run.start = len(items)
        return None

    # -- the queue ---------------------------------------------------------------------------

    def push(self, item: OrderKey) -> None:
        """Add or reorder a Workload among the offered heads."""
        self._leave(item[4])
        run = _Run([item], parked=False)
        self._members[item[4]] = (item, run)
        self._active += 1
        self._offer(run)

    def park(self, item: OrderKey) -> None:
        """Set a Workload aside as inadmissible (it is not offered as a head)."""
        self._leave(item[4])
        run = _Run([item], parked=True)
        self._members[item[4]] = (item, run)
        self._parked.append(run)

    def park_run(
        self,
        signature_of: Callable[[WorkloadKey], object],
        signature: object,
        tag: object = None,
        before: OrderKey | None = None,
    ) -> int:
        """Set aside the heads, in order, for as long as `signature_of(key) == signature`
        (and, with `before`, the head comes before it), as one run carrying `tag`
        (`tag_of`); returns how many. A run parked this way before is taken whole (its
        items share the signature) when no other head falls inside it, and consecutive
        runs are merged, smaller into larger, so a queue keeps a few runs however many
        times it is retried and parked again."""
        parked = 0
        current: _Run | None = None
        while True:
            top = self._top()
            if top is None:
                break
            first, run = top
            if before is not None and not first < before:
                break
            if run.signature is not None and run.signature == signature:
                following = self._next_key(run)
                if before is not None and (following is None or before < following):
                    following = before
                if following is None or run.last < following:
                    heapq.heappop(self._heap)
                    run.parked = True
                    self._active -= run.live
                    parked += run.live
                    current = run if current is None else self._merge(current, run)
                    continue
            if signature_of(first[4]) != signature:
                break
            self.pop()
            parked += 1
            if current is None:
                current = _Run([first], parked=True, signature=signature)
            else:
                current.items.append(first)
                current.last = first
                current.live += 1
            self._members[first[4]] = (first, current)
        if current is not None:
            current.tag = tag
            self._parked.append(current)
        return parked

    def _merge(self, before: _Run, after: _Run) -> _Run:
        """One run of two consecutive parked ones: the smaller's live items move."""
        members = self._members
        moving, staying = (after, before) if before.live >= after.live else (before, after)
        items = [item for item in moving.items[moving.start :] if self._is_member(item, moving)]
        for item in items:
            members[item[4]] = (item, staying)
        if staying is before:
            before.items.extend(items)
            before.last = after.last
        else:
            after.items = items + after.items[after.start :]
            after.start = 0
        staying.live += len(items)
        return staying

    def tag_of(self, key: WorkloadKey) -> object:
        """The tag its run was parked with, if the Workload is still in such a run."""
        member = self._members.get(key)
        return member[1].tag if member is not None else None

    def _is_member(self, item: OrderKey, run: _Run) -> bool:
        member = self._members.get(item[4])
        return member is not None and member[0] is item and member[1] is run

    def _top(self) -> tuple[OrderKey, _Run] | None:
        """The first offered head and its run, with the heap entry's key made exact."""
        heap = self._heap
        while heap:
            key, _, run = heap[0]
            first = None if run.parked else self._first(run)
            if first is None:
                heapq.heappop(heap)
                continue
            if first is not key:
                self._seq += 1
                heapq.heapreplace(heap, (first, self._seq, run))
                continue
            return first, run
        return None

    def _next_key(self, run: _Run) -> OrderKey | None:
        """The first head after `run`'s (the heap top): the smallest key among the other
        entries, made exact; None when there is none."""
        heap = self._heap
        entry = heapq.heappop(heap)
        try:
            top = self._top()
            return top[0] if top is not None else None
        finally:
            heapq.heappush(heap, entry)

    def requeue(self, item: OrderKey, inadmissible: bool) -> None:
        """Put a failed head back: StrictFIFO always into the heap (unless the reason is a
        namespace mismatch, `inadmissible` forced by the caller); BestEffortFIFO parks it."""
        if inadmissible:
            self.park(item)
        else:
            self.push(item)

    def remove(self, key: WorkloadKey) -> OrderKey | None:
        member = self._leave(key)
        return member[0] if member is not None else None

    def has_heads(self) -> bool:
        """Whether anything is offered as a head."""
        return self._active > 0

    def peek(self) -> OrderKey | None:
        top = self._top()
        return top[0] if top is not None else None

    def pop(self) -> OrderKey | None:
        """Remove and return the first offered head (parked Workloads are not offered)."""
        top = self._top()
        if top is None:
            return None
        first, run = top
        self._leave(first[4])
        run.start += 1
        following = self._first(run)
        if following is None:
            heapq.heappop(self._heap)
        else:
            self._seq += 1
            heapq.heapreplace(self._heap, (following, self._seq, run))
        return first

    def retry_inadmissible(self) -> int:
        """Offer every parked Workload again; returns how many."""
        moved = 0
        for run in self._parked:
            if run.live > 0:
                run.parked = False
                moved += run.live
                self._first(run)
                if run.start < len(run.items):
                    self._offer(run)
        self._active += moved
        self._parked.clear()
        return moved

    def is_inadmissible(self, key: WorkloadKey) -> bool:
        member = self._members.get(key)
        return member is not None and member[1].parked

    def inadmissible_count(self) -> int:
        return len(self._members) - self._active

    def workload_keys(self) -> Iterator[WorkloadKey]:
        yield from self._members

    def ordered(self) -> list[OrderKey]:
        """Every pending item in queue order (O(n log n); for tools, not the cycle)."""
        return sorted(item for item, _ in self._members.values())

    def _compact(self) -> None:
        runs = {id(run): run for _, _, run in self._heap if not run.parked and run.live > 0}
        self._heap = []
        for run in runs.values():
            first = self._first(run)
            if first is not None:
                self._seq += 1
                self._heap.append((first, self._seq, run))
        heapq.heapify(self._heap)
        self._parked = [run for run in self._parked if run.live > 0]
