"""Kueue's `kueue_unadmitted_workloads` and `kueue_local_queue_unadmitted_workloads`
(pkg/cache/queue/unadmitted_workloads.go): the Workloads not admitted, not finished and not
being deleted, counted per ClusterQueue (and LocalQueue) by `reason` — the reason of their
`Admitted` condition, `NoReservation` without one — and `underlying_cause` — the reason of
`QuotaReserved` when it is False, empty when it is True, `PendingEvaluation` without one.

Kept as Workload events are applied (a condition lookup per event); the gauges are set by
the queue status refresh (`set_gauges`), each series only when its count changed, and
removed when it reaches zero, as Kueue removes them. A Workload whose LocalQueue does not
exist counts nowhere (Kueue cannot name its ClusterQueue either)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Gauge

from api import workload_status
from controller.runtime.cohort_metrics import Series, set_series
from controller.runtime.local_queue_metrics import local_queue_of

__all__ = ["UnadmittedWorkloads", "unadmitted_status"]

_ROLE = "replica_role"
Status = tuple[str, str, str, str]  # namespace, LocalQueue, reason, underlying_cause


def unadmitted_status(body: Mapping[str, Any]) -> Status | None:
    """Kueue's `getUnadmittedWorkloadStatus`: None for a Workload that is admitted,
    finished or being deleted."""
    wl: Any = body
    if workload_status.is_admitted(wl) or workload_status.is_finished(wl):
        return None
    if (body.get("metadata") or {}).get("deletionTimestamp"):
        return None
    admitted = workload_status.condition(wl, "Admitted")
    reason = str(admitted.get("reason") or "") if admitted is not None else "NoReservation"
    reserved = workload_status.condition(wl, "QuotaReserved")
    if reserved is None:
        cause = "PendingEvaluation"
    elif reserved.get("status") == "True":
        cause = ""
    else:
        cause = str(reserved.get("reason") or "")
    name, namespace = local_queue_of(body)
    return namespace, name, reason, cause


class UnadmittedWorkloads:
    """The counts, and their two gauges in `registry`."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.cluster_queue = Gauge(
            "kueue_unadmitted_workloads",
            "The number of unadmitted workloads, per 'cluster_queue', 'reason', and "
            "'underlying_cause'",
            ["cluster_queue", "reason", "underlying_cause", _ROLE],
            registry=registry,
        )
        self.local_queue = Gauge(
            "kueue_local_queue_unadmitted_workloads",
            "The number of unadmitted workloads, per 'name', 'namespace', 'cluster_queue', "
            "'reason', and 'underlying_cause'",
            ["name", "namespace", "cluster_queue", "reason", "underlying_cause", _ROLE],
            registry=registry,
        )
        self._status: dict[str, Status] = {}  # Workload key → its status
        self._counts: dict[Status, int] = {}
        self.changed = True  # counts changed since the gauges were set
        self._set: dict[Series, float] = {}  # series → value set

    def gauges(self) -> tuple[Gauge, ...]:
        return (self.cluster_queue, self.local_queue)

    def update(self, body: Mapping[str, Any]) -> None:
        """A Workload's newest copy."""
        meta = body.get("metadata") or {}
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        status = unadmitted_status(body)
        if self._status.get(key) == status:
            return
        self.forget(key)
        if status is not None:
            self._status[key] = status
            self._counts[status] = self._counts.get(status, 0) + 1
            self.changed = True

    def forget(self, key: str) -> None:
        """The Workload `namespace/name` is gone."""
        status = self._status.pop(key, None)
        if status is None:
            return
        left = self._counts[status] - 1
        if left:
            self._counts[status] = left
        else:
            del self._counts[status]
        self.changed = True

    def set_gauges(self, cluster_queue_of: Mapping[str, Any], role: str, anew: bool) -> None:
        """Set the series whose counts changed and remove those gone to zero;
        `cluster_queue_of`: LocalQueue key (namespace/name) → LocalQueue (`.cluster_queue`);
        `anew`: the gauges were cleared (a role change): set every series again."""
        if anew:
            self._set = {}
        elif not self.changed:
            return
        self.changed = False
        wanted: dict[Series, float] = {}
        for (namespace, name, reason, cause), count in self._counts.items():
            lq = cluster_queue_of.get(f"{namespace}/{name}")
            if lq is None or not lq.cluster_queue:
                continue
            cq = lq.cluster_queue
            series = (self.cluster_queue, (cq, reason, cause, role))
            wanted[series] = wanted.get(series, 0) + count
            wanted[(self.local_queue, (name, namespace, cq, reason, cause, role))] = count
        self._set = set_series(wanted, self._set)
