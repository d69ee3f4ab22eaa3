"""List + watch straight into a sink: the high-volume resources bypass kopf.

kopf gives every object its own worker and waits a batching window per event; at
Kueue-benchmark rates (hundreds of Workload events a second, ten thousand objects) that
queue fell minutes behind and the state admitted against usage that had long been
released (docs/benchmark.md, "What the first live run showed"). Workloads are therefore
watched here: one stream, events applied in the order the API server sent them, each in
microseconds. So are the ClusterQueues and LocalQueues, whose status the controller itself
rewrites as their usage changes (kopf's handling of those echoes was 4 % of the
controller's CPU in a baseline run), and the pods and Jobs the integrations manage, with a
label selector the server applies (kopf's label filters run on the client, after every pod
of the cluster was streamed). The watch continues from a LIST's resourceVersion, and on 410
Gone or a broken connection it re-lists (objects gone from the list are applied as deleted)
and watches again. A refusal that will not go away by itself (401, 403: credentials or RBAC)
is fatal: the process stops and says so, rather than run blind.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Protocol

from kubernetes.aio import client as aio_client
from kubernetes.aio.client.exceptions import ApiException

from controller.kube.client import (
    CONNECTION_ERRORS,
    WORKLOADS,
    Api,
    Resource,
    describe,
    retrying,
)
from controller.kube.fatal import FatalError

__all__ = ["Informer", "WorkloadInformer"]

log = logging.getLogger(__name__)


class Sink(Protocol):
    """Where an informer's events go; `known_keys` are the `namespace/name` of the objects
    of the resource it holds (`/name` for a cluster-scoped one), so a re-list can tell it
    which ones are gone."""

    def apply_event(self, event_type: str | None, body: dict[str, Any]) -> None: ...

    def known_keys(self) -> set[str]: ...


class Informer:
    """List + watch one resource (all namespaces, or the listed ones; only the objects
    matching `label_selector` and `field_selector`, filtered by the server) into `sink`."""

    def __init__(
        self,
        api_client: aio_client.ApiClient,
        resource: Resource,
        sink: Sink,
        namespaces: list[str] | None = None,
        label_selector: str | None = None,
        watch_timeout: int = 300,
        on_listed: Callable[[], None] | None = None,
        await_api: bool = False,
        field_selector: str | None = None,
    ) -> None:
        self.api = Api(api_client)
        self.field_selector = field_selector
        self.resource = resource
        self.sink = sink
        self.namespaces = namespaces or []
        self.label_selector = label_selector
        self.watch_timeout = watch_timeout
        self.on_listed = on_listed  # told after every complete (re-)list
        # A resource the server may not serve yet (a CRD installed later): a 404 is
        # waited out, as Kueue waits for an integration's API (`WaitForAPI`).
        self.await_api = await_api
        self.events = 0

    async def run(self) -> None:
        if not self.namespaces:
            await self._inform(None)
            return
        async with asyncio.TaskGroup() as tasks:
            for namespace in self.namespaces:
                tasks.create_task(self._inform(namespace))
        # A namespace's watch never ends on its own: the group can only end normally when
        # its tasks were cancelled from outside (kopf cancels every task spawned after it
        # started when the process stops). So this is cancelled too, never "ended".
        raise asyncio.CancelledError

    async def _inform(self, namespace: str | None) -> None:
        backoff = 0.5
        missing = False
        while True:
            try:
                version = await self._relist(namespace)
                if missing:
                    log.info("the API server serves %s now", self.resource.plural)
                    missing = False
                backoff = 0.5
                while True:
                    version = await self._watch(namespace, version)
            except ApiException as exc:
                plural = self.resource.plural
                if exc.status == 410:
                    log.info("%s watch expired (410 Gone); re-listing", plural)
                    continue
                if exc.status == 404 and self.await_api:
                    if not missing:
                        log.info(
                            "the API server does not serve %s (%s) yet: waiting for its CRD",
                            plural,
                            self.resource.api_version,
                        )
                    missing = True
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, 30.0)
                    continue
                if exc.status in (401, 403):
                    raise FatalError(
                        f"not allowed to list/watch {plural}"
                        f"{f' in namespace {namespace}' if namespace else ''}: {exc.status} "
                        f"{exc.reason} (check the credentials and the ClusterRole's rules)"
                    ) from None
                log.warning("listing/watching %s failed: %s", plural, describe(exc))
            except CONNECTION_ERRORS as exc:
                log.warning(
                    "listing/watching %s failed: %s",
                    self.resource.plural,
                    exc or type(exc).__name__,
                )
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 30.0)

    async def _relist(self, namespace: str | None) -> str:
        resource = self.resource
        collection = Api.path(resource, None, namespace)
        params = {
            key: value
            for key, value in (
                ("labelSelector", self.label_selector),
                ("fieldSelector", self.field_selector),
            )
            if value
        } or None
        listing: Any = await retrying(lambda: self.api.request("GET", collection, params=params))
        present: set[str] = set()
        for item in listing.get("items") or ():
            item.setdefault("kind", resource.kind)
            item.setdefault("apiVersion", resource.api_version)
            meta = item.get("metadata") or {}
            present.add(f"{meta.get('namespace') or ''}/{meta.get('name')}")
            self.sink.apply_event(None, item)
        for key in self.sink.known_keys() - present:
            ns, _, name = key.partition("/")
            if namespace is None or ns == namespace:
                gone = {"namespace": ns, "name": name} if ns else {"name": name}
                self.sink.apply_event(
                    "DELETED",
                    {"kind": resource.kind, "apiVersion": resource.api_version, "metadata": gone},
                )
        if self.on_listed is not None:
            self.on_listed()
        return str((listing.get("metadata") or {}).get("resourceVersion") or "")

    async def _watch(self, namespace: str | None, version: str) -> str:
        """Apply events from `version` until the server ends the watch; the version to go
        on from (ApiException 410 when it expired)."""
        async for kind, body in self.api.watch(
            self.resource,
            namespace=namespace,
            resource_version=version,
            label_selector=self.label_selector,
            timeout_seconds=self.watch_timeout,
            field_selector=self.field_selector,
        ):
            version = str((body.get("metadata") or {}).get("resourceVersion") or version)
            if kind == "BOOKMARK":
                continue
            body.setdefault("kind", self.resource.kind)
            body.setdefault("apiVersion", self.resource.api_version)
            self.events += 1
            self.sink.apply_event(kind, body)
        return version


class WorkloadInformer(Informer):
    """The Workloads (all namespaces, or the listed ones) into `sink`."""

    def __init__(
        self,
        api_client: aio_client.ApiClient,
        sink: Sink,
        namespaces: list[str] | None = None,
        watch_timeout: int = 300,
        on_listed: Callable[[], None] | None = None,
        await_api: bool = False,
    ) -> None:
        super().__init__(api_client, WORKLOADS, sink, namespaces, None, watch_timeout, on_listed)
