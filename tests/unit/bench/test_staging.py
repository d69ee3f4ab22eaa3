"""A live run is measured with the controller's garbage-collector thresholds, and the
process gets its own back afterwards, whatever the run's outcome."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from controller import collector
from tools.bench.live.staging import LiveError, staged


class _Client:
    closed = False

    async def close(self) -> None:
        self.closed = True


class _Runner:
    run_id = "r1"

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.during: Any = None
        self.setup_thresholds: Any = None
        self.cleaned = False

    async def setup(self) -> None:
        self.setup_thresholds = gc.get_threshold()

    async def run(self) -> str:
        self.during = gc.get_threshold()
        if self.fail:
            raise LiveError("the run failed")
        return "report"

    async def cleanup(self) -> None:
        self.cleaned = True


@pytest.fixture
def default_thresholds() -> Any:
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield (700, 10, 10)
    gc.set_threshold(*before)


def test_the_run_has_the_controllers_thresholds_and_the_process_gets_its_own_back(
    default_thresholds: Any,
) -> None:
    runner, client = _Runner(), _Client()
    result = asyncio.run(staged(runner, client, progress=None, keep=False, announce=""))  # type: ignore[arg-type]
    assert result == "report"
    assert runner.during == collector.GC_THRESHOLDS
    assert runner.setup_thresholds == default_thresholds
    assert gc.get_threshold() == default_thresholds
    assert runner.cleaned and client.closed


def test_a_failed_run_gives_the_thresholds_back_too(default_thresholds: Any) -> None:
    runner, client = _Runner(fail=True), _Client()
    with pytest.raises(LiveError, match="the run failed"):
        asyncio.run(staged(runner, client, progress=None, keep=True, announce=""))  # type: ignore[arg-type]
    assert runner.during == collector.GC_THRESHOLDS
    assert gc.get_threshold() == default_thresholds
    assert not runner.cleaned and client.closed


def test_tune_sets_the_thresholds_for_good(default_thresholds: Any) -> None:
    collector.tune()
    assert gc.get_threshold() == collector.GC_THRESHOLDS
