"""Minimum runtime before preemption on the real API server with `quotagate run`: a
ClusterQueue annotated `quotagate.x-k8s.io/minimum-runtime-seconds` keeps a freshly
reserved Workload from being preempted until that long after its QuotaReserved time; the
waiting preemptor says so, then preempts, and is admitted once its victim is released.

The Workloads are bare; the test is their job side (it acknowledges the eviction as
Kueue's job side does)."""

from __future__ import annotations

from typing import Any

from api import workload_status as ws
from api.constants import MINIMUM_RUNTIME_ANNOTATION
from tests.cluster.fixtures import wait_for
from tests.integration.kueue import (
    ControllerProcess,
    Kueue,
    cluster_queue,
    condition,
    flavor,
    local_queue,
    wait_admitted,
    workload,
)

MINIMUM = 4  # seconds


def _time(text: str) -> float:
    parsed = ws.parse_rfc3339(text)
    assert parsed is not None, text
    return parsed


def _preempted(kueue: Kueue, namespace: str, name: str) -> dict[str, Any] | None:
    wl = kueue.get_workload(namespace, name)
    found = condition(wl, "Evicted")
    return wl if found is not None and found["status"] == "True" else None


def test_a_fresh_workload_is_preempted_only_after_its_minimum_runtime(
    controller: ControllerProcess, kueue: Kueue, namespace: str
) -> None:
    cq = cluster_queue(
        f"{namespace}-cq",
        {f"{namespace}-rf": {"cpu": 1}},
        preemption={"withinClusterQueue": "LowerPriority"},
    )
    cq["metadata"]["annotations"] = {MINIMUM_RUNTIME_ANNOTATION: str(MINIMUM)}
    kueue.apply(flavor(f"{namespace}-rf"), cq, local_queue(namespace, "lq", cq["metadata"]["name"]))
    kueue.apply(workload(namespace, "low", "lq", priority=1))
    low = wait_admitted(kueue, namespace, "low")
    reserved_at = _time(condition(low, "QuotaReserved")["lastTransitionTime"])  # type: ignore[index]

    kueue.apply(workload(namespace, "high", "lq", priority=10))

    def protected_reason() -> str | None:
        found = condition(kueue.get_workload(namespace, "high"), "QuotaReserved")
        message = str((found or {}).get("message", ""))
        return message if "minimum runtime" in message else None

    reason = wait_for(protected_reason, timeout=30, what="the preemptor's pending reason")
    assert "1 preemption candidate within its ClusterQueue's minimum runtime" in reason
    assert f"the first preemptible at {ws.rfc3339(reserved_at + MINIMUM)}" in reason
    assert _preempted(kueue, namespace, "low") is None

    victim = wait_for(
        lambda: _preempted(kueue, namespace, "low"), timeout=30, what="the preemption of low"
    )
    evicted = condition(victim, "Evicted")
    assert evicted is not None and evicted["reason"] == "Preempted"
    # Second precision on both times: never before the minimum runtime has passed.
    assert _time(evicted["lastTransitionTime"]) >= reserved_at + MINIMUM
    kueue.acknowledge_eviction(namespace, "low")
    wait_admitted(kueue, namespace, "high")
