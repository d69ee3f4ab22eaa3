"""What the controller's parts share: the API, the configuration, the metrics, the clock,
the Event recorder, the write slots, the state and whether this replica leads.

The parts are the event sync (`sync.py`), the decision writers (`writers.py`) and the
pending reasons (`pending_reasons.py`); `controller.py` builds one `Context` and hands it
to each.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from controller.config import ControllerConfig, configure_state
from controller.core.state import ClusterState
from controller.kube.client import Api
from controller.runtime.metrics import Metrics

Clock = Callable[[], float]
# (object, type, reason, message) → a Kubernetes Event on the object (best effort).
EventSink = Callable[[dict[str, Any], str, str, str], Awaitable[None]]


@dataclass(slots=True)
class Context:
    api: Api
    config: ControllerConfig
    metrics: Metrics
    clock: Clock
    events: EventSink | None
    state: ClusterState
    # Admissions and evictions are decisions: they get `write_parallelism` slots.
    writes: asyncio.Semaphore
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
