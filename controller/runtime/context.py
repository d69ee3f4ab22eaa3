"""What the controller's parts share: the API, the configuration, the metrics, the clock,
the Event recorder, the write slots, the state and whether this replica leads.

The parts are the event sync (`sync.py`), the decision writers (`writers.py`) and the
pending reasons (`pending_reasons.py`); `controller.py` builds one `Context` and hands it
to each.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from controller.config import ControllerConfig, configure_state
from controller.core.state import ClusterState
from controller.kube.client import Api
from controller.runtime.metrics import Metrics

Clock = Callable[[], float]
# (object, type, reason, message) → a Kubernetes Event on the object (best effort).
EventSink = Callable[[dict[str, Any], str, str, str], Awaitable[None]]


class WriteSlots:
    """The controller's `writeParallelism` concurrent API writes. Decisions (admissions,
    evictions, deactivations) take any free slot; information (pending reasons, queue and
    Workload status conditions) holds at most a quarter of them at once, so a burst of
    queue statuses or pending reasons never keeps an admission waiting for a slot."""

    def __init__(self, parallelism: int) -> None:
        self._all = asyncio.Semaphore(parallelism)
        self._information = asyncio.Semaphore(max(1, parallelism // 4))

    @contextlib.asynccontextmanager
    async def decision(self) -> AsyncIterator[None]:
        async with self._all:
            yield

    @contextlib.asynccontextmanager
    async def information(self) -> AsyncIterator[None]:
        async with self._information, self._all:
            yield


@dataclass(slots=True)
class Context:
    api: Api
    config: ControllerConfig
    metrics: Metrics
    clock: Clock
    events: EventSink | None
    state: ClusterState
    writes: WriteSlots
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    leading: bool = False  # set by the leader-election loop; followers never write
    tasks: set[asyncio.Task[None]] = field(default_factory=set)

    def spawn(self, coro: Awaitable[None]) -> None:
        """Run `coro` in the background; cancelled with the others when leadership ends."""
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def new_state(self) -> ClusterState:
        """An empty state configured from the configuration."""
        return new_state(self.config)


def new_state(config: ControllerConfig) -> ClusterState:
    return configure_state(config, ClusterState())


def priority_class_of(body: dict[str, Any]) -> str:
    """The Workload's WorkloadPriorityClass name ("" without one): a metric label."""
    return str(((body.get("spec") or {}).get("priorityClassRef") or {}).get("name") or "")
