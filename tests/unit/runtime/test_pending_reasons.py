"""Pending reasons (controller/runtime/pending_reasons.py): they wait out a short delay and
coalesce; a reason already written is not written again; a Workload being written waits;
Workloads the cycle never looks at get core's reason (`unqueued_decisions`)."""

from __future__ import annotations

import asyncio

from api import workload_status
from controller.config import ControllerConfig
from controller.core.decisions import Inadmissible
from controller.core.model.workloads import WorkloadKey
from controller.runtime.controller import Controller
from tests.unit.runtime.workloads import (
    RecordingApi,
    admitted_status,
    cluster_objects,
    leading_controller,
    workload_body,
)

W = WorkloadKey("ns/w")


def test_pending_reasons_wait_out_the_delay_and_coalesce() -> None:
    config = ControllerConfig.model_validate({"pendingReasonDelaySeconds": 0.05})
    controller = Controller(RecordingApi(), config)  # type: ignore[arg-type]

    async def scenario() -> None:
        controller.pending.want(Inadmissible(W, "cq", "available 0"))
        controller.pending.want(Inadmissible(W, "cq", "available 1"))
        assert len(controller.pending.queue) == 0  # not yet: it may be admitted meanwhile
        await asyncio.sleep(0.1)
        assert len(controller.pending.queue) == 1
        assert controller.pending.wanted[W].reason == "available 1"

    asyncio.run(scenario())


def _controller(api: RecordingApi) -> Controller:
    config = ControllerConfig.model_validate({"pendingReasonDelaySeconds": 0})
    controller = Controller(api, config)  # type: ignore[arg-type]
    controller.leading = True
    return controller


def test_a_reason_is_written_once_and_an_in_flight_workload_waits() -> None:
    api = RecordingApi()
    controller = _controller(api)
    controller.apply_event("ADDED", workload_body("w"))
    pending = controller.pending

    async def scenario() -> None:
        controller.sync.begin_write(W)  # an admission is being written
        pending.want(Inadmissible(W, "cq", "insufficient quota", "Pending"))
        await pending.write(await pending.queue.get())
        assert api.patches == [] and pending.wanted[W].reason == "insufficient quota"
        controller.sync.end_write(W, None)

        pending.want(Inadmissible(W, "cq", "insufficient quota", "Pending"))  # decided again
        await pending.write(await pending.queue.get())
        [(_, _, status)] = api.patches
        condition = workload_status.condition({"status": status}, "QuotaReserved")
        assert condition is not None and condition["message"] == "insufficient quota"
        assert pending.written[W] == "insufficient quota"

        pending.want(Inadmissible(W, "cq", "insufficient quota", "Pending"))
        assert W not in pending.wanted and len(pending.queue) == 0  # nothing new to say

    asyncio.run(scenario())


def test_a_conflict_puts_the_reason_back_in_the_queue() -> None:
    api = RecordingApi(conflicts=1)
    controller = _controller(api)
    controller.apply_event("ADDED", workload_body("w"))
    pending = controller.pending

    async def scenario() -> None:
        pending.want(Inadmissible(W, "cq", "insufficient quota"))
        assert await pending.queue.get() == W
        await pending.write(W)
        assert api.patches == []
        assert len(pending.queue) == 1 and pending.wanted[W].reason == "insufficient quota"

    asyncio.run(scenario())


def test_unqueued_workloads_get_cores_reason_unless_being_written() -> None:
    controller = _controller(RecordingApi())
    controller.apply_event("ADDED", workload_body("w", queue="missing"))
    controller.apply_event("ADDED", workload_body("x", queue="missing"))
    controller.sync.begin_write(WorkloadKey("ns/x"))

    async def scenario() -> None:
        controller.pending.explain_unqueued(now=10.0)

    asyncio.run(scenario())
    assert set(controller.pending.wanted) == {W}
    wanted = controller.pending.wanted[W]
    assert (wanted.condition_reason, wanted.reason) == (
        "Misconfigured",
        "LocalQueue missing doesn't exist",
    )
    controller.pending.wanted.clear()
    controller.pending.explain_unqueued(now=10.5)  # at most once a second
    assert controller.pending.wanted == {}


def test_reasons_are_paced_by_pending_reason_qps_and_one_admitted_meanwhile_gets_none() -> None:
    api = RecordingApi()
    config = ControllerConfig.model_validate(
        {"pendingReasonDelaySeconds": 0, "pendingReasonQPS": 20, "pendingReasonBurst": 2}
    )
    controller = Controller(api, config)  # type: ignore[arg-type]
    controller.leading = True
    names = ["a", "b", "c", "d"]
    for name in names:
        controller.apply_event("ADDED", workload_body(name))
    pending = controller.pending

    async def scenario() -> list[float]:
        for name in names:
            pending.want(Inadmissible(WorkloadKey(f"ns/{name}"), "cq", "insufficient quota"))
        loop = asyncio.get_running_loop()
        started, done = loop.time(), []
        for _ in names[:2]:  # the burst: at once
            await pending.write(await pending.queue.get())
            done.append(loop.time() - started)
        key = await pending.queue.get()  # c: waits for a token
        writing = asyncio.ensure_future(pending.write(key))
        await asyncio.sleep(0.01)
        assert len(api.patches) == 2  # still waiting: 20 a second
        await writing
        done.append(loop.time() - started)
        # d is admitted while it waits its turn: it needs no reason, and spends no token.
        resolved = {"value": "preemptible", "source": "default"}
        admitted = {**admitted_status(), "resolvedPreemptibility": resolved}
        controller.apply_event("MODIFIED", workload_body("d", admitted, rv="2"))
        key = await pending.queue.get()
        before = loop.time()
        await pending.write(key)
        done.append(loop.time() - before)
        return done

    done = asyncio.run(scenario())
    assert [name for (_, name, _) in api.patches] == ["a", "b", "c"]
    assert done[1] < 0.045  # a and b: the burst, at once
    assert done[2] >= 0.045  # one token every 50 ms once the burst is spent
    assert done[3] < 0.04  # d waited for no token


def test_pending_workloads_get_their_check_entries_through_the_same_queue() -> None:
    """A ClusterQueue naming a check for every flavor: its pending Workloads get the entry
    Pending (Kueue's workload controller before a reservation), written by the pending
    reasons' writer; afterwards only Workloads that changed are looked at again, until a
    queue changes."""
    api = RecordingApi()
    controller = leading_controller(api)
    [_, cq, _] = cluster_objects()
    cq["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": "prov"}]}  # type: ignore[index]
    controller.apply_event("MODIFIED", cq)
    controller.apply_event("ADDED", workload_body("w"))
    pending = controller.pending

    async def scenario() -> None:
        pending.sync_pending_checks(10.0)
        assert pending.checks_wanted == {W: ("prov",)}
        await pending.write(await pending.queue.get())
        [(_, _, status)] = api.patches
        [entry] = status["admissionChecks"]
        assert (entry["name"], entry["state"]) == ("prov", "Pending")
        assert "admission" not in status and pending.checks_wanted == {}

        pending.sync_pending_checks(10.5)  # at most once a second
        pending.sync_pending_checks(11.0)  # w in step now: nothing to write
        assert len(pending.queue) == 0 and pending.checks_wanted == {}
        controller.apply_event("ADDED", workload_body("x", rv="7"))
        pending.sync_pending_checks(12.0)  # only x changed
        assert pending.checks_wanted == {WorkloadKey("ns/x"): ("prov",)}

    asyncio.run(scenario())
