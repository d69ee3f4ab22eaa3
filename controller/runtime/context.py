"""What the controller's parts share: the API, the configuration, the metrics, the clock,
the Event recorder, the write slots, the state and whether this replica leads.

The parts are the event sync (`sync.py`), the decision writers (`writers.py`) and the
pending reasons (`pending_reasons.py`); `controller.py` builds one `Context` and hands it
to each.
"""

from __future__ import annotations

import asyncio
import collections
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


# Adapting the decision slots to the watch (`WriteSlots.adapt`), by the mean time the last
# second's decision writes waited for the watch to bring them (`WorkloadSync.watch_lag`).
LAG_HIGH = 2.0  # above: the API server's watch falls behind; take slots away
LAG_LOW = 0.5  # below, with decisions waiting for a slot: one slot more
DECREASE = 0.7  # the share of slots kept on a lag


class WriteSlots:
    """The controller's concurrent API writes: `parallelism` for decisions and a sixteenth
    as many (at least one), of their own, for information (pending reasons, queue and Workload status
    conditions), so neither ever waits for the other: a burst of queue statuses never keeps
    an admission waiting, and a backlog of admissions never keeps `kubectl get
    clusterqueue` minutes behind.

    Decisions waiting for a slot get one first come, first served (evictions included:
    one that waits while its victim finishes is never sent, where sending it first would
    evict Workloads about to finish). `waiting` counts the decisions waiting: the
    admission cycle keeps at most eight rounds of decisions waiting
    (`Controller.schedule_forever`), so the wait stays short.

    With a `maximum` above `parallelism`, the number of decision slots adapts (`adapt`,
    once a second) between the start and `maximum`: one more while the watch keeps up and
    decisions wait for a slot, 30 % fewer while it lags."""

    def __init__(self, parallelism: int, maximum: int | None = None) -> None:
        self.parallelism = parallelism  # decision slots now
        self.maximum = max(parallelism, maximum or parallelism)
        self.minimum = parallelism
        self._busy = 0
        self._wanted_more = False  # a decision waited for a slot since the last `adapt`
        self.waiting = 0  # decisions waiting for a slot
        self._waiting: collections.deque[asyncio.Future[None]] = collections.deque()
        self.information_slots = max(1, parallelism // 16)
        self._information = asyncio.Semaphore(self.information_slots)

    @property
    def adaptive(self) -> bool:
        return self.maximum > self.minimum

    def adapt(self, lag: float) -> None:
        """Once a second: `lag` is how long the last second's decision writes waited for
        the watch to bring them (`WorkloadSync.watch_lag`). Above LAG_HIGH, keep 70 % of
        the slots; below LAG_LOW, when a decision waits or had to wait for a slot since the
        last call, add one."""
        wanted_more = self._wanted_more or self.waiting > 0
        self._wanted_more = False
        if not self.adaptive:
            return
        if lag > LAG_HIGH:
            self.parallelism = max(self.minimum, int(self.parallelism * DECREASE))
        elif lag < LAG_LOW and wanted_more:
            self.parallelism = min(self.maximum, self.parallelism + 1)
            self._grant()

    @contextlib.asynccontextmanager
    async def decision(self) -> AsyncIterator[None]:
        await self._acquire()
        try:
            yield
        finally:
            self._release()

    @contextlib.asynccontextmanager
    async def information(self) -> AsyncIterator[None]:
        async with self._information:
            yield

    async def _acquire(self) -> None:
        if self._busy < self.parallelism and not self._waiting:
            self._busy += 1
            return
        self._wanted_more = True
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append(granted)
        self.waiting += 1
        try:
            await granted
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():
                self._release()  # handed the slot as it was cancelled: pass it on
            else:
                self.waiting -= 1
            raise

    def _release(self) -> None:
        self._busy -= 1
        self._grant()

    def _grant(self) -> None:
        """Hand free slots to the first waiters still waiting (a cancelled waiter's future
        is done and is skipped); after fewer slots, none until enough are given back."""
        while self._waiting and self._busy < self.parallelism:
            granted = self._waiting.popleft()
            if not granted.done():
                granted.set_result(None)
                self._busy += 1
                self.waiting -= 1


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
