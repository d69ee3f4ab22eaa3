"""`unqueued_decisions` (controller/core/pending.py): every pending Workload the cycle never
looks at (it is in no queue) gets Kueue's QuotaReserved=False reason; Workloads being written and nominated
preemptors are left to their writers; Workloads waiting in an active queue get none."""

from __future__ import annotations

from dataclasses import replace

from api.constants import StopPolicy
from controller.core.cache.objects import Inactive
from controller.core.decisions import Inadmissible
from controller.core.model.clusterqueues import LocalQueue
from controller.core.model.cohorts import Cohort
from controller.core.model.flavors import ResourceFlavor
from controller.core.model.workloads import WorkloadKey
from controller.core.pending import unqueued_decisions
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
    assert set(state.cache.admitted) == {"ns/running"}

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
    Workloads held back (`state.index.held_back`); one deactivated again, then reactivated,
    or finished, drops out."""
    state = add(
        cluster(cq("cq", {"default": {"cpu": "1"}})),
        wl("running", cpu="1"),
        *(wl(f"waiting-{i}", cpu="1") for i in range(5)),
        wl("off", cpu="1", active=False),
        replace(wl("off-finished", cpu="1", active=False), finished=True),
    )
    settle(state)
    assert list(state.index.held_back) == ["ns/off"]

    decisions = unqueued_decisions(state, skip=())
    assert decisions == [
        Inadmissible(WorkloadKey("ns/off"), None, "The workload is deactivated", "Deactivated")
    ]

    add(state, wl("off", cpu="1"))  # reactivated: it waits in its queue, the cycle explains it
    assert not state.index.held_back
    assert unqueued_decisions(state, skip=()) == []


def test_an_invalid_or_gated_workload_waits_outside_the_queue_with_kueues_reason() -> None:
    """A Workload Kueue's rules refuse is not queued (QuotaReserved=False, Misconfigured,
    with what is wrong); one with admission gates left waits for them (AdmissionGated,
    Kueue's message); either is admitted once that is gone. A queue blocker speaks first,
    as in Kueue."""
    state = cluster(cq("cq", {"default": {"cpu": "4"}}))
    problem = 'spec.podSets[0]...requests[pods]: Invalid value: "pods": reserved'
    add(
        state,
        replace(wl("bad", cpu="1"), invalid=problem),
        replace(wl("gated", cpu="1"), admission_gated_by="example.com/a, example.com/b"),
        replace(wl("lost", "nowhere", cpu="1"), admission_gated_by="example.com/a"),
    )
    settle(state)
    assert not state.cache.admitted
    assert list(state.index.held_back) == ["ns/bad", "ns/gated", "ns/lost"]
    decisions = {
        d.workload_key: (d.condition_reason, d.reason) for d in unqueued_decisions(state, ())
    }
    assert decisions == {
        "ns/bad": ("Misconfigured", problem),
        "ns/gated": ("AdmissionGated", "Admission is gated by: example.com/a, example.com/b"),
        "ns/lost": ("Misconfigured", "LocalQueue nowhere doesn't exist"),
    }
    add(state, wl("bad", cpu="1"), wl("gated", cpu="1"))  # fixed, and the gates removed
    settle(state)
    assert set(state.cache.admitted) == {"ns/bad", "ns/gated"}


def test_invalid_queues_flavors_and_cohorts_make_their_queues_inactive() -> None:
    """An invalid ClusterQueue, a queue naming an invalid flavor or under an invalid Cohort,
    and an invalid LocalQueue admit nothing (Active=False, Invalid, with what is wrong), and
    their pending Workloads say why; a fixed object lets them run again."""
    state = cluster(
        cq("bad-cq", {"default": {"cpu": "4"}}),
        cq("flavored", {"spot": {"cpu": "4"}}),
        cq("tree", {"default": {"cpu": "4"}}, cohort="team"),
        cq("fine", {"default": {"cpu": "4"}}),
        flavors=("default", "spot"),
    )
    state.set_cluster_queue(
        replace(state.objects.cluster_queues["bad-cq"], invalid="lendingLimit: bad")
    )
    state.set_flavor(ResourceFlavor("spot", invalid="spec.tolerations: bad"))
    state.set_cohort(Cohort("team", invalid="spec.resourceGroups: bad"))
    state.set_local_queue(LocalQueue("ns", "broken", "fine", invalid="spec: bad"))
    add(
        state,
        *(wl(f"in-{name}", name, cpu="1") for name in ("bad-cq", "flavored", "tree", "fine")),
        wl("in-broken", "broken", cpu="1"),
    )
    settle(state)
    assert set(state.cache.admitted) == {"ns/in-fine"}
    assert state.objects.cluster_queue_inactive("bad-cq") == Inactive(
        "Invalid", "ClusterQueue bad-cq is inactive: lendingLimit: bad"
    )
    assert state.objects.cluster_queue_inactive("flavored") == Inactive(
        "Invalid",
        "ClusterQueue flavored is inactive: ResourceFlavor spot is invalid: spec.tolerations: bad",
    )
    assert state.objects.cluster_queue_inactive("tree") == Inactive(
        "Invalid", "ClusterQueue tree is inactive: Cohort team is invalid: spec.resourceGroups: bad"
    )
    assert state.objects.local_queue_inactive("ns/broken") == Inactive(
        "Invalid", "LocalQueue broken is inactive: spec: bad"
    )
    reasons = {d.workload_key: d.condition_reason for d in unqueued_decisions(state, ())}
    assert reasons == dict.fromkeys(
        ("ns/in-bad-cq", "ns/in-flavored", "ns/in-tree", "ns/in-broken"), "Suspended"
    )
    state.set_cluster_queue(replace(state.objects.cluster_queues["bad-cq"], invalid=None))
    state.set_flavor(ResourceFlavor("spot"))
    state.set_cohort(Cohort("team"))
    state.set_local_queue(LocalQueue("ns", "broken", "fine"))
    settle(state)
    assert len(state.cache.admitted) == 5


def test_a_workload_on_hold_is_neither_queued_nor_given_a_reason_until_its_hold_ends() -> None:
    """Kueue's OnHold (a RayJob KubeRay refused): the job side released its quota with
    QuotaReserved=False OnHold; it is not queued again, and no pending reason replaces
    that one. Without the hold it is queued and admitted."""
    state = add(
        cluster(cq("cq", {"default": {"cpu": "1"}})), replace(wl("held", cpu="1"), on_hold=True)
    )
    settle(state)
    assert not state.cache.admitted
    assert unqueued_decisions(state, skip=()) == []
    add(state, wl("held", cpu="1"))
    settle(state)
    assert set(state.cache.admitted) == {"ns/held"}
