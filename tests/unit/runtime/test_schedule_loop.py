"""The admission loop (controller/runtime/controller.py `schedule_forever`): a cycle is
followed by at least as long a pause as it took, so the watches and the writers get at
least half of the event loop however long cycles become (at large scale they starved the
informer, and every cycle then decided on a state further behind the API server)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time

from controller.config import ControllerConfig
from controller.runtime.controller import Controller

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
