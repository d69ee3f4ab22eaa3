"""ClusterQueue and LocalQueue status as Kueue keeps it (controller/runtime/queue_status.py),
computed from the engine's state: counts, reservation and usage per flavor and resource
(an evicting Workload still reserves but no longer counts as admitted or used), borrowing,
and the Active condition."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from api.constants import ReclaimWithinCohortPolicy, WithinClusterQueuePolicy
from controller.config import ControllerConfig
from controller.core.afs.sampling import LocalQueueUsage
from controller.core.cache.objects import Inactive
from controller.core.model.clusterqueues import PreemptionPolicy
from controller.core.scheduler.cycle import run_cycle
from controller.runtime.controller import Controller
from controller.runtime.metrics import LEADER
from controller.runtime.queue_status import (
    NO_WORKLOADS,
    QueueStatusWriter,
    active_condition,
    admission_fair_sharing_status,
    cluster_queue_figures,
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
    assert {"ns/a", "ns/b", "ns/c"} <= set(state.cache.admitted)
    state.cache.admitted["ns/c"].evicting = True

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
    b = state.cache.workloads["ns/b"]
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


# Steps over two ClusterQueues of a cohort: add a Workload (priority, cpu), run a cycle
# (admissions; nominations mark their victims evicting), release the n-th Workload holding
# quota (an eviction done, or a Workload finished).
_STEPS = st.lists(
    st.one_of(
        st.tuples(
            st.just("add"),
            st.sampled_from(["a", "b"]),
            st.sampled_from([0, 100]),
            st.integers(1, 4),
        ),
        st.tuples(st.just("cycle")),
        st.tuples(st.just("release"), st.integers(0, 20), st.booleans()),
    ),
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(_STEPS)
def test_the_figures_kept_between_refreshes_are_those_of_a_fresh_count(steps: list[Any]) -> None:
    """The refresh keeps each ClusterQueue's gauge series and sets a gauge only when its
    value changed: after every step, the figures, the statuses wanted and the gauges are
    those counted afresh from the state."""
    policy = PreemptionPolicy(
        within_cluster_queue=WithinClusterQueuePolicy.LOWER_PRIORITY,
        reclaim_within_cohort=ReclaimWithinCohortPolicy.ANY,
    )
    state = cluster(
        cq("a", {"default": {"cpu": ("2", "4")}}, cohort="co", preemption=policy),
        cq("b", {"default": {"cpu": ("2", "4")}}, cohort="co", preemption=policy),
    )
    controller = leading_controller(SlowStatusApi())
    controller.ctx.state = state
    writer = QueueStatusWriter(controller.ctx, {})
    registry = controller.metrics.registry
    now = 0.0
    for n, step in enumerate(steps):
        now += 1.0
        if step[0] == "add":
            _, queue, priority, cpu = step
            add(state, wl(f"w{n}", queue, priority=priority, created=now, cpu=str(cpu)))
        elif step[0] == "cycle":
            run_cycle(state, now)
        else:
            holding = sorted(state.cache.admitted)
            if holding:
                state.release(holding[step[1] % len(holding)], requeue=step[2])
        writer.refresh()
        counts = local_queue_counts(state)
        for name in ("a", "b"):
            fresh = cluster_queue_figures(state, name, state.index.finished_in.get(name, 0))
            facts, status = writer.figures[name]
            assert facts[1] == fresh
            assert status == {**status, **cluster_queue_status(state, name, fresh)}
            labels = {"cluster_queue": name, "replica_role": "standalone"}
            gauges = {
                "kueue_pending_workloads": (
                    {**labels, "status": "active"},
                    fresh.pending - fresh.inadmissible,
                ),
                "kueue_reserving_active_workloads": (labels, fresh.reserving),
                "kueue_admitted_active_workloads": (labels, fresh.admitted),
                "kueue_cluster_queue_resource_usage": (
                    {**labels, "cohort": "co", "flavor": "default", "resource": "cpu"},
                    dict(fresh.used)["default", "cpu"] / 1000,
                ),
                "kueue_cluster_queue_resource_reservation": (
                    {**labels, "cohort": "co", "flavor": "default", "resource": "cpu"},
                    dict(fresh.reserved)["default", "cpu"] / 1000,
                ),
            }
            for metric, (metric_labels, value) in gauges.items():
                assert registry.get_sample_value(metric, metric_labels) == value, metric
            inadmissible = {**labels, "status": "inadmissible"}
            assert (
                registry.get_sample_value("kueue_pending_workloads", inadmissible)
                == fresh.inadmissible
            )
            local = writer.wanted[f"LocalQueue/ns/{name}"][2]
            expected = counts.get(f"ns/{name}", NO_WORKLOADS)
            assert {k: local[k] for k in expected} == expected
