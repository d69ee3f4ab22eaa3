"""Kueue's Cohort metrics and the hierarchy's info metrics (pkg/cache/scheduler/
cohort_metrics.go, behind Kueue's MetricsForCohorts gate, on by default): the same names,
label names and types, each with `replica_role`.

- `kueue_cohort_subtree_quota`, `kueue_cohort_subtree_resource_reservations`: per cohort,
  flavor and resource, the nominal quota of its subtree (Kueue's SubtreeQuota) and the
  quota its subtree's ClusterQueues reserve; a series is there only while its value is
  above zero, as Kueue clears the others.
- `kueue_cohort_subtree_admitted_active_workloads`: admitted Workloads of the subtree (for
  the cohorts above some ClusterQueue, as Kueue reports them).
- `kueue_cohort_subtree_admitted_workloads_total`: counted at each admission for every
  cohort above the Workload's ClusterQueue.
- `kueue_cohort_info` (cohort, parent_cohort, root_cohort) for every cohort of a valid tree
  and `kueue_cluster_queue_info` (cluster_queue, parent_cohort, root_cohort) for every
  ClusterQueue (empty cohorts without one): 1, to join on.

The gauges are set by the queue status refresh (`set_gauges`) from the engine's quota tree,
each series only when its value changed; series that no longer hold are removed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge

from controller.core.state import ClusterState

__all__ = ["CohortMetrics", "set_series"]

_ROLE = "replica_role"
Series = tuple[Gauge, tuple[str, ...]]


def set_series(wanted: dict[Series, float], was: Mapping[Series, float]) -> dict[Series, float]:
    """Set each series of `wanted` whose value is not the one `was` set, remove those of
    `was` no longer wanted; returns `wanted` (what is set now)."""
    for (gauge, labels), value in wanted.items():
        if was.get((gauge, labels)) != value:
            gauge.labels(*labels).set(value)
    for gauge, labels in set(was) - set(wanted):
        with contextlib.suppress(KeyError):  # gone with a role change already
            gauge.remove(*labels)
    return wanted


class CohortMetrics:
    """The families, in `registry`."""

    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        by_resource = ["cohort", "flavor", "resource", _ROLE]
        self.subtree_quota = Gauge(
            "kueue_cohort_subtree_quota",
            "Reports the cohort's nominal quota aggregated within the cohort's subtree. The "
            "values are reported per resource and flavor",
            by_resource,
            registry=r,
        )
        self.subtree_admitted_workloads = Counter(
            "kueue_cohort_subtree_admitted_workloads",
            "The total number of admitted workloads per cohort's subtree",
            ["cohort", "priority_class", _ROLE],
            registry=r,
        )
        self.subtree_resource_reservations = Gauge(
            "kueue_cohort_subtree_resource_reservations",
            "Reports the cohort's resource reservations aggregated within the cohort's "
            "subtree. The values are reported per resource and flavor",
            by_resource,
            registry=r,
        )
        self.subtree_admitted_active_workloads = Gauge(
            "kueue_cohort_subtree_admitted_active_workloads",
            "The number of admitted Workloads that are active, per cohort's subtree",
            ["cohort", _ROLE],
            registry=r,
        )
        self.cohort_info = Gauge(
            "kueue_cohort_info",
            "Reports Cohort hierarchy information. The metric has value 1 and can be joined "
            "using labels.",
            ["cohort", "parent_cohort", "root_cohort", _ROLE],
            registry=r,
        )
        self.cluster_queue_info = Gauge(
            "kueue_cluster_queue_info",
            "Reports ClusterQueue hierarchy information. The metric has value 1 and can be "
            "joined using labels.",
            ["cluster_queue", "parent_cohort", "root_cohort", _ROLE],
            registry=r,
        )
        self._set: dict[Series, float] = {}

    def gauges(self) -> tuple[Gauge, ...]:
        return (
            self.subtree_quota,
            self.subtree_resource_reservations,
            self.subtree_admitted_active_workloads,
            self.cohort_info,
            self.cluster_queue_info,
        )

    def observe_admitted(
        self, state: ClusterState, cluster_queue: str, priority_class: str, role: str
    ) -> None:
        for cohort in state.cache.quota.path(cluster_queue):
            self.subtree_admitted_workloads.labels(cohort, priority_class, role).inc()

    def set_gauges(
        self, state: ClusterState, admitted: Mapping[str, int], role: str, anew: bool
    ) -> None:
        """Every series from the state; `admitted`: admitted Workloads per ClusterQueue;
        `anew`: the gauges were cleared (a role change): set every series again."""
        if anew:
            self._set = {}
        self._set = set_series(self._wanted(state, admitted, role), self._set)

    def _wanted(
        self, state: ClusterState, admitted: Mapping[str, int], role: str
    ) -> dict[Series, float]:
        quota = state.cache.quota
        wanted: dict[Series, float] = {}
        reserved: dict[str, dict[Any, int]] = {}
        active: dict[str, int] = {}
        cohorts = {name for name, cohort in state.objects.cohorts.items() if cohort.invalid is None}
        for name in state.objects.cluster_queues:
            path = quota.path(name)
            parent, root = (path[0], path[-1]) if path else ("", "")
            wanted[(self.cluster_queue_info, (name, parent, root, role))] = 1
            usage = quota.usage_of(name)
            for cohort in path:
                cohorts.add(cohort)
                active[cohort] = active.get(cohort, 0) + admitted.get(name, 0)
                into = reserved.setdefault(cohort, {})
                for fr, value in usage.items():
                    into[fr] = into.get(fr, 0) + value
        for cohort in cohorts:
            declared = state.objects.cohorts.get(cohort)
            if declared is not None and declared.invalid is not None:
                continue  # a cycle or another fault: Kueue reports none for it
            parent = quota.parent_of(cohort) or ""
            wanted[(self.cohort_info, (cohort, parent, quota.root_of(cohort), role))] = 1
            for (flavor, resource), value in quota.subtree_quota(cohort).items():
                if value > 0:
                    wanted[(self.subtree_quota, (cohort, flavor, resource, role))] = value / 1000
            for (flavor, resource), value in reserved.get(cohort, {}).items():
                if value > 0:
                    series = (self.subtree_resource_reservations, (cohort, flavor, resource, role))
                    wanted[series] = value / 1000
            if cohort in active:
                wanted[(self.subtree_admitted_active_workloads, (cohort, role))] = active[cohort]
        return wanted
