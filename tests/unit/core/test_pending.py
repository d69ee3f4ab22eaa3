"""`unqueued_decisions` (controller/core/pending.py): every pending Workload the cycle never
looks at (it is in no queue) gets Kueue's QuotaReserved=False reason; Workloads being written and nominated
preemptors are left to their writers; Workloads waiting in an active queue get none."""

from __future__ import annotations

from dataclasses import replace

from controller.core.clusterqueues import LocalQueue, StopPolicy
from controller.core.decisions import Inadmissible
from controller.core.pending import unqueued_decisions
from controller.core.workloads import WorkloadKey
from tests.unit.core.builders import add, cluster, cq, settle, wl


def test_each_unqueued_workload_gets_kueues_reason() -> None:
    state = add(
        cluster(cq("cq", {"default": {"cpu": "1"}})),
        wl("running", cpu="1"),
        wl("waiting", cpu="1"),  # in an active queue: the cycle explains it
        wl("off", cpu="1", active=False),
        wl("lost", "nowhere", cpu="1"),
    )
    state.set_local_queue(LocalQueue("ns", "held", "cq", StopPolicy.HOLD))
    state.set_local_queue(LocalQueue("ns", "dangling", "gone"))
    add(state, wl("on-hold", "held", cpu="1"), wl("orphan", "dangling", cpu="1"))
    settle(state)
    assert set(state.admitted) == {"ns/running"}

    decisions = {d.workload_key: d for d in unqueued_decisions(state, skip=())}

    assert decisions == {
        "ns/off": Inadmissible(
            WorkloadKey("ns/off"), None, "The workload is deactivated", "Deactivated"
        ),
        "ns/lost": Inadmissible(
            WorkloadKey("ns/lost"), None, "LocalQueue nowhere doesn't exist", "Misconfigured"
        ),
        "ns/on-hold": Inadmissible(
            WorkloadKey("ns/on-hold"),
            None,
            "LocalQueue held is inactive: stopped (Hold)",
            "Suspended",
        ),
        "ns/orphan": Inadmissible(
            WorkloadKey("ns/orphan"), None, "ClusterQueue gone doesn't exist", "Misconfigured"
        ),
    }


def test_workloads_being_written_are_skipped() -> None:
    state = add(cluster(cq("cq", {"default": {"cpu": "1"}})), wl("a", "x"), wl("b", "x"))
    decisions = unqueued_decisions(state, skip={WorkloadKey("ns/a")})
    assert [d.workload_key for d in decisions] == ["ns/b"]


def test_with_every_queue_active_only_the_deactivated_get_a_reason() -> None:
    """While every LocalQueue with Workloads is active, the pass looks only at the
    deactivated Workloads (`state.deactivated`); one deactivated again, then reactivated,
    or finished, drops out."""
    state = add(
        cluster(cq("cq", {"default": {"cpu": "1"}})),
        wl("running", cpu="1"),
        *(wl(f"waiting-{i}", cpu="1") for i in range(5)),
        wl("off", cpu="1", active=False),
        replace(wl("off-finished", cpu="1", active=False), finished=True),
    )
    settle(state)
    assert list(state.deactivated) == ["ns/off"]

    decisions = unqueued_decisions(state, skip=())
    assert decisions == [
        Inadmissible(WorkloadKey("ns/off"), None, "The workload is deactivated", "Deactivated")
    ]

    add(state, wl("off", cpu="1"))  # reactivated: it waits in its queue, the cycle explains it
    assert not state.deactivated
    assert unqueued_decisions(state, skip=()) == []


def test_a_workload_on_hold_is_neither_queued_nor_given_a_reason_until_its_hold_ends() -> None:
    """Kueue's OnHold (a RayJob KubeRay refused): the job side released its quota with
    QuotaReserved=False OnHold; it is not queued again, and no pending reason replaces
    that one. Without the hold it is queued and admitted."""
    state = add(
        cluster(cq("cq", {"default": {"cpu": "1"}})), replace(wl("held", cpu="1"), on_hold=True)
    )
    settle(state)
    assert not state.admitted
    assert unqueued_decisions(state, skip=()) == []
    add(state, wl("held", cpu="1"))
    settle(state)
    assert set(state.admitted) == {"ns/held"}
