"""A fault scenario's load: two namespaces, each with a LocalQueue `lq` of its own
ClusterQueue, both in one cohort; bare Workloads, Jobs and pods of 1 cpu; and the job side
of the bare Workloads (Finished after their runtime, evictions acknowledged), riding out
the scenario's outages."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

from kubernetes import client

from api.workload_status import has_quota_reservation, is_evicted, is_finished
from tests.cluster.fixtures import wait_for
from tests.cluster.nodes import RUN_SECONDS, TIMEOUT, queued_job
from tests.faults.cluster import FaultCluster
from tests.integration.kueue import (
    GROUP,
    VERSION,
    Kueue,
    cluster_queue,
    flavor,
    local_queue,
    workload,
)
from tools.bench.kueue_clients import runner_finish, runner_release

RUNTIME_LABEL = "quotagate.test/runtime-ms"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


class Load:
    """A scenario's queues and Workloads: two namespaces, each with a LocalQueue `lq` of
    its own ClusterQueue, both in one cohort; bare Workloads, Jobs and pods of 1 cpu."""

    def __init__(self, cluster: FaultCluster, tag: str, nominal: int) -> None:
        self.api_client = cluster.api_client
        self.kueue = Kueue(cluster.api_client)
        self.core = client.CoreV1Api(cluster.api_client)
        self.batch = client.BatchV1Api(cluster.api_client)
        self.tag = tag
        self.namespaces = [f"{tag}-a", f"{tag}-b"]
        self.cluster_queues = {ns: ns for ns in self.namespaces}
        self.nominal = nominal
        self.created = 0
        self._created_lock = threading.Lock()
        self._job_side: threading.Thread | None = None
        self._stop = threading.Event()
        self.job_side_errors = 0
        self.job_side_error = ""

    def setup(self) -> Load:
        rf = f"{self.tag}-rf"
        self.kueue.apply(flavor(rf))
        for ns in self.namespaces:
            self.core.create_namespace({"metadata": {"name": ns}})
            self.kueue.apply(
                cluster_queue(
                    self.cluster_queues[ns],
                    {rf: {"cpu": self.nominal}},
                    cohort=self.tag,
                    preemption={"withinClusterQueue": "LowerPriority"},
                ),
                local_queue(ns, "lq", self.cluster_queues[ns]),
            )
        return self

    # -- the objects ---------------------------------------------------------------------------

    def bare(self, namespace: str, name: str, runtime_ms: int, priority: int = 0) -> None:
        body = workload(namespace, name, "lq", priority=priority)
        body["metadata"]["labels"] = {RUNTIME_LABEL: str(runtime_ms)}
        self.kueue.apply(body)
        self._count()

    def job(self, namespace: str, name: str) -> None:
        self.batch.create_namespaced_job(namespace, queued_job(name))
        self._count()

    def pod(self, namespace: str, name: str, seconds: int = 1) -> None:
        self.core.create_namespaced_pod(namespace, queued_pod(name, seconds))
        self._count()

    def _count(self) -> None:
        with self._created_lock:
            self.created += 1

    def create(
        self,
        bare: int,
        jobs: int = 0,
        pods: int = 0,
        prefix: str = "",
        runtime_ms: int = 1000,
        priority: int = 0,
    ) -> None:
        """`bare` Workloads (`runtime_ms`, `priority`), `jobs` Jobs and `pods` pods (1 s
        each), spread over both namespaces, created eight at a time."""
        creations: list[Callable[[], None]] = []
        for i in range(max(bare, jobs, pods)):
            ns = self.namespaces[i % 2]
            if i < bare:
                creations.append(partial(self.bare, ns, f"{prefix}w{i}", runtime_ms, priority))
            if i < jobs:
                creations.append(partial(self.job, ns, f"{prefix}j{i}"))
            if i < pods:
                creations.append(partial(self.pod, ns, f"{prefix}p{i}"))
        with ThreadPoolExecutor(8) as pool:
            for done in pool.map(lambda create: create(), creations):
                assert done is None

    # -- reading -------------------------------------------------------------------------------

    def workloads(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        for ns in self.namespaces:
            found = self.kueue.custom.list_namespaced_custom_object(
                GROUP, VERSION, ns, "workloads", _request_timeout=TIMEOUT
            )
            items += found["items"]
        return items

    def counts(self) -> dict[str, int]:
        found = {"workloads": 0, "finished": 0, "holding": 0}
        for wl in self.workloads():
            found["workloads"] += 1
            if is_finished(wl):
                found["finished"] += 1
            elif has_quota_reservation(wl):
                found["holding"] += 1
        return found

    def wait_admitting(self, holding: int, timeout: float = 60) -> None:
        """Until at least `holding` Workloads hold quota at once (admissions are flowing)."""
        wait_for(
            lambda: self._safely(self.counts)["holding"] >= holding,
            timeout=timeout,
            interval=0.2,
            what=f"{holding} Workloads holding quota",
        )

    def wait_evicting(self, timeout: float = 60) -> None:
        """Until some Workload is evicted while it still holds quota."""

        def evicting() -> bool:
            try:
                return any(is_evicted(w) and has_quota_reservation(w) for w in self.workloads())
            except Exception:
                return False

        wait_for(evicting, timeout=timeout, interval=0.1, what="an eviction")

    def wait_finished(self, expected: int, timeout: float = 180) -> None:
        """Until `expected` Workloads exist and all are finished (if not, the error says
        where the others are)."""

        def done() -> bool:
            counts = self._safely(self.counts)
            return counts["workloads"] == expected and counts["finished"] == expected

        try:
            wait_for(done, timeout=timeout, interval=0.5, what=f"all {expected} Workloads finished")
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}; not finished: {self._unfinished()}") from None

    def _unfinished(self) -> str:
        """The Workloads not finished, by their kind (prefix) and state, and the pods not
        done, by phase and gate."""
        states: dict[str, int] = {}
        pending: list[str] = []  # which, and why, for the first few
        for wl in self._safely(self.workloads):
            if is_finished(wl):
                continue
            meta = wl["metadata"]
            kind = meta["name"].split("-")[0] if "-" in meta["name"] else "bare"
            state = "holding quota" if has_quota_reservation(wl) else "pending"
            if is_evicted(wl):
                state += ", evicted"
            states[f"{kind} {state}"] = states.get(f"{kind} {state}", 0) + 1
            if state == "pending" and len(pending) < 5:
                reserved = next(
                    (
                        c
                        for c in (wl.get("status") or {}).get("conditions") or ()
                        if c.get("type") == "QuotaReserved"
                    ),
                    {},
                )
                pending.append(
                    f"{meta['namespace']}/{meta['name']} (rv {meta.get('resourceVersion')}: "
                    f"{reserved.get('reason')}: {reserved.get('message')})"
                )
        pods: dict[str, int] = {}
        for ns in self.namespaces:
            for pod in self.core.list_namespaced_pod(ns).items:
                if pod.status.phase in ("Succeeded", "Failed"):
                    continue
                gated = "gated" if pod.spec.scheduling_gates else "ungated"
                key = f"{pod.status.phase} {gated} {'bound' if pod.spec.node_name else 'unbound'}"
                pods[key] = pods.get(key, 0) + 1
        return f"Workloads {states} (pending: {pending}), pods {pods}"

    @staticmethod
    def _safely(read: Any) -> Any:
        try:
            return read()
        except Exception as exc:  # the API server is down (urllib3's errors are no OSError)
            return {"workloads": -1, "finished": -1, "holding": -1, "error": str(exc)}

    # -- the job side of bare Workloads --------------------------------------------------------

    def start_job_side(self) -> Load:
        """A thread that plays the owner of the bare Workloads, as Kueue's runner does: marks
        them Finished their runtime after they were admitted, and releases the reservation
        of an evicted one so it competes again. It rides out API server outages."""
        self._job_side = threading.Thread(target=self._play, daemon=True, name="job-side")
        self._job_side.start()
        return self

    def stop_job_side(self) -> None:
        self._stop.set()
        if self._job_side is not None:
            self._job_side.join(10)

    def _play(self) -> None:
        admitted_at: dict[str, float] = {}
        while not self._stop.wait(0.25):
            try:
                for wl in self.workloads():
                    meta = wl["metadata"]
                    runtime = (meta.get("labels") or {}).get(RUNTIME_LABEL)
                    if runtime is None or is_finished(wl):
                        continue
                    key = f"{meta['namespace']}/{meta['name']}/{meta['uid']}"
                    if not has_quota_reservation(wl):
                        admitted_at.pop(key, None)
                        continue
                    if is_evicted(wl):
                        self._send(wl, runner_release(wl, time.time()))
                        admitted_at.pop(key, None)
                        continue
                    since = admitted_at.setdefault(key, time.monotonic())
                    if time.monotonic() - since >= int(runtime) / 1000:
                        self._send(wl, runner_finish(wl, time.time()))
            except Exception as exc:  # an outage (urllib3's errors too), a conflict: next round
                self.job_side_errors += 1
                self.job_side_error = f"{type(exc).__name__}: {exc}"

    def _send(self, wl: dict[str, Any], write: Any) -> None:
        meta = wl["metadata"]
        self.kueue.custom.patch_namespaced_custom_object_status(
            GROUP,
            VERSION,
            meta["namespace"],
            "workloads",
            meta["name"],
            write.body,
            field_manager=write.field_manager,
            force=write.force,
            _content_type="application/apply-patch+yaml",
            _request_timeout=TIMEOUT,
        )


def queued_pod(name: str, seconds: int = 1, queue: str = "lq") -> dict[str, Any]:
    """A pod of 1 cpu for LocalQueue `queue` that the fake nodes run for `seconds`."""
    return {
        "metadata": {
            "name": name,
            "labels": {QUEUE_LABEL: queue},
            "annotations": {RUN_SECONDS: str(seconds)},
        },
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
            ],
        },
    }
