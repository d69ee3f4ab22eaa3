"""The process's log (controller/kube/process.py): one JSON object per line; once the
process is stopping, a library's error about a request cut short is one line, while our
own errors keep their traceback."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import Iterator

import pytest
import uvloop

from controller.kube import process
from controller.kube.fatal import FatalError


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    libraries = {name: logging.getLogger(name).level for name in ("kopf", "aiohttp", "kubernetes")}
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    for name, library_level in libraries.items():
        logging.getLogger(name).setLevel(library_level)


def _log_lines(monkeypatch: pytest.MonkeyPatch, stopping: bool) -> list[dict[str, str]]:
    monkeypatch.setattr(process, "_stopping", False)
    stream = io.StringIO()
    monkeypatch.setattr(process.sys, "stderr", stream)
    process.setup_logging("info")
    if stopping:
        process.begin_stopping()
    for name in ("kopf.objects", "controller.runtime.operator"):
        try:
            raise ConnectionResetError("session closed")
        except ConnectionResetError:
            logging.getLogger(name).exception("request failed")
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_while_running_tracebacks_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    kopf, ours = _log_lines(monkeypatch, stopping=False)
    assert kopf["logger"] == "kopf.objects" and "Traceback" in kopf["exc"]
    assert "Traceback" in ours["exc"]


def test_while_stopping_a_librarys_traceback_becomes_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kopf, ours = _log_lines(monkeypatch, stopping=True)
    assert "exc" not in kopf
    assert kopf["msg"] == "request failed (ConnectionResetError: session closed; while stopping)"
    assert ours["msg"] == "request failed" and "Traceback" in ours["exc"]


def test_the_process_runs_on_uvloop_and_a_fatal_error_is_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`run_until_done` runs `main` on uvloop's event loop; a FatalError ends it with exit
    code 1 and one line on stderr."""
    loops: list[type] = []

    async def main(stop: asyncio.Event) -> None:
        loops.append(type(asyncio.get_running_loop()))

    assert process.run_until_done(main, "quotagate") == 0
    assert loops == [uvloop.Loop]

    async def failing(stop: asyncio.Event) -> None:
        raise FatalError("no credentials")

    assert process.run_until_done(failing, "quotagate") == 1
    assert capsys.readouterr().err == "quotagate: no credentials\n"


def test_the_fatal_line_comes_after_the_log_of_a_task_left_failed() -> None:
    """A library's task that failed too (kopf's watch on revoked credentials), its exception
    never retrieved: asyncio logs it when the task is freed, which must come before the
    line saying why the process stops, not after it."""
    import subprocess
    import sys

    script = (
        "import asyncio, logging, sys\n"
        "from controller.kube import process\n"
        "from controller.kube.fatal import FatalError\n"
        "logging.basicConfig()\n"
        "async def main(stop):\n"
        "    async def fails():\n"
        "        raise RuntimeError('library gave up')\n"
        "    task = asyncio.get_running_loop().create_task(fails())\n"
        "    await asyncio.sleep(0.05)\n"
        "    cycle = [task]\n"
        "    cycle.append(cycle)  # freed only by a collection, as kopf's tasks are\n"
        "    del task, cycle\n"
        "    raise FatalError('not allowed: 401 Unauthorized')\n"
        "sys.exit(process.run_until_done(main, 'quotagate run'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 1, done.stderr
    assert "Task exception was never retrieved" in done.stderr, done.stderr
    assert lines[-1] == "quotagate run: not allowed: 401 Unauthorized", done.stderr


def test_a_bench_run_is_on_uvloop_and_returns_its_result() -> None:
    """`run_on_uvloop` (the bench's runs: `quotagate bench`, `make bench-compare`) runs a
    coroutine to its result on uvloop, and raises what it raises."""

    async def report() -> tuple[type, str]:
        return type(asyncio.get_running_loop()), "report"

    assert process.run_on_uvloop(report()) == (uvloop.Loop, "report")

    async def failing() -> None:
        raise RuntimeError("the run failed")

    with pytest.raises(RuntimeError, match="the run failed"):
        process.run_on_uvloop(failing())


def test_a_stop_signal_during_the_imports_stops_the_process_cleanly() -> None:
    """A long-running command holds SIGTERM from its first line: a signal that arrives
    before the event loop runs (here: sent by the process to itself) makes it stop as soon
    as the loop starts, with exit status 0, instead of dying on the default action."""
    import subprocess
    import sys

    script = (
        "import asyncio, os, signal, sys\n"
        "from controller.kube import process\n"
        "process.hold_stop_signals()\n"
        "os.kill(os.getpid(), signal.SIGTERM)\n"
        "async def main(stop):\n"
        "    await asyncio.wait_for(stop.wait(), 10)\n"
        "    print('stopped', flush=True)\n"
        "sys.exit(process.run_until_done(main, 'quotagate'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout) == (0, "stopped\n"), done.stderr
