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
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.core.state import ClusterState
from controller.core.workloads import OwnerReference, WorkloadKey

__all__ = [
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "PendingWorkload",
    "bounded_limit_offset",
    "pending_in_cluster_queue",
    "pending_in_local_queue",
]

DEFAULT_LIMIT = 1000
"""Kueue's `DefaultPendingWorkloadsLimit`."""
MAX_LIMIT = 100_000
"""Kueue's `MaxPendingWorkloadsLimit`."""


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


def _ordered(state: ClusterState, cluster_queue: str) -> list[WorkloadKey] | None:
    queue = state.queues.get(cluster_queue)
    if queue is None:
        return None
    return [item[4] for item in queue.ordered()]


def _item(state: ClusterState, key: WorkloadKey, in_cq: int, in_lq: int) -> PendingWorkload:
    workload = state.workloads[key]
    return PendingWorkload(
        namespace=workload.namespace,
        name=workload.name,
        creation_timestamp=workload.creation_timestamp,
        owner_references=workload.owner_references,
        priority=state.priority_classes.resolve(workload).value,
        local_queue=workload.queue_name,
        position_in_cluster_queue=in_cq,
        position_in_local_queue=in_lq,
    )


def pending_in_cluster_queue(
    state: ClusterState, cluster_queue: str, limit: int = DEFAULT_LIMIT, offset: int = 0
) -> list[PendingWorkload] | None:
    """The ClusterQueue's pending Workloads from `offset`, at most `limit`; None when the
    ClusterQueue does not exist (Kueue answers NotFound)."""
    if cluster_queue not in state.cluster_queues:
        return None
    limit, offset = bounded_limit_offset(limit, offset)
    ordered = _ordered(state, cluster_queue) or []
    in_local_queue: dict[tuple[str, str], int] = {}
    items = []
    for index, key in enumerate(ordered[: offset + limit]):
        workload = state.workloads[key]
        lq = (workload.namespace, workload.queue_name)
        position = in_local_queue.get(lq, 0)
        in_local_queue[lq] = position + 1
        if index >= offset:
            items.append(_item(state, key, index, position))
    return items


def pending_in_local_queue(
    state: ClusterState, namespace: str, name: str, limit: int = DEFAULT_LIMIT, offset: int = 0
) -> list[PendingWorkload] | None:
    """The LocalQueue's pending Workloads in its ClusterQueue's order, from `offset`, at
    most `limit`; None when the LocalQueue does not exist (Kueue answers NotFound). A
    LocalQueue whose ClusterQueue does not exist has none."""
    local_queue = state.local_queues.get(f"{namespace}/{name}")
    if local_queue is None:
        return None
    limit, offset = bounded_limit_offset(limit, offset)
    items: list[PendingWorkload] = []
    skipped = 0
    for index, key in enumerate(_ordered(state, local_queue.cluster_queue) or []):
        if len(items) >= limit:
            break
        workload = state.workloads[key]
        if workload.namespace != namespace or workload.queue_name != name:
            continue
        if skipped < offset:
            skipped += 1
        else:
            items.append(_item(state, key, index, len(items) + offset))
    return items
