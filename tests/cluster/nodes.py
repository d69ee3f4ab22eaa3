"""Fake nodes and a tiny kubelet stand-in, so kube-scheduler binds pods and Jobs finish.

`create_node` registers a Ready Node with capacity (no kubelet behind it; the
node-lifecycle controller is not run, so it is never tainted). `PodLifecycle` watches
pods bound to those nodes (labelled `quotagate.test/fake-node`; a real node's pods are its
kubelet's) and plays the kubelet's part: bound pods become Running;
pods annotated `quotagate.test/run-seconds: "N"` succeed N seconds later (0 = at once);
`complete()` succeeds a pod on demand; and a pod being deleted is removed at once
(force delete), as a kubelet would after its containers stopped.

Readiness (for the PodsReady condition): a Running pod is Ready at once, unless annotated

- `quotagate.test/not-ready: "true"`: it stays Running but not Ready (a container that
  never passes its readiness probe) until `set_ready()` says otherwise;
- `quotagate.test/ready-after-seconds: "N"`: it is Running but not Ready for N seconds,
  then Ready.

`set_ready(namespace, name, ready)` makes a Running pod Ready or not Ready on demand (a
Ready pod losing readiness, as when its container crashes and restarts).
"""

from __future__ import annotations

import contextlib
import threading
import time
from datetime import UTC, datetime
from typing import Any

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

RUN_SECONDS = "quotagate.test/run-seconds"
NOT_READY = "quotagate.test/not-ready"
READY_AFTER_SECONDS = "quotagate.test/ready-after-seconds"
FAKE_NODE_LABEL = "quotagate.test/fake-node"
TIMEOUT = 30  # seconds for each request: an API server restarted under it never hangs it


def queued_job(name: str, queue: str = "lq", parallelism: int = 1) -> dict[str, Any]:
    """A Job for the LocalQueue `queue`: `parallelism` pods of 1 cpu that the fake nodes
    run for a second each."""
    return {
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": queue}},
        "spec": {
            "parallelism": parallelism,
            "completions": parallelism,
            "template": {
                "metadata": {"annotations": {RUN_SECONDS: "1"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
                    ],
                },
            },
        },
    }


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def create_node(
    core: client.CoreV1Api,
    name: str,
    cpu: str = "32",
    memory: str = "128Gi",
    pods: str = "110",
    labels: dict[str, str] | None = None,
    extra: dict[str, str] | None = None,
) -> None:
    """A Ready Node with the given allocatable resources (idempotent)."""
    capacity = {"cpu": cpu, "memory": memory, "pods": pods, **(extra or {})}
    body = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, FAKE_NODE_LABEL: "true", **(labels or {})},
        },
        "spec": {},
    }
    with contextlib.suppress(ApiException):
        core.create_node(body)
    status = {
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "fake node",
                    "lastHeartbeatTime": _now(),
                    "lastTransitionTime": _now(),
                }
            ],
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
            "nodeInfo": {
                "architecture": "amd64",
                "operatingSystem": "linux",
                "kubeletVersion": "v1.36.3",
                "kubeProxyVersion": "",
                "containerRuntimeVersion": "fake://1",
                "kernelVersion": "",
                "osImage": "fake",
                "bootID": "",
                "machineID": "",
                "systemUUID": "",
            },
        }
    }
    core.patch_node_status(name, status)
    # The TaintNodesByCondition admission plugin taints a new Node not-ready; without the
    # node-lifecycle controller nobody lifts it, so the fake kubelet does.
    core.patch_node(name, {"spec": {"taints": None}})


class PodLifecycle:
    """A background thread that moves pods on fake nodes through their phases."""

    def __init__(self, api_client: client.ApiClient) -> None:
        self.core = client.CoreV1Api(api_client)
        self._stop = threading.Event()
        self._due: dict[tuple[str, str], float] = {}
        self._ready_due: dict[tuple[str, str], float] = {}
        self._lock = threading.Lock()
        self._fake: dict[str, bool] = {}
        self._threads = [
            threading.Thread(target=self._watch_loop, name="pod-lifecycle-watch", daemon=True),
            threading.Thread(target=self._timer_loop, name="pod-lifecycle-timer", daemon=True),
        ]

    def start(self) -> PodLifecycle:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def complete(self, namespace: str, name: str, succeeded: bool = True) -> None:
        """Finish a running pod now (Succeeded, or Failed)."""
        self._finish(namespace, name, succeeded)

    def set_ready(self, namespace: str, name: str, ready: bool) -> None:
        """Make a Running pod Ready, or not Ready, now."""
        with self._lock:
            self._ready_due.pop((namespace, name), None)
        self._patch_readiness(namespace, name, ready)

    def _watch_loop(self) -> None:
        while not self._stop.is_set():
            try:
                stream = watch.Watch()
                for event in stream.stream(
                    self.core.list_pod_for_all_namespaces,
                    timeout_seconds=5,
                    _request_timeout=TIMEOUT,
                ):
                    if self._stop.is_set():
                        stream.stop()
                        return
                    self._handle(event["type"], event["object"])
            except Exception:  # the API server restarting must not kill the helper
                time.sleep(0.5)

    def _is_fake(self, node_name: str) -> bool:
        """Whether `node_name` is a fake node (a real kubelet runs the others' pods)."""
        if node_name not in self._fake:
            try:
                labels = self.core.read_node(node_name).metadata.labels or {}
            except ApiException:
                return False
            self._fake[node_name] = labels.get(FAKE_NODE_LABEL) == "true"
        return self._fake[node_name]

    def _handle(self, event_type: str, pod: Any) -> None:
        if event_type == "DELETED":
            return
        meta, spec, status = pod.metadata, pod.spec, pod.status
        if spec.node_name and not self._is_fake(spec.node_name):
            return
        if meta.deletion_timestamp is not None:
            with contextlib.suppress(ApiException):
                self.core.delete_namespaced_pod(
                    meta.name, meta.namespace, grace_period_seconds=0, _request_timeout=TIMEOUT
                )
            return
        if not spec.node_name or status.phase not in (None, "Pending"):
            return
        annotations = meta.annotations or {}
        ready_after = annotations.get(READY_AFTER_SECONDS)
        ready = annotations.get(NOT_READY) != "true" and ready_after is None
        # Due times first: if the API server goes away while the pod is made Running, the
        # pod still finishes (a lost answer would otherwise leave it Running for ever).
        with self._lock:
            if ready_after is not None and annotations.get(NOT_READY) != "true":
                self._ready_due[(meta.namespace, meta.name)] = time.monotonic() + float(ready_after)
            seconds = annotations.get(RUN_SECONDS)
            if seconds is not None:
                self._due[(meta.namespace, meta.name)] = time.monotonic() + float(seconds)
        self._set_running(pod, ready)

    def _timer_loop(self) -> None:
        while not self._stop.wait(0.2):
            now = time.monotonic()
            with self._lock:
                due = [key for key, at in self._due.items() if at <= now]
                for key in due:
                    del self._due[key]
                ready = [key for key, at in self._ready_due.items() if at <= now]
                for key in ready:
                    del self._ready_due[key]
            for timers, keys, act in (
                (self._ready_due, ready, lambda ns, n: self._patch_readiness(ns, n, True)),
                (self._due, due, lambda ns, n: self._finish(ns, n, True)),
            ):
                for namespace, name in keys:
                    try:
                        act(namespace, name)
                    except Exception:  # the API server restarting: try again soon
                        with self._lock:
                            timers[(namespace, name)] = time.monotonic() + 0.5

    def _patch_readiness(self, namespace: str, name: str, ready: bool) -> None:
        """The Ready and ContainersReady conditions and the containers' `ready` of a Running
        pod (a pod that is not Running is left alone)."""
        try:
            pod = self.core.read_namespaced_pod(name, namespace, _request_timeout=TIMEOUT)
        except ApiException:
            return
        if pod.status.phase != "Running":
            return
        text = "True" if ready else "False"
        body = {
            "status": {
                "conditions": [
                    {"type": "ContainersReady", "status": text, "lastTransitionTime": _now()},
                    {"type": "Ready", "status": text, "lastTransitionTime": _now()},
                ],
                "containerStatuses": [
                    {
                        "name": c.name,
                        "image": c.image or "fake",
                        "imageID": c.image_id or "fake",
                        "ready": ready,
                        "restartCount": c.restart_count or 0,
                        "started": True,
                        "state": {"running": {"startedAt": _now()}},
                    }
                    for c in pod.status.container_statuses or ()
                ],
            }
        }
        with contextlib.suppress(ApiException):
            self.core.patch_namespaced_pod_status(name, namespace, body, _request_timeout=TIMEOUT)

    def _set_running(self, pod: Any, ready: bool = True) -> None:
        text = "True" if ready else "False"
        containers = [
            {
                "name": c.name,
                "image": c.image or "fake",
                "imageID": "fake",
                "ready": ready,
                "restartCount": 0,
                "started": True,
                "state": {"running": {"startedAt": _now()}},
            }
            for c in pod.spec.containers
        ]
        body = {
            "status": {
                "phase": "Running",
                "podIP": "10.244.0.1",
                "hostIP": "127.0.0.1",
                "startTime": _now(),
                "conditions": [
                    {"type": "PodScheduled", "status": "True", "lastTransitionTime": _now()},
                    {"type": "Initialized", "status": "True", "lastTransitionTime": _now()},
                    {"type": "ContainersReady", "status": text, "lastTransitionTime": _now()},
                    {"type": "Ready", "status": text, "lastTransitionTime": _now()},
                ],
                "containerStatuses": containers,
            }
        }
        with contextlib.suppress(ApiException):
            self.core.patch_namespaced_pod_status(
                pod.metadata.name, pod.metadata.namespace, body, _request_timeout=TIMEOUT
            )

    def _finish(self, namespace: str, name: str, succeeded: bool) -> None:
        try:
            pod = self.core.read_namespaced_pod(name, namespace, _request_timeout=TIMEOUT)
        except ApiException:
            return
        exit_code = 0 if succeeded else 1
        containers = [
            {
                "name": c.name,
                "image": c.image or "fake",
                "imageID": "fake",
                "ready": False,
                "restartCount": 0,
                "started": False,
                "state": {
                    "terminated": {
                        "exitCode": exit_code,
                        "reason": "Completed" if succeeded else "Error",
                        "startedAt": _now(),
                        "finishedAt": _now(),
                    }
                },
            }
            for c in pod.spec.containers
        ]
        body = {
            "status": {
                "phase": "Succeeded" if succeeded else "Failed",
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "False",
                        "reason": "PodCompleted",
                        "lastTransitionTime": _now(),
                    },
                    {
                        "type": "ContainersReady",
                        "status": "False",
                        "reason": "PodCompleted",
                        "lastTransitionTime": _now(),
                    },
                ],
                "containerStatuses": containers,
            }
        }
        with contextlib.suppress(ApiException):
            self.core.patch_namespaced_pod_status(name, namespace, body, _request_timeout=TIMEOUT)
