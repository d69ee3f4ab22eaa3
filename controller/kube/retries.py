"""Retries where their cost does not matter: start-up, the cost controller's writes and the
leader election's campaign, with tenacity.

The status writes of the admission cycle retry with `client.retrying`, a plain loop: with
tenacity's machinery on every write the controller spent 4 % more CPU (docs/architecture.md,
"Retries"). Everywhere else a call is rare, and tenacity says the policy in one place.
Both follow the same policy: retry what `is_retryable` says is worth another try, after
`retry_wait(attempt)` (exponential from 0.05 s to 2 s, with jitter), and re-raise the last
error when the attempts run out.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    retry_if_exception_type,
    retry_if_result,
    stop_after_attempt,
    wait_fixed,
)

from controller.kube.client import CONNECTION_ERRORS, is_retryable, retry_wait

__all__ = ["campaign", "retried"]

T = TypeVar("T")
log = logging.getLogger(__name__)


def _awaited(call: Callable[[], Awaitable[T]]) -> Callable[[], Awaitable[T]]:
    """`call` as a coroutine function: tenacity awaits only what it recognises as one, and
    calls anything else (a lambda returning a coroutine, say) without awaiting it."""

    async def attempt() -> T:
        return await call()

    return attempt


def _wait(state: RetryCallState) -> float:
    return retry_wait(state.attempt_number)


async def retried(call: Callable[[], Awaitable[T]], attempts: int = 6) -> T:
    """`call()`, tried up to `attempts` times while it fails with a retryable error."""
    retrying = AsyncRetrying(
        retry=retry_if_exception(is_retryable),
        wait=_wait,
        stop=stop_after_attempt(attempts),
        reraise=True,
    )
    return await retrying(_awaited(call))


def _failed(state: RetryCallState) -> None:
    if state.outcome is not None and state.outcome.failed:
        log.info("lease attempt failed: %s", state.outcome.exception())


async def campaign(attempt: Callable[[], Awaitable[bool]], period: float) -> None:
    """Call `attempt()` every `period` seconds until it returns True (a lost connection
    counts as False and is logged): the leader election's wait for its Lease."""
    retrying = AsyncRetrying(
        retry=retry_if_result(lambda acquired: not acquired)
        | retry_if_exception_type(CONNECTION_ERRORS),
        wait=wait_fixed(period),
        before_sleep=_failed,
    )
    await retrying(_awaited(attempt))
