"""The live run's job side, as Kueue's scheduler-perf runner writes it (reproduced in
tools/bench/kueue_clients.py from the runner's code): `runtimeMs` after a Workload is
admitted it is marked `Finished=True` (server-side apply of that condition as
`kueue-job-controller-Finished`); when it is evicted, its quota reservation is cleared
(server-side apply as `kueue-admission` with force: QuotaReserved=False, no
`status.admission`), so it competes again."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes.aio.client.exceptions import ApiException

from controller.kube.client import API_ERRORS, WORKLOADS, Api, is_retryable
from tools.bench import kueue_clients
from tools.bench.live.staging import LiveError
from tools.bench.report import Job

__all__ = ["JobSide", "Tracked"]

TRIES = 20


@dataclass
class Tracked:
    """What the run knows of one scenario Workload, from the watch."""

    job: Job
    body: dict[str, Any] | None = None
    seen_at: float | None = None
    reserved: bool = False
    evicted: bool = False
    finished: bool = False
    finish_answered: float | None = None  # when the API server answered our Finished patch


class JobSide:
    """The runner's job side. `now` is the run's clock; `gate` bounds its parallel
    requests (a client of its own, as in Kueue's runner: a creation backlog must not delay
    completions)."""

    def __init__(self, api: Api, gate: asyncio.Semaphore, now: Callable[[], float]) -> None:
        self.api = api
        self.gate = gate
        self.now = now
        # The round trip of each Finished patch: sent → answered.
        self.finish_write: list[float] = []

    async def finish_later(self, tracked: Tracked, epoch: int) -> None:
        """Mark the Workload Finished after its runtime, unless it lost its reservation
        (or was evicted) in the meantime."""
        await asyncio.sleep(tracked.job.runtime)
        sent = self.now()
        await self._patch_status(
            tracked,
            lambda wl: kueue_clients.runner_finish(wl, time.time()),
            still=lambda: tracked.job.epoch == epoch and tracked.reserved and not tracked.evicted,
        )
        if not tracked.finished:
            tracked.finish_answered = self.now()
            self.finish_write.append(tracked.finish_answered - sent)

    async def acknowledge(self, tracked: Tracked) -> None:
        """Acknowledge an eviction: clear the quota reservation as Kueue's job side does."""
        await self._patch_status(
            tracked,
            lambda wl: kueue_clients.runner_release(wl, time.time()),
            still=lambda: tracked.reserved and not tracked.finished,
        )

    async def _patch_status(
        self,
        tracked: Tracked,
        make: Callable[[dict[str, Any]], Any],
        still: Callable[[], bool],
    ) -> None:
        """The job side's status write `make(Workload)`, strict (the last seen
        resourceVersion); on a conflict, read the Workload again and retry while the write
        still applies."""
        for _ in range(TRIES):
            if not still() or tracked.body is None:
                return
            body = tracked.body
            meta = body["metadata"]
            write = make(body)
            try:
                async with self.gate:
                    updated: Any = await kueue_clients.send(
                        self.api, WORKLOADS, meta["namespace"], meta["name"], write
                    )
            except API_ERRORS as exc:
                if not is_retryable(exc):
                    raise
                if not isinstance(exc, ApiException) or exc.status != 409:
                    await asyncio.sleep(0.2)  # a dropped connection or a busy server
                    continue
                async with self.gate:
                    fresh: Any = await self.api.get_workload(meta["namespace"], meta["name"])
                if newer(fresh, tracked.body):
                    tracked.body = fresh
                continue
            if newer(updated, tracked.body):
                tracked.body = updated
            return
        raise LiveError(f"could not update {tracked.job.key}: {TRIES} failed tries in a row")


def newer(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    """Whether Workload `a` is a later version than `b` (by resourceVersion)."""
    if a is None:
        return False
    if b is None:
        return True
    try:
        return int(a["metadata"]["resourceVersion"]) > int(b["metadata"]["resourceVersion"])
    except (KeyError, ValueError, TypeError):
        return True
