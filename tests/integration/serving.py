"""Builders for the serving kinds' objects in integration and e2e tests: a Deployment, a
StatefulSet and a LeaderWorkerSet labelled with a LocalQueue, their pods asking for CPU."""

from __future__ import annotations

from typing import Any

from api.constants import QUEUE_NAME_LABEL

LWS = ("leaderworkerset.x-k8s.io", "v1", "leaderworkersets")


def pod_template(app: str, cpu: str = "1", **annotations: str) -> dict[str, Any]:
    """Pods that run until deleted (the fake nodes keep them Running)."""
    return {
        "metadata": {"labels": {"app": app}, "annotations": dict(annotations)},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {"name": "c", "image": "nginx", "resources": {"requests": {"cpu": cpu}}}
            ],
        },
    }


def _meta(name: str, queue: str | None, labels: dict[str, str] | None) -> dict[str, Any]:
    meta_labels = dict(labels or {})
    if queue is not None:
        meta_labels[QUEUE_NAME_LABEL] = queue
    return {"name": name, "labels": meta_labels}


def deployment(
    name: str, replicas: int, queue: str | None = "lq", labels: dict[str, str] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(name, queue, labels),
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": pod_template(name),
        },
    }


def statefulset(
    name: str, replicas: int, queue: str | None = "lq", labels: dict[str, str] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": _meta(name, queue, labels),
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {"app": name}},
            "template": pod_template(name),
        },
    }


def leaderworkerset(
    name: str,
    replicas: int,
    size: int,
    queue: str | None = "lq",
    leader_cpu: str | None = "1",
    worker_cpu: str = "1",
) -> dict[str, Any]:
    """`replicas` groups of `size` pods: a leader (its own template, `leader_cpu`, unless
    None) and size − 1 workers."""
    lwt: dict[str, Any] = {"size": size, "workerTemplate": pod_template(name, worker_cpu)}
    if leader_cpu is not None:
        lwt["leaderTemplate"] = pod_template(name, leader_cpu)
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": _meta(name, queue, None),
        "spec": {"replicas": replicas, "leaderWorkerTemplate": lwt},
    }
