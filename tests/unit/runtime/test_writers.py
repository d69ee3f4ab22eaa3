"""The decision writers (controller/runtime/writers.py): an eviction leaves a Workload that
finished while the write waited alone (no request); an admission the API server no longer
allows is rolled back and the server's object decides."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from api import workload_status
from api.constants import PreemptionReason
from controller.config import ControllerConfig
from controller.core.decisions import Admit, Evict, Preempt, UnhealthyNodes
from controller.core.model.cohorts import Cohort
from controller.core.model.workloads import WorkloadKey
from controller.core.preemption.types import Victim
from controller.runtime.controller import Controller
from controller.runtime.writers import admitted_message
from tests.unit.runtime.workloads import (
    RecordingApi,
    admitted_status,
    leading_controller,
    workload_body,
)


@pytest.mark.parametrize("finished", [True, False])
def test_eviction_skips_a_workload_that_finished_before_the_write(finished: bool) -> None:
    api = RecordingApi()
    controller = Controller(api, ControllerConfig())  # type: ignore[arg-type]
    controller.apply_event("ADDED", workload_body("w", admitted_status(finished)))
    evict = Evict("ns/w", "cq", "Preempted", "preempted to make room")

    asyncio.run(controller.writers.write_eviction(evict))

    registry = controller.metrics.registry

    def timed(phase: str) -> float | None:
        labels = {"write": "evict", "phase": phase}
        return registry.get_sample_value("quotagate_api_write_duration_seconds_count", labels)

    if finished:
        assert api.patches == []
        assert timed("request") is None  # nothing sent, nothing timed
    else:
        [(namespace, name, status)] = api.patches
        assert (namespace, name) == ("ns", "w")
        assert workload_status.is_evicted({"status": status})
        assert timed("wait") == 1 and timed("request") == 1
        assert controller.state.cache.admitted["ns/w"].evicting  # the returned copy was applied


def test_an_eviction_refused_as_stale_of_a_workload_that_finished_is_not_counted() -> None:
    """The copy the eviction was built from is stale: the server answers 409, and the
    Workload as re-read has finished, so nothing more is sent. No write landed: none is
    counted or timed (at the baseline's start such conflicts were counted as ~200
    evictions written while ~20 were)."""
    api = RecordingApi(conflicts=1)
    api.objects["ns/w"] = workload_body("w", admitted_status(finished=True), rv="50")
    controller = Controller(api, ControllerConfig())  # type: ignore[arg-type]
    controller.apply_event("ADDED", workload_body("w", admitted_status(False)))

    asyncio.run(controller.writers.write_eviction(Evict("ns/w", "cq", "Preempted", "to make room")))

    registry = controller.metrics.registry
    assert api.patches == []
    assert (
        registry.get_sample_value("quotagate_api_writes_total", {"write": "evict", "outcome": "ok"})
        is None
    )
    labels = {"write": "evict", "phase": "request"}
    assert registry.get_sample_value("quotagate_api_write_duration_seconds_count", labels) is None


def test_an_eviction_that_waited_for_a_slot_is_built_on_what_the_watch_brought_meanwhile() -> None:
    """The eviction waits for the only decision slot; meanwhile the watch brings the
    victim Finished. Once the slot is free the eviction is built on that copy: nothing is
    sent, not even a request refused as stale (at the baseline's start about half the
    evictions of one cohort found their victim finished by the time they got a slot)."""
    api = RecordingApi(conflicts=1)  # a request built on the old copy would be refused
    api.objects["ns/w"] = workload_body("w", admitted_status(finished=True), rv="50")
    config = ControllerConfig(writeParallelism=1, writeParallelismMax=None)
    controller = Controller(api, config)  # type: ignore[arg-type]
    controller.apply_event("ADDED", workload_body("w", admitted_status(False)))

    async def scenario() -> None:
        release = asyncio.Event()

        async def hold() -> None:
            async with controller.ctx.writes.decision():
                await release.wait()

        holder = asyncio.ensure_future(hold())
        await asyncio.sleep(0)
        eviction = asyncio.ensure_future(
            controller.writers.write_eviction(Evict("ns/w", "cq", "Preempted", "to make room"))
        )
        await asyncio.sleep(0)
        assert controller.ctx.writes.waiting == 1
        controller.apply_event("MODIFIED", api.objects["ns/w"])
        release.set()
        await asyncio.gather(holder, eviction)

    asyncio.run(scenario())
    assert api.patches == [] and api.conflicts == 1  # no request at all
    assert "ns/w" not in controller.state.cache.admitted  # finished: its quota is free


def test_an_admission_is_written_and_its_copy_applied() -> None:
    api = RecordingApi()
    controller = leading_controller(api)
    controller.apply_event("ADDED", workload_body("w"))

    async def cycle() -> None:
        controller.schedule_once()
        assert "ns/w" in controller.sync.in_flight  # events held back while writing
        await asyncio.gather(*controller.ctx.tasks)

    asyncio.run(cycle())
    [(_, name, status)] = api.patches
    assert name == "w" and workload_status.has_quota_reservation({"status": status})
    assert status["admission"]["clusterQueue"] == "cq"
    assert "ns/w" not in controller.sync.in_flight
    assert controller.sync.copies["ns/w"].rv == api.rv  # the write's answer is the copy
    assert controller.state.cache.admitted["ns/w"].cluster_queue == "cq"


def test_an_admission_is_one_event_with_both_steps_and_the_wait() -> None:
    """Kueue records QuotaReserved, then Admitted; quotagate writes both in one status
    apply and records one Event saying both (half the Event requests)."""

    class Api(RecordingApi):  # answers with the whole object, as the API server does
        async def apply_workload_status(self, body: dict[str, Any], **_: Any) -> dict[str, Any]:
            answer = await super().apply_workload_status(body)
            answer["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
            return answer

    api = Api()
    events: list[tuple[str, str, str, str]] = []

    async def record(body: dict[str, Any], kind: str, reason: str, message: str) -> None:
        events.append((body["metadata"]["name"], kind, reason, message))

    controller = leading_controller(api, events=record)
    body = workload_body("w")
    body["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    controller.ctx.clock = lambda: workload_status.parse_rfc3339("2026-01-01T00:00:42Z")
    controller.apply_event("ADDED", body)

    async def cycle() -> None:
        controller.schedule_once()
        await asyncio.gather(*controller.ctx.tasks)

    asyncio.run(cycle())
    assert events == [
        (
            "w",
            "Normal",
            "Admitted",
            "Quota reserved in ClusterQueue cq and admitted, wait time since queued was 42s",
        )
    ]
    assert admitted_message(Admit(WorkloadKey("ns/w"), "cq", (), borrowing=False), None) == (
        "Quota reserved in ClusterQueue cq and admitted"
    )


def test_a_superseded_admission_is_rolled_back_to_the_servers_object() -> None:
    """The copy the cycle decided on is stale: the server's Workload already finished. The
    assumed admission is forgotten and the server's object is applied instead."""
    api = RecordingApi(conflicts=1)
    finished = workload_body("w", admitted_status(finished=True), rv="50")
    api.objects["ns/w"] = finished
    controller = leading_controller(api)
    controller.apply_event("ADDED", workload_body("w"))

    async def cycle() -> None:
        controller.schedule_once()
        await asyncio.gather(*controller.ctx.tasks)

    asyncio.run(cycle())
    assert api.patches == []  # the 409 re-read found it finished: nothing applied
    assert controller.sync.copies["ns/w"].rv == 50
    assert controller.state.cache.workloads["ns/w"].finished
    assert "ns/w" not in controller.state.cache.admitted


@pytest.mark.parametrize(("parent", "path"), [(None, "/co/cq"), ("org", "/org/co/cq")])
def test_a_victims_preempted_condition_carries_kueues_message_word_for_word(
    parent: str | None, path: str
) -> None:
    """Kueue's `preemptionMessage`: the preemptor's UID and job UID, the reason in words,
    and both ClusterQueues' paths from the root cohort (through the tree of Cohorts). The
    Event names the preemptor."""
    api = RecordingApi()
    events: list[tuple[str, str, str]] = []

    async def record(body: dict[str, Any], kind: str, reason: str, message: str) -> None:
        events.append((body["metadata"]["name"], reason, message))

    controller = leading_controller(api, cohort="co", events=record)
    if parent:
        controller.state.set_cohort(Cohort("co", parent))
    preemptor = workload_body("big", uid="u-big")
    preemptor["metadata"]["labels"] = {"kueue.x-k8s.io/job-uid": "job-7"}
    controller.apply_event("ADDED", preemptor)
    controller.apply_event("ADDED", workload_body("small", admitted_status()))
    victim = Victim(
        WorkloadKey("ns/small"), "cq", PreemptionReason.IN_CLUSTER_QUEUE, pods=1, total_pods=1
    )
    admit = Admit(WorkloadKey("ns/big"), "cq", (), borrowing=False)

    asyncio.run(
        controller.writers.write_preemption(Preempt(WorkloadKey("ns/big"), "cq", (victim,), admit))
    )

    [(_, name, status)] = api.patches
    expected = (
        "Preempted to accommodate a workload (UID: u-big, JobUID: job-7) due to "
        f"prioritization in the ClusterQueue; preemptor path: {path}; preemptee path: {path}"
    )
    assert name == "small"
    assert workload_status.condition({"status": status}, "Preempted")["message"] == expected
    assert events == [("small", "Preempted", f"{expected}; preemptor: ns/big")]  # only


def test_an_eviction_other_than_a_preemption_is_an_evicted_due_to_event() -> None:
    api = RecordingApi()
    events: list[tuple[str, str]] = []

    async def record(body: dict[str, Any], kind: str, reason: str, message: str) -> None:
        events.append((reason, message))

    controller = leading_controller(api, events=record)
    controller.apply_event("ADDED", workload_body("w", admitted_status()))
    asyncio.run(
        controller.writers.write_eviction(Evict("ns/w", "cq", "Deactivated", "spec.active false"))
    )
    assert events == [("EvictedDueToDeactivated", "spec.active false")]


def _watch_delays(controller: Controller) -> tuple[float | None, float | None]:
    registry = controller.metrics.registry
    return (
        registry.get_sample_value("quotagate_watch_delay_seconds_count"),
        registry.get_sample_value("quotagate_watch_delay_seconds_sum"),
    )


def test_the_watch_delay_of_a_decision_is_timed_from_its_answer_to_its_event() -> None:
    """The admission's answer (rv 101) is remembered; an older event leaves it waiting, the
    event carrying rv 101 three seconds later is the delay, and later events add nothing."""
    api = RecordingApi()
    controller = leading_controller(api)
    now = [10.0]
    controller.sync.monotonic = lambda: now[0]
    controller.apply_event("ADDED", workload_body("w", rv="7"))

    async def cycle() -> None:
        controller.schedule_once()
        await asyncio.gather(*controller.ctx.tasks)

    asyncio.run(cycle())
    assert controller.sync.copies["ns/w"].rv == 101  # the answer
    assert _watch_delays(controller) == (0, 0)

    now[0] = 12.0
    controller.apply_event("MODIFIED", workload_body("w", rv="7"))  # older than our answer
    assert _watch_delays(controller) == (0, 0)
    now[0] = 13.0
    controller.apply_event("MODIFIED", workload_body("w", admitted_status(), rv="101"))
    assert _watch_delays(controller) == (1, 3.0)
    now[0] = 20.0
    controller.apply_event("MODIFIED", workload_body("w", admitted_status(True), rv="102"))
    assert _watch_delays(controller) == (1, 3.0)


def test_the_watch_lag_is_the_mean_wait_seen_or_still_awaited() -> None:
    """`watch_lag` (what the write slots follow): the mean, over the answers the watch
    brought since the last call and those still awaited, of the wait from the answer to
    its event (or to now); an answer awaited for more than a minute is forgotten."""
    api = RecordingApi()
    controller = leading_controller(api)
    now = [10.0]
    sync = controller.sync
    sync.monotonic = lambda: now[0]
    controller.apply_event("ADDED", workload_body("a", rv="7"))

    async def cycle() -> None:
        controller.schedule_once()
        await asyncio.gather(*controller.ctx.tasks)

    asyncio.run(cycle())
    assert set(sync.echoes) == {"ns/a"}
    now[0] = 12.5
    assert sync.watch_lag() == 2.5  # still awaited
    now[0] = 13.0
    controller.apply_event("MODIFIED", workload_body("a", admitted_status(), rv="101"))
    sync._await_echo(WorkloadKey("ns/b"), workload_body("b", rv="103"))  # another, awaited
    now[0] = 14.0
    assert sync.watch_lag() == 2.0  # a seen after 3 s, b awaited for 1 s
    now[0] = 15.0
    assert sync.watch_lag() == 2.0  # b, still awaited
    now[0] = 73.5
    assert sync.watch_lag() == 0.0  # b forgotten after a minute
    assert not sync.echoes
    assert sync.watch_lag() == 0.0  # nothing written, nothing awaited


def test_an_event_that_came_before_the_answer_is_no_delay() -> None:
    api = RecordingApi()
    controller = leading_controller(api)
    controller.apply_event("ADDED", workload_body("w", rv="7"))
    controller.sync.begin_write(WorkloadKey("ns/w"))
    # The watch brings our write's version while the request is still in flight.
    controller.apply_event("MODIFIED", workload_body("w", admitted_status(), rv="101"))

    async def write() -> None:
        build = lambda wl: workload_status.admit(wl, {"clusterQueue": "cq"}, 0.0)  # noqa: E731
        result = await controller.sync.write(WorkloadKey("ns/w"), build, "admit")
        controller.sync.end_write(WorkloadKey("ns/w"), result)

    asyncio.run(write())
    assert _watch_delays(controller) == (1, 0.0)
    assert not controller.sync.echoes


def test_an_eviction_whose_version_the_watch_applied_before_the_answer_is_no_delay() -> None:
    """Evictions hold no events back: the watch may apply the evicted version before the
    request returns. It is not waited for (a later event would count seconds of delay)."""
    controller: Controller

    class WatchFirst(RecordingApi):
        async def apply_workload_status(self, body: dict[str, Any], **kw: Any) -> dict[str, Any]:
            answer = await super().apply_workload_status(body, **kw)
            controller.apply_event("MODIFIED", answer)  # the watch was quicker
            return answer

    controller = leading_controller(WatchFirst())
    controller.apply_event("ADDED", workload_body("w", admitted_status(), rv="7"))
    asyncio.run(controller.writers.write_eviction(Evict("ns/w", "cq", "Preempted", "to make room")))
    assert _watch_delays(controller) == (1, 0.0)
    assert not controller.sync.echoes


class _InDoubtApi(RecordingApi):
    """Every admission write breaks its connection (the request may or may not have been
    made); a GET waits for `answer` and returns `objects`."""

    def __init__(self) -> None:
        super().__init__()
        self.answer = asyncio.Event()
        self.reads = 0

    async def apply_workload_status(self, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        raise ConnectionResetError("the API server closed the connection")

    async def get_workload(self, namespace: str, name: str) -> dict[str, Any]:
        self.reads += 1
        await self.answer.wait()
        return await super().get_workload(namespace, name)


@pytest.mark.parametrize("written", [True, False])
def test_an_admission_in_doubt_holds_its_quota_until_the_api_server_answers(
    written: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The connection broke after the admission went out: it may have been written. Until a
    re-read says, its quota stays taken (w2 would fit in it and is not admitted); then the
    server's object decides."""
    monkeypatch.setattr("controller.kube.client.retry_wait", lambda attempt: 0.0)
    api = _InDoubtApi()
    status = admitted_status() if written else {}
    api.objects["ns/w1"] = workload_body("w1", status, rv="60", cpu="2")
    controller = leading_controller(api)  # cq: 2 cpu
    controller.apply_event("ADDED", workload_body("w1", cpu="2"))

    async def scenario() -> None:
        controller.schedule_once()  # admits w1 (assumed), its write breaks
        while api.reads == 0:
            await asyncio.sleep(0)
        controller.apply_event("ADDED", workload_body("w2", rv="2", cpu="1"))
        controller.schedule_once()  # w2 would fit only in w1's quota
        assert "ns/w1" in controller.state.cache.admitted
        assert "ns/w2" not in controller.state.cache.admitted
        assert "ns/w2" not in controller.sync.in_flight  # no write for it
        api.answer.set()
        await asyncio.gather(*controller.ctx.tasks)

    asyncio.run(scenario())
    assert controller.sync.copies["ns/w1"].rv == 60
    assert ("ns/w1" in controller.state.cache.admitted) is written


@pytest.mark.parametrize("refusal", [422, 503])
def test_a_refused_admission_gives_its_quota_back_at_once(
    refusal: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refusal (422 at once; 503 on every try) was not written: the assumed quota is
    released before the re-read answers."""
    from kubernetes.aio.client.exceptions import ApiException

    monkeypatch.setattr("controller.kube.client.retry_wait", lambda attempt: 0.0)

    class Refusing(_InDoubtApi):
        async def apply_workload_status(self, body: dict[str, Any], **_: Any) -> dict[str, Any]:
            raise ApiException(status=refusal, reason="refused")

    api = Refusing()
    api.objects["ns/w1"] = workload_body("w1", rv="60", cpu="2")
    controller = leading_controller(api)
    controller.apply_event("ADDED", workload_body("w1", cpu="2"))

    async def scenario() -> None:
        controller.schedule_once()
        while api.reads == 0:
            await asyncio.sleep(0)
        assert "ns/w1" not in controller.state.cache.admitted
        api.answer.set()
        await asyncio.gather(*controller.ctx.tasks)

    asyncio.run(scenario())
    assert "ns/w1" not in controller.state.cache.admitted
    assert controller.sync.copies["ns/w1"].rv == 60


def test_unhealthy_nodes_are_written_as_kueue_writes_them_and_an_eviction_drops_them() -> None:
    """`status.unhealthyNodes: [{name: NODE}]` while a Workload waits for a replacement;
    `[]` removes the field; nothing is sent when it already says so; an eviction clears
    it (Kueue's resetUnhealthyNodes)."""
    api = RecordingApi()
    controller = Controller(api, ControllerConfig())  # type: ignore[arg-type]
    controller.apply_event("ADDED", workload_body("w", admitted_status()))
    writers = controller.writers

    asyncio.run(writers.write_unhealthy_nodes(UnhealthyNodes(WorkloadKey("ns/w"), ("n1",))))
    [(_, _, status)] = api.patches
    assert status["unhealthyNodes"] == [{"name": "n1"}]
    assert controller.sync.copies["ns/w"].body["status"]["unhealthyNodes"] == [{"name": "n1"}]
    asyncio.run(writers.write_unhealthy_nodes(UnhealthyNodes(WorkloadKey("ns/w"), ("n1",))))
    assert len(api.patches) == 1  # already so: nothing sent
    asyncio.run(writers.write_eviction(Evict("ns/w", "cq", "NodeFailures", "no replacement")))
    assert "unhealthyNodes" not in api.patches[-1][2]
    assert workload_status.is_evicted({"status": api.patches[-1][2]})

    api.patches.clear()
    controller.apply_event(
        "ADDED", workload_body("v", {**admitted_status(), "unhealthyNodes": [{"name": "n2"}]})
    )
    asyncio.run(writers.write_unhealthy_nodes(UnhealthyNodes(WorkloadKey("ns/v"), ())))
    [(_, name, status)] = api.patches
    assert name == "v" and "unhealthyNodes" not in status


class _MadeThenRefusedApi(RecordingApi):
    """The first admission write is made (the Workload holds quota at resourceVersion 60)
    but its answer is lost: kube-apiserver was killed after etcd committed it. Every later
    attempt is refused with `refusal`: 409 when built on the old resourceVersion (the write
    that was made changed it), 503 as a restarting API server answers. The first `free`
    GETs answer at once, later ones wait for `answer`."""

    def __init__(self, refusal: int, free: int) -> None:
        super().__init__()
        self.refusal = refusal
        self.free = free
        self.answer = asyncio.Event()
        self.reads = 0
        self.waiting = False
        self.attempts = 0

    async def apply_workload_status(self, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        from kubernetes.aio.client.exceptions import ApiException

        self.attempts += 1
        if self.attempts == 1:
            meta = body["metadata"]
            self.objects["ns/w1"] = workload_body(meta["name"], body["status"], rv="60", cpu="2")
            raise ConnectionResetError("the API server closed the connection")
        raise ApiException(status=self.refusal, reason="refused")

    async def get_workload(self, namespace: str, name: str) -> dict[str, Any]:
        self.reads += 1
        if self.reads > self.free:
            self.waiting = True
            await self.answer.wait()
        return await super().get_workload(namespace, name)


@pytest.mark.parametrize(("refusal", "free"), [(409, 1), (503, 0)])
def test_an_admission_made_by_an_attempt_whose_answer_was_lost_keeps_its_quota(
    refusal: int, free: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first attempt of w1's admission was made, its answer lost; the retries are
    refused (409: w1 changed, by that write; 503: the API server restarting), so the write
    fails with a refusal. It is still in doubt: w1 keeps its quota until the API server's
    object is read (w2 would fit only in w1's quota and is not admitted meanwhile). Taking
    the last refusal for the outcome let another admission into the quota w1 holds: the
    fault suite's over-use of one cpu after a kube-apiserver restart."""
    monkeypatch.setattr("controller.kube.client.retry_wait", lambda attempt: 0.0)
    api = _MadeThenRefusedApi(refusal, free)
    controller = leading_controller(api)  # cq: 2 cpu
    controller.apply_event("ADDED", workload_body("w1", cpu="2"))

    async def scenario() -> None:
        controller.schedule_once()  # admits w1 (assumed)
        [admission] = controller.ctx.tasks
        while not (api.waiting or admission.done()):
            await asyncio.sleep(0)
        controller.apply_event("ADDED", workload_body("w2", rv="2", cpu="1"))
        controller.schedule_once()  # w2 would fit only in w1's quota
        assert "ns/w2" not in controller.sync.in_flight  # no write for it
        assert "ns/w2" not in controller.state.cache.admitted
        assert "ns/w1" in controller.state.cache.admitted
        api.answer.set()
        await asyncio.gather(*controller.ctx.tasks)

    asyncio.run(scenario())
    assert controller.sync.copies["ns/w1"].rv == 60
    assert "ns/w1" in controller.state.cache.admitted


@pytest.mark.parametrize("answered", [True, False])
def test_a_failed_node_replacement_keeps_the_workloads_quota_while_it_is_read_again(
    answered: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The write of w1's new topology assignment fails; w1 stays admitted all along (the
    replacement changes where its pods go, not its quota), so its quota stays counted while
    it is read again (w2 would fit only in it). Then the API server's object is taken, or,
    when it cannot be read, the copy the replacement was built on."""
    from controller.core.decisions import ReplaceNode

    class Api(_InDoubtApi):
        async def get_workload(self, namespace: str, name: str) -> dict[str, Any]:
            found = await super().get_workload(namespace, name)
            if not answered:
                raise ConnectionRefusedError("the API server is down")
            return found

    monkeypatch.setattr("controller.kube.client.retry_wait", lambda attempt: 0.0)
    api = Api()
    held = admitted_status()
    held["admission"]["podSetAssignments"][0]["resourceUsage"] = {"cpu": "2"}
    api.objects["ns/w1"] = workload_body("w1", held, rv="60", cpu="2")
    controller = leading_controller(api)  # cq: 2 cpu
    controller.apply_event("ADDED", workload_body("w1", held, rv="5", cpu="2"))
    admission = controller.state.cache.admitted["ns/w1"].admission
    replaced = ReplaceNode(WorkloadKey("ns/w1"), "cq", admission, "node-a")

    async def scenario() -> None:
        controller.sync.begin_write(replaced.workload_key)
        replacement = asyncio.ensure_future(controller.writers.write_replacement(replaced))
        while api.reads == 0:
            await asyncio.sleep(0)
        controller.apply_event("ADDED", workload_body("w2", rv="2", cpu="1"))
        controller.schedule_once()  # w2 would fit only in w1's quota
        assert "ns/w2" not in controller.sync.in_flight  # no write for it
        assert "ns/w1" in controller.state.cache.admitted
        api.answer.set()
        await replacement

    asyncio.run(scenario())
    assert "ns/w1" in controller.state.cache.admitted
    assert controller.sync.copies["ns/w1"].rv == (60 if answered else 5)
