"""Workloads straight from a watch: the high-volume resource bypasses kopf.

kopf gives every object its own worker and waits a batching window per event; at
Kueue-benchmark rates (hundreds of Workload events a second, ten thousand objects) that
queue fell minutes behind and the state admitted against usage that had long been
released (docs/benchmark.md, "What the first live run showed"). Workloads are therefore
watched here: one stream, events applied to the state in the order the API server sent
them, each in microseconds. The initial LIST comes from `Controller.load`; this watch
continues from a fresh LIST's resourceVersion, and on 410 Gone or a broken connection it
re-lists (objects gone from the list are applied as deleted) and watches again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Protocol

from kubernetes.aio import client as aio_client
from kubernetes.aio.client.exceptions import ApiException

from controller.runtime.kube import CONNECTION_ERRORS, WORKLOADS, Api, retrying

__all__ = ["WorkloadInformer"]

log = logging.getLogger(__name__)


class _Sink(Protocol):
    def apply_event(self, event_type: str | None, body: dict[str, Any]) -> None: ...

    def workload_keys(self) -> set[str]: ...


class WorkloadInformer:
    """List + watch Workloads (all namespaces, or the listed ones) into `sink`."""

    def __init__(
        self,
        api_client: aio_client.ApiClient,
        sink: _Sink,
        namespaces: list[str] | None = None,
        watch_timeout: int = 300,
        on_listed: Callable[[], None] | None = None,
    ) -> None:
        self.api = Api(api_client)
        self.sink = sink
        self.namespaces = namespaces or []
        self.watch_timeout = watch_timeout
        self.on_listed = on_listed  # told after every complete (re-)list
        self.events = 0

    async def run(self) -> None:
        if not self.namespaces:
            await self._inform(None)
            return
        async with asyncio.TaskGroup() as tasks:
            for namespace in self.namespaces:
                tasks.create_task(self._inform(namespace))

    async def _inform(self, namespace: str | None) -> None:
        backoff = 0.5
        while True:
            try:
                version = await self._relist(namespace)
                backoff = 0.5
                while True:
                    version = await self._watch(namespace, version)
            except ApiException as exc:
                if exc.status == 410:
                    log.info("Workload watch expired (410 Gone); re-listing")
                    continue
                log.warning("listing/watching Workloads failed: %s %s", exc.status, exc.reason)
            except CONNECTION_ERRORS as exc:
                log.warning("listing/watching Workloads failed: %s", exc or type(exc).__name__)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 30.0)

    async def _relist(self, namespace: str | None) -> str:
        collection = Api.path(WORKLOADS, None, namespace)
        listing: Any = await retrying(lambda: self.api.request("GET", collection))
        present: set[str] = set()
        for item in listing.get("items") or ():
            item.setdefault("kind", WORKLOADS.kind)
            item.setdefault("apiVersion", WORKLOADS.api_version)
            meta = item.get("metadata") or {}
            present.add(f"{meta.get('namespace')}/{meta.get('name')}")
            self.sink.apply_event(None, item)
        for key in self.sink.workload_keys() - present:
            ns, _, name = key.partition("/")
            if namespace is None or ns == namespace:
                self.sink.apply_event(
                    "DELETED",
                    {
                        "kind": WORKLOADS.kind,
                        "apiVersion": WORKLOADS.api_version,
                        "metadata": {"namespace": ns, "name": name},
                    },
                )
        if self.on_listed is not None:
            self.on_listed()
        return str((listing.get("metadata") or {}).get("resourceVersion") or "")

    async def _watch(self, namespace: str | None, version: str) -> str:
        """Apply events from `version` until the server ends the watch; the version to go
        on from (ApiException 410 when it expired)."""
        async for kind, body in self.api.watch(
            WORKLOADS,
            namespace=namespace,
            resource_version=version,
            timeout_seconds=self.watch_timeout,
        ):
            version = str((body.get("metadata") or {}).get("resourceVersion") or version)
            if kind == "BOOKMARK":
                continue
            body.setdefault("kind", WORKLOADS.kind)
            body.setdefault("apiVersion", WORKLOADS.api_version)
            self.events += 1
            self.sink.apply_event(kind, body)
        return version
