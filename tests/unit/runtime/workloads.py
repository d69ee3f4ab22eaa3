"""Workload objects, the queues of admission fair sharing, and a recording stand-in for `Api`,
for unit tests of the controller's parts (sync, writers, pending reasons, queue status).
Integration tests use the real API server."""

from __future__ import annotations

from typing import Any

from kubernetes.aio.client.exceptions import ApiException

from api import workload_status
from controller.config import ControllerConfig
from controller.runtime.controller import Controller


def workload_body(
    name: str,
    status: dict[str, Any] | None = None,
    rv: str = "1",
    queue: str = "lq",
    cpu: str = "1",
    generation: int | None = 1,
    uid: str | None = None,
    count: int = 1,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "ns",
        "resourceVersion": rv,
        "uid": uid or f"uid-{name}",
    }
    if generation is not None:
        meta["generation"] = generation
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": meta,
        "spec": {
            "queueName": queue,
            "podSets": [
                {
                    "name": "main",
                    "count": count,
                    "template": {
                        "spec": {
                            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]
                        }
                    },
                }
            ],
        },
        "status": status or {},
    }


def admitted_status(finished: bool = False, cluster_queue: str = "cq") -> dict[str, Any]:
    admission = {
        "clusterQueue": cluster_queue,
        "podSetAssignments": [
            {"name": "main", "flavors": {"cpu": "rf"}, "resourceUsage": {"cpu": "1"}, "count": 1}
        ],
    }
    status = workload_status.admit({}, admission, 1000.0)
    if finished:
        conditions = [
            *status["conditions"],
            {
                "type": "Finished",
                "status": "True",
                "reason": "Succeeded",
                "message": "done",
                "lastTransitionTime": "2026-11-23T00:00:00Z",
            },
        ]
        status = {**status, "conditions": conditions}
    return status


class RecordingApi:
    """Stands in for `Api`: records status applies and answers them with the applied object
    at the next resourceVersion; `conflicts` answers that many applies with 409 first;
    `objects` is what a GET returns."""

    def __init__(self, conflicts: int = 0) -> None:
        self.patches: list[tuple[str, str, dict[str, Any]]] = []
        self.conflicts = conflicts
        self.objects: dict[str, dict[str, Any]] = {}
        self.rv = 100

    async def apply_workload_status(self, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        if self.conflicts > 0:
            self.conflicts -= 1
            raise ApiException(status=409, reason="Conflict")
        meta = body["metadata"]
        self.patches.append((meta["namespace"], meta["name"], body["status"]))
        self.rv += 1
        return workload_body(meta["name"], body["status"], rv=str(self.rv))

    async def get_workload(self, namespace: str, name: str) -> dict[str, Any]:
        found = self.objects.get(f"{namespace}/{name}")
        if found is None:
            raise ApiException(status=404, reason="NotFound")
        return found


def fair_queue_objects() -> list[dict[str, Any]]:
    """A ResourceFlavor `rf` and a ClusterQueue `cq` with 4 cpu of it that orders its
    Workloads by LocalQueue usage (admission fair sharing)."""
    return [
        {"kind": "ResourceFlavor", "metadata": {"name": "rf"}},
        {
            "kind": "ClusterQueue",
            "metadata": {"name": "cq"},
            "spec": {
                "namespaceSelector": {},
                "admissionScope": {"admissionMode": "UsageBasedAdmissionFairSharing"},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [
                            {"name": "rf", "resources": [{"name": "cpu", "nominalQuota": "4"}]}
                        ],
                    }
                ],
            },
        },
    ]


def cluster_objects(cohort: str | None = None) -> list[dict[str, object]]:
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor"}
    return [
        {**flavor, "metadata": {"name": "rf"}},
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": "cq"},
            "spec": {
                **({"cohortName": cohort} if cohort else {}),
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [
                            {"name": "rf", "resources": [{"name": "cpu", "nominalQuota": "2"}]}
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "lq", "namespace": "ns"},
            "spec": {"clusterQueue": "cq"},
        },
    ]


def leading_controller(api: Any, cohort: str | None = None, events: Any = None) -> Controller:
    """A leading controller that has seen a flavor, a ClusterQueue `cq` (2 cpu) and its
    LocalQueue `ns/lq`."""
    controller = Controller(api, ControllerConfig(), events=events)  # type: ignore[arg-type]
    controller.leading = True
    for body in cluster_objects(cohort):
        controller.apply_event("ADDED", body)
    return controller
