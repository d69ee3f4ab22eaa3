"""The cost controller process: list + watch Workloads, write `status.preemptionCost`.

A plain list/watch loop on the official client (low volume; no operator framework, so the
process needs exactly the RBAC KEP-7990 names: get/list/watch workloads, patch
workloads/status). Every `resync` seconds everything is listed and re-evaluated, so
time-based policies move on without events; a 410 Gone re-lists at once.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException
from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server

from controller.core.quantities import Quantity
from costcontroller.policy import Clock, CostPolicy
from costcontroller.reconcile import decide

log = logging.getLogger(__name__)

GROUP, VERSION, PLURAL = "kueue.x-k8s.io", "v1beta2", "workloads"
FIELD_MANAGER = "quotagate-cost-controller"


class CostMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.patches = Counter(
            "quotagate_cost_patches", "preemptionCost patches written", registry=self.registry
        )
        self.policy_errors = Counter(
            "quotagate_cost_policy_errors",
            "Policy results refused (exception, wrong type, out of range, …)",
            ["reason"],
            registry=self.registry,
        )
        self.reconcile_duration = Histogram(
            "quotagate_cost_reconcile_duration_seconds",
            "Time to evaluate and (if needed) patch one Workload",
            registry=self.registry,
        )


class CostController:
    def __init__(
        self,
        api_client: client.ApiClient,
        policy: CostPolicy,
        max_cost: Quantity,
        resync: float = 30.0,
        clock: Clock = time.time,
        metrics: CostMetrics | None = None,
    ) -> None:
        self.custom = client.CustomObjectsApi(api_client)
        self.policy = policy
        self.max_cost = max_cost
        self.resync = resync
        self.clock = clock
        self.metrics = metrics or CostMetrics()
        self.stop = threading.Event()

    def reconcile(self, body: dict[str, Any]) -> None:
        started = time.perf_counter()
        try:
            decision = decide(body, self.policy, self.clock, self.max_cost)
            if decision.error is not None:
                log.warning("cost not written: %s", decision.error)
                self.metrics.policy_errors.labels(decision.error_kind or "error").inc()
                return
            if decision.patch is None:
                return
            meta = body["metadata"]
            try:
                self.custom.patch_namespaced_custom_object_status(
                    GROUP,
                    VERSION,
                    meta["namespace"],
                    PLURAL,
                    meta["name"],
                    decision.patch,
                    field_manager=FIELD_MANAGER,
                )
            except ApiException as exc:
                if exc.status != 404:
                    log.warning(
                        "patching %s/%s failed: %s %s",
                        meta["namespace"],
                        meta["name"],
                        exc.status,
                        exc.reason,
                    )
                return
            self.metrics.patches.inc()
            log.info(
                "preemptionCost of %s/%s set to %s",
                meta["namespace"],
                meta["name"],
                decision.patch["status"]["preemptionCost"],
            )
        finally:
            self.metrics.reconcile_duration.observe(time.perf_counter() - started)

    def run(self) -> None:
        """List, then watch until the resync interval; repeat until `stop` is set."""
        while not self.stop.is_set():
            try:
                listing: Any = self.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)
            except ApiException as exc:
                log.error("listing workloads failed: %s %s", exc.status, exc.reason)
                self.stop.wait(2)
                continue
            for item in listing.get("items") or []:
                item.setdefault("apiVersion", f"{GROUP}/{VERSION}")
                item.setdefault("kind", "Workload")
                self.reconcile(item)
            version = (listing.get("metadata") or {}).get("resourceVersion")
            self._watch(version)

    def _watch(self, version: str | None) -> None:
        stream = watch.Watch()
        deadline = time.monotonic() + self.resync
        try:
            for event in stream.stream(
                self.custom.list_cluster_custom_object,
                GROUP,
                VERSION,
                PLURAL,
                resource_version=version,
                timeout_seconds=max(1, int(self.resync)),
            ):
                if self.stop.is_set() or time.monotonic() > deadline:
                    break
                if event["type"] in ("ADDED", "MODIFIED"):
                    self.reconcile(event["object"])
        except ApiException as exc:
            if exc.status != 410:
                log.warning("watch ended: %s %s", exc.status, exc.reason)
        except Exception as exc:  # a dropped connection: re-list
            log.warning("watch interrupted: %s", exc)
        finally:
            stream.stop()


def serve_metrics(metrics: CostMetrics, port: int) -> None:
    if port:
        start_http_server(port, registry=metrics.registry)
