"""Admission fair sharing as Kueue decides it: the cases of Kueue's
`pkg/scheduler/scheduler_afs_test.go` (TestScheduleForAFS, and TestShouldApplyEntryPenalty
for the entry penalty), each as manifests under tests/unit/data/kueue_afs/ named after the
Kueue case, run through `quotagate plan` with Kueue's afsConfig (config.yaml: half-life 10s,
sampling 1s). A LocalQueue's `initialUsage` is its status.fairSharing. Kueue's test runs one
admission cycle per Workload of the case; so does each plan. Each test states what Kueue's
test expects.

Not ported: "admits workload when another LQ is deleted" and "admits workload even if its
localqueue was deleted" delete the LocalQueue from Kueue's fake client only, so its
Workloads stay queued in the queue manager and its weight falls back to 1; with a
LocalQueue really gone, Kueue's and quotagate's queues drop its Workloads, and `quotagate
plan` refuses a Workload whose LocalQueue is not in the input (the fallback weight itself
is tested in tests/unit/core/test_state.py). scheduler_afs_secondpass_test.go is about
topology-aware scheduling's second pass, which quotagate does not implement.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.kueue_cases import plan_case

ALPHA = 1 - 0.5 ** (1 / 10)  # the entry penalty rate: sampling 1s over a half-life of 10s


def plan(
    case: str, capsys: pytest.CaptureFixture[str], workloads: int, fair: bool = True
) -> dict[str, Any]:
    config = "config.yaml" if fair else None
    return plan_case("kueue_afs", case, capsys, config=config, cycles=workloads)


def admitted(result: dict[str, Any]) -> list[str]:
    return [a["workload"] for a in result["admitted"]]


def pending(result: dict[str, Any]) -> dict[str, str]:
    return {p["workload"]: p["reason"] for p in result["pending"]}


def usage(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {u["localQueue"]: u for u in result.get("localQueueUsage", ())}


NO_QUOTA_8 = (
    "insufficient quota for cpu in flavor default: requested 8, available 0 "
    "(nominal 8, reserved 8, borrowable 0)"
)


def test_admits_workload_from_less_active_localqueue(capsys: pytest.CaptureFixture[str]) -> None:
    """lq-a used 8 cpus recently, lq-b 2: Kueue admits wl-b1 although wl-a1 is older, and
    wl-a1 stays pending, 8 cpus short."""
    result = plan("admits-workload-from-less-active-localqueue", capsys, 2)
    assert admitted(result) == ["default/wl-b1"]
    assert pending(result) == {"default/wl-a1": NO_QUOTA_8}
    lq_b = usage(result)["default/lq-b"]
    assert lq_b["consumed"] == {"cpu": 2.0}
    assert lq_b["pendingPenalty"] == {"cpu": pytest.approx(8 * ALPHA)}


def test_does_not_prioritize_a_zero_weight_localqueue(capsys: pytest.CaptureFixture[str]) -> None:
    """Both LocalQueues idle; lq-zero has weight 0, so its usage is infinite even at 0:
    Kueue admits wl-a1 of lq-a and leaves the older wl-z1 of lq-zero pending."""
    result = plan("does-not-prioritize-a-zero-weight-localqueue", capsys, 2)
    assert admitted(result) == ["default/wl-a1"]
    assert pending(result) == {"default/wl-z1": NO_QUOTA_8}
    assert usage(result)["default/lq-zero"]["usage"] == "+Inf"


def test_without_afs_classic_admission_decision_ignores_queue_usage(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The same LocalQueue usage, admission fair sharing off: Kueue admits the older wl-a1,
    wl-b1 waits. quotagate reports the admission scope and the weights as having no effect."""
    result = plan(
        "without-afs-classic-admission-decision-ignores-queue-usage", capsys, 2, fair=False
    )
    assert admitted(result) == ["default/wl-a1"]
    assert pending(result) == {"default/wl-b1": NO_QUOTA_8}
    assert "localQueueUsage" not in result
    reported = {(u["object"], u["field"]) for u in result["unsupported"]}
    assert ("ClusterQueue cq1", "spec.admissionScope") in reported
    assert ("LocalQueue default/lq-a", "spec.fairSharing") in reported


def test_admits_one_workload_from_each_localqueue_when_quota_is_limited(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """lq-a and lq-b used 4 cpus each; 8 cpus of quota, four Workloads of 4. Kueue admits
    wl-a1 (equal usage: the oldest), then wl-b1 (wl-a1's entry penalty put lq-a behind),
    then finds no quota for wl-a2 (4 more needed) and sets wl-b2, alike, aside with it."""
    result = plan("admits-one-workload-from-each-localqueue-when-quota-is-limited", capsys, 4)
    assert admitted(result) == ["default/wl-a1", "default/wl-b1"]
    reason = (
        "insufficient quota for cpu in flavor default: requested 4, available 0 "
        "(nominal 8, reserved 8, borrowable 0)"
    )
    assert pending(result) == {"default/wl-a2": reason, "default/wl-b2": reason}
    for local_queue in ("default/lq-a", "default/lq-b"):
        assert usage(result)[local_queue]["usage"] == pytest.approx(4 + 4 * ALPHA)


def test_schedules_normally_when_queues_have_equal_usage(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Three LocalQueues with 2 cpus of usage each; 4 + 3 + 1 cpus fit in 8: Kueue admits
    all three."""
    result = plan("schedules-normally-when-queues-have-equal-usage", capsys, 3)
    assert admitted(result) == ["default/wl-a1", "default/wl-b1", "default/wl-c1"]
    assert pending(result) == {}


def test_admits_workload_from_lq_b_with_uninitialized_cache(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """lq-a used 8 cpus; lq-b has no history at all (usage 0): Kueue admits wl-b1."""
    result = plan("admits-workload-from-lq-b-with-uninitialized-cache", capsys, 2)
    assert admitted(result) == ["default/wl-b1"]
    assert pending(result) == {"default/wl-a1": NO_QUOTA_8}


# TestShouldApplyEntryPenalty: when an admission pushes an entry penalty.


def test_pushes_for_a_first_pass_workload_on_a_usage_based_clusterqueue(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A pending Workload admitted in a usage-based ClusterQueue: its 4 cpus × alpha are
    pending on its LocalQueue until it is seen back Admitted."""
    result = plan("pushes-for-a-first-pass-workload-on-a-usage-based-clusterqueue", capsys, 1)
    assert admitted(result) == ["ns/wl"]
    assert usage(result)["ns/lq"]["pendingPenalty"] == {"cpu": pytest.approx(4 * ALPHA)}


def test_skips_when_no_admissionfairsharing_config_is_set(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """No admissionFairSharing section: the admission pushes nothing (and no LocalQueue has
    an admission fair sharing record)."""
    result = plan("skips-when-no-admissionfairsharing-config-is-set", capsys, 1, fair=False)
    assert admitted(result) == ["ns/wl"]
    assert "localQueueUsage" not in result


def test_skips_for_a_clusterqueue_without_usage_based_admission_mode(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Admission fair sharing configured, but the Workload's ClusterQueue has no
    usage-based admission mode: nothing is pushed (only the idle usage-based ClusterQueue's
    LocalQueue has a record)."""
    result = plan("skips-for-a-clusterqueue-without-usage-based-admission-mode", capsys, 1)
    assert admitted(result) == ["ns/wl"]
    assert list(usage(result)) == ["ns/other"]
    assert usage(result)["ns/other"]["pendingPenalty"] == {}


def test_skips_a_second_pass_workload_that_already_holds_a_quota_reservation(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A Workload that already holds its reservation is not admitted again and pushes no
    second penalty."""
    result = plan("skips-a-second-pass-workload-that-already-holds-a-quota-reservation", capsys, 1)
    assert admitted(result) == []
    assert usage(result)["ns/lq"]["pendingPenalty"] == {}
