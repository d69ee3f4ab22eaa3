"""ClusterQueue and LocalQueue status as Kueue keeps it (controller/runtime/queue_status.py),
computed from the engine's state: counts, reservation and usage per flavor and resource
(an evicting Workload still reserves but no longer counts as admitted or used), borrowing,
and the Active condition."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace
from typing import Any

from controller.config import ControllerConfig
from controller.core.pending import Inactive
from controller.core.usage_sampling import LocalQueueUsage
from controller.runtime.controller import Controller
from controller.runtime.metrics import LEADER
from controller.runtime.queue_status import (
    QueueStatusWriter,
    active_condition,
    admission_fair_sharing_status,
    cluster_queue_status,
    local_queue_counts,
)
from tests.unit.core.builders import add, cluster, cq, settle, wl
from tests.unit.runtime.workloads import (
    cluster_objects,
    fair_queue_objects,
    leading_controller,
    workload_body,
)


def test_cluster_queue_status_counts_reservation_usage_and_borrowing() -> None:
    state = add(
        cluster(
            cq("cq", {"default": {"cpu": ("2", "4")}}, cohort="co"),
            cq("lender", {"default": {"cpu": "4"}}, cohort="co"),
        ),
        wl("a", cpu="2"),
        wl("b", cpu="1"),
        wl("c", cpu="1"),
        wl("waits", cpu="4"),
    )
    settle(state)
    assert {"ns/a", "ns/b", "ns/c"} <= set(state.admitted)
    state.admitted["ns/c"].evicting = True

    status = cluster_queue_status(state, "cq")

    assert (status["pendingWorkloads"], status["reservingWorkloads"]) == (1, 3)
    assert status["admittedWorkloads"] == 2  # c is being evicted
    assert status["flavorsReservation"] == [
        {"name": "default", "resources": [{"name": "cpu", "total": "4", "borrowed": "2"}]}
    ]
    assert status["flavorsUsage"] == [
        {"name": "default", "resources": [{"name": "cpu", "total": "3", "borrowed": "2"}]}
    ]


def test_local_queue_counts_and_finished_per_cluster_queue() -> None:
    state = add(cluster(cq("cq", {"default": {"cpu": "2"}})), wl("a", cpu="1"), wl("b", cpu="1"))
    admissions = {a.workload_key: a.admission for r in settle(state) for a in r.admitted}
    add(state, wl("c", cpu="1"))
    b = state.workloads["ns/b"]
    state.upsert_workload(replace(b, finished=True, admission=admissions["ns/b"]))
    finished: dict[str, int] = {}

    counts = local_queue_counts(state, finished)

    assert counts["ns/cq"] == {
        "pendingWorkloads": 1,
        "reservingWorkloads": 1,
        "admittedWorkloads": 1,
    }
    assert finished == {"cq": 1}


def test_active_condition_carries_the_inactive_reason() -> None:
    assert active_condition(None) == (True, "Ready", "Can admit new workloads")
    stopped = Inactive("Stopped", "ClusterQueue cq is inactive: stopped (Hold)")
    assert active_condition(stopped) == (False, "Stopped", stopped.message)


# -- admission fair sharing ---------------------------------------------------------------


def _fair_controller(config: dict[str, object]) -> Controller:
    controller = Controller(None, ControllerConfig.model_validate(config))  # type: ignore[arg-type]
    controller.metrics.set_role(LEADER)
    for obj in (
        *fair_queue_objects(),
        {
            "kind": "LocalQueue",
            "metadata": {"name": "lq", "namespace": "ns"},
            "spec": {"clusterQueue": "cq", "fairSharing": {"weight": "2"}},
            "status": {
                "fairSharing": {
                    "weightedShare": 0,
                    "admissionFairSharingStatus": {
                        "consumedResources": {"cpu": "8"},
                        "lastUpdate": "2026-01-01T00:00:00Z",
                    },
                }
            },
        },
    ):
        controller.apply_event("ADDED", obj)
    return controller


def _usage_gauge(controller: Controller) -> float | None:
    labels = {"name": "lq", "namespace": "ns", "cluster_queue": "cq", "replica_role": LEADER}
    return controller.metrics.registry.get_sample_value(
        "kueue_local_queue_admission_fair_sharing_usage", labels
    )


def test_each_sampling_tick_takes_the_local_queues_status_and_gauge() -> None:
    controller = _fair_controller(
        {"admissionFairSharing": {"usageHalfLifeTime": "10s", "usageSamplingInterval": "1s"}}
    )
    writer = QueueStatusWriter(controller.ctx, {})
    writer.sample_if_due(100.0)  # history read from the status; the first tick folds nothing
    assert writer.local_queue_fair_sharing["ns/lq"] == {
        "weightedShare": 0,
        "admissionFairSharingStatus": {
            "consumedResources": {"cpu": "8"},
            "lastUpdate": "1970-01-01T00:01:40Z",
        },
    }
    assert _usage_gauge(controller) == 4.0  # 8 cpus over a weight of 2
    writer.sample_if_due(100.5)  # not due yet
    assert writer.local_queue_fair_sharing["ns/lq"]["admissionFairSharingStatus"][
        "consumedResources"
    ] == {"cpu": "8"}
    writer.sample_if_due(101.0)  # one second idle: 8 × 0.5^0.1, to the nano
    sampled = writer.local_queue_fair_sharing["ns/lq"]["admissionFairSharingStatus"]
    assert sampled == {
        "consumedResources": {"cpu": "7464263932n"},
        "lastUpdate": "1970-01-01T00:01:41Z",
    }
    controller.apply_event(
        "DELETED", {"kind": "LocalQueue", "metadata": {"name": "lq", "namespace": "ns"}}
    )
    writer.sample_if_due(102.0)
    assert writer.local_queue_fair_sharing == {} and _usage_gauge(controller) is None


def test_an_unchanged_history_keeps_its_time_so_nothing_is_written_again() -> None:
    usage = LocalQueueUsage("ns/lq", "cq", {"cpu": 0.0}, 200.0, {}, 0.0)
    before = {
        "weightedShare": 0,
        "admissionFairSharingStatus": {"consumedResources": {"cpu": "0"}, "lastUpdate": "then"},
    }
    assert admission_fair_sharing_status(usage, before) == before
    changed = LocalQueueUsage("ns/lq", "cq", {"cpu": 0.25}, 200.0, {}, 0.25)
    assert admission_fair_sharing_status(changed, before)["admissionFairSharingStatus"] == {
        "consumedResources": {"cpu": "250m"},
        "lastUpdate": "1970-01-01T00:03:20Z",
    }


def test_nothing_is_sampled_without_admission_fair_sharing() -> None:
    controller = _fair_controller({})
    writer = QueueStatusWriter(controller.ctx, {})
    writer.sample_if_due(100.0)
    assert writer.local_queue_fair_sharing == {} and writer.next_sample is None
    assert _usage_gauge(controller) is None


# -- writing -----------------------------------------------------------------------------


class SlowStatusApi:
    """Stands in for `Api`'s status patches: each waits for `release`, then is recorded."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.patches: list[tuple[str, dict[str, Any]]] = []

    async def patch_cluster_status(self, resource: Any, name: str, body: dict[str, Any]) -> None:
        await self.release.wait()
        self.patches.append((f"{resource.kind}/{name}", body))

    async def patch_namespaced_status(
        self, resource: Any, namespace: str, name: str, body: dict[str, Any]
    ) -> None:
        await self.release.wait()
        self.patches.append((f"{resource.kind}/{namespace}/{name}", body))


def _pending_gauge(controller: Controller) -> float | None:
    labels = {"cluster_queue": "cq", "status": "active", "replica_role": "standalone"}
    return controller.metrics.registry.get_sample_value("kueue_pending_workloads", labels)


def test_the_gauges_stay_current_while_the_status_writes_wait() -> None:
    """At 1,000 ClusterQueues under load a status write can wait many seconds; the tick
    must not wait for it (it did: the gauges stayed at their first value for minutes)."""
    api = SlowStatusApi()
    controller = leading_controller(api)
    writer = QueueStatusWriter(controller.ctx, {}, interval=0.01)

    async def scenario() -> None:
        task = asyncio.ensure_future(writer.run_forever())
        await asyncio.sleep(0.05)
        assert _pending_gauge(controller) == 0
        for name in ("a", "b", "c"):
            controller.apply_event("ADDED", workload_body(name))
        await asyncio.sleep(0.05)
        assert _pending_gauge(controller) == 3  # no write has landed yet
        assert api.patches == []
        api.release.set()
        await asyncio.sleep(0.05)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    cq_patches = [body for key, body in api.patches if key == "ClusterQueue/cq"]
    assert cq_patches[-1]["pendingWorkloads"] == 3  # written with its latest status


def test_a_queue_whose_status_changes_while_it_waits_is_written_once_with_the_latest() -> None:
    api = SlowStatusApi()
    controller = leading_controller(api)
    writer = QueueStatusWriter(controller.ctx, {})

    async def scenario() -> None:
        writer.refresh()
        for name in ("a", "b"):
            controller.apply_event("ADDED", workload_body(name))
            writer.refresh()  # still queued: keeps its place, takes the new status
        assert len(writer.queue) == 2  # the ClusterQueue and the LocalQueue, once each
        api.release.set()
        await writer.write_changed()

    asyncio.run(scenario())
    assert [(key, body["pendingWorkloads"]) for key, body in api.patches] == [
        ("ClusterQueue/cq", 2),
        ("LocalQueue/ns/lq", 2),
    ]


def test_the_active_condition_keeps_its_transition_time_while_its_status_holds() -> None:
    api = SlowStatusApi()
    api.release.set()
    controller = leading_controller(api)
    now = [1000.0]
    controller.ctx.clock = lambda: now[0]
    writer = QueueStatusWriter(controller.ctx, {})

    def active() -> dict[str, Any]:
        [body] = [body for key, body in api.patches[-2:] if key == "ClusterQueue/cq"]
        [condition] = body["conditions"]
        return condition

    asyncio.run(writer.write_changed())
    first = active()
    now[0] = 2000.0
    controller.apply_event("ADDED", workload_body("a"))  # the counts change, Active does not
    asyncio.run(writer.write_changed())
    assert api.patches[-2][1]["pendingWorkloads"] == 1
    assert active() == first
    assert first["lastTransitionTime"] == "1970-01-01T00:16:40Z"


def test_a_cluster_queue_is_formatted_again_only_when_its_figures_change() -> None:
    """At 1,000 ClusterQueues formatting every status and setting every gauge each second
    took a tenth of a core; an unchanged queue reuses what it had. Its gauges come back
    after a role change cleared them, and a new term's state is taken afresh."""
    api = SlowStatusApi()
    controller = leading_controller(api)
    writer = QueueStatusWriter(controller.ctx, {})
    metrics = controller.metrics
    writer.refresh()
    status = writer.wanted["ClusterQueue//cq"][2]

    writer.refresh()  # nothing changed: the same status object, no new write wanted
    assert writer.wanted["ClusterQueue//cq"][2] is status

    controller.apply_event("ADDED", workload_body("a"))
    writer.refresh()
    assert writer.wanted["ClusterQueue//cq"][2]["pendingWorkloads"] == 1
    assert _pending_gauge(controller) == 1

    metrics.set_role(LEADER)
    metrics.set_role("follower")  # a leader losing its lease clears the queue gauges
    metrics.set_role("standalone")
    assert _pending_gauge(controller) is None
    writer.refresh()
    assert _pending_gauge(controller) == 1

    controller.reset()  # a new term: an empty state, read again (without the Workload)
    for body in cluster_objects():
        controller.apply_event("ADDED", body)
    writer.refresh()
    assert writer.wanted["ClusterQueue//cq"][2]["pendingWorkloads"] == 0
    assert _pending_gauge(controller) == 0
