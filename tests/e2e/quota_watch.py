"""A sampler for "quota is never over-committed": while a test runs, it reads (every
0.1 s) the Workloads holding quota in a namespace and the pods running there, and keeps
the most CPU ever reserved per flavor and ever running per node at once."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from kubernetes import client

from api.quantities import Quantity
from tests.integration.kueue import GROUP, VERSION, condition


def _milli(text: object) -> int:
    return Quantity.parse(text).milli


class QuotaWatch:
    """The most CPU (milli) reserved per flavor by unfinished Workloads with
    QuotaReserved=True, and the most requested by live pods (bound, not finished, not being
    deleted) per node and on all nodes at once."""

    def __init__(self, api_client: client.ApiClient, namespace: str) -> None:
        self.custom = client.CustomObjectsApi(api_client)
        self.core = client.CoreV1Api(api_client)
        self.namespace = namespace
        self.reserved: dict[str, int] = {}
        self.running: dict[str, int] = {}
        self.running_total = 0  # the most requested by live pods at once, on all nodes
        self.samples = 0
        self._stop = threading.Event()

    def sample(self) -> None:
        reserved: dict[str, int] = {}
        workloads = self.custom.list_namespaced_custom_object(
            GROUP, VERSION, self.namespace, "workloads"
        )["items"]
        for workload in workloads:
            held = condition(workload, "QuotaReserved")
            done = condition(workload, "Finished")
            if not held or held["status"] != "True" or (done and done["status"] == "True"):
                continue  # a finished Workload's quota is returned (Kueue's rule)
            admission = (workload.get("status") or {}).get("admission") or {}
            for assignment in admission.get("podSetAssignments") or ():
                flavor = (assignment.get("flavors") or {}).get("cpu")
                usage = (assignment.get("resourceUsage") or {}).get("cpu")
                if flavor and usage:
                    reserved[flavor] = reserved.get(flavor, 0) + _milli(usage)
        running: dict[str, int] = {}
        for pod in self.core.list_namespaced_pod(self.namespace).items:
            node = pod.spec.node_name
            if (
                not node
                or pod.metadata.deletion_timestamp is not None
                or pod.status.phase in ("Succeeded", "Failed")
            ):
                continue
            for container in pod.spec.containers:
                requests = (container.resources.requests or {}) if container.resources else {}
                if "cpu" in requests:
                    running[node] = running.get(node, 0) + _milli(requests["cpu"])
        for key, value in reserved.items():
            self.reserved[key] = max(self.reserved.get(key, 0), value)
        for key, value in running.items():
            self.running[key] = max(self.running.get(key, 0), value)
        self.running_total = max(self.running_total, sum(running.values()))
        self.samples += 1

    def observed(self) -> bool:
        """Whether the sampler ran through the test and saw quota held at least once: the
        maxima it keeps mean something only then. (Not a count of samples: one sample lists
        every Workload and pod, and takes longer while the machine is busy.)"""
        return self.samples >= 2 and any(self.reserved.values())

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            self.sample()


@contextmanager
def quota_watch(api_client: client.ApiClient, namespace: str) -> Iterator[QuotaWatch]:
    watch = QuotaWatch(api_client, namespace)
    thread = threading.Thread(target=watch._run, daemon=True)
    thread.start()
    try:
        yield watch
    finally:
        watch._stop.set()
        thread.join(5)
