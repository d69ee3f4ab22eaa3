"""The cost controller process: an informer over Workloads and one worker that writes
`status.preemptionCost`.

All Workloads are listed once, then watched from the list's resourceVersion; the latest copy
of each is kept in memory. Every change puts the Workload's key on a de-duplicating queue,
and every `resync` seconds all keys are queued again, so time-based policies move on without
events. A 410 Gone (the resourceVersion expired) or a broken connection re-lists. One worker
takes keys off the queue and reconciles the latest copy, so there is never more than one
write in flight per Workload.

It needs exactly the RBAC of KEP-7990 ("Security, Privacy, and RBAC"): get/list/watch
workloads and patch workloads/status — plus create on Events, to tell a Workload's owner
why its cost was not written.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import aiohttp
from kubernetes.aio import client as aio_client
from kubernetes.aio.client.exceptions import ApiException
from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server

from api.constants import GROUP, VERSION
from api.quantities import Quantity
from controller.kube.client import MERGE_PATCH, describe
from controller.kube.fatal import FatalError
from controller.kube.informer import WorkloadInformer
from controller.kube.retries import retried
from controller.kube.workqueue import KeyQueue
from costcontroller.policy import Clock, CostPolicy
from costcontroller.reconcile import decide

log = logging.getLogger(__name__)

PLURAL = "workloads"
FIELD_MANAGER = "quotagate-cost-controller"
EVENT_REASON = "PreemptionCostRejected"

Key = tuple[str, str]
"""(namespace, name) of a Workload."""

# What a broken connection looks like from the asyncio client (ApiException is separate).
CONNECTION_ERRORS = (aiohttp.ClientError, OSError, asyncio.TimeoutError)


class CostMetrics:
    """The controller's Prometheus metrics, on a registry of their own."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.patches = Counter(
            "quotagate_cost_patches", "preemptionCost patches written", registry=self.registry
        )
        self.policy_errors = Counter(
            "quotagate_cost_policy_errors",
            "Policy results refused (exception, wrong_type, not_finite, out_of_range, "
            "invalid_workload); the field is left unchanged",
            ["reason"],
            registry=self.registry,
        )
        self.patch_errors = Counter(
            "quotagate_cost_patch_errors",
            "preemptionCost patches the API server refused or that could not be sent",
            registry=self.registry,
        )
        self.reconcile_duration = Histogram(
            "quotagate_cost_reconcile_duration_seconds",
            "Time to evaluate and (if needed) patch one Workload",
            registry=self.registry,
        )

    def serve(self, port: int) -> None:
        """Serve /metrics on `port` (0 = off)."""
        if port:
            try:
                start_http_server(port, registry=self.registry)
            except OSError as exc:
                raise FatalError(
                    f"cannot serve metrics on port {port}: {exc.strerror or exc} "
                    "(--metrics-port; 0 turns metrics off)"
                ) from None


def key_of(body: dict[str, Any]) -> Key:
    meta = body.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))


class CostController:
    """Keeps `status.preemptionCost` of every Workload equal to what `policy` says."""

    def __init__(
        self,
        api_client: aio_client.ApiClient,
        policy: CostPolicy,
        max_cost: Quantity,
        *,
        resync: float = 30.0,
        clock: Clock = time.time,
        metrics: CostMetrics | None = None,
        watch_timeout: int = 240,
        sleep: Callable[[float], Any] = asyncio.sleep,
    ) -> None:
        self.custom = aio_client.CustomObjectsApi(api_client)
        self.core = aio_client.CoreV1Api(api_client)
        self.policy = policy
        self.max_cost = max_cost
        self.resync = resync
        self.clock = clock
        self.metrics = metrics or CostMetrics()
        self.watch_timeout = watch_timeout
        self.sleep = sleep
        self.workloads: dict[Key, dict[str, Any]] = {}
        self.synced = asyncio.Event()
        self.on_synced: Callable[[], None] | None = None  # told after every complete list
        self._queue: KeyQueue[Key] = KeyQueue()
        self._reported: dict[Key, str] = {}  # the last refusal reported per Workload

    # --- the informer -------------------------------------------------------------------

    async def run(self) -> None:
        """Inform, resync and work until cancelled."""
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(self._inform())
            tasks.create_task(self._resync())
            tasks.create_task(self._work())

    def enqueue(self, key: Key) -> None:
        self._queue.add(key)

    def forget(self, key: Key) -> None:
        self.workloads.pop(key, None)
        self._reported.pop(key, None)

    async def _inform(self) -> None:
        """List + watch every Workload (re-listing on 410 or a broken connection)."""
        await WorkloadInformer(
            self.custom.api_client,
            self,
            watch_timeout=self.watch_timeout,
            on_listed=self._listed,
        ).run()

    def _listed(self) -> None:
        self.synced.set()
        if self.on_synced is not None:
            self.on_synced()

    def known_keys(self) -> set[str]:
        return {f"{namespace}/{name}" for namespace, name in self.workloads}

    def apply_event(self, kind: str | None, body: dict[str, Any]) -> None:
        if kind == "BOOKMARK":
            return
        key = key_of(body)
        if kind == "DELETED":
            self.forget(key)
            return
        body.setdefault("apiVersion", f"{GROUP}/{VERSION}")
        body.setdefault("kind", "Workload")
        self.workloads[key] = body
        self.enqueue(key)

    async def _resync(self) -> None:
        if self.resync <= 0:
            return
        while True:
            await self.sleep(self.resync)
            for key in list(self.workloads):
                self.enqueue(key)

    async def _work(self) -> None:
        while True:
            key = await self._queue.get()
            body = self.workloads.get(key)
            if body is None:
                continue
            try:
                await self.reconcile(body)
            except Exception:  # a bug must not stop the other Workloads' costs
                log.exception("reconciling Workload %s/%s failed", *key)

    # --- one Workload -------------------------------------------------------------------

    async def reconcile(self, body: dict[str, Any]) -> None:
        """Evaluate the policy for one Workload and write the cost if it changed."""
        started = time.perf_counter()
        try:
            await self._reconcile(body)
        finally:
            self.metrics.reconcile_duration.observe(time.perf_counter() - started)

    async def _reconcile(self, body: dict[str, Any]) -> None:
        key = key_of(body)
        decision = decide(body, self.policy, self.clock, self.max_cost)
        if decision.error is not None:
            self.metrics.policy_errors.labels(decision.error_kind or "error").inc()
            await self._report(key, body, decision.error)
            return
        self._reported.pop(key, None)
        if decision.patch is None:
            return
        namespace, name = key
        patch = decision.patch
        try:
            updated = await retried(
                lambda: self.custom.patch_namespaced_custom_object_status(
                    GROUP,
                    VERSION,
                    namespace,
                    PLURAL,
                    name,
                    patch,
                    field_manager=FIELD_MANAGER,
                    _content_type=MERGE_PATCH,
                )
            )
        except ApiException as exc:
            if exc.status == 404:  # deleted meanwhile; the watch will say so
                return
            self.metrics.patch_errors.inc()
            log.warning(
                "patching preemptionCost of %s/%s failed: %s", namespace, name, describe(exc)
            )
            return
        except CONNECTION_ERRORS as exc:
            self.metrics.patch_errors.inc()
            log.warning("patching preemptionCost of %s/%s failed: %s", namespace, name, exc)
            return
        self.metrics.patches.inc()
        if key in self.workloads and isinstance(updated, dict):
            self.workloads[key] = updated  # so a resync before the watch event writes nothing
        log.info(
            "preemptionCost of %s/%s set to %s",
            namespace,
            name,
            patch["status"]["preemptionCost"],
        )

    async def _report(self, key: Key, body: dict[str, Any], message: str) -> None:
        """Log a refused policy result and record it as a Warning Event on the Workload —
        once per distinct message, not at every resync."""
        if self._reported.get(key) == message:
            log.debug("preemptionCost still not written: %s", message)
            return
        self._reported[key] = message
        log.warning("preemptionCost not written: %s", message)
        namespace, name = key
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        event: Any = {
            "metadata": {"generateName": f"{name}.", "namespace": namespace},
            "involvedObject": {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "Workload",
                "namespace": namespace,
                "name": name,
                "uid": (body.get("metadata") or {}).get("uid"),
            },
            "reason": EVENT_REASON,
            "message": message[:1000],
            "type": "Warning",
            "source": {"component": FIELD_MANAGER},
            "reportingComponent": FIELD_MANAGER,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            await self.core.create_namespaced_event(namespace, event)
        except (ApiException, *CONNECTION_ERRORS) as exc:
            log.debug("recording the Event for %s/%s failed: %s", namespace, name, exc)
