"""Flavor assignment modes and fungibility (controller/core/scheduler/flavor_assignment.py)."""

from __future__ import annotations

from api.constants import (
    BorrowWithinCohortPolicy,
    FlavorFungibilityPolicy,
    FlavorFungibilityPreference,
    ReclaimWithinCohortPolicy,
)
from controller.core.model.clusterqueues import FlavorFungibility, PreemptionPolicy
from controller.core.model.workloads import PodSet
from controller.core.scheduler.flavor_assignment import Mode, Preemptible, assign_flavors, show
from tests.unit.core.builders import add, cluster, cq, m, settle, wl

TWO = {"a": {"cpu": "4"}, "b": {"cpu": "4"}}


def assign(state, name: str, workload):  # type: ignore[no-untyped-def]
    return assign_flavors(
        state.cache.quota, state.objects.flavors, state.objects.cluster_queues[name], workload
    )


def test_modes() -> None:
    state = cluster(
        cq("x", {"a": {"cpu": "4"}}, cohort="co"),
        cq("y", {"a": {"cpu": "4"}}, cohort="co"),
        flavors=["a"],
    )
    assert assign(state, "x", wl("w", "x", cpu="3")).mode is Mode.FIT
    assert assign(state, "x", wl("w", "x", cpu="6")).mode is Mode.BORROW
    assert assign(state, "x", wl("w", "x", cpu="9")).mode is Mode.NO_FIT
    add(state, wl("r", "x", cpu="3"))
    settle(state)
    result = assign(state, "x", wl("w", "x", cpu="4"))  # 4 ≤ nominal: preempting could help
    assert result.mode is Mode.BORROW
    add(state, wl("r2", "y", cpu="4"))
    settle(state)
    result = assign(state, "x", wl("w", "x", cpu="4"))
    assert result.mode is Mode.PREEMPT
    assert result.missing() == {("a", "cpu"): m(3)}
    assert result.condition_reason == "WaitingForQuota"


def test_borrow_within_cohort_allows_preempt_mode_beyond_nominal() -> None:
    policy = PreemptionPolicy(
        reclaim_within_cohort=ReclaimWithinCohortPolicy.LOWER_PRIORITY,
        borrow_within_cohort=BorrowWithinCohortPolicy.LOWER_PRIORITY,
    )
    state = cluster(
        cq("x", {"a": {"cpu": "2"}}, cohort="co", preemption=policy),
        cq("y", {"a": {"cpu": "4"}}, cohort="co"),
        flavors=["a"],
    )
    add(state, wl("r", "y", cpu="4"))
    settle(state)
    assert assign(state, "x", wl("w", "x", cpu="3")).mode is Mode.PREEMPT


def test_when_can_preempt_may_stop_search_stops_at_first_flavor() -> None:
    stop = FlavorFungibility(when_can_preempt=FlavorFungibilityPolicy.MAY_STOP_SEARCH)
    state = cluster(cq("x", TWO, fungibility=stop), flavors=["a", "b"])
    add(state, wl("r", "x", cpu="3"))
    settle(state)
    result = assign(state, "x", wl("w", "x", cpu="2"))
    # No preemption engine (no oracle): a preempt-only flavor never stops the scan.
    assert result.mode is Mode.FIT and result.pod_sets[0].flavors == {"cpu": "b"}
    oracle_says_yes = assign_flavors(
        state.cache.quota,
        state.objects.flavors,
        state.objects.cluster_queues["x"],
        wl("w", "x", cpu="2"),
        lambda *_: (Preemptible.PREEMPT, False),
    )
    assert oracle_says_yes.mode is Mode.PREEMPT and oracle_says_yes.pod_sets[0].flavors == {
        "cpu": "a"
    }


def test_preference_preemption_over_borrowing() -> None:
    fung = FlavorFungibility(
        FlavorFungibilityPolicy.TRY_NEXT_FLAVOR,
        FlavorFungibilityPolicy.TRY_NEXT_FLAVOR,
        FlavorFungibilityPreference.PREEMPTION_OVER_BORROWING,
    )
    flavors = {"a": {"cpu": "4"}, "b": {"cpu": "1"}}
    state = cluster(
        cq("x", flavors, cohort="co", fungibility=fung),
        cq("y", {"a": {"cpu": "0"}, "b": {"cpu": "8"}}, cohort="co"),
        flavors=["a", "b"],
    )
    add(state, wl("r", "x", cpu="3"))
    settle(state)
    yes = lambda *_: (Preemptible.PREEMPT, False)  # noqa: E731
    w = wl("w", "x", cpu="2")
    result = assign_flavors(
        state.cache.quota, state.objects.flavors, state.objects.cluster_queues["x"], w, yes
    )
    assert result.pod_sets[0].flavors == {"cpu": "a"} and result.mode is Mode.PREEMPT
    default = cq(
        "x",
        flavors,
        cohort="co",
        fungibility=FlavorFungibility(FlavorFungibilityPolicy.TRY_NEXT_FLAVOR),
    )
    state.set_cluster_queue(default)
    result = assign_flavors(state.cache.quota, state.objects.flavors, default, w, yes)
    assert result.pod_sets[0].flavors == {"cpu": "b"} and result.mode is Mode.BORROW


def test_exceeds_max_quota_and_uncovered() -> None:
    state = cluster(cq("x", {"a": {"cpu": "4"}}), flavors=["a"])
    result = assign(state, "x", wl("w", "x", cpu="5"))
    assert result.condition_reason == "ExceedsMaxQuota"
    gpu = wl("g", "x", pod_sets=[PodSet("main", 1, {"nvidia.com/gpu": 1000})])
    assert assign(state, "x", gpu).condition_reason == "NoMatchingFlavor"


def test_show_uses_binary_suffixes_for_memory() -> None:
    assert show("memory", 2 * (1 << 30) * 1000) == "2Gi"
    assert show("cpu", 1500) == "1500m"
