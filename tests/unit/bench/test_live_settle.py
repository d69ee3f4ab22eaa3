"""After the last Workload finished, a live run records ClusterQueue events until no active
queue reports pending or reserving Workloads (Kueue's runner's `expectMoreEvents`): while
the run's timeout allows, and at least SETTLE_TIMEOUT. A queue that never settles fails the
run at the deadline, naming it; the wait is reported."""

from __future__ import annotations

import asyncio
import io
import time
from typing import Any

import pytest
from kubernetes.aio import client as aio_client

from tools.bench.live import run as live_run
from tools.bench.live.run import LiveError, LiveRun
from tools.bench.recorder import cluster_queue_event
from tools.bench.scenario import SCENARIOS, load

SMOKE = SCENARIOS / "smoke.yaml"


def _queue(name: str, pending: int) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {},
        "status": {
            "pendingWorkloads": pending,
            "conditions": [{"type": "Active", "status": "True"}],
        },
    }


def _settle(
    timeline: list[tuple[float, str, int]], timeout: float, monkeypatch: pytest.MonkeyPatch
) -> tuple[float, str]:
    """Run `_settle` with `timeline` (seconds after the start, queue, pending) played on the
    ClusterQueue watch; its wait and progress text."""
    monkeypatch.setattr(live_run, "SETTLE_TIMEOUT", 0.3)
    monkeypatch.setattr(live_run, "SETTLE_NOTE_EVERY", 0.1)
    progress = io.StringIO()

    async def main() -> float:
        api_client = aio_client.ApiClient(aio_client.Configuration(host="http://127.0.0.1:9"))
        try:
            run = LiveRun(api_client, load(SMOKE), progress=progress, timeout=timeout)
            run.t0 = time.monotonic()
            for name in ("a", "b"):
                run.recorder.record_cluster_queue(cluster_queue_event(_queue(name, 1), 0.0))

            async def play() -> None:
                for at, name, pending in timeline:
                    await asyncio.sleep(max(0.0, at - run.now()))
                    run.recorder.record_cluster_queue(
                        cluster_queue_event(_queue(name, pending), run.now())
                    )
                    run.cluster_queue_seen.set()
                await asyncio.Event().wait()

            queues = asyncio.ensure_future(play())
            try:
                return await run._settle(queues)
            finally:
                queues.cancel()
        finally:
            await api_client.close()

    return asyncio.run(main()), progress.getvalue()


def test_the_run_waits_past_the_minimum_while_its_timeout_allows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    waited, said = _settle([(0.05, "a", 0), (0.5, "b", 0)], 5.0, monkeypatch)
    assert 0.45 <= waited < 2.0  # past SETTLE_TIMEOUT (0.3 s), ended by b's last status
    assert "waiting" in said and "ClusterQueues (e.g. b)" in said


def test_a_queue_that_never_settles_fails_the_run_at_its_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started = time.monotonic()
    with pytest.raises(LiveError, match=r"1 ClusterQueues \(e\.g\. b\) still report"):
        _settle([(0.05, "a", 0)], 0.6, monkeypatch)
    assert 0.55 <= time.monotonic() - started < 3.0


def test_settled_queues_end_the_wait_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    waited, said = _settle([(0.0, "a", 0), (0.0, "b", 0)], 5.0, monkeypatch)
    assert waited < 0.2 and said == ""
