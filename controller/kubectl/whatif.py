"""`kubectl quotagate whatif`: would a Workload be admitted if it were submitted now? Pure.

A hypothetical Workload (one pod set of `count` pods whose single container requests the
given resources, created now, so it queues behind every existing Workload of its
priority) is added to the live cluster's objects and `quotagate plan`'s engine runs over
them. Only the hypothetical Workload's decision is reported: admitted (ClusterQueue,
flavor per resource, borrowing), admitted after preempting (the victims), or pending
(the reason the controller would write).
"""

from __future__ import annotations

import secrets
from collections.abc import Collection, Mapping
from datetime import UTC, datetime
from typing import Any

from api.constants import API_VERSION, SCHEDULING_GROUP, Kind
from api.quantities import InvalidQuantity, Quantity
from controller.core.model.from_api import CoreObject
from controller.core.model.priorities import KUEUE_GROUP, PriorityClass, WorkloadPriorityClass
from controller.core.plan import plan
from controller.core.state import ClusterState
from controller.kubectl.printing import format_table

__all__ = [
    "ADMIT",
    "PENDING",
    "PREEMPT",
    "decide",
    "hypothetical_workload",
    "parse_requests",
    "priority_class",
    "priority_class_ref",
    "render_answer",
    "unique_name",
]

ADMIT, PREEMPT, PENDING = "admit", "preempt", "pending"
_RESOURCE_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._/")


def parse_requests(text: str) -> dict[str, str]:
    """`cpu=4,memory=8Gi` → {"cpu": "4", "memory": "8Gi"}; raises ValueError naming the
    offending item."""
    requests: dict[str, str] = {}
    for item in text.split(","):
        name, sep, value = item.strip().partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name or not value:
            raise ValueError(f"{item.strip()!r} is not RESOURCE=QUANTITY (e.g. cpu=4,memory=8Gi)")
        if not set(name) <= _RESOURCE_CHARS:
            raise ValueError(f"{name!r} is not a resource name")
        if name in requests:
            raise ValueError(f"{name} is given twice")
        try:
            quantity = Quantity.parse(value)
        except InvalidQuantity as exc:
            raise ValueError(f"{name}: {exc}") from None
        if quantity.milli < 0:
            raise ValueError(f"{name}: a request must not be negative, got {value}")
        requests[name] = value
    return requests


def unique_name(taken: Collection[str], namespace: str) -> str:
    """`whatif-<random>`, not the name of an existing Workload in `namespace`."""
    while True:
        name = f"whatif-{secrets.token_hex(4)}"
        if f"{namespace}/{name}" not in taken:
            return name


def priority_class_ref(name: str, objects: list[CoreObject]) -> dict[str, str] | None:
    """The `spec.priorityClassRef` for a class name: a WorkloadPriorityClass first (as the
    `kueue.x-k8s.io/priority-class` label would), else a PriorityClass; None if neither."""
    found = priority_class(name, objects)
    return found[0] if found is not None else None


def priority_class(name: str, objects: list[CoreObject]) -> tuple[dict[str, str], int] | None:
    """The `spec.priorityClassRef` for a class name and the class's value (Kueue's API
    wants the priority beside the ref): a WorkloadPriorityClass first, else a
    PriorityClass; None if neither."""
    for cls, group, kind in (
        (WorkloadPriorityClass, KUEUE_GROUP, "WorkloadPriorityClass"),
        (PriorityClass, SCHEDULING_GROUP, "PriorityClass"),
    ):
        for obj in objects:
            if isinstance(obj, cls) and obj.name == name:
                return {"group": group, "kind": kind, "name": name}, obj.value
    return None


def hypothetical_workload(
    namespace: str,
    name: str,
    queue: str,
    requests: Mapping[str, str],
    count: int,
    now: float,
    priority: int | None = None,
    priority_class: Mapping[str, str] | None = None,
    min_count: int | None = None,
) -> dict[str, Any]:
    """A v1beta2 Workload as a user would submit it (created now); with `min_count` it may
    be admitted with that many pods or more (partial admission)."""
    spec: dict[str, Any] = {
        "queueName": queue,
        "podSets": [
            {
                "name": "main",
                "count": count,
                "template": {
                    "spec": {
                        "containers": [{"name": "main", "resources": {"requests": dict(requests)}}]
                    }
                },
            }
        ],
    }
    if min_count is not None:
        spec["podSets"][0]["minCount"] = min_count
    if priority is not None:
        spec["priority"] = priority
    if priority_class is not None:
        spec["priorityClassRef"] = dict(priority_class)
    created = datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": API_VERSION,
        "kind": Kind.WORKLOAD.value,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": name,  # sorts after real UIDs (hex) on a creation-time tie
            "creationTimestamp": created,
        },
        "spec": spec,
    }


def decide(
    objects: list[CoreObject], key: str, now: float, state: ClusterState | None = None
) -> dict[str, Any]:
    """Run the plan over `objects` (which include the hypothetical Workload `key`), on
    `state` (configured as the controller is) if given, and return only its decision."""
    result = plan(objects, now, state=state)
    for admitted in result["admitted"]:
        if admitted["workload"] == key:
            return {
                "decision": ADMIT,
                "clusterQueue": admitted["clusterQueue"],
                "borrowing": admitted["borrowing"],
                "podSets": admitted["podSets"],
            }
    for preempting in result["preempting"]:
        if preempting["workload"] == key:
            out = {
                "decision": PREEMPT,
                "clusterQueue": preempting["clusterQueue"],
                "victims": preempting["victims"],
            }
            if "podSets" in preempting:  # partial admission once the victims are gone
                out["podSets"] = preempting["podSets"]
            return out
    for pending in result["pending"]:
        if pending["workload"] == key:
            return {
                "decision": PENDING,
                "clusterQueue": pending["clusterQueue"],
                "reason": pending["reason"],
            }
    raise AssertionError(f"the plan has no decision for {key}")  # pragma: no cover


def render_answer(answer: Mapping[str, Any]) -> str:
    """The text output of `whatif`."""
    requests = ", ".join(f"{r}={q}" for r, q in answer["requests"].items())
    pods = f"{answer['count']} pod{'s' if answer['count'] != 1 else ''}"
    if answer.get("minCount") is not None:
        pods += f", at least {answer['minCount']}"
    lines = [
        f"Workload {answer['workload']} ({pods} × {requests}; priority {answer['priority']}) "
        f"in LocalQueue {answer['localQueue']}:",
    ]
    decision = answer["decision"]
    cluster_queue = answer.get("clusterQueue") or "<none>"
    if decision == ADMIT:
        lines.append(f"  would be admitted by ClusterQueue {cluster_queue}")
        lines.append(f"  borrowing: {'yes' if answer['borrowing'] else 'no'}")
        for ps in answer["podSets"]:
            flavors = ", ".join(f"{r}={f}" for r, f in ps["flavors"].items())
            lines.append(f"  flavors: {flavors}")
            if "topology" in ps:
                lines.append(f"  topology: {ps['topology']}")
            if "requestedCount" in ps:
                lines.append(f"  partial admission: {ps['count']} of {ps['requestedCount']} pods")
    elif decision == PREEMPT:
        victims = answer["victims"]
        lines.append(
            f"  would be admitted by ClusterQueue {cluster_queue} after preempting "
            f"{len(victims)} workload{'s' if len(victims) != 1 else ''}:"
        )
        rows = [
            [
                v["workload"],
                v["clusterQueue"],
                v["reason"] + (" (already evicting)" if v.get("alreadyEvicting") else ""),
                str(v["pods"]),
            ]
            for v in victims
        ]
        table = format_table(["VICTIM", "CLUSTERQUEUE", "REASON", "PODS"], rows)
        lines += ["    " + line for line in table.splitlines()]
        for ps in answer.get("podSets", ()):
            lines.append(f"  partial admission: {ps['count']} of {ps['requestedCount']} pods")
    else:
        lines.append(f"  would stay pending in ClusterQueue {cluster_queue}")
        lines.append(f"  reason: {answer['reason']}")
    if answer.get("engineSettings"):
        lines.append(f"  decided with: {answer['engineSettings']}")
    return "\n".join(lines)
