"""Admission fair sharing's sampling tick and what it reports per LocalQueue.

Every `usageSamplingInterval` the runtime calls `sample(queues, objects, now)`: each LocalQueue of an
active ClusterQueue with admission fair sharing folds its admitted usage into its consumed
usage, decayed for the time since its last update (Kueue's LocalQueue reconciler,
`reconcileConsumedUsage`). What comes back is what the runtime writes to the LocalQueue's
`status.fairSharing.admissionFairSharingStatus` and to the metric
`kueue_local_queue_admission_fair_sharing_usage`; `quotagate plan` reports the same
without sampling (`local_queue_usages`). Pure: time is passed in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from controller.core.cache.objects import ObjectStore
from controller.core.queue.manager import QueueManager

__all__ = ["LocalQueueUsage", "fair_local_queues", "local_queue_usages", "sample"]


@dataclass(frozen=True, slots=True)
class LocalQueueUsage:
    """One LocalQueue's admission fair sharing record, as it stands."""

    local_queue: str  # namespace/name
    cluster_queue: str
    consumed: Mapping[str, float]  # whole units per resource, decayed
    last_update: float | None  # when consumed was last folded (None: never yet)
    penalty: Mapping[str, float]  # entry penalties pending settlement
    usage: float  # what orders its Workloads: weighted, over its weight (+inf at weight 0)


def fair_local_queues(queues: QueueManager, objects: ObjectStore) -> list[str]:
    """The LocalQueues (`namespace/name`, sorted) whose ClusterQueue orders by their usage."""
    return sorted(
        key
        for key, lq in objects.local_queues.items()
        if queues.uses_admission_fair_sharing(lq.cluster_queue)
    )


def _usage(queues: QueueManager, objects: ObjectStore, local_queue: str) -> LocalQueueUsage:
    entry = queues.usage_ledger.entry(local_queue)
    return LocalQueueUsage(
        local_queue,
        objects.local_queues[local_queue].cluster_queue,
        dict(entry.consumed) if entry is not None else {},
        entry.last_update if entry is not None else None,
        dict(entry.penalty) if entry is not None else {},
        queues.local_queue_usage(local_queue),
    )


def local_queue_usages(queues: QueueManager, objects: ObjectStore) -> list[LocalQueueUsage]:
    """Every LocalQueue of a ClusterQueue with admission fair sharing, as it stands."""
    return [_usage(queues, objects, key) for key in fair_local_queues(queues, objects)]


def sample(queues: QueueManager, objects: ObjectStore, now: float) -> list[LocalQueueUsage]:
    """Fold each LocalQueue's admitted usage into its consumed usage at `now`, for the
    LocalQueues of active ClusterQueues with admission fair sharing (Kueue samples only
    those: an inactive ClusterQueue's LocalQueues keep their history as it is). Returns
    them as they stand afterwards; nothing when admission fair sharing is off."""
    settings = queues.admission_fair_sharing
    if settings is None:
        return []
    sampled = []
    for key in fair_local_queues(queues, objects):
        if objects.cluster_queue_inactive(objects.local_queues[key].cluster_queue) is not None:
            continue
        queues.usage_ledger.sample(key, now, settings.usage_half_life_seconds)
        sampled.append(_usage(queues, objects, key))
    return sampled
