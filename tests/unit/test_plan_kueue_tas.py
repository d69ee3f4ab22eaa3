"""Topology-aware decisions as Kueue's scheduler makes them: cases of Kueue's
`pkg/scheduler/scheduler_tas_test.go` (TestScheduleForTASPreemption and
TestScheduleForTASCohorts), each as manifests under tests/unit/data/kueue_tas/ named after
the Kueue case, run through `quotagate plan` for one admission cycle (Kueue's test runs
one). Each test states what Kueue's test expects: the Workloads evicted for the preemptor
(wantWorkloads' Evicted/Preempted conditions) and those left pending (wantLeft).

Kueue's fixtures put pods on a node past its allocatable (a 5-pod Workload of 1 cpu each on
a 3-cpu node); the manifests keep them as they are: an admitted Workload's assignment is
counted as written."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.kueue_cases import plan_case


def plan(case: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    return plan_case("kueue_tas", case, capsys, cycles=1)


def victims(result: dict[str, Any], preemptor: str) -> list[tuple[str, str, str]]:
    """The preemptor's victims: (workload, ClusterQueue, reason)."""
    [preempting] = [p for p in result["preempting"] if p["workload"] == preemptor]
    return [(v["workload"], v["clusterQueue"], v["reason"]) for v in preempting["victims"]]


def test_only_low_priority_workload_is_preempted(capsys: pytest.CaptureFixture[str]) -> None:
    """One 5-cpu node full with a priority-1 Workload; a priority-3 one-pod Workload
    (preferred: hostname) fits the quota but no node: the low-priority Workload is
    preempted and the preemptor waits for it."""
    result = plan("only-low-priority-workload-is-preempted", capsys)
    assert result["admitted"] == []
    assert victims(result, "default/foo") == [
        ("default/low-priority-admitted", "tas-main", "InClusterQueue")
    ]


def test_low_priority_workload_is_preempted_mid_priority_workload_survives(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Two 2-cpu Workloads (priorities 1 and 2) leave 1 cpu on the node; the 2-cpu
    preemptor (priority 3) needs one of them gone: the lower priority goes."""
    result = plan("low-priority-workload-is-preempted-mid-priority-workload-survives", capsys)
    assert result["admitted"] == []
    assert victims(result, "default/foo") == [
        ("default/low-priority-admitted", "tas-main", "InClusterQueue")
    ]


def test_low_priority_workload_is_preempted_even_though_there_is_enough_capacity_but_fragmented(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Two nodes each 4/5 full leave 2 cpus, enough for the two pods, but they must share
    one node: the lower-priority Workload is preempted."""
    result = plan(
        "low-priority-workload-is-preempted-even-though-there-is-enough-capacity-but-fragmented",
        capsys,
    )
    assert result["admitted"] == []
    assert victims(result, "default/foo") == [
        ("default/low-priority-admitted", "tas-main", "InClusterQueue")
    ]


def test_workload_with_equal_priority_awaits_for_other_workloads_to_complete(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The head (priority 2, two pods on one node) cannot preempt a Workload of its own
    priority and waits; in that cycle the lower-priority Workload behind it, which would
    fit, is not admitted either."""
    result = plan("workload-with-equal-priority-awaits-for-other-workloads-to-complete", capsys)
    assert result["admitted"] == [] and result["preempting"] == []
    assert {p["workload"]: p["clusterQueue"] for p in result["pending"]} == {
        "default/low-priority-which-would-fit": "tas-main",
        "default/mid-priority-waiting": "tas-main",
    }


def test_reclaim_within_cohort_single_borrowing_workload_gets_preempted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """tas-cq-a borrows (5 cpus of its nominal 4); tas-cq-b's 4-pod Workload lacks quota
    in the cohort: a1 is reclaimed. Our search also checks the pods then have a node: y1
    is free for them (preferred: hostname)."""
    result = plan("reclaim-within-cohort-single-borrowing-workload-gets-preempted", capsys)
    assert result["admitted"] == []
    assert victims(result, "default/b1") == [
        ("default/a1-admitted", "tas-cq-a", "InCohortReclamation")
    ]


def test_reclaim_within_cohort_single_workload_is_preempted_out_three_candidates(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """tas-cq-a borrows 4 cpus with three Workloads; b1 needs 3: only a1 (the lowest
    priority, 5 cpus on x1) is reclaimed, which also frees x1 for b1's pods."""
    result = plan("reclaim-within-cohort-single-workload-is-preempted-out-three-candidates", capsys)
    assert result["admitted"] == []
    assert victims(result, "default/b1") == [
        ("default/a1-admitted", "tas-cq-a", "InCohortReclamation")
    ]


def test_multi_layer_block_required_rack_slices_of_4_host_slices_of_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """TestFindTopologyAssignments' multi-layer case through the whole plan: 8 pods in one
    block, racks of 4, hosts of 2; x1 (1 cpu) holds no host slice, so r1's 4 pods go to
    x2 and r2's to x3 and x4 (Kueue: x2×4, x3×2, x4×2)."""
    result = plan("multi-layer-block-required-rack-slices-of-4-host-slices-of-2", capsys)
    [admitted] = result["admitted"]
    assert admitted["podSets"][0]["topology"] == "kubernetes.io/hostname: x2×4, x3×2, x4×2"


def test_with_pods_count_usage_pressure_on_nodes_only_low_priority_workload_is_preempted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The node takes one pod only (allocatable pods: 1): the waiting Workload needs the
    admitted one's pod gone, not only its cpus."""
    result = plan(
        "with-pods-count-usage-pressure-on-nodes-only-low-priority-workload-is-preempted", capsys
    )
    assert result["admitted"] == []
    assert victims(result, "default/high-priority-waiting") == [
        ("default/low-priority-admitted", "tas-main", "InClusterQueue")
    ]


def test_workload_which_requires_borrowing_gets_scheduled(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """6 pods of 1 cpu in tas-cq-a (nominal 4) borrow from tas-cq-b and are spread over
    the two nodes as preferred: x1 1 (3 cpus), y1 5 (Kueue: the same domains)."""
    result = plan("workload-which-requires-borrowing-gets-scheduled", capsys)
    [admitted] = result["admitted"]
    assert admitted["workload"] == "default/a1" and admitted["borrowing"] is True
    assert admitted["podSets"][0]["topology"] == "kubernetes.io/hostname: x1×1, y1×5"


def test_workload_preempted_due_to_quota_is_using_deleted_node(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The quota (10 cpus) is short by the 5 a priority-1 Workload holds on a node that no
    longer exists (z1); the nodes x1 and y1 have room for the 10 pods. The victim is the
    quota's, whose leaving frees nothing on the nodes — none is needed."""
    result = plan("workload-preempted-due-to-quota-is-using-deleted-node", capsys)
    assert result["admitted"] == []
    assert victims(result, "default/foo") == [
        ("default/low-priority-admitted", "tas-main", "InClusterQueue")
    ]


def test_multi_layer_topology_host_slice_rounding_makes_rack_slice_impossible_nofit(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Two 3-cpu hosts hold one 2-pod host slice each (the third cpu of each is left), so
    the rack holds 4 pods, short of one 6-pod rack slice: pending with Kueue's multi-layer
    message (quotagate adds the largest free domain)."""
    result = plan(
        "multi-layer-topology-host-slice-rounding-makes-rack-slice-impossible-nofit", capsys
    )
    assert result["admitted"] == [] and result["preempting"] == []
    [pending] = result["pending"]
    assert pending["reason"].startswith(
        'pod set one: topology "tas-three-level" doesn\'t allow to fit; 0/1 slice(s) fit on '
        "level cloud.provider.com/rack; 2/3 slice(s) fit on level kubernetes.io/hostname"
    )
