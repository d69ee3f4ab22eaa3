"""One reconcile at a time per key, shared by the job and pod integrations: a kick while a
key's reconcile runs makes it go round once more instead of running beside it; a reconcile
that fails (the API server refused a Workload create, an unsuspend, an ungate) is retried
for that key after an exponential backoff, not left until some unrelated event."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, Generic, TypeVar

from kubernetes.aio.client.exceptions import ApiException

from controller.kube.client import CONNECTION_ERRORS, describe

K = TypeVar("K", bound=Hashable)


class SerialReconciler(Generic[K]):
    """`kick(key)` runs `reconcile(key)` as a task while leading; `keep(key)` false after a
    round lets the key's lock go. A failed round is retried after `base_delay · 2^(n−1)`
    seconds (n consecutive failures, capped at `max_delay`); a success resets the count.
    404 (the object is gone) ends it; 404 and 409 (a stale copy: the next event brings the
    newer one, and the retry covers it if none comes) are expected races and not logged."""

    def __init__(
        self,
        reconcile: Callable[[K], Awaitable[None]],
        is_leading: Callable[[], bool],
        what: Callable[[K], str],
        log: logging.Logger,
        keep: Callable[[K], bool] = lambda key: True,
        base_delay: float = 0.5,
        max_delay: float = 60.0,
    ) -> None:
        self.reconcile, self.is_leading, self.what, self.log, self.keep = (
            reconcile,
            is_leading,
            what,
            log,
            keep,
        )
        self.base_delay, self.max_delay = base_delay, max_delay
        self._locks: dict[K, asyncio.Lock] = {}
        self._dirty: set[K] = set()
        self._failures: dict[K, int] = {}
        self.tasks: set[asyncio.Task[Any]] = set()
        self.retries = 0  # retries scheduled, for tests and metrics

    def spawn(self, coro: Awaitable[Any]) -> None:
        """Run `coro` as a task that is kept referenced until it ends."""
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def kick(self, key: K) -> None:
        if self.is_leading():
            self.spawn(self._run(key))

    def cancel_all(self) -> None:
        """Leadership ended: cancel every reconcile in progress (their writes in flight are
        abandoned) and forget the retries; a new term resyncs every key."""
        for task in list(self.tasks):
            task.cancel()
        self._dirty.clear()
        self._failures.clear()

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
                    if exc.status == 404:
                        self._failures.pop(key, None)
                    else:
                        if exc.status != 409:
                            self.log.warning(
                                "reconciling %s failed: %s", self.what(key), describe(exc)
                            )
                        self._retry_later(key)
                except CONNECTION_ERRORS as exc:  # an outage: one line, no traceback
                    self.log.warning("reconciling %s failed: %s", self.what(key), exc)
                    self._retry_later(key)
                except Exception as exc:
                    self.log.warning(
                        "reconciling %s failed: %s", self.what(key), exc, exc_info=True
                    )
                    self._retry_later(key)
                else:
                    self._failures.pop(key, None)
                if key not in self._dirty:
                    break
            if not self.keep(key):
                self._locks.pop(key, None)

    def kick_later(self, key: K, delay: float) -> None:
        """`kick(key)` in `delay` seconds (a wait the key's reconcile asked for)."""
        asyncio.get_running_loop().call_later(delay, self.kick, key)

    def _retry_later(self, key: K) -> None:
        failures = self._failures[key] = self._failures.get(key, 0) + 1
        delay = min(self.max_delay, self.base_delay * 2 ** (failures - 1))
        self.retries += 1
        self.log.info("retrying %s in %.1fs (failure %d)", self.what(key), delay, failures)
        asyncio.get_running_loop().call_later(delay, self.kick, key)


class ObjectReconciles:
    """The part of `Integration` (framework/registry.py) shared by the integrations that keep
    their objects by `namespace/name` in `objects` and reconcile each with a
    `SerialReconciler` (`_serial`): the job framework's and the parent kinds'."""

    objects: dict[str, dict[str, Any]]
    _serial: SerialReconciler[str]

    def resync(self) -> None:
        for key in list(self.objects):
            self.kick(key)

    def stop_leading(self) -> None:
        """The term ended: cancel the reconciles in progress (`SerialReconciler.cancel_all`)."""
        self._serial.cancel_all()

    def known_keys(self) -> set[str]:
        return set(self.objects)

    def kick(self, key: str) -> None:
        self._serial.kick(key)
