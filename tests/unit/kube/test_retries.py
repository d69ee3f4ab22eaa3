"""`retried` and `campaign` (controller/kube/retries.py): tenacity with the same policy as
the hot path's `retrying`, for start-up, the cost controller and the leader election."""

from __future__ import annotations

import asyncio
import logging

import aiohttp
import pytest
from kubernetes.aio.client.exceptions import ApiException

from controller.kube import retries


@pytest.fixture(autouse=True)
def _no_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(retries, "retry_wait", lambda attempt: 0.0)


def _calls(*outcomes: BaseException | object) -> tuple[list[int], object]:
    """A call that raises or returns each outcome in turn."""
    calls: list[int] = []

    async def call() -> object:
        calls.append(len(calls) + 1)
        outcome = outcomes[len(calls) - 1]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    return calls, call


def test_retried_tries_a_conflict_and_a_dropped_connection_again() -> None:
    calls, call = _calls(ApiException(status=409), aiohttp.ServerDisconnectedError(), "done")
    assert asyncio.run(retries.retried(call)) == "done"  # type: ignore[arg-type]
    assert calls == [1, 2, 3]


def test_retried_awaits_a_lambda_that_returns_a_coroutine() -> None:
    """The cost controller's shape: `lambda: client.patch_…(…)` is no coroutine function,
    and tenacity alone would return the coroutine without sending the request."""
    calls, call = _calls(ApiException(status=503), {"patched": True})
    result = asyncio.run(retries.retried(lambda: call()))  # type: ignore[operator]
    assert result == {"patched": True} and calls == [1, 2]


def test_retried_raises_a_refusal_at_once() -> None:
    calls, call = _calls(ApiException(status=403), "never")
    with pytest.raises(ApiException) as raised:
        asyncio.run(retries.retried(call))  # type: ignore[arg-type]
    assert raised.value.status == 403 and calls == [1]


def test_retried_raises_the_last_failure_when_the_attempts_run_out() -> None:
    calls, call = _calls(*(ApiException(status=503) for _ in range(3)), "never")
    with pytest.raises(ApiException) as raised:
        asyncio.run(retries.retried(call, attempts=3))  # type: ignore[arg-type]
    assert raised.value.status == 503 and calls == [1, 2, 3]


def test_campaign_tries_until_acquired_and_logs_lost_connections(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls, attempt = _calls(False, ConnectionResetError("reset"), False, True)
    with caplog.at_level(logging.INFO, logger=retries.__name__):
        asyncio.run(retries.campaign(attempt, 0))  # type: ignore[arg-type]
    assert calls == [1, 2, 3, 4]
    assert [r.getMessage() for r in caplog.records] == ["lease attempt failed: reset"]


def test_campaign_raises_what_is_not_a_lost_connection() -> None:
    calls, attempt = _calls(False, ApiException(status=403), True)
    with pytest.raises(ApiException):
        asyncio.run(retries.campaign(attempt, 0))  # type: ignore[arg-type]
    assert calls == [1, 2]
