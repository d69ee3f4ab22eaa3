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
of the cluster was streamed).

The watch continues from a LIST's resourceVersion. A broken connection or a server error
resumes it from the last resourceVersion seen, as client-go's reflector does (nothing is
missed: the API server sends every event after it), after a backoff of 0.5 s doubling to at
most MAX_BACKOFF; when the API server no longer has that version (410 Gone: it restarted,
or its watch cache moved on) the informer re-lists at once (objects gone from the list are
applied as deleted) and watches again. It never gives up on an outage. A refusal that will
not go away by itself (401, 403: credentials or RBAC) is fatal: the process stops and says
so, rather than run blind. A `WatchObserver` is told all of it (the controller's metrics).
"""

from __future__ import annotations

import asyncio
import logging
import time
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

__all__ = [
    "FIRST_BACKOFF",
    "MAX_BACKOFF",
    "Informer",
    "ObjectCache",
    "WatchObserver",
    "WorkloadInformer",
]

log = logging.getLogger(__name__)

FIRST_BACKOFF = 0.5  # seconds before the first retry after a failure
MAX_BACKOFF = 4.0  # and at most this long between retries: an API server back is seen soon


class Sink(Protocol):
    """Where an informer's events go; `known_keys` are the `namespace/name` of the objects
    of the resource it holds (`/name` for a cluster-scoped one), so a re-list can tell it
    which ones are gone."""

    def apply_event(self, event_type: str | None, body: dict[str, Any]) -> None: ...

    def known_keys(self) -> set[str]: ...


class ObjectCache:
    """A resource's objects as its watch last showed them: a `Sink` that keeps them by
    `namespace/name` (`/name` when cluster-scoped), `listed` once its first complete list
    is in; `on_change` is called after every event and after that list."""

    def __init__(self, on_change: Callable[[], None]) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.listed = False
        self._on_change = on_change

    def apply_event(self, event_type: str | None, body: dict[str, Any]) -> None:
        meta = body.get("metadata") or {}
        key = f"{meta.get('namespace') or ''}/{meta.get('name')}"
        if event_type == "DELETED":
            self.objects.pop(key, None)
        else:
            self.objects[key] = body
        self._on_change()

    def known_keys(self) -> set[str]:
        return set(self.objects)

    def mark_listed(self) -> None:
        self.listed = True
        self._on_change()


class WatchObserver(Protocol):
    """Told what an informer goes through, by resource plural (metrics, alerts)."""

    def watch_up(self, resource: str, up: bool) -> None:
        """The last list or watch call answered (True) or failed (False)."""

    def watch_event(self, resource: str) -> None:
        """An event arrived (bookmarks included): the watch is alive."""

    def relisted(self, resource: str, seconds: float, objects: int) -> None:
        """A complete (re-)list of `objects` took `seconds`."""

    def watch_expired(self, resource: str) -> None:
        """The API server answered 410 Gone: a re-list follows."""


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
        observer: WatchObserver | None = None,
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
        self.observer = observer
        self.events = 0
        self.relists = 0

    async def run(self) -> None:
        if not self.namespaces:
            await self._inform(None)
            return
        try:
            async with asyncio.TaskGroup() as tasks:
                for namespace in self.namespaces:
                    tasks.create_task(self._inform(namespace))
        except ExceptionGroup as group:
            # One namespace's refusal (401, 403) says why, not "unhandled errors in a
            # TaskGroup".
            fatal = group.subgroup(lambda exc: isinstance(exc, FatalError))
            if fatal is not None:
                raise fatal.exceptions[0] from None
            raise
        # A namespace's watch never ends on its own: the group can only end normally when
        # its tasks were cancelled from outside (kopf cancels every task spawned after it
        # started when the process stops). So this is cancelled too, never "ended".
        raise asyncio.CancelledError

    async def _inform(self, namespace: str | None) -> None:
        plural = self.resource.plural
        observer = self.observer
        backoff = FIRST_BACKOFF
        version = ""  # where the watch goes on from; empty: list first
        missing = False
        while True:
            events = self.events
            try:
                if not version:
                    version = await self._relist(namespace)
                    backoff = FIRST_BACKOFF
                    if missing:
                        log.info("the API server serves %s now", plural)
                        missing = False
                while True:
                    version = await self._watch(namespace, version)
                    backoff = FIRST_BACKOFF  # the server ended a watch that worked
            except ApiException as exc:
                if exc.status == 410:
                    log.info("%s watch expired (410 Gone): re-listing", plural)
                    if observer is not None:
                        observer.watch_expired(plural)
                    version = ""
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
                    "listing/watching %s failed: %s", plural, str(exc) or type(exc).__name__
                )
            if observer is not None:
                observer.watch_up(plural, False)
            if self.events > events:
                backoff = FIRST_BACKOFF  # it failed after working for a while
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF)

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
        started = time.monotonic()
        listing: Any = await retrying(lambda: self.api.request("GET", collection, params=params))
        version = str((listing.get("metadata") or {}).get("resourceVersion") or "")
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
                # Gone as of the list's resourceVersion: a sink that keeps the newest copy
                # (the Workloads') drops an older one, keeps one that is newer (made again
                # after the list).
                gone: dict[str, str] = {"namespace": ns, "name": name} if ns else {"name": name}
                if version:
                    gone["resourceVersion"] = version
                self.sink.apply_event(
                    "DELETED",
                    {"kind": resource.kind, "apiVersion": resource.api_version, "metadata": gone},
                )
        self.relists += 1
        seconds = time.monotonic() - started
        log.info("listed %d %s in %.2fs", len(present), resource.plural, seconds)
        if self.observer is not None:
            self.observer.watch_up(resource.plural, True)
            self.observer.relisted(resource.plural, seconds, len(present))
        if self.on_listed is not None:
            self.on_listed()
        return version

    async def _watch(self, namespace: str | None, version: str) -> str:
        """Apply events from `version` until the server ends the watch; the version to go
        on from (ApiException 410 when it expired)."""
        observer, plural = self.observer, self.resource.plural
        async for kind, body in self.api.watch(
            self.resource,
            namespace=namespace,
            resource_version=version,
            label_selector=self.label_selector,
            timeout_seconds=self.watch_timeout,
            field_selector=self.field_selector,
        ):
            version = str((body.get("metadata") or {}).get("resourceVersion") or version)
            if observer is not None:
                observer.watch_event(plural)
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
        observer: WatchObserver | None = None,
    ) -> None:
        super().__init__(
            api_client,
            WORKLOADS,
            sink,
            namespaces,
            None,
            watch_timeout,
            on_listed,
            await_api=await_api,
            observer=observer,
        )
