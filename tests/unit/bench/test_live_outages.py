"""A live run rides its API server's outages out (tools/bench/outages.py): a watch's
failed requests are tried again, one refused with 410 Gone is listed again, the outage is
timed and so is the time until admission resumed; a re-list's snapshot is applied releases
first, so the quota ledger never counts what the snapshot had already released."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes.aio import client as aio_client
from kubernetes.aio.client.exceptions import ApiException

from api import workload_status
from controller.kube.client import WORKLOADS
from tools.bench.live import run as live_run
from tools.bench.live.run import LiveRun
from tools.bench.live.staging import LiveError, follow
from tools.bench.outages import Outages, render_outages
from tools.bench.scenario import SCENARIOS, load

SMOKE = SCENARIOS / "smoke.yaml"


class _Api:
    """Watches play `script` (an event's resourceVersion, or an error to raise); a GET is
    the re-list."""

    def __init__(self, script: list[Any]) -> None:
        self.script = script
        self.watched_from: list[str | None] = []

    async def watch(
        self, resource: Any, *, label_selector: str, resource_version: str | None
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        self.watched_from.append(resource_version)
        while self.script:
            step = self.script.pop(0)
            if isinstance(step, BaseException):
                raise step
            yield "MODIFIED", {"metadata": {"name": step, "resourceVersion": step}}
        await asyncio.Event().wait()

    async def request(self, method: str, path: str, **_: Any) -> dict[str, Any]:
        return {"metadata": {"resourceVersion": "20"}, "items": [{"metadata": {"name": "x"}}]}


def _follow(script: list[Any], outages: Outages | None, events: int) -> list[Any]:
    api = _Api(script)
    seen: list[Any] = []

    async def main() -> None:
        async for kind, body in follow(api, WORKLOADS, "run=1", outages=outages):  # type: ignore[arg-type]
            seen.append(
                (
                    kind,
                    body["metadata"].get("resourceVersion")
                    if kind != "RELISTED"
                    else len(body["items"]),
                )
            )
            if len(seen) == events:
                return

    asyncio.run(asyncio.wait_for(main(), 10))
    return [seen, api.watched_from]


def test_a_run_that_rides_outages_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tools.bench.live.staging.FIRST_BACKOFF", 0.0)
    clock = iter(range(100))
    outages = Outages(lambda: float(next(clock)))
    script = [
        "11",
        ConnectionResetError("reset"),
        ApiException(status=503, reason="Service Unavailable"),
        "12",
        ApiException(status=410, reason="Gone"),
        "21",
    ]
    seen, watched_from = _follow(script, outages, events=4)
    assert seen == [("MODIFIED", "11"), ("MODIFIED", "12"), ("RELISTED", 1), ("MODIFIED", "21")]
    assert watched_from == [None, "11", "11", "20"]
    assert outages.relists == 1
    [outage] = outages.seen
    assert outage.ended is not None and outage.ended > outage.began
    outages.admitted(outage.ended + 2.5)
    figures = outages.to_json()
    assert figures["outages"][0]["admission_resumed_after_s"] == 2.5
    lines = render_outages(figures)
    assert lines[0].startswith("  API server outages seen by the run: 1; watches listed again")
    assert "admission resumed 2.5 s later" in lines[1]


def test_without_outages_an_expired_watch_ends_the_run() -> None:
    with pytest.raises(LiveError, match="410 Gone"):
        _follow([ApiException(status=410, reason="Gone")], None, events=1)


def test_a_relist_is_applied_releases_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """Eight 1-cpu Workloads fill the cohort's 8 cpu; the re-list shows one of them finished
    and a ninth admitted, the admitted one listed first: no over-use is counted."""

    async def main() -> LiveRun:
        api_client = aio_client.ApiClient(aio_client.Configuration(host="http://127.0.0.1:9"))
        run = LiveRun(api_client, load(SMOKE))
        smalls = [job for job in run.jobs if job.class_name == "small"][:9]

        def body(job: Any, status: dict[str, Any]) -> dict[str, Any]:
            queue, name = job.key.split("/", 1)
            meta = {"name": name, "namespace": run.cluster.name(queue), "uid": name}
            return {"metadata": meta, "status": status}

        def admitted(job: Any) -> dict[str, Any]:
            admission = {"clusterQueue": job.cluster_queue, "podSetAssignments": []}
            return body(job, workload_status.admit({}, admission, 0.0))

        for job in smalls[:8]:
            run._observe(admitted(job))
        finished = admitted(smalls[0])
        finished["status"]["conditions"].append({"type": "Finished", "status": "True"})
        snapshot = {"items": [admitted(smalls[8]), finished]}

        async def replay(*_: Any, **__: Any) -> AsyncIterator[tuple[str, dict[str, Any]]]:
            yield "RELISTED", snapshot

        monkeypatch.setattr(live_run, "follow", replay)
        await run._watch()
        for task in list(run.tasks):
            task.cancel()
        await api_client.close()
        return run

    run = asyncio.run(main())
    assert run.ledger.overuse == 0
    assert run.counters["admitted"] == 9 and run.counters["finished"] == 1


def test_a_create_whose_reply_was_lost_is_counted_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first POST reached the API server but its reply was lost (kube-apiserver killed);
    the next is refused with 409 AlreadyExists: the Workload exists, the create is done
    (retrying would take the conflict for one worth another try, for ever)."""
    monkeypatch.setattr("controller.kube.client.retry_wait", lambda attempt: 0.0)

    async def main() -> tuple[LiveRun, list[str]]:
        api_client = aio_client.ApiClient(aio_client.Configuration(host="http://127.0.0.1:9"))
        run = LiveRun(api_client, load(SMOKE))
        answers: list[BaseException] = [
            ConnectionResetError("reset"),
            ApiException(status=409, reason="AlreadyExists"),
        ]
        sent: list[str] = []

        async def request(method: str, path: str, *_: Any, **__: Any) -> dict[str, Any]:
            sent.append(method)
            if answers:
                raise answers.pop(0)
            return {}

        monkeypatch.setattr(run.api, "request", request)
        await run.gate.acquire()  # as _create_all does
        await asyncio.wait_for(run._create(run.jobs[0]), 10)
        await api_client.close()
        return run, sent

    run, sent = asyncio.run(main())
    assert sent == ["POST", "POST"]
    assert run.counters["created"] == 1
    assert run.outages.retries == 1
