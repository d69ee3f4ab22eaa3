"""What every live run shares: its error, the stages a run goes through (set up, run,
clean up), the resumable watch it records from, and reading a process's CPU time."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator
from typing import Any, Protocol, TextIO, TypeVar

from kubernetes.aio import client as aio_client
from kubernetes.aio.client.exceptions import ApiException

from controller import collector
from controller.kube.client import (
    CONNECTION_ERRORS,
    Api,
    Resource,
    describe,
    is_retryable,
    retrying,
)
from controller.kube.informer import FIRST_BACKOFF, MAX_BACKOFF
from tools.bench.outages import Outages

__all__ = ["LiveError", "Staged", "follow", "process_cpu", "spent", "staged"]

log = logging.getLogger(__name__)

R = TypeVar("R", covariant=True)


class LiveError(RuntimeError):
    """The run could not be set up or did not finish."""


class Staged(Protocol[R]):
    run_id: str

    async def setup(self) -> None: ...
    async def run(self) -> R: ...
    async def cleanup(self) -> None: ...


async def staged(
    runner: Staged[R],
    api_client: aio_client.ApiClient,
    *,
    progress: TextIO | None,
    keep: bool,
    announce: str,
) -> R:
    """Set up, run and (unless `keep`) clean up a run, then close its client; the run's
    report. Cleanup is best effort: the run's own error, if any, is the one raised. The
    run has the controller's garbage-collector thresholds (controller/collector.py): the
    bench shares the cores with what it measures."""
    try:
        if progress is not None:
            progress.write(announce + "\n")
        await runner.setup()
        with collector.tuned():
            return await runner.run()
    finally:
        if not keep:
            if progress is not None:
                progress.write(f"cleaning up run {runner.run_id}\n")
            with contextlib.suppress(Exception):
                await runner.cleanup()
        await api_client.close()


async def follow(
    api: Api,
    resource: Resource,
    selector: str,
    version: str = "",
    outages: Outages | None = None,
) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """A run's events of `resource`, from `version` on (empty: from now, the existing
    objects first), resumed from the last event seen after a broken connection. Without
    `outages`, an expired watch (410 Gone) would lose events and ends the run, and so does
    an error answer. With `outages` (a run that rides its API server's outages out, as the
    controller does: `outages.py`), the API server's errors are tried again like broken
    connections, 0.5 s doubling to 4 s apart, and an expired watch is listed again:
    `("RELISTED", the list)`, then the events after it."""
    backoff = FIRST_BACKOFF
    while True:
        try:
            async for kind, body in api.watch(
                resource, label_selector=selector, resource_version=version or None
            ):
                if outages is not None:
                    outages.answered()
                    backoff = FIRST_BACKOFF
                version = (body.get("metadata") or {}).get("resourceVersion") or version
                yield kind, body
            continue  # the server ended the watch: go on from where it was
        except ApiException as exc:
            if exc.status == 410 and outages is not None:
                log.info("the %s watch expired (410 Gone); listing again", resource.kind)
                listing: Any = await retrying(
                    lambda: api.request(
                        "GET", Api.path(resource, None), params={"labelSelector": selector}
                    ),
                    attempts=None,
                    on_retry=outages.retried,
                )
                outages.relists += 1
                outages.answered()
                version = str((listing.get("metadata") or {}).get("resourceVersion") or "")
                yield "RELISTED", listing
                continue
            if exc.status == 410:
                raise LiveError(
                    f"the {resource.kind} watch expired (410 Gone); the run cannot be recorded "
                    "exactly"
                ) from exc
            if outages is None or not is_retryable(exc):
                raise
            log.info("the %s watch failed (%s); resuming", resource.kind, describe(exc))
        except CONNECTION_ERRORS as exc:  # resume from the last event seen
            log.info("the %s watch broke (%s); resuming", resource.kind, exc or type(exc).__name__)
        if outages is None:
            await asyncio.sleep(0.2)
            continue
        outages.failed()
        await asyncio.sleep(backoff)
        backoff = min(backoff * 2, MAX_BACKOFF)


def process_cpu(pid: int | None) -> float | None:
    """User + system CPU seconds of a process (Linux /proc), or None."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stream:
            fields = stream.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def spent(before: float | None, after: float | None) -> float | None:
    """CPU seconds between two readings, or None if either is missing."""
    return None if before is None or after is None else after - before
