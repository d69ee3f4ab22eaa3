"""The live run's objects on the API server, in Kueue's v1beta2 API as Kueue's performance
runner creates them: ResourceFlavor `rf`; per ClusterQueue a Namespace of the same name,
the ClusterQueue (cohort, cpu quota, preemption policy, `namespaceSelector: {}`, its class
as the label Kueue's generator sets) and a LocalQueue; and the scenario's bare Workloads.
Every name carries the run id and every object the run's label, so runs never collide and
cleanup finds them all."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable
from typing import Any, TypeVar

from kubernetes.aio import client as aio_client
from kubernetes.aio.client.exceptions import ApiException

from api.quantities import Quantity
from api.workload_status import is_true
from controller.bench.live.staging import LiveError
from controller.bench.recorder import CLASS_LABEL
from controller.bench.report import Job
from controller.bench.scenario import Scenario
from controller.bench.simulate import FLAVOR, RESOURCE
from controller.kube.client import KUEUE_GROUP, KUEUE_VERSION

__all__ = ["FIELD_MANAGER", "RUNTIME_LABEL", "RUN_LABEL", "LiveCluster", "workload_body"]

T = TypeVar("T")

RUN_LABEL = "quotagate.bench/run"
RUNTIME_LABEL = "kueue.x-k8s.io/performance-scheduler-running-ms"
FIELD_MANAGER = "quotagate-bench"

_API_VERSION = f"{KUEUE_GROUP}/{KUEUE_VERSION}"


def _cpu(milli: int) -> str:
    return str(Quantity(milli))


class LiveCluster:
    """A run's queues: set up, named and cleaned up. `gate` bounds parallel requests."""

    def __init__(
        self,
        api_client: aio_client.ApiClient,
        scenario: Scenario,
        run_id: str,
        gate: asyncio.Semaphore,
    ) -> None:
        self.custom = aio_client.CustomObjectsApi(api_client)
        self.core = aio_client.CoreV1Api(api_client)
        self.scenario = scenario
        self.run_id = run_id
        self.gate = gate

    @property
    def labels(self) -> dict[str, str]:
        return {RUN_LABEL: self.run_id}

    @property
    def selector(self) -> str:
        return f"{RUN_LABEL}={self.run_id}"

    def name(self, queue: str) -> str:
        """The object name of a scenario queue (its ClusterQueue, Namespace and LocalQueue)."""
        return f"{queue}-{self.run_id}"

    def key_of(self, body: dict[str, Any]) -> str | None:
        """The scenario key (`queue/name`) of a Workload of this run, or None."""
        meta = body.get("metadata") or {}
        ns = str(meta.get("namespace") or "")
        suffix = f"-{self.run_id}"
        if not ns.endswith(suffix):
            return None
        return f"{ns[: -len(suffix)]}/{meta.get('name')}"

    async def guarded(self, call: Awaitable[T]) -> T:
        async with self.gate:
            return await call

    async def setup(self, timeout: float) -> None:
        """Flavor, namespaces and queues; then wait until every ClusterQueue is Active."""
        await self.custom.create_cluster_custom_object(
            KUEUE_GROUP,
            KUEUE_VERSION,
            "resourceflavors",
            {
                "apiVersion": _API_VERSION,
                "kind": "ResourceFlavor",
                "metadata": {"name": f"{FLAVOR}-{self.run_id}", "labels": self.labels},
                "spec": {},
            },
        )
        creations = []
        for name, cohort, qs in self.scenario.queues():
            quota: dict[str, Any] = {"name": RESOURCE, "nominalQuota": _cpu(qs.nominal)}
            if qs.borrowing_limit is not None:
                quota["borrowingLimit"] = _cpu(qs.borrowing_limit)
            cq = {
                "apiVersion": _API_VERSION,
                "kind": "ClusterQueue",
                "metadata": {
                    "name": self.name(name),
                    "labels": {**self.labels, CLASS_LABEL: qs.name},
                },
                "spec": {
                    "cohortName": self.name(cohort),
                    "namespaceSelector": {},
                    "resourceGroups": [
                        {
                            "coveredResources": [RESOURCE],
                            "flavors": [{"name": f"{FLAVOR}-{self.run_id}", "resources": [quota]}],
                        }
                    ],
                    "preemption": {
                        "reclaimWithinCohort": qs.reclaim_within_cohort,
                        "withinClusterQueue": qs.within_cluster_queue,
                    },
                },
            }
            creations.append(self._create_queue(name, cq))
        await asyncio.gather(*creations)
        await self._wait_active(timeout)

    async def _create_queue(self, name: str, cq: dict[str, Any]) -> None:
        ns = self.name(name)
        await self.guarded(
            self.core.create_namespace(
                {"metadata": {"name": ns, "labels": self.labels}}  # type: ignore[arg-type]
            )
        )
        await self.guarded(
            self.custom.create_cluster_custom_object(
                KUEUE_GROUP, KUEUE_VERSION, "clusterqueues", cq
            )
        )
        await self.guarded(
            self.custom.create_namespaced_custom_object(
                KUEUE_GROUP,
                KUEUE_VERSION,
                ns,
                "localqueues",
                {
                    "apiVersion": _API_VERSION,
                    "kind": "LocalQueue",
                    "metadata": {"name": ns, "namespace": ns, "labels": self.labels},
                    "spec": {"clusterQueue": ns},
                },
            )
        )

    async def _wait_active(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        wanted = {self.name(name) for name, _, _ in self.scenario.queues()}
        while True:
            listing: Any = await self.custom.list_cluster_custom_object(
                KUEUE_GROUP, KUEUE_VERSION, "clusterqueues", label_selector=self.selector
            )
            active = {
                item["metadata"]["name"]
                for item in listing.get("items") or ()
                if is_true(item, "Active")
            }
            if wanted <= active:
                return
            if time.monotonic() > deadline:
                missing = sorted(wanted - active)
                raise LiveError(
                    f"{len(missing)} ClusterQueues not Active after {timeout:.0f}s "
                    f"(e.g. {missing[0]}): is a Kueue-compatible controller running?"
                )
            await asyncio.sleep(0.5)

    async def cleanup(self) -> None:
        """Workloads, LocalQueues, namespaces, ClusterQueues and the flavor, by label."""
        names = [self.name(name) for name, _, _ in self.scenario.queues()]

        async def namespace(ns: str) -> None:
            for plural in ("workloads", "localqueues"):
                with contextlib.suppress(ApiException):
                    await self.guarded(
                        self.custom.delete_collection_namespaced_custom_object(
                            KUEUE_GROUP, KUEUE_VERSION, ns, plural, label_selector=self.selector
                        )
                    )
            with contextlib.suppress(ApiException):
                await self.guarded(self.core.delete_namespace(ns))

        await asyncio.gather(*(namespace(ns) for ns in names))
        for plural in ("clusterqueues", "resourceflavors"):
            with contextlib.suppress(ApiException):
                await self.custom.delete_collection_cluster_custom_object(
                    KUEUE_GROUP, KUEUE_VERSION, plural, label_selector=self.selector
                )


def workload_body(job: Job, namespace: str, labels: dict[str, str]) -> dict[str, Any]:
    """The bare Workload of a scenario job, as Kueue's generator writes it: one pod with
    the job's cpu request, `spec.priority`, and its class and runtime as labels."""
    return {
        "apiVersion": _API_VERSION,
        "kind": "Workload",
        "metadata": {
            "name": job.key.split("/", 1)[1],
            "namespace": namespace,
            "labels": {
                **labels,
                CLASS_LABEL: job.class_name,
                RUNTIME_LABEL: str(int(job.runtime * 1000)),
            },
        },
        "spec": {
            "queueName": namespace,
            "priority": job.priority,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "c",
                                    "image": "pause",
                                    "resources": {"requests": {RESOURCE: _cpu(job.request)}},
                                }
                            ],
                        }
                    },
                }
            ],
        },
    }
