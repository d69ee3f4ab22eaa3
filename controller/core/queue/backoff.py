"""Eviction backoff: Workloads waiting for their `requeueState.requeueAt` (a
PodsReadyTimeout eviction's backoff, controller/core/after_admission.py) before they are
queued again."""

from __future__ import annotations

import heapq

from controller.core.model.workloads import WorkloadKey

__all__ = ["BackoffQueue"]


class BackoffQueue:
    """Workloads waiting for their requeueAt; `due(now)` releases the expired ones."""

    __slots__ = ("_heap", "_live")

    def __init__(self) -> None:
        self._heap: list[tuple[float, WorkloadKey]] = []
        self._live: dict[WorkloadKey, float] = {}

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, key: WorkloadKey) -> bool:
        return key in self._live

    def add(self, key: WorkloadKey, requeue_at: float) -> None:
        self._live[key] = requeue_at
        heapq.heappush(self._heap, (requeue_at, key))

    def remove(self, key: WorkloadKey) -> None:
        self._live.pop(key, None)

    def requeue_at(self, key: WorkloadKey) -> float | None:
        return self._live.get(key)

    def next_due(self) -> float | None:
        """The earliest requeueAt still waited for (None: nobody waits)."""
        heap = self._heap
        while heap and self._live.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)  # superseded or removed
        return heap[0][0] if heap else None

    def due(self, now: float) -> list[WorkloadKey]:
        out: list[WorkloadKey] = []
        heap = self._heap
        while heap and heap[0][0] <= now:
            at, key = heapq.heappop(heap)
            if self._live.get(key) == at:
                del self._live[key]
                out.append(key)
        return out
