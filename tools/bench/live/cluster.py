"""The live run's objects on the API server, in Kueue's v1beta2 API as Kueue's performance
runner creates them: ResourceFlavor `rf`; per ClusterQueue a Namespace of the same name,
the ClusterQueue (cohort, cpu quota, preemption policy, `namespaceSelector: {}`, its class
as the label Kueue's generator sets) and a LocalQueue; and the scenario's bare Workloads.
A scenario with a tree (quotagate's extension) also gets its Cohort objects, created
before the ClusterQueues: the parent cohorts (parent, cpu quota and limits, weight) and
the generated cohorts that have a parent or a weight; and the ClusterQueues their
`spec.fairSharing.weight`. Every name carries the run id and every object the run's
label, so runs never collide and cleanup finds them all."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from decimal import Decimal
from fractions import Fraction
from typing import Any, TextIO, TypeVar

from kubernetes.aio import client as aio_client
from kubernetes.aio.client.exceptions import ApiException

from api.quantities import Quantity
from api.workload_status import is_true
from controller.kube.client import KUEUE_GROUP, KUEUE_VERSION, Api
from tools.bench.live.staging import LiveError
from tools.bench.live.tas_nodes import TASObjects, topology_request
from tools.bench.recorder import CLASS_LABEL
from tools.bench.report import Job
from tools.bench.scenario import ParentCohort, QueueSet, Scenario
from tools.bench.simulate import FLAVOR, RESOURCE

__all__ = [
    "FIELD_MANAGER",
    "RUNTIME_LABEL",
    "RUN_LABEL",
    "LiveCluster",
    "cluster_queue_body",
    "cohort_bodies",
    "workload_body",
]

T = TypeVar("T")

RUN_LABEL = "quotagate.bench/run"
RUNTIME_LABEL = "kueue.x-k8s.io/performance-scheduler-running-ms"
FIELD_MANAGER = "quotagate-bench"

_API_VERSION = f"{KUEUE_GROUP}/{KUEUE_VERSION}"


def _cpu(milli: int) -> str:
    return str(Quantity(milli))


def _weight(weight: Fraction) -> str:
    """A weight as a quantity, exactly (a scenario's weights are decimal)."""
    if (weight * 1000).denominator == 1:
        return str(Quantity(int(weight * 1000)))
    return str(Decimal(weight.numerator) / Decimal(weight.denominator))


def _cpu_groups(flavor: str, quota: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "coveredResources": [RESOURCE],
            "flavors": [{"name": flavor, "resources": [{"name": RESOURCE, **quota}]}],
        }
    ]


def _parent_cohort_quota(pc: ParentCohort) -> dict[str, Any] | None:
    if not pc.has_quota:
        return None
    quota = {"nominalQuota": _cpu(pc.nominal or 0)}
    for key, limit in (("borrowingLimit", pc.borrowing_limit), ("lendingLimit", pc.lending_limit)):
        if limit is not None:
            quota[key] = _cpu(limit)
    return quota


def cohort_bodies(
    scenario: Scenario, name: Callable[[str], str], flavor: str, labels: dict[str, str]
) -> list[dict[str, Any]]:
    """The scenario's Cohort objects (`name` gives a cohort's object name, `flavor` the
    flavor's): its parent cohorts, then the generated cohorts with a parent or a weight."""

    def body(
        cohort: str, parent: str | None, quota: dict[str, Any] | None, weight: Fraction | None
    ) -> dict[str, Any]:
        spec: dict[str, Any] = {}
        if parent is not None:
            spec["parentName"] = name(parent)
        if quota is not None:
            spec["resourceGroups"] = _cpu_groups(flavor, quota)
        if weight is not None:
            spec["fairSharing"] = {"weight": _weight(weight)}
        return {
            "apiVersion": _API_VERSION,
            "kind": "Cohort",
            "metadata": {"name": name(cohort), "labels": labels},
            "spec": spec,
        }

    bodies = [
        body(pc.name, pc.parent, _parent_cohort_quota(pc), pc.weight)
        for pc in scenario.parent_cohorts
    ]
    bodies += [
        body(f"{cs.name}-{c}", cs.parent, None, cs.weight)
        for cs in scenario.cohort_sets
        if cs.explicit
        for c in range(cs.count)
    ]
    return bodies


def cluster_queue_body(
    name: str, cohort: str, qs: QueueSet, flavor: str, labels: dict[str, str]
) -> dict[str, Any]:
    """A scenario ClusterQueue (object names given): Kueue's generator's, with
    `spec.fairSharing.weight` when the queue set has a weight."""
    quota: dict[str, Any] = {"nominalQuota": _cpu(qs.nominal)}
    if qs.borrowing_limit is not None:
        quota["borrowingLimit"] = _cpu(qs.borrowing_limit)
    spec: dict[str, Any] = {
        "cohortName": cohort,
        "namespaceSelector": {},
        "resourceGroups": _cpu_groups(flavor, quota),
        "preemption": {
            "reclaimWithinCohort": qs.reclaim_within_cohort,
            "withinClusterQueue": qs.within_cluster_queue,
        },
    }
    if qs.weight is not None:
        spec["fairSharing"] = {"weight": _weight(qs.weight)}
    return {
        "apiVersion": _API_VERSION,
        "kind": "ClusterQueue",
        "metadata": {"name": name, "labels": {**labels, CLASS_LABEL: qs.name}},
        "spec": spec,
    }


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
        self.api = Api(api_client)
        self.tas = None if scenario.tas is None else TASObjects(scenario.tas, run_id, self.labels)

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

    @property
    def flavor(self) -> str:
        return f"{FLAVOR}-{self.run_id}"

    async def setup(self, timeout: float, progress: TextIO | None = None) -> None:
        """A TAS scenario's nodes and Topology; flavor, Cohorts, namespaces and queues; then
        wait until every ClusterQueue is Active (the Cohorts exist before any ClusterQueue
        names them)."""
        if self.tas is not None:
            started = time.monotonic()
            nodes = await self.tas.create(self.api, self.gate)
            if progress is not None:
                progress.write(
                    f"created {nodes} Ready nodes and Topology {self.tas.topology} in "
                    f"{time.monotonic() - started:.1f}s\n"
                )
        await self.custom.create_cluster_custom_object(
            KUEUE_GROUP,
            KUEUE_VERSION,
            "resourceflavors",
            {
                "apiVersion": _API_VERSION,
                "kind": "ResourceFlavor",
                "metadata": {"name": self.flavor, "labels": self.labels},
                "spec": {} if self.tas is None else self.tas.flavor_spec(),
            },
        )
        await asyncio.gather(
            *(
                self.guarded(
                    self.custom.create_cluster_custom_object(
                        KUEUE_GROUP, KUEUE_VERSION, "cohorts", body
                    )
                )
                for body in cohort_bodies(self.scenario, self.name, self.flavor, self.labels)
            )
        )
        creations = []
        for name, cohort, qs in self.scenario.queues():
            cq = cluster_queue_body(
                self.name(name), self.name(cohort), qs, self.flavor, self.labels
            )
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
        """Workloads, LocalQueues, namespaces, ClusterQueues, Cohorts and the flavor, by
        label."""
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
        for plural in ("clusterqueues", "cohorts", "resourceflavors"):
            with contextlib.suppress(ApiException):
                await self.custom.delete_collection_cluster_custom_object(
                    KUEUE_GROUP, KUEUE_VERSION, plural, label_selector=self.selector
                )
        if self.tas is not None:
            await self.tas.cleanup(self.api, self.selector)


def workload_body(job: Job, namespace: str, labels: dict[str, str]) -> dict[str, Any]:
    """The bare Workload of a scenario job, as Kueue's generator writes it: one pod set
    `main` of the job's pods (one, or a TAS class's `podCount`, each with its share of the
    cpu request, and its `topologyRequest`), `spec.priority`, and its class and runtime as
    labels."""
    pod_set: dict[str, Any] = {
        "name": "main",
        "count": job.pods,
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "c",
                        "image": "pause",
                        "resources": {"requests": {RESOURCE: _cpu(job.request // job.pods)}},
                    }
                ],
            }
        },
    }
    if job.topology is not None:
        pod_set["topologyRequest"] = topology_request(job.topology)
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
            "podSets": [pod_set],
        },
    }
