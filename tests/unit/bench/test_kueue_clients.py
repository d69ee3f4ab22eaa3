"""The bench's reproductions of Kueue's client writes leave the Workload they read alone
and send only what Kueue's typed clients know."""

from __future__ import annotations

import copy
from typing import Any

from api.workload_status import ADMISSION_FIELD_MANAGER
from tools.bench.kueue_clients import (
    RUNNER_FINISH_MANAGER,
    kueue_view,
    runner_finish,
    runner_release,
    runner_release_merge,
)


def _admitted() -> dict[str, Any]:
    condition = {
        "type": "QuotaReserved",
        "status": "True",
        "reason": "QuotaReserved",
        "message": "Quota reserved in ClusterQueue cq",
        "lastTransitionTime": "2026-11-26T00:00:00Z",
        "observedGeneration": 1,
    }
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": "wl",
            "namespace": "ns",
            "uid": "u-1",
            "generation": 1,
            "resourceVersion": "42",
            "labels": {"run": "r"},
            "managedFields": [{"manager": "bench", "fieldsV1": {"f:spec": {}}}],
        },
        "spec": {"queueName": "lq", "preemptibility": "Never", "disruptionMode": "Pod"},
        "status": {
            "conditions": [condition, {**condition, "type": "Admitted", "reason": "Admitted"}],
            "admission": {"clusterQueue": "cq", "podSetAssignments": []},
            "preemptionCost": 7,
            "resolvedPreemptibility": "Never",
        },
    }


def test_the_view_drops_quotagates_fields_and_leaves_the_workload_alone() -> None:
    wl = _admitted()
    before = copy.deepcopy(wl)
    view = kueue_view(wl)
    assert "preemptibility" not in view["spec"] and "disruptionMode" not in view["spec"]
    assert "preemptionCost" not in view["status"]
    assert "resolvedPreemptibility" not in view["status"]
    assert view["spec"]["queueName"] == "lq"
    assert view["status"]["admission"] == {"clusterQueue": "cq", "podSetAssignments": []}
    assert wl == before


def test_the_runners_writes_leave_the_workload_they_read_alone() -> None:
    wl = _admitted()
    before = copy.deepcopy(wl)
    finish = runner_finish(wl, 1_800_000_000.0)
    release = runner_release(wl, 1_800_000_000.0)
    merge = runner_release_merge(wl, 1_800_000_000.0)
    assert wl == before
    assert finish.field_manager == RUNNER_FINISH_MANAGER and finish.apply
    assert [c["type"] for c in finish.body["status"]["conditions"]] == ["Finished"]
    assert finish.body["metadata"]["resourceVersion"] == "42"
    assert "managedFields" not in finish.body["metadata"]
    assert release.field_manager == ADMISSION_FIELD_MANAGER and release.force
    assert "admission" not in release.body["status"]
    assert "preemptionCost" not in release.body["status"]
    reserved = {c["type"]: c["status"] for c in release.body["status"]["conditions"]}
    assert reserved["QuotaReserved"] == "False"
    assert merge.body["status"]["admission"] is None
    assert [c["type"] for c in merge.body["status"]["conditions"]] == ["QuotaReserved", "Admitted"]
    assert merge.body["metadata"] == {"resourceVersion": "42"}
