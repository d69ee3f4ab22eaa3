"""WriteSlots: decisions may take every write slot, information at most a quarter of them,
so a burst of information never keeps a decision waiting."""

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


def test_information_holds_at_most_a_quarter_and_a_decision_does_not_wait_behind_it() -> None:
    async def scenario() -> None:
        slots = WriteSlots(8)
        held: list[str] = []
        release = asyncio.Event()
        burst = [
            asyncio.ensure_future(_hold(slots.information(), held, f"info-{n}", release))
            for n in range(60)
        ]
        await asyncio.sleep(0)
        assert sorted(held) == ["info-0", "info-1"]
        decisions = [
            asyncio.ensure_future(_hold(slots.decision(), held, f"admit-{n}", release))
            for n in range(6)
        ]
        await asyncio.sleep(0)
        assert sorted(name for name in held if name.startswith("admit")) == [
            f"admit-{n}" for n in range(6)
        ]
        assert len(held) == 8
        late = asyncio.ensure_future(_hold(slots.decision(), held, "admit-late", release))
        await asyncio.sleep(0)
        assert "admit-late" not in held  # every slot is taken: it waits like any write
        release.set()
        await asyncio.gather(*burst, *decisions, late)
        assert held == []

    asyncio.run(scenario())


def test_one_slot_is_shared_by_both() -> None:
    async def scenario() -> None:
        slots = WriteSlots(1)
        held: list[str] = []
        release = asyncio.Event()
        info = asyncio.ensure_future(_hold(slots.information(), held, "info", release))
        await asyncio.sleep(0)
        decision = asyncio.ensure_future(_hold(slots.decision(), held, "admit", release))
        await asyncio.sleep(0)
        assert held == ["info"]
        release.set()
        await asyncio.gather(info, decision)
        assert held == []

    asyncio.run(scenario())
