"""The admission loop (controller/runtime/controller.py `schedule_forever`): a cycle is
followed by at least as long a pause as it took, so the watches and the writers get at
least half of the event loop however long cycles become (at large scale they starved the
informer, and every cycle then decided on a state further behind the API server); and
a cycle keeps at most eight rounds of admissions waiting for write slots, and none runs
while more than a round waits (decisions made far ahead of their writes held quota the API server had not
seen: at 1,000 ClusterQueues an admission waited ~30 s for its write)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time

from controller.config import ControllerConfig
from controller.runtime.controller import Controller
from tests.unit.runtime.workloads import cluster_objects, workload_body

CYCLE = 0.05


def test_a_long_cycle_is_followed_by_as_long_for_everything_else() -> None:
    controller = Controller(None, ControllerConfig())  # type: ignore[arg-type]
    started: list[float] = []
    ticks: list[float] = []

    def slow_cycle() -> None:
        started.append(time.perf_counter())
        time.sleep(CYCLE)  # a cycle holds the event loop
        controller.ctx.wake.set()  # and there is always more to decide

    controller.schedule_once = slow_cycle  # type: ignore[method-assign]

    async def watch() -> None:  # stands in for the informer: runs whenever the loop is free
        while True:
            ticks.append(time.perf_counter())
            await asyncio.sleep(0.001)

    async def main() -> None:
        controller.ctx.wake.set()
        loop = asyncio.create_task(controller.schedule_forever())
        other = asyncio.create_task(watch())
        await asyncio.sleep(0.6)
        for task in (loop, other):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    asyncio.run(main())
    assert len(started) >= 3
    gaps = [b - a for a, b in itertools.pairwise(started)]
    # cycleIntervalSeconds is 0.02: without the rule a cycle would start every 0.07 s.
    assert min(gaps) >= 2 * CYCLE - 0.005, gaps
    # Between two cycles the rest of the loop ran, not just once.
    for a, b in itertools.pairwise(started):
        assert sum(1 for t in ticks if a + CYCLE < t < b) >= 5


def _three_queues(parallelism: int) -> Controller:
    """A leading controller with three ClusterQueues of 2 cpu, each with one pending
    Workload, whose status writes never return; `parallelism` fixed write slots."""
    api = _NeverAnswers()
    config = ControllerConfig(writeParallelism=parallelism, writeParallelismMax=None)
    controller = Controller(api, config)  # type: ignore[arg-type]
    controller.leading = True
    for n, body in enumerate([*cluster_objects(), *cluster_objects(), *cluster_objects()]):
        suffix = str(n // 3)
        meta = body["metadata"]
        if body["kind"] == "ClusterQueue":
            body = {**body, "metadata": {**meta, "name": f"cq{suffix}"}}
        elif body["kind"] == "LocalQueue":
            body = {
                **body,
                "metadata": {**meta, "name": f"lq{suffix}"},
                "spec": {"clusterQueue": f"cq{suffix}"},
            }
        controller.apply_event("ADDED", body)
    for n in range(3):
        controller.apply_event("ADDED", workload_body(f"w{n}", queue=f"lq{n}"))
    return controller


class _NeverAnswers:
    async def apply_workload_status(self, body: object, **_: object) -> None:
        await asyncio.Event().wait()


async def _occupy(
    controller: Controller, count: int, release: asyncio.Event
) -> list[asyncio.Task[None]]:
    """`count` decisions holding or waiting for the write slots until `release`."""

    async def hold() -> None:
        async with controller.ctx.writes.decision():
            await release.wait()

    tasks = [asyncio.create_task(hold()) for _ in range(count)]
    await asyncio.sleep(0)
    return tasks


def test_a_cycle_leaves_at_most_eight_rounds_of_admissions_waiting_for_slots() -> None:
    async def main() -> None:
        controller = _three_queues(parallelism=2)
        release = asyncio.Event()
        held = await _occupy(controller, 17, release)  # two writing, fifteen waiting
        assert controller.ctx.writes.waiting == 15
        controller.schedule_once()
        assert len(controller.state.cache.admitted) == 1  # room for 8 × 2 - 15 admissions: one
        release.set()
        await asyncio.gather(*held)
        for task in controller.ctx.tasks:
            task.cancel()

    asyncio.run(main())


def test_no_cycle_runs_while_more_than_a_round_of_writes_waits_for_slots() -> None:
    async def main() -> None:
        controller = _three_queues(parallelism=2)
        cycles: list[int] = []
        controller.schedule_once = lambda: cycles.append(1)  # type: ignore[method-assign]
        release = asyncio.Event()
        held = await _occupy(controller, 5, release)  # two writing, three waiting
        controller.ctx.wake.set()
        loop = asyncio.create_task(controller.schedule_forever())
        await asyncio.sleep(0.2)
        assert cycles == []
        release.set()
        await asyncio.gather(*held)
        await asyncio.sleep(0.1)
        assert cycles  # the round went out: cycles run again
        loop.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await loop

    asyncio.run(main())
