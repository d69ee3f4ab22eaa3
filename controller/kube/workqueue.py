"""A de-duplicating work queue of keys, for level-triggered workers.

A key added while it is already queued keeps its place; the worker that takes it reads the
latest state for it then, so a burst of changes to one object costs one piece of work.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from typing import Generic, TypeVar

__all__ = ["KeyQueue"]

K = TypeVar("K", bound=Hashable)


class KeyQueue(Generic[K]):
    """First in, first out; each key at most once."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[K] = asyncio.Queue()
        self._queued: set[K] = set()

    def add(self, key: K) -> None:
        if key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    async def get(self) -> K:
        key = await self._queue.get()
        self._queued.discard(key)
        return key

    def __contains__(self, key: object) -> bool:
        return key in self._queued

    def __len__(self) -> int:
        return len(self._queued)
