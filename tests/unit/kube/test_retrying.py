"""`retrying` (controller/kube/client.py): conflicts, throttling and dropped connections
are tried again after a growing, jittered pause, with `on_retry` told before each new
try; a refusal is raised at once; the last failure is raised after `attempts` tries."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from kubernetes.aio.client.exceptions import ApiException

from controller.kube.client import retry_wait, retrying


def _failing(*errors: BaseException) -> tuple[list[int], object]:
    calls: list[int] = []

    async def call() -> str:
        calls.append(len(calls) + 1)
        if len(calls) <= len(errors):
            raise errors[len(calls) - 1]
        return "done"

    return calls, call


def test_a_conflict_then_a_dropped_connection_are_tried_again() -> None:
    calls, call = _failing(ApiException(status=409), aiohttp.ServerDisconnectedError())
    told: list[str] = []

    async def on_retry(exc: BaseException) -> None:
        told.append(type(exc).__name__)

    assert asyncio.run(retrying(call, on_retry=on_retry)) == "done"  # type: ignore[arg-type]
    assert calls == [1, 2, 3]
    assert told == ["ApiException", "ServerDisconnectedError"]


def test_a_refusal_is_raised_at_once() -> None:
    calls, call = _failing(ApiException(status=404))
    with pytest.raises(ApiException) as raised:
        asyncio.run(retrying(call))  # type: ignore[arg-type]
    assert raised.value.status == 404
    assert calls == [1]


def test_the_last_failure_is_raised_after_the_attempts() -> None:
    calls, call = _failing(*(ApiException(status=503) for _ in range(5)))
    with pytest.raises(ApiException) as raised:
        asyncio.run(retrying(call, attempts=3))  # type: ignore[arg-type]
    assert raised.value.status == 503
    assert calls == [1, 2, 3]


def test_the_pause_grows_to_two_seconds_with_a_tenth_of_jitter() -> None:
    for attempt, base in ((1, 0.05), (2, 0.1), (3, 0.2), (6, 1.6), (7, 2.0), (20, 2.0)):
        waits = [retry_wait(attempt) for _ in range(50)]
        assert all(base <= w <= base + 0.1 for w in waits)
