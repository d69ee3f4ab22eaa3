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
from controller.kube.client import CONNECTION_ERRORS, Api, Resource

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
    api: Api, resource: Resource, selector: str, version: str = ""
) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """A run's events of `resource`, from `version` on (empty: from now, the existing
    objects first), resumed from the last event seen after a broken connection. An expired
    watch (410 Gone) would lose events: it ends the run."""
    while True:
        try:
            async for kind, body in api.watch(
                resource, label_selector=selector, resource_version=version or None
            ):
                version = (body.get("metadata") or {}).get("resourceVersion") or version
                yield kind, body
        except ApiException as exc:
            if exc.status != 410:
                raise
            raise LiveError(
                f"the {resource.kind} watch expired (410 Gone); the run cannot be recorded exactly"
            ) from exc
        except CONNECTION_ERRORS as exc:  # resume from the last event seen
            log.info("the %s watch broke (%s); resuming", resource.kind, exc or type(exc).__name__)
            await asyncio.sleep(0.2)


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
