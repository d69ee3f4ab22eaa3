"""Kubernetes Events on Workloads for every decision, deduplicated like kubectl expects.

An identical (object, type, reason, message) within `dedupe_seconds` is counted on the
existing Event instead of creating a new one, so a Workload pending for the same reason
does not flood the namespace.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import aiohttp
from kubernetes.aio.client.exceptions import ApiException

from controller.kube.client import Api

log = logging.getLogger(__name__)

COMPONENT = "quotagate-controller"
_MAX_RECENT = 10_000


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class TokenBucket:
    """`rate` tokens a second up to `burst`; `take()` spends one if there is one."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float]) -> None:
        self.rate, self.burst, self.clock = rate, burst, clock
        self.tokens = float(burst)
        self.at = clock()

    def take(self) -> bool:
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True

    async def spend(self) -> None:
        """Take a token, waiting for one if there is none."""
        while not self.take():
            await asyncio.sleep((1 - self.tokens) / self.rate)


class EventRecorder:
    """Creates core/v1 Events; failures are logged, never raised (events are best effort).
    At most `qps` a second beyond a `burst` (as the kubelet limits its Events), so a storm
    of decisions never turns into a storm of API calls; the excess is dropped and counted."""

    def __init__(
        self,
        api: Api,
        component: str = COMPONENT,
        dedupe_seconds: float = 300.0,
        qps: float = 50.0,
        burst: int = 100,
        on_drop: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = api
        self.component = component
        self.dedupe_seconds = dedupe_seconds
        self.clock = clock
        self.limit = TokenBucket(qps, burst, clock)
        self.on_drop = on_drop
        self.host = os.environ.get("HOSTNAME", "")
        self._recent: dict[tuple[str, str, str, str], tuple[float, str, int]] = {}

    async def __call__(self, obj: dict[str, Any], type_: str, reason: str, message: str) -> None:
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        uid = meta.get("uid", "")
        key = (uid, type_, reason, message)
        seen = self._recent.get(key)
        now = self.clock()
        if not self.limit.take():
            if self.on_drop is not None:
                self.on_drop()
            return
        try:
            if seen is not None and now - seen[0] < self.dedupe_seconds:
                name, count = seen[1], seen[2] + 1
                await self.api.patch_event(
                    namespace, name, {"count": count, "lastTimestamp": _now()}
                )
                self._recent[key] = (seen[0], name, count)
                return
            name = f"{meta.get('name', 'object')}.{uuid.uuid4().hex[:16]}"
            body: Any = {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": name, "namespace": namespace},
                "involvedObject": {
                    "apiVersion": obj.get("apiVersion", ""),
                    "kind": obj.get("kind", ""),
                    "name": meta.get("name", ""),
                    "namespace": namespace,
                    "uid": uid,
                    "resourceVersion": meta.get("resourceVersion", ""),
                },
                "type": type_,
                "reason": reason,
                "message": message[:1024],
                "source": {"component": self.component, "host": self.host},
                "firstTimestamp": _now(),
                "lastTimestamp": _now(),
                "count": 1,
                "reportingComponent": self.component,
                "reportingInstance": self.host or self.component,
            }
            await self.api.create_event(namespace, body)
            self._recent[key] = (now, name, 1)
            if len(self._recent) > _MAX_RECENT:
                self._forget_old(now)
        except (ApiException, OSError, ValueError, aiohttp.ClientError) as exc:
            log.info("event %s/%s on %s not recorded: %s", type_, reason, meta.get("name"), exc)

    def _forget_old(self, now: float) -> None:
        """Drop entries past the dedupe window, oldest first (the dict is in creation order,
        so this stops at the first recent one); beyond `_MAX_RECENT`, the oldest go too
        (they are then no longer counted, only recorded anew)."""
        while self._recent:
            key = next(iter(self._recent))
            if (
                now - self._recent[key][0] < self.dedupe_seconds
                and len(self._recent) <= _MAX_RECENT
            ):
                break
            del self._recent[key]
