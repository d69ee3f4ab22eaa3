"""controller/runtime/operator.py: kopf's watches never give up on an outage. kopf retries a
failed request only as many times as `error_backoffs` has pauses and then escalates, which
ends the operator (after about a minute with its defaults); quotagate's pauses never run
out, and start again for every request."""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import Any

import aiohttp
import kopf
from kopf._cogs.clients import api as kopf_api

from controller.runtime.operator import RETRY_FOREVER


def test_the_pauses_never_run_out_and_start_again_for_each_request() -> None:
    first = list(itertools.islice(RETRY_FOREVER, 100))
    assert first[:5] == [1.0, 1.0, 2.0, 3.0, 4.0] and all(p == 4.0 for p in first[4:])
    assert list(itertools.islice(RETRY_FOREVER, 3)) == [1.0, 1.0, 2.0]


def test_kopf_retries_a_request_past_its_own_defaults(monkeypatch: Any) -> None:
    """Twelve connection failures (kopf's defaults escalate after nine tries), then an
    answer: the request succeeds."""
    failures = 12
    calls = 0

    class Session:
        closed = False

        async def request(self, **_: Any) -> Any:
            nonlocal calls
            calls += 1
            if calls <= failures:
                raise aiohttp.ClientConnectionError("refused")
            return "answered"

    class Context:
        server = "https://api"
        session = Session()

    async def no_wait(_: float) -> None:
        pass

    async def checked(response: Any) -> None:
        pass

    monkeypatch.setattr(kopf_api.asyncio, "sleep", no_wait)
    monkeypatch.setattr(kopf_api.errors, "check_response", checked)
    settings = kopf.OperatorSettings()
    settings.networking.error_backoffs = RETRY_FOREVER
    answer = asyncio.run(
        kopf_api.request.__wrapped__(  # type: ignore[attr-defined]
            "GET", "/x", settings=settings, context=Context(), logger=logging.getLogger("t")
        )
    )
    assert answer == "answered" and calls == failures + 1
