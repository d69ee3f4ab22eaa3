"""`kubectl quotagate list`: the columns users need for Workloads and queues. Pure.

The counts shown for queues are the ones the controller writes into their status
(`pendingWorkloads`, `reservingWorkloads`, `admittedWorkloads`), as `kubectl get` would.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from controller.core.model.priorities import PriorityClasses
from controller.kubectl.printing import age, format_table, one_line
from controller.kubectl.workload_view import (
    cluster_queue_of,
    condition,
    priority_value,
    status_of,
)

__all__ = ["cluster_queue_table", "local_queue_table", "workload_table"]

NONE = "<none>"

Row = list[str]


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _by_name(obj: Mapping[str, Any]) -> tuple[str, str]:
    return str(_meta(obj).get("namespace") or ""), str(_meta(obj).get("name") or "")


def _count(status: Mapping[str, Any], field: str) -> str:
    return str(status.get(field, 0))


def _message(obj: Mapping[str, Any]) -> str:
    """The message a user most needs: why it waits, or why it was evicted."""
    for type_ in ("Evicted", "QuotaReserved"):
        found = condition(obj, type_)
        if found is not None and (type_ == "Evicted") == (found.get("status") == "True"):
            return one_line(found.get("message") or "")
    return ""


def workload_table(
    workloads: Sequence[Mapping[str, Any]],
    local_queues: Mapping[str, str],
    classes: PriorityClasses,
    now: float,
    all_namespaces: bool = False,
    wide: bool = False,
) -> str:
    """`local_queues` maps `namespace/name` to the LocalQueue's ClusterQueue."""
    header = ["NAME", "QUEUE", "CLUSTERQUEUE", "PRIORITY", "STATUS", "COST", "AGE"]
    if wide:
        header += ["PREEMPTIBILITY", "MESSAGE"]
    rows: list[Row] = []
    for obj in sorted(workloads, key=_by_name):
        status = obj.get("status") or {}
        row = [
            str(_meta(obj).get("namespace")),
            str(_meta(obj).get("name")),
            str((obj.get("spec") or {}).get("queueName") or NONE),
            cluster_queue_of(obj, local_queues) or NONE,
            priority_value(obj, classes),
            status_of(obj),
            str(status.get("preemptionCost", 0)),
            age(_meta(obj).get("creationTimestamp"), now),
        ]
        if wide:
            resolved = status.get("resolvedPreemptibility") or {}
            row += [str(resolved.get("value") or NONE), _message(obj)]
        rows.append(row)
    return _namespaced_table(header, rows, all_namespaces)


def cluster_queue_table(cluster_queues: Sequence[Mapping[str, Any]], wide: bool = False) -> str:
    header = ["NAME", "COHORT", "PENDING", "RESERVING", "ADMITTED", "ACTIVE"]
    if wide:
        header += ["STRATEGY", "FLAVORS"]
    rows: list[Row] = []
    for obj in sorted(cluster_queues, key=_by_name):
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        active = condition(obj, "Active")
        row = [
            str(_meta(obj).get("name")),
            str(spec.get("cohortName") or spec.get("cohort") or NONE),
            _count(status, "pendingWorkloads"),
            _count(status, "reservingWorkloads"),
            _count(status, "admittedWorkloads"),
            str(active.get("status")) if active else "Unknown",
        ]
        if wide:
            flavors = [
                str(flavor.get("name"))
                for group in spec.get("resourceGroups") or ()
                for flavor in group.get("flavors") or ()
            ]
            row += [str(spec.get("queueingStrategy") or "BestEffortFIFO"), ",".join(flavors)]
        rows.append(row)
    return format_table(header, rows)


def local_queue_table(
    local_queues: Sequence[Mapping[str, Any]], all_namespaces: bool = False, wide: bool = False
) -> str:
    header = ["NAME", "CLUSTERQUEUE", "PENDING", "ADMITTED"]
    if wide:
        header += ["RESERVING", "ACTIVE"]
    rows: list[Row] = []
    for obj in sorted(local_queues, key=_by_name):
        status = obj.get("status") or {}
        row = [
            str(_meta(obj).get("namespace")),
            str(_meta(obj).get("name")),
            str((obj.get("spec") or {}).get("clusterQueue") or NONE),
            _count(status, "pendingWorkloads"),
            _count(status, "admittedWorkloads"),
        ]
        if wide:
            active = condition(obj, "Active")
            row += [
                _count(status, "reservingWorkloads"),
                str(active.get("status")) if active else "Unknown",
            ]
        rows.append(row)
    return _namespaced_table(header, rows, all_namespaces)


def _namespaced_table(header: list[str], rows: list[Row], all_namespaces: bool) -> str:
    """Rows start with the namespace; kubectl shows that column with --all-namespaces only."""
    if all_namespaces:
        return format_table(["NAMESPACE", *header], rows)
    return format_table(header, [row[1:] for row in rows])
