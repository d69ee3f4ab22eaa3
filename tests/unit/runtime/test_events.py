"""The Event rate limit: a token bucket like the kubelet's eventRecordQPS/eventBurst."""

from __future__ import annotations

import asyncio
from typing import Any

from controller.runtime.events import EventRecorder, TokenBucket


class _Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_bucket_allows_a_burst_then_refills_at_the_rate() -> None:
    clock = _Clock()
    bucket = TokenBucket(rate=2.0, burst=3, clock=clock)
    assert [bucket.take() for _ in range(4)] == [True, True, True, False]
    clock.t += 0.5  # one token back
    assert [bucket.take() for _ in range(2)] == [True, False]
    clock.t += 100.0  # never more than the burst
    assert sum(bucket.take() for _ in range(10)) == 3


class _Api:
    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []

    async def create_event(self, namespace: str, body: dict[str, Any]) -> None:
        self.created.append(body)


def test_events_over_the_limit_are_dropped_and_counted() -> None:
    api = _Api()
    clock = _Clock()
    dropped: list[int] = []
    recorder = EventRecorder(
        api,  # type: ignore[arg-type]
        qps=1.0,
        burst=2,
        on_drop=lambda: dropped.append(1),
        clock=clock,
    )
    workload = {"kind": "Workload", "metadata": {"name": "w", "namespace": "ns", "uid": "u"}}

    async def record(n: int, prefix: str = "reason") -> None:
        for i in range(n):
            await recorder(workload, "Normal", "Pending", f"{prefix} {i}")

    asyncio.run(record(5))
    assert [e["message"] for e in api.created] == ["reason 0", "reason 1"]
    assert len(dropped) == 3
    clock.t += 1.0
    asyncio.run(record(1, "later"))
    assert [e["message"] for e in api.created][-1] == "later 0"
