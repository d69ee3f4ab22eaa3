"""A long-running process's life: JSON logging, signals, and exit codes that say why it
ended (one line on stderr, never a traceback)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import uvloop

from controller.kube.fatal import FatalError

T = TypeVar("T")


class JsonFormatter(logging.Formatter):
    """One JSON object per log line: time, level, logger, message (+ exception)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry)


_LIBRARIES = ("kopf", "aiohttp", "kubernetes")
_stopping = False
_asked_to_stop_early = False


def hold_stop_signals() -> None:
    """Called first thing by a long-running command: a SIGTERM or SIGINT that arrives
    before its event loop runs (while its libraries are still being imported) is kept, and
    the process stops cleanly as soon as the loop starts, instead of dying on the signal's
    default action (exit status -15 for a pod deleted right after it was created)."""

    def keep(signum: int, frame: object) -> None:
        global _asked_to_stop_early
        _asked_to_stop_early = True

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, keep)


def begin_stopping() -> None:
    """The process is shutting down: what the libraries it stops (kopf) log about requests
    cut short is said from now on in one line, without a traceback."""
    global _stopping
    _stopping = True


class _OneLineWhileStopping(logging.Filter):
    # asyncio reports what cancelled tasks and closed generators of those libraries raise.
    QUIET = (*_LIBRARIES, "asyncio")

    def filter(self, record: logging.LogRecord) -> bool:
        if _stopping and record.exc_info and record.name.split(".")[0] in self.QUIET:
            exc = record.exc_info[1]
            record.msg = f"{record.getMessage()} ({type(exc).__name__}: {exc}; while stopping)"
            record.args, record.exc_info, record.exc_text = None, None, None
        return True


def setup_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(_OneLineWhileStopping())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in _LIBRARIES:
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))


def run_on_uvloop(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` on uvloop's event loop: the loop, its sockets and TLS in C (a
    baseline benchmark run's controller CPU: 73.2 s against 77.9 s on asyncio's loop;
    the bench's runs use it too, as they share the cores with what they measure;
    docs/benchmark.md)."""
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main)


def run_until_done(main: Callable[[asyncio.Event], Awaitable[None]], name: str) -> int:
    """Run a long-running process to its end: 0 when it was asked to stop (SIGTERM, Ctrl-C:
    `main` gets an event that is set then, and stops cleanly), 1 with one line on stderr
    (never a traceback) when it could not go on."""
    try:
        run_on_uvloop(_stopping_on_signals(main))
    except KeyboardInterrupt:
        return 0
    except FatalError as exc:
        _collect_tasks()
        print(f"{name}: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # a bug: one line for the user, the traceback at debug level
        logging.getLogger(__name__).debug("unexpected error", exc_info=True)
        _collect_tasks()
        print(f"{name}: unexpected error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


def _collect_tasks() -> None:
    """Free the tasks the stopped loop left (a library's watch that failed too, its
    exception never retrieved) now, so that asyncio's log of them comes before the last
    line, which says why the process stops."""
    gc.collect()


async def wait_at_most(event: asyncio.Event, seconds: float) -> None:
    """Wait until `event` is set or `seconds` have passed. A cancellation always ends it:
    Python 3.11's `asyncio.wait_for` returns instead when the event is set in the same turn
    of the event loop, and a loop around it runs on after it was cancelled (a scheduling
    loop after its term or SIGTERM, holding the process up until it is killed)."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await event.wait()


def stop_on_signals(stop: asyncio.Event) -> None:
    """SIGTERM and SIGINT set `stop` (and what the libraries cut short is reported in one
    line from then on). Install it again after a library that installs handlers of its
    own (kopf does: on SIGTERM it would stop alone, and wait 5 s for the rest)."""
    loop = asyncio.get_running_loop()

    def stopping() -> None:
        begin_stopping()
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping)


async def _stopping_on_signals(main: Callable[[asyncio.Event], Awaitable[None]]) -> None:
    stop = asyncio.Event()
    stop_on_signals(stop)
    if _asked_to_stop_early:
        begin_stopping()
        stop.set()
    await main(stop)
