"""controller/kube/informer.py: the watches of a namespace-restricted controller end as
cancelled, never as "ended", when something cancels them from outside (kopf cancels every
task spawned after it started when the process stops; a watch that "ended" is fatal and
the process would exit 1 instead of 0 on SIGTERM)."""

from __future__ import annotations

import asyncio
from typing import Any

from kubernetes.aio.client.exceptions import ApiException

from controller.kube.client import CLUSTER_QUEUES, LOCAL_QUEUES, WORKLOADS, Api
from controller.kube.informer import Informer


class _Sink:
    def apply_event(self, event_type: str | None, body: dict[str, Any]) -> None:
        pass

    def known_keys(self) -> set[str]:
        return set()


class _Blocking(Informer):
    """Lists nothing and watches forever, like a quiet API server."""

    async def _relist(self, namespace: str | None) -> str:
        return "1"

    async def _watch(self, namespace: str | None, version: str) -> str:
        await asyncio.Event().wait()
        return version


def test_a_namespaced_informer_is_cancelled_when_its_watches_are() -> None:
    async def scenario() -> asyncio.Task[None]:
        informer = _Blocking(None, WORKLOADS, _Sink(), ["a", "b"])  # type: ignore[arg-type]
        task = asyncio.ensure_future(informer.run())
        await asyncio.sleep(0.01)
        for other in asyncio.all_tasks():  # what kopf does at shutdown, minus these two
            if other is not task and other is not asyncio.current_task():
                other.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return task

    task = asyncio.run(scenario())
    assert task.cancelled()


class _Recording:
    def __init__(self, known: set[str]) -> None:
        self.known = known
        self.events: list[tuple[str | None, dict[str, Any]]] = []

    def apply_event(self, event_type: str | None, body: dict[str, Any]) -> None:
        self.events.append((event_type, body))

    def known_keys(self) -> set[str]:
        return self.known


def _relisted(resource: Any, items: list[dict[str, Any]], known: set[str]) -> _Recording:
    """Re-list `resource` returning `items` to a sink that holds `known`."""
    sink = _Recording(known)
    informer = Informer(None, resource, sink)  # type: ignore[arg-type]

    async def request(method: str, path: str, **_: Any) -> dict[str, Any]:
        assert (method, path) == ("GET", Api.path(resource, None))
        return {"metadata": {"resourceVersion": "7"}, "items": items}

    informer.api.request = request  # type: ignore[method-assign]
    assert asyncio.run(informer._relist(None)) == "7"
    return sink


def test_a_relist_of_cluster_scoped_queues_deletes_only_those_gone() -> None:
    """ClusterQueues are keyed `/name`: a re-list applies the listed ones and deletes, by
    name and without a namespace, the ones the sink holds that are gone."""
    sink = _relisted(CLUSTER_QUEUES, [{"metadata": {"name": "kept"}}], {"/kept", "/gone"})
    assert [(t, b["metadata"]) for t, b in sink.events] == [
        (None, {"name": "kept"}),
        ("DELETED", {"name": "gone", "resourceVersion": "7"}),
    ]
    assert all(b["kind"] == "ClusterQueue" for _, b in sink.events)


def test_a_relist_of_namespaced_queues_deletes_by_namespace_and_name() -> None:
    items = [{"metadata": {"namespace": "a", "name": "lq"}}]
    sink = _relisted(LOCAL_QUEUES, items, {"a/lq", "b/lq"})
    assert [(t, b["metadata"]) for t, b in sink.events] == [
        (None, {"namespace": "a", "name": "lq"}),
        ("DELETED", {"namespace": "b", "name": "lq", "resourceVersion": "7"}),
    ]


class _Observer:
    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    def watch_up(self, resource: str, up: bool) -> None:
        self.calls.append(("up" if up else "down", resource))

    def watch_event(self, resource: str) -> None:
        self.calls.append(("event", resource))

    def relisted(self, resource: str, seconds: float, objects: int) -> None:
        self.calls.append(("relisted", resource, str(objects)))

    def watch_expired(self, resource: str) -> None:
        self.calls.append(("expired", resource))


class _Outage(Informer):
    """Lists once at version 10; its watches go: an event at 11, a broken connection, an
    event at 12 (resumed from 11, not re-listed), 410 Gone, then (after the re-list at
    20) quiet."""

    def __init__(self, observer: _Observer) -> None:
        super().__init__(None, WORKLOADS, _Recording(set()), observer=observer)  # type: ignore[arg-type]
        self.watched_from: list[str] = []
        self.script = ["11", ConnectionResetError("reset"), "12", ApiException(status=410)]

    async def _relist(self, namespace: str | None) -> str:
        self.relists += 1
        return "10" if self.relists == 1 else "20"

    async def _watch(self, namespace: str | None, version: str) -> str:
        self.watched_from.append(version)
        step = self.script.pop(0) if self.script else None
        if step is None:
            await asyncio.Event().wait()
        if isinstance(step, BaseException):
            raise step
        assert self.observer is not None
        self.observer.watch_event("workloads")
        return str(step)


def test_a_broken_watch_resumes_where_it_was_and_a_gone_one_lists_again(
    monkeypatch: Any,
) -> None:
    monkeypatch.setattr("controller.kube.informer.FIRST_BACKOFF", 0.0)
    observer = _Observer()
    informer = _Outage(observer)

    async def scenario() -> None:
        task = asyncio.ensure_future(informer._inform(None))
        while informer.script or len(informer.watched_from) < 5:
            await asyncio.sleep(0.01)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(scenario())
    assert informer.watched_from == ["10", "11", "11", "12", "20"]
    assert informer.relists == 2
    assert ("down", "workloads") in observer.calls
    assert ("expired", "workloads") in observer.calls
