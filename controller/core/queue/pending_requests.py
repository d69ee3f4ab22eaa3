"""The requests of the pending Workloads per ClusterQueue, kept as Workloads are queued and
leave their queue (Kueue's `pendingResourcesTotal`, reported as
`kueue_cluster_queue_resource_pending`): Σ pod count × request per resource, in milli-units,
over every Workload queued under the ClusterQueue (offered, parked or being tried), before
any flavor is assigned. Kept per Workload as it was added, so a Workload's leaving takes off
exactly what it added."""

from __future__ import annotations

from collections.abc import Mapping

from controller.core.model.workloads import Workload, WorkloadKey

__all__ = ["PendingRequests"]


def total_requests(workload: Workload) -> dict[str, int]:
    """Σ count × request per resource over the Workload's pod sets (milli-units)."""
    total: dict[str, int] = {}
    for pod_set in workload.pod_sets:
        for resource, value in pod_set.requests.items():
            total[resource] = total.get(resource, 0) + value * pod_set.count
    return total


class PendingRequests:
    """Per ClusterQueue, Σ requests of its queued Workloads."""

    __slots__ = ("_held", "_totals")

    def __init__(self) -> None:
        self._totals: dict[str, dict[str, int]] = {}
        self._held: dict[WorkloadKey, tuple[str, dict[str, int]]] = {}

    def queued(self, key: WorkloadKey, cluster_queue: str, workload: Workload) -> None:
        self.left(key)
        requests = total_requests(workload)
        self._held[key] = (cluster_queue, requests)
        totals = self._totals.setdefault(cluster_queue, {})
        for resource, value in requests.items():
            totals[resource] = totals.get(resource, 0) + value

    def left(self, key: WorkloadKey) -> None:
        held = self._held.pop(key, None)
        if held is None:
            return
        cluster_queue, requests = held
        totals = self._totals[cluster_queue]
        for resource, value in requests.items():
            totals[resource] -= value
            if not totals[resource]:
                del totals[resource]
        if not totals:
            del self._totals[cluster_queue]

    def of(self, cluster_queue: str) -> Mapping[str, int]:
        """The ClusterQueue's pending requests per resource (absent: none)."""
        return self._totals.get(cluster_queue, {})
