"""One reconcile at a time per key, shared by the job and pod integrations: a kick while a
key's reconcile runs makes it go round once more instead of running beside it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, Generic, TypeVar

from kubernetes.aio.client.exceptions import ApiException

K = TypeVar("K", bound=Hashable)


class SerialReconciler(Generic[K]):
    """`kick(key)` runs `reconcile(key)` as a task while leading; `keep(key)` false after a
    round lets the key's lock go. 404 and 409 are expected races and not logged."""

    def __init__(
        self,
        reconcile: Callable[[K], Awaitable[None]],
        is_leading: Callable[[], bool],
        what: Callable[[K], str],
        log: logging.Logger,
        keep: Callable[[K], bool] = lambda key: True,
    ) -> None:
        self.reconcile, self.is_leading, self.what, self.log, self.keep = (
            reconcile,
            is_leading,
            what,
            log,
            keep,
        )
        self._locks: dict[K, asyncio.Lock] = {}
        self._dirty: set[K] = set()
        self.tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Awaitable[Any]) -> None:
        """Run `coro` as a task that is kept referenced until it ends."""
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def kick(self, key: K) -> None:
        if self.is_leading():
            self.spawn(self._run(key))

    async def _run(self, key: K) -> None:
        lock = self._locks.setdefault(key, asyncio.Lock())
        if lock.locked():
            self._dirty.add(key)  # the running reconcile goes round once more
            return
        async with lock:
            while True:
                self._dirty.discard(key)
                try:
                    await self.reconcile(key)
                except ApiException as exc:
                    if exc.status not in (404, 409):
                        self.log.warning(
                            "reconciling %s failed: %s %s", self.what(key), exc.status, exc.reason
                        )
                except Exception:
                    self.log.exception("reconciling %s failed", self.what(key))
                if key not in self._dirty:
                    break
            if not self.keep(key):
                self._locks.pop(key, None)
