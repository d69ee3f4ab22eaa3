"""WriteSlots: decisions have every write slot, information a sixteenth as many of its own
(at least one), so neither waits for the other; waiting decisions are served first come,
first served."""

from __future__ import annotations

import asyncio
from contextlib import AbstractAsyncContextManager

from controller.runtime.context import WriteSlots


async def _hold(
    slot: AbstractAsyncContextManager[None], held: list[str], name: str, release: asyncio.Event
) -> None:
    async with slot:
        held.append(name)
        await release.wait()
        held.remove(name)


def test_information_holds_a_sixteenth_of_its_own_and_neither_kind_waits_for_the_other() -> None:
    async def scenario() -> None:
        slots = WriteSlots(32)
        held: list[str] = []
        release = asyncio.Event()
        burst = [
            asyncio.ensure_future(_hold(slots.information(), held, f"info-{n}", release))
            for n in range(60)
        ]
        await asyncio.sleep(0)
        assert sorted(held) == ["info-0", "info-1"]
        decisions = [
            asyncio.ensure_future(_hold(slots.decision(), held, f"admit-{n:02}", release))
            for n in range(33)
        ]
        await asyncio.sleep(0)
        # All 32 decision slots are taken beside the information burst; one waits.
        assert sorted(name for name in held if name.startswith("admit")) == [
            f"admit-{n:02}" for n in range(32)
        ]
        assert len(held) == 34 and slots.waiting == 1
        release.set()
        await asyncio.gather(*burst, *decisions)
        assert held == [] and slots.waiting == 0

    asyncio.run(scenario())


def test_information_is_written_while_a_backlog_of_decisions_waits() -> None:
    async def scenario() -> None:
        slots = WriteSlots(4)
        held: list[str] = []
        release = asyncio.Event()
        backlog = [
            asyncio.ensure_future(_hold(slots.decision(), held, f"admit-{n}", release))
            for n in range(100)
        ]
        await asyncio.sleep(0)
        written: list[str] = []

        async def status() -> None:
            async with slots.information():
                written.append("cluster-queue status")

        await asyncio.wait_for(status(), timeout=1)
        assert written == ["cluster-queue status"]
        assert len(held) == 4  # the backlog still holds every decision slot
        release.set()
        await asyncio.gather(*backlog)

    asyncio.run(scenario())


def test_waiting_decisions_get_a_freed_slot_first_come_first_served() -> None:
    async def scenario() -> None:
        slots = WriteSlots(1)
        order: list[str] = []
        gate = asyncio.Event()

        async def write(name: str) -> None:
            async with slots.decision():
                order.append(name)
                await gate.wait()

        first = asyncio.ensure_future(write("first"))
        await asyncio.sleep(0)
        names = ["admit-a", "evict", "admit-b", "deactivate"]
        waiting = [asyncio.ensure_future(write(name)) for name in names]
        await asyncio.sleep(0)
        assert order == ["first"] and slots.waiting == 4
        gate.set()
        await asyncio.gather(first, *waiting)
        assert order == ["first", *names] and slots.waiting == 0

    asyncio.run(scenario())


def test_a_cancelled_waiter_gives_up_its_turn_and_no_slot_is_lost() -> None:
    async def scenario() -> None:
        slots = WriteSlots(1)
        held: list[str] = []
        release = asyncio.Event()
        holder = asyncio.ensure_future(_hold(slots.decision(), held, "holder", release))
        await asyncio.sleep(0)
        cancelled = asyncio.ensure_future(_hold(slots.decision(), held, "cancelled", release))
        after = asyncio.ensure_future(_hold(slots.decision(), held, "after", release))
        await asyncio.sleep(0)
        cancelled.cancel()
        await asyncio.sleep(0)
        release.set()
        await asyncio.gather(holder, after)
        assert cancelled.cancelled()
        # The one slot is free again: a new decision takes it at once.
        release.clear()
        again = asyncio.ensure_future(_hold(slots.decision(), held, "again", release))
        await asyncio.sleep(0)
        assert held == ["again"]
        release.set()
        await again

    asyncio.run(scenario())


def test_a_waiter_cancelled_as_it_is_handed_the_slot_passes_it_on() -> None:
    async def scenario() -> None:
        slots = WriteSlots(1)
        order: list[str] = []
        gate = asyncio.Event()
        tasks: dict[str, asyncio.Future[None]] = {}

        async def write(name: str) -> None:
            async with slots.decision():
                order.append(name)
                await gate.wait()
            if name == "holder":
                # The release above handed the slot to `handed`, which has not run yet.
                tasks["handed"].cancel()

        tasks["holder"] = asyncio.ensure_future(write("holder"))
        await asyncio.sleep(0)
        tasks["handed"] = asyncio.ensure_future(write("handed"))
        tasks["last"] = asyncio.ensure_future(write("last"))
        await asyncio.sleep(0)
        gate.set()
        # A slot lost with `handed` would leave `last` waiting for ever.
        await asyncio.wait_for(asyncio.gather(*tasks.values(), return_exceptions=True), 2)
        assert order == ["holder", "last"]
        assert tasks["handed"].cancelled()

    asyncio.run(scenario())


def test_slots_follow_the_watch_between_the_start_and_the_maximum() -> None:
    """`adapt`: one slot more per second while the watch keeps up and decisions wait for a
    slot (at once handed to a waiter); none while nothing waits; 70 % kept on a lag (the
    writes already out finish, no new one starts until enough are back); never fewer than
    the start, never more than the maximum."""

    async def scenario() -> None:
        slots = WriteSlots(4, maximum=8)
        held: list[str] = []
        releases = [asyncio.Event() for _ in range(10)]
        slots.adapt(0.0)  # nothing waited yet: no slot more
        assert slots.parallelism == 4
        writes = [
            asyncio.ensure_future(_hold(slots.decision(), held, f"admit-{n}", releases[n]))
            for n in range(10)
        ]
        await asyncio.sleep(0)
        assert len(held) == 4 and slots.waiting == 6
        slots.adapt(0.2)  # kept up, and decisions wait: one more, given to a waiter
        await asyncio.sleep(0)
        assert slots.parallelism == 5 and len(held) == 5 and slots.waiting == 5
        slots.adapt(1.0)  # between the bounds: unchanged
        assert slots.parallelism == 5
        for _ in range(5):
            slots.adapt(0.1)
        await asyncio.sleep(0)
        assert slots.parallelism == 8 and len(held) == 8  # at the maximum
        slots.adapt(3.0)  # lagging: 70 % of 8
        assert slots.parallelism == 5
        slots.adapt(3.0)  # not below the start
        assert slots.parallelism == 4
        assert len(held) == 8  # the writes out are not cut short
        for n in range(5):  # five come back: 3 busy, one slot free again
            releases[n].set()
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert held == [f"admit-{n}" for n in range(5, 9)] and slots.waiting == 1
        for release in releases[5:]:
            release.set()
        await asyncio.gather(*writes)
        assert held == [] and slots.waiting == 0

    asyncio.run(scenario())


def test_fixed_slots_do_not_adapt() -> None:
    slots = WriteSlots(16)  # no maximum: fixed
    slots.adapt(0.0)
    slots.adapt(5.0)
    assert (slots.parallelism, slots.minimum, slots.maximum) == (16, 16, 16)
    assert not slots.adaptive
