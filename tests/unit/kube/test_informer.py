"""controller/kube/informer.py: the watches of a namespace-restricted controller end as
cancelled, never as "ended", when something cancels them from outside (kopf cancels every
task spawned after it started when the process stops; a watch that "ended" is fatal and
the process would exit 1 instead of 0 on SIGTERM)."""

from __future__ import annotations

import asyncio
from typing import Any

from controller.kube.client import WORKLOADS
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
