"""Admission scenarios (controller/core/scheduler/cycle.py): a small cluster, a few Workloads, the
expected admissions and reasons."""

from __future__ import annotations

from dataclasses import replace

from api.constants import FlavorFungibilityPolicy, QueueingStrategy, StopPolicy
from controller.core.model.clusterqueues import FlavorFungibility, LocalQueue
from controller.core.model.flavors import ResourceFlavor, Taint
from controller.core.model.selectors import LabelSelector, Requirement
from controller.core.model.workloads import PodSet, Toleration
from controller.core.pending import unqueued_reason, why_pending
from controller.core.scheduler.cycle import run_cycle
from controller.core.scheduler.flavor_assignment import Mode
from controller.core.scheduler.memory import SchedulerMemory
from tests.unit.core.builders import add, cluster, cq, m, settle, usage, wl

STRICT = QueueingStrategy.STRICT_FIFO


def test_nominal_fit_admits_and_charges_quota() -> None:
    state = add(cluster(cq("cq", {"default": {"cpu": "10"}})), wl("a", cpu="3", count=3))
    result = run_cycle(state, 0)
    [admit] = result.admitted
    assert admit.workload_key == "ns/a"
    assert admit.borrowing is False
    assert admit.pod_sets[0].flavors == {"cpu": "default"}
    assert admit.pod_sets[0].resource_usage == {"cpu": m(9)}
    assert usage(state, "cq") == m(9)


def test_many_heads_in_one_cycle_never_share_capacity() -> None:
    state = cluster(
        cq("a", {"default": {"cpu": "4"}}, cohort="co"),
        cq("b", {"default": {"cpu": "4"}}, cohort="co"),
        cq("c", {"default": {"cpu": "0"}}, cohort="co"),
    )
    add(state, wl("wa", "a", cpu="4"), wl("wb", "b", cpu="2"), wl("wc", "c", cpu="4"))
    result = run_cycle(state, 0)
    # a and b fit without borrowing and go first; c can only borrow the 2 left.
    assert {x.workload_key for x in result.admitted} == {"ns/wa", "ns/wb"}
    assert result.requeued == ("ns/wc",)
    assert state.cache.quota.usage("c", ("default", "cpu")) == 0


def test_non_borrowing_heads_go_before_older_higher_priority_borrowers() -> None:
    state = cluster(
        cq("a", {"default": {"cpu": "0"}}, cohort="co"),
        cq("b", {"default": {"cpu": "4"}}, cohort="co"),
    )
    add(state, wl("borrower", "a", cpu="4", priority=100), wl("owner", "b", cpu="4", created=5))
    result = run_cycle(state, 0)
    assert [x.workload_key for x in result.admitted] == ["ns/owner"]
    assert "ns/borrower" in result.requeued


def test_borrowers_in_one_cohort_rechecked_against_updated_usage() -> None:
    state = cluster(
        cq("lender", {"default": {"cpu": "6"}}, cohort="co"),
        cq("a", {"default": {"cpu": "0"}}, cohort="co"),
        cq("b", {"default": {"cpu": "0"}}, cohort="co"),
    )
    add(state, wl("wa", "a", cpu="3", priority=2), wl("wb", "b", cpu="3", priority=1))
    result = run_cycle(state, 0)
    assert {x.workload_key for x in result.admitted} == {"ns/wa", "ns/wb"}
    assert all(x.borrowing for x in result.admitted)
    add(state, wl("wc", "a", cpu="1"))
    result = run_cycle(state, 0)
    assert not result.admitted
    assert "insufficient quota for cpu in flavor default" in result.inadmissible[0].reason


def test_borrowing_limit_caps_borrowing() -> None:
    state = cluster(
        cq("a", {"default": {"cpu": ("2", "1", None)}}, cohort="co"),
        cq("b", {"default": {"cpu": "10"}}, cohort="co"),
    )
    add(state, wl("big", "a", cpu="4"), wl("ok", "a", cpu="3", created=1))
    settle(state)
    assert set(state.cache.admitted) == {"ns/ok"}
    assert "at most 3 can ever be available" in why_pending(state, "ns/big")


def test_lending_limit_keeps_part_of_nominal_private() -> None:
    # Kueue's example: lender nominal 10, lendingLimit 3 ⇒ contributes only 3.
    state = cluster(
        cq("lender", {"default": {"cpu": ("10", None, "3")}}, cohort="co"),
        cq("borrower", {"default": {"cpu": "0"}}, cohort="co"),
    )
    add(state, wl("w4", "borrower", cpu="4"), wl("w3", "borrower", cpu="3", created=1))
    settle(state)
    assert set(state.cache.admitted) == {"ns/w3"}
    # The lender itself can still use all of its 10 - 3 lent = 7 private + nothing more.
    add(state, wl("own", "lender", cpu="7"))
    settle(state)
    assert "ns/own" in state.cache.admitted
    assert state.cache.quota.available("lender", ("default", "cpu")) == 0


def test_lending_limit_digest_example() -> None:
    state = cluster(
        cq("lend-a", {"default": {"cpu": ("3", None, "2")}}, cohort="co"),
        cq("lend-b", {"default": {"cpu": ("2", None, "2")}}, cohort="co"),
    )
    add(state, wl("b2", "lend-b", cpu="2"))
    settle(state)
    assert state.cache.quota.available("lend-b", ("default", "cpu")) == m(2)
    assert state.cache.quota.potential_available("lend-b", ("default", "cpu")) == m(4)


def test_no_cohort_means_no_borrowing() -> None:
    state = add(cluster(cq("cq", {"default": {"cpu": "4"}})), wl("a", cpu="6"))
    result = run_cycle(state, 0)
    assert not result.admitted
    assert result.inadmissible[0].condition_reason == "ExceedsMaxQuota"


def test_preemption_needed_is_inadmissible_with_what_is_missing() -> None:
    state = add(
        cluster(cq("cq", {"on-demand": {"cpu": "10"}}), flavors=["on-demand"]), wl("a", cpu="8")
    )
    settle(state)
    add(state, wl("b", cpu="6"))
    result = run_cycle(state, 0)
    [refused] = result.inadmissible
    assert refused.reason == (
        "insufficient quota for cpu in flavor on-demand: requested 6, available 2 "
        "(nominal 10, reserved 8, borrowable 0)"
    )
    assert refused.assignment is not None
    assert refused.assignment.mode is Mode.PREEMPT
    assert refused.assignment.missing() == {("on-demand", "cpu"): m(4)}


def test_flavors_tried_in_order_and_borrowing_stops_search_by_default() -> None:
    flavors = {"on-demand": {"cpu": "2"}, "spot": {"cpu": "10"}}
    state = cluster(
        cq("a", flavors, cohort="co"),
        cq("b", {"on-demand": {"cpu": "10"}, "spot": {"cpu": "0"}}, cohort="co"),
        flavors=["on-demand", "spot"],
    )
    add(state, wl("w", "a", cpu="4"))
    [admit] = run_cycle(state, 0).admitted
    assert admit.pod_sets[0].flavors == {"cpu": "on-demand"}
    assert admit.borrowing


def test_try_next_flavor_when_can_borrow_prefers_a_flavor_without_borrowing() -> None:
    flavors = {"on-demand": {"cpu": "2"}, "spot": {"cpu": "10"}}
    fungibility = FlavorFungibility(when_can_borrow=FlavorFungibilityPolicy.TRY_NEXT_FLAVOR)
    state = cluster(
        cq("a", flavors, cohort="co", fungibility=fungibility),
        cq("b", {"on-demand": {"cpu": "10"}, "spot": {"cpu": "0"}}, cohort="co"),
        flavors=["on-demand", "spot"],
    )
    add(state, wl("w", "a", cpu="4"))
    [admit] = run_cycle(state, 0).admitted
    assert admit.pod_sets[0].flavors == {"cpu": "spot"}
    assert not admit.borrowing


def test_second_flavor_used_when_first_is_full() -> None:
    state = cluster(
        cq("cq", {"on-demand": {"cpu": "2"}, "spot": {"cpu": "4"}}),
        flavors=["on-demand", "spot"],
    )
    add(state, wl("a", cpu="2"), wl("b", cpu="3", created=1))
    settle(state)
    assert state.cache.admitted["ns/b"].admission.pod_set_assignments[0].flavors == {"cpu": "spot"}


def test_resources_of_one_group_share_a_flavor() -> None:
    flavors = {"small": {"cpu": "8", "memory": "1Gi"}, "big": {"cpu": "8", "memory": "8Gi"}}
    state = cluster(cq("cq", flavors), flavors=["small", "big"])
    add(state, wl("a", cpu="1", memory="2Gi"))
    [admit] = run_cycle(state, 0).admitted
    assert admit.pod_sets[0].flavors == {"cpu": "big", "memory": "big"}


def test_flavor_taints_and_node_selector() -> None:
    spot = ResourceFlavor("spot", {"tier": "spot"}, (Taint("spot", "true", "NoSchedule"),))
    on_demand = ResourceFlavor("on-demand", {"tier": "on-demand"})
    state = cluster(
        cq("cq", {"spot": {"cpu": "10"}, "on-demand": {"cpu": "10"}}), flavors=[spot, on_demand]
    )
    tolerating = PodSet("main", 1, {"cpu": m(1)}, tolerations=(Toleration("spot", "Exists"),))
    pinned = PodSet("main", 1, {"cpu": m(1)}, {"tier": "on-demand", "other": "ignored"})
    add(state, wl("plain", cpu="1"), wl("tol", pod_sets=[tolerating]), wl("pin", pod_sets=[pinned]))
    settle(state)
    flavor = {
        k: a.admission.pod_set_assignments[0].flavors["cpu"]
        for k, a in state.cache.admitted.items()
    }
    assert flavor == {"ns/plain": "on-demand", "ns/tol": "spot", "ns/pin": "on-demand"}


def test_no_matching_flavor_reason() -> None:
    state = cluster(cq("cq", {"x": {"cpu": "10"}}), flavors=[ResourceFlavor("x", {"zone": "a"})])
    add(state, wl("w", cpu="1", node_selector={"zone": "b"}))
    [refused] = run_cycle(state, 0).inadmissible
    assert refused.condition_reason == "NoMatchingFlavor"
    assert "zone=b" in refused.reason


def test_affinity_restricted_to_flavor_label_keys() -> None:
    state = cluster(cq("cq", {"x": {"cpu": "10"}}), flavors=[ResourceFlavor("x", {"zone": "a"})])
    term = (Requirement("zone", "In", ("a", "b")), Requirement("gpu", "Exists"))
    add(state, wl("w", pod_sets=[PodSet("main", 1, {"cpu": m(1)}, affinity_terms=(term,))]))
    assert run_cycle(state, 0).admitted


def test_strict_fifo_blocks_behind_its_head() -> None:
    state = cluster(cq("cq", {"default": {"cpu": "4"}}, strategy=STRICT))
    add(state, wl("big", cpu="5"), wl("small", cpu="1", created=1))
    settle(state)
    assert not state.cache.admitted
    assert "waiting in queue" in why_pending(state, "ns/small")


def test_best_effort_fifo_moves_on_and_retries_when_quota_frees() -> None:
    state = cluster(cq("cq", {"default": {"cpu": "4"}}))
    add(state, wl("running", cpu="3", created=-1))
    settle(state)
    add(state, wl("big", cpu="2"), wl("small", cpu="1", created=1))
    settle(state)
    assert set(state.cache.admitted) == {"ns/running", "ns/small"}
    assert state.queues["cq"].is_inadmissible("ns/big")
    state.release("ns/running", requeue=False)
    settle(state)
    assert "ns/big" in state.cache.admitted


def test_gang_is_all_or_nothing() -> None:
    state = add(cluster(cq("cq", {"default": {"cpu": "10"}})), wl("gang", cpu="3", count=4))
    result = run_cycle(state, 0)
    assert not result.admitted
    assert usage(state, "cq") == 0
    assert "requested 12" in result.inadmissible[0].reason


def test_multiple_podsets_accumulate_in_one_flavor() -> None:
    sets = [PodSet("driver", 1, {"cpu": m(2)}), PodSet("workers", 4, {"cpu": m(2)})]
    state = add(cluster(cq("cq", {"default": {"cpu": "9"}})), wl("job", pod_sets=sets))
    result = run_cycle(state, 0)
    assert not result.admitted
    assert "podset workers" in result.inadmissible[0].reason
    assert "requested 10" in result.inadmissible[0].reason


def test_pods_resource_counts_pods() -> None:
    state = add(
        cluster(cq("cq", {"default": {"cpu": "10", "pods": "3"}})), wl("w", cpu="1", count=4)
    )
    result = run_cycle(state, 0)
    assert "insufficient quota for pods" in result.inadmissible[0].reason
    add(state, wl("ok", cpu="1", count=3))
    settle(state)
    assert state.cache.admitted["ns/ok"].usage[("default", "pods")] == m(3)


def test_uncovered_resource_is_inadmissible() -> None:
    sets = [PodSet("main", 1, {"cpu": m(1), "nvidia.com/gpu": m(1)})]
    state = add(cluster(cq("cq", {"default": {"cpu": "10"}})), wl("w", pod_sets=sets))
    [refused] = run_cycle(state, 0).inadmissible
    assert refused.reason == "resource nvidia.com/gpu unavailable in ClusterQueue cq"


def test_namespace_selector() -> None:
    selector = LabelSelector({"team": "a"}, (Requirement("env", "NotIn", ("prod",)),))
    state = cluster(cq("cq", {"default": {"cpu": "10"}}, selector=selector, strategy=STRICT))
    state.set_namespace("ns", {"team": "b"})
    add(state, wl("w", cpu="1"))
    [refused] = run_cycle(state, 0).inadmissible
    assert refused.condition_reason == "Misconfigured"
    assert state.queues["cq"].is_inadmissible("ns/w")  # parked even under StrictFIFO
    state.set_namespace("ns", {"team": "a"})
    assert run_cycle(state, 0).admitted


def test_null_namespace_selector_admits_nothing() -> None:
    state = add(cluster(cq("cq", {"default": {"cpu": "10"}}, selector=None)), wl("w", cpu="1"))
    assert not run_cycle(state, 0).admitted


def test_stop_policy_hold_admits_nothing_new() -> None:
    state = add(
        cluster(cq("cq", {"default": {"cpu": "10"}}, stop=StopPolicy.HOLD)), wl("w", cpu="1")
    )
    result = run_cycle(state, 0)
    assert not result.admitted and not result.inadmissible
    assert why_pending(state, "ns/w") == "ClusterQueue cq is inactive: stopped (Hold)"


def test_stop_policy_hold_and_drain_evicts_admitted_once() -> None:
    state = add(cluster(cq("cq", {"default": {"cpu": "10"}})), wl("w", cpu="1"))
    settle(state)
    state.set_cluster_queue(cq("cq", {"default": {"cpu": "10"}}, stop=StopPolicy.HOLD_AND_DRAIN))
    [evict] = run_cycle(state, 0).evicted
    assert (evict.workload_key, evict.reason) == ("ns/w", "ClusterQueueStopped")
    assert usage(state, "cq") == m(1)  # still held until released
    assert not run_cycle(state, 0).evicted
    state.release("ns/w")
    assert usage(state, "cq") == 0
    assert not run_cycle(state, 0).admitted


def test_stopped_local_queue_holds_its_workloads_until_resumed() -> None:
    """Kueue's LocalQueue stopPolicy: Hold admits nothing new from that LocalQueue (pending
    reason Suspended); HoldAndDrain also evicts its admitted Workloads (LocalQueueStopped);
    resuming queues the held Workloads again. Other LocalQueues are unaffected."""
    state = add(cluster(cq("cq", {"default": {"cpu": "10"}})), wl("running", cpu="1"))
    settle(state)
    state.set_local_queue(LocalQueue("ns", "other", "cq"))
    state.set_local_queue(LocalQueue("ns", "cq", "cq", StopPolicy.HOLD))
    add(state, wl("held", cpu="1"), wl("elsewhere", "other", cpu="1"))
    result = run_cycle(state, 0)
    assert [a.workload_key for a in result.admitted] == ["ns/elsewhere"]
    assert not result.evicted  # Hold keeps what runs
    unqueued = unqueued_reason(state, "ns/held")
    assert unqueued is not None
    assert (unqueued.reason, unqueued.message) == (
        "Suspended",
        "LocalQueue cq is inactive: stopped (Hold)",
    )

    state.set_local_queue(LocalQueue("ns", "cq", "cq", StopPolicy.HOLD_AND_DRAIN))
    [evict] = run_cycle(state, 0).evicted
    assert (evict.workload_key, evict.reason) == ("ns/running", "LocalQueueStopped")
    state.release("ns/running")
    assert not run_cycle(state, 0).admitted  # both wait while the LocalQueue is stopped

    state.set_local_queue(LocalQueue("ns", "cq", "cq"))
    settle(state)
    assert {"ns/running", "ns/held", "ns/elsewhere"} <= set(state.cache.admitted)
    assert state.objects.local_queue_inactive("ns/cq") is None


def test_inactive_workload_never_admitted() -> None:
    state = add(cluster(cq("cq", {"default": {"cpu": "10"}})), wl("w", cpu="1", active=False))
    settle(state)
    assert not state.cache.admitted
    assert "deactivated" in why_pending(state, "ns/w")


def test_missing_flavor_makes_queue_inactive() -> None:
    state = add(cluster(cq("cq", {"gone": {"cpu": "10"}}), flavors=[]), wl("w", cpu="1"))
    settle(state)
    assert "flavor gone not found" in why_pending(state, "ns/w")
    state.set_flavor(ResourceFlavor("gone"))
    settle(state)
    assert "ns/w" in state.cache.admitted


def test_backoff_delays_requeue_until_requeue_at() -> None:
    state = add(cluster(cq("cq", {"default": {"cpu": "10"}})), wl("w", cpu="1"))
    settle(state)
    # The job side releases a Workload evicted with status.requeueState.requeueAt = 160.
    state.release("ns/w")
    state.upsert_workload(replace(state.cache.records["ns/w"].workload, requeue_at=160.0))
    assert not run_cycle(state, 159.0).admitted
    assert run_cycle(state, 160.0).admitted
    state.release("ns/w")
    state.upsert_workload(replace(state.cache.records["ns/w"].workload, requeue_at=320.0))
    assert not run_cycle(state, 319.0).admitted
    assert run_cycle(state, 320.0).admitted


def test_capacity_held_back_for_a_queue_waiting_to_preempt() -> None:
    # "owner" needs 6 of its nominal 10: 4 are used by its own Workload and 4 lent to the
    # borrower, so it would fit within nominal but has no candidates (it may preempt
    # nobody). It is processed before the borrowers (no borrowing) and holds back what it
    # is entitled to, so a borrower cannot take the 2 free cpu this cycle (Kueue §5.6.3).
    state = cluster(
        cq("owner", {"default": {"cpu": "10"}}, cohort="co"),
        cq("borrower", {"default": {"cpu": "0"}}, cohort="co"),
    )
    add(state, wl("running", "owner", cpu="4"), wl("lent", "borrower", cpu="4"))
    settle(state)
    add(state, wl("needs", "owner", cpu="6"), wl("b", "borrower", cpu="2", created=-5))
    result = run_cycle(state, 0)
    assert not result.admitted
    assert usage(state, "borrower") == m(4)


def test_a_borrowing_head_without_candidates_comes_after_an_older_borrower() -> None:
    # As in Kueue, a head that needs preemption but has no candidates keeps the borrowing
    # level it has now: "needs" (8 used + 6 > 10) borrows, like "b", which is older, so "b"
    # is processed first and admitted with the 2 free cpu.
    state = cluster(
        cq("owner", {"default": {"cpu": "10"}}, cohort="co"),
        cq("borrower", {"default": {"cpu": "0"}}, cohort="co"),
    )
    add(state, wl("running", "owner", cpu="8"))
    settle(state)
    add(state, wl("needs", "owner", cpu="6"), wl("b", "borrower", cpu="2", created=-5))
    result = run_cycle(state, 0)
    assert [a.workload_key for a in result.admitted] == ["ns/b"]


def test_workloads_alike_to_a_refused_head_are_parked_with_its_reason_but_no_decision() -> None:
    state = add(
        cluster(cq("cq", {"default": {"cpu": "2"}})),
        wl("big", cpu="2", created=0),
        *(wl(f"w{i}", cpu="1", created=1 + i) for i in range(4)),
        wl("other", cpu="3", created=9),
    )
    assert [x.workload_key for x in run_cycle(state, 0).admitted] == ["ns/big"]
    first = run_cycle(state, 0)
    # The head w0 is tried; w1..w3 are the same but for their age: parked behind it with
    # its reason, without a decision each (nothing to write for them).
    [refused] = first.inadmissible
    assert refused.workload_key == "ns/w0"
    assert first.changed
    for i in range(1, 4):
        assert why_pending(state, f"ns/w{i}") == refused.reason
        assert state.queues["cq"].is_inadmissible(f"ns/w{i}")
    # `other` differs, so it is tried on its own in the next cycle.
    assert [x.workload_key for x in run_cycle(state, 0).inadmissible] == ["ns/other"]


def test_a_cycle_admits_no_more_than_its_admission_limit_the_rest_untried() -> None:
    """Step 9: with room for two admission writes, the two heads first in the cycle's
    order (within nominal quota, then priority) are admitted; the others stay at the head
    of their queues with nothing recorded, and go in the next cycle."""
    state = add(
        cluster(
            *(cq(f"q{n}", {"default": {"cpu": ("2", "10")}}, cohort="co") for n in range(4)),
        ),
        wl("low", "q0", cpu="1", priority=1),
        wl("high", "q1", cpu="1", priority=9),
        wl("middle", "q2", cpu="1", priority=5),
        wl("borrows", "q3", cpu="4", priority=100),
    )

    first = run_cycle(state, 0.0, admission_limit=2)

    assert [a.workload_key for a in first.admitted] == ["ns/high", "ns/middle"]
    assert first.inadmissible == () and first.requeued == () and first.changed
    for key in ("ns/low", "ns/borrows"):
        assert key not in state.cache.admitted
        assert state.cache.records[key].reason is None  # untried: no reason recorded
    assert {name for name, queue in state.queues.items() if queue.has_heads()} == {"q0", "q3"}

    second = run_cycle(state, 0.0, admission_limit=2)

    assert [a.workload_key for a in second.admitted] == ["ns/low", "ns/borrows"]


def test_no_admission_limit_admits_every_head_that_fits() -> None:
    state = add(
        cluster(*(cq(f"q{n}", {"default": {"cpu": "2"}}) for n in range(3))),
        *(wl(f"w{n}", f"q{n}", cpu="1") for n in range(3)),
    )
    assert len(run_cycle(state, 0.0).admitted) == 3


def test_queues_a_limited_cycle_passed_over_go_first_in_the_next_one() -> None:
    """Step 9's turns: q0's heads are low priority and q1's high; with room for one
    admission per cycle, Kueue's order alone would admit all of q1 first. Passed over
    once, q0 goes first in the next limited cycle: the queues take turns."""
    state = add(
        cluster(*(cq(f"q{n}", {"default": {"cpu": "10"}}) for n in range(2))),
        *(wl(f"low-{n}", "q0", cpu="1", priority=1, created=float(n)) for n in range(3)),
        *(wl(f"high-{n}", "q1", cpu="1", priority=9, created=float(n)) for n in range(3)),
    )
    memory = SchedulerMemory(state)
    admitted = [
        a.workload_key
        for n in range(6)
        for a in run_cycle(state, float(n), memory=memory, admission_limit=1).admitted
    ]
    assert admitted == [
        "ns/high-0",
        "ns/low-0",
        "ns/high-1",
        "ns/low-1",
        "ns/high-2",
        "ns/low-2",
    ]
    assert memory.passed_over == {}  # the last cycle left nothing untried
