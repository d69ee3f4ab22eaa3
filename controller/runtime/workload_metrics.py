"""Kueue's metrics of a Workload's life, observed from its status as Kueue observes them:
the same names, label names and buckets as Kueue's pkg/metrics/metrics.go, each with
`replica_role`.

- `kueue_execution_time_seconds` (and `kueue_local_queue_execution_time_seconds`): when a
  Workload finishes, Finished's minus Admitted's transition time plus
  `status.accumulatedPastExecutionTimeSeconds` (Kueue's `TotalExecutionTime`), only for a
  Workload whose Admitted and Finished are both True.
- `kueue_pods_ready_to_evicted_time_seconds`: at an eviction, Evicted's minus PodsReady's
  transition time, when PodsReady is True (Kueue's `reportEvictedWorkload`).
- `kueue_workload_eviction_latency_seconds`: when an evicted Workload goes back to pending
  (its quota released, Evicted still True), the time since Evicted's transition, labelled
  with the ClusterQueue it held quota in (Kueue's `EvictionPendingLatency`).
- `kueue_workload_creation_latency_seconds`: the job side created a Workload for a job of
  generation 1: the Workload's creationTimestamp minus the job's (Kueue's
  `RecordWorkloadCreationLatency`, by `job_kind`).
- `kueue_pod_scheduling_gate_removal_seconds`: the pod integration removed the admission
  gate (`kueue.x-k8s.io/admission`) of a pod: the time since Admitted's transition.

Durations that come out negative (clock skew between the API server and us) count as 0, as
Kueue clamps them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Histogram

from api import workload_status
from controller.runtime.local_queue_metrics import local_queue_of

__all__ = ["WorkloadMetrics", "execution_seconds", "pods_ready_to_evicted_seconds"]

_ROLE = "replica_role"
_DEFAULT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)


def _buckets(count: int) -> tuple[float, ...]:
    return (1.0, *(2.5 * 2**i for i in range(count - 1)))


def _true_since(body: Mapping[str, Any], type_: str) -> float | None:
    """The transition time of a True condition (None: not True, or no time)."""
    found = workload_status.condition(body, type_)
    if found is None or found.get("status") != "True":
        return None
    return workload_status.parse_rfc3339(found.get("lastTransitionTime"))


def execution_seconds(body: Mapping[str, Any]) -> float | None:
    """Kueue's `TotalExecutionTime` of a finished Workload."""
    admitted, finished = _true_since(body, "Admitted"), _true_since(body, "Finished")
    if admitted is None or finished is None:
        return None
    past = (body.get("status") or {}).get("accumulatedPastExecutionTimeSeconds") or 0
    return float(past) + finished - admitted


def pods_ready_to_evicted_seconds(body: Mapping[str, Any]) -> float | None:
    """Kueue's `workloadsWithPodsReadyToEvictedTime` of an evicted Workload."""
    ready, evicted = _true_since(body, "PodsReady"), _true_since(body, "Evicted")
    if ready is None or evicted is None:
        return None
    return evicted - ready


class WorkloadMetrics:
    """The families, in `registry`."""

    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.execution_time = Histogram(
            "kueue_execution_time_seconds",
            "The total execution time of a finished admitted workload (from first admission "
            "to completion, including time across evict/readmit cycles), per 'cluster_queue'",
            ["cluster_queue", "priority_class", _ROLE],
            buckets=_buckets(16),
            registry=r,
        )
        self.local_queue_execution_time = Histogram(
            "kueue_local_queue_execution_time_seconds",
            "The total execution time of a finished admitted workload (from first admission "
            "to completion, including time across evict/readmit cycles), per 'local_queue'",
            ["name", "namespace", "priority_class", _ROLE],
            buckets=_buckets(16),
            registry=r,
        )
        self.pods_ready_to_evicted_time = Histogram(
            "kueue_pods_ready_to_evicted_time_seconds",
            "The number of seconds between a workload's pods being ready and eviction, per "
            "'cluster_queue', by eviction reason and underlying_cause",
            ["cluster_queue", "reason", "underlying_cause", _ROLE],
            buckets=_buckets(14),
            registry=r,
        )
        self.eviction_latency = Histogram(
            "kueue_workload_eviction_latency_seconds",
            "The time from workload eviction (WorkloadEvicted condition becomes True) until "
            "the workload returns to Pending (quota released), by the ClusterQueue it held "
            "quota in and the eviction reason",
            ["cluster_queue", "reason", _ROLE],
            buckets=_buckets(14),
            registry=r,
        )
        self.creation_latency = Histogram(
            "kueue_workload_creation_latency_seconds",
            "The time between a job was created until its workload was created, per "
            "'job_kind'. Entries are only recorded for objects with generation 1.",
            ["job_kind", _ROLE],
            buckets=tuple(0.01 * 2**i for i in range(11)),
            registry=r,
        )
        self.gate_removal = Histogram(
            "kueue_pod_scheduling_gate_removal_seconds",
            "Duration from Workload admission to removal of a Pod scheduling gate.",
            ["name", "cluster_queue", "is_group", _ROLE],
            buckets=_DEFAULT_BUCKETS,
            registry=r,
        )

    def observe_finished(
        self, body: Mapping[str, Any], cluster_queue: str, priority_class: str, role: str
    ) -> None:
        seconds = execution_seconds(body)
        if seconds is None:
            return
        seconds = max(0.0, seconds)
        self.execution_time.labels(cluster_queue, priority_class, role).observe(seconds)
        self.local_queue_execution_time.labels(*local_queue_of(body), priority_class, role).observe(
            seconds
        )

    def observe_evicted(
        self, body: Mapping[str, Any], cluster_queue: str, reason: str, cause: str, role: str
    ) -> None:
        seconds = pods_ready_to_evicted_seconds(body)
        if seconds is not None:
            self.pods_ready_to_evicted_time.labels(cluster_queue, reason, cause, role).observe(
                seconds
            )

    def observe_released(
        self, before: Mapping[str, Any], after: Mapping[str, Any], now: float, role: str
    ) -> None:
        """A Workload's new copy `after` of `before`: an evicted Workload that held quota
        and is pending again observes its eviction latency."""
        if not workload_status.has_quota_reservation(before):
            return
        if workload_status.has_quota_reservation(after):
            return
        if workload_status.is_finished(after):
            return  # finished, not pending
        evicted = workload_status.condition(after, "Evicted")
        if evicted is None or evicted.get("status") != "True":
            return
        since = workload_status.parse_rfc3339(evicted.get("lastTransitionTime"))
        cluster_queue = ((before.get("status") or {}).get("admission") or {}).get("clusterQueue")
        if since is None or not cluster_queue:
            return
        self.eviction_latency.labels(
            str(cluster_queue), str(evicted.get("reason") or ""), role
        ).observe(max(0.0, now - since))

    def observe_created(
        self, job_kind: str, job: Mapping[str, Any], workload: Mapping[str, Any], role: str
    ) -> None:
        job_meta, meta = job.get("metadata") or {}, workload.get("metadata") or {}
        if (job_meta.get("generation") or 0) > 1:
            return
        created = workload_status.parse_rfc3339(job_meta.get("creationTimestamp"))
        made = workload_status.parse_rfc3339(meta.get("creationTimestamp"))
        if created is not None and made is not None:
            self.creation_latency.labels(job_kind, role).observe(made - created)

    def observe_gate_removed(
        self, gate: str, workload: Mapping[str, Any], is_group: bool, now: float, role: str
    ) -> None:
        admitted = _true_since(workload, "Admitted")
        cluster_queue = ((workload.get("status") or {}).get("admission") or {}).get("clusterQueue")
        if admitted is None or not cluster_queue:
            return
        self.gate_removal.labels(
            gate, str(cluster_queue), "true" if is_group else "false", role
        ).observe(max(0.0, now - admitted))
