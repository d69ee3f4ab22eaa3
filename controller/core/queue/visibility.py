"""What Kueue's visibility API answers (`visibility.kueue.x-k8s.io/v1beta2`,
`pendingworkloads` of a ClusterQueue or a LocalQueue), computed from the engine's state.

The order is the engine's queue order, the one the admission cycle takes heads in
(`WorkloadQueue.ordered`: priority, then preemption cost, then queue time; with admission
fair sharing, the LocalQueues' usage first), so a position is where the Workload really
waits. Positions are 0-based, as Kueue's (`pkg/visibility/storage`):

- for a ClusterQueue, the items at `offset` … `offset + limit − 1` of its pending queue,
  each with its place in the ClusterQueue and in its own LocalQueue;
- for a LocalQueue, its own Workloads in the ClusterQueue's order, skipping `offset`,
  at most `limit`, each with its place in the ClusterQueue and in the LocalQueue.

`limit` is bounded to 0 … 100,000 and `offset` to ≥ 0 (Kueue's `boundedLimitOffset`); the
default limit is 1,000. Pure: the caller reads a state no cycle is changing.

A read model over the queue manager: it reads the queues, the objects and the Workload
records (`PendingSource`, which `ClusterState` is), and changes none of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from controller.core.afs.queue import AdmissionFairQueue
from controller.core.cache.objects import ObjectStore
from controller.core.cache.reservations import ReservationCache
from controller.core.model.workloads import OrderKey, OwnerReference, WorkloadKey
from controller.core.queue.manager import QueueManager
from controller.core.queue.pending_queue import WorkloadQueue

__all__ = [
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "PendingOrder",
    "PendingSource",
    "PendingWorkload",
    "bounded_limit_offset",
    "pending_in_cluster_queue",
    "pending_in_local_queue",
]

DEFAULT_LIMIT = 1000
"""Kueue's `DefaultPendingWorkloadsLimit`."""
MAX_LIMIT = 100_000
"""Kueue's `MaxPendingWorkloadsLimit`."""


class PendingSource(Protocol):
    """The parts of the engine's state the answers read (`ClusterState` has them)."""

    @property
    def queues(self) -> QueueManager: ...
    @property
    def objects(self) -> ObjectStore: ...
    @property
    def cache(self) -> ReservationCache: ...


@dataclass(frozen=True, slots=True)
class PendingWorkload:
    """One item of a `PendingWorkloadsSummary`."""

    namespace: str
    name: str
    creation_timestamp: float
    owner_references: tuple[OwnerReference, ...]
    priority: int  # the base priority, as Kueue's (without a priority boost)
    local_queue: str
    position_in_cluster_queue: int
    position_in_local_queue: int


def bounded_limit_offset(limit: int, offset: int) -> tuple[int, int]:
    """Kueue's `boundedLimitOffset`: limit in 0 … MAX_LIMIT, offset ≥ 0."""
    return min(max(limit, 0), MAX_LIMIT), max(offset, 0)


@dataclass(slots=True)
class _Order:
    """A ClusterQueue's pending order as computed from `queue` when it had made `changes`
    (and, with admission fair sharing, its LocalQueues had `usage`). Each item's place in
    its own LocalQueue is counted as far as a request has needed (`count_to`)."""

    queue: WorkloadQueue
    changes: int
    usage: dict[str, float] | None
    items: list[OrderKey]
    in_local_queue: list[int] = field(default_factory=list)  # of items[:counted]
    by_local_queue: dict[tuple[str, str], list[int]] = field(default_factory=dict)

    def count_to(self, state: PendingSource, end: int) -> None:
        """Count the LocalQueue places of the items before `end`."""
        items, places, by_local_queue = self.items, self.in_local_queue, self.by_local_queue
        records = state.cache.records
        for index in range(len(places), min(end, len(items))):
            workload = records[items[index][4]].workload
            lq = by_local_queue.setdefault((workload.namespace, workload.queue_name), [])
            places.append(len(lq))
            lq.append(index)


def _usage(queue: WorkloadQueue) -> dict[str, float] | None:
    return queue.usage() if isinstance(queue, AdmissionFairQueue) else None


class PendingOrder:
    """Each ClusterQueue's pending order, sorted once and kept until its queue changes: a
    request reads a page of it instead of sorting the queue and counting LocalQueue places
    again. The queue's `changes` count says whether it may have changed; when it moved (a
    cycle pops its heads and parks them again), the queue is sorted again (quick: its
    items are in sorted runs) and, when that gives the same items (and, with admission
    fair sharing, the same LocalQueue usage), the places counted are kept."""

    def __init__(self) -> None:
        self._orders: dict[str, _Order] = {}
        # For tests and benchmarks: how many times a queue was sorted, and how many of
        # those found its items changed (its LocalQueue places counted anew).
        self.sorts = 0
        self.new_orders = 0

    def of(self, state: PendingSource, cluster_queue: str) -> _Order | None:
        queue = state.queues.get(cluster_queue)
        if queue is None:
            self._orders.pop(cluster_queue, None)
            return None
        order = self._orders.get(cluster_queue)
        if order is not None and order.queue is queue and order.changes == queue.changes:
            return order
        self.sorts += 1
        items, usage = queue.ordered(), _usage(queue)
        same = order is not None and order.queue is queue and order.usage == usage
        if same and order is not None and order.items == items:  # the places counted hold
            order.changes = queue.changes
            return order
        self.new_orders += 1
        order = self._orders[cluster_queue] = _Order(queue, queue.changes, usage, items)
        return order


def _item(state: PendingSource, key: WorkloadKey, in_cq: int, in_lq: int) -> PendingWorkload:
    workload = state.cache.records[key].workload
    return PendingWorkload(
        namespace=workload.namespace,
        name=workload.name,
        creation_timestamp=workload.creation_timestamp,
        owner_references=workload.owner_references,
        priority=state.objects.priority_classes.resolve(workload).value,
        local_queue=workload.queue_name,
        position_in_cluster_queue=in_cq,
        position_in_local_queue=in_lq,
    )


def pending_in_cluster_queue(
    state: PendingSource,
    cluster_queue: str,
    limit: int = DEFAULT_LIMIT,
    offset: int = 0,
    orders: PendingOrder | None = None,
) -> list[PendingWorkload] | None:
    """The ClusterQueue's pending Workloads from `offset`, at most `limit`; None when the
    ClusterQueue does not exist (Kueue answers NotFound). `orders` keeps the sorted order
    between calls (without it, the queue is sorted for this call)."""
    if cluster_queue not in state.objects.cluster_queues:
        return None
    limit, offset = bounded_limit_offset(limit, offset)
    order = (orders or PendingOrder()).of(state, cluster_queue)
    if order is None:
        return []
    order.count_to(state, offset + limit)
    items, in_local_queue = order.items, order.in_local_queue
    return [
        _item(state, items[index][4], index, in_local_queue[index])
        for index in range(offset, min(offset + limit, len(items)))
    ]


def pending_in_local_queue(
    state: PendingSource,
    namespace: str,
    name: str,
    limit: int = DEFAULT_LIMIT,
    offset: int = 0,
    orders: PendingOrder | None = None,
) -> list[PendingWorkload] | None:
    """The LocalQueue's pending Workloads in its ClusterQueue's order, from `offset`, at
    most `limit`; None when the LocalQueue does not exist (Kueue answers NotFound). A
    LocalQueue whose ClusterQueue does not exist has none."""
    local_queue = state.objects.local_queues.get(f"{namespace}/{name}")
    if local_queue is None:
        return None
    limit, offset = bounded_limit_offset(limit, offset)
    order = (orders or PendingOrder()).of(state, local_queue.cluster_queue)
    if order is None:
        return []
    order.count_to(state, len(order.items))
    places = order.by_local_queue.get((namespace, name), [])
    return [
        _item(state, order.items[index][4], index, position)
        for position, index in enumerate(places[offset : offset + limit], start=offset)
    ]
