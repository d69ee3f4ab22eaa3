"""Kueue's scheduler-perf runner's job side against quotagate: Workloads finished by the
runner's condition apply, evictions acknowledged by its admission-status apply (Kueue's
default) or by the merge patch of Kueue's `WorkloadRequestUseMergePatch` gate. A preempted
Workload is admitted again after the acknowledgement, and the ClusterQueue's status always
counts exactly the Workloads whose QuotaReserved condition is True (issue 17)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.cluster.fixtures import wait_for
from tests.compat.clients import send, setup_queue, wait_quota_consistent
from tests.integration.kueue import (
    ControllerProcess,
    Kueue,
    condition,
    is_admitted,
    wait_admitted,
    workload,
)
from tools.bench.kueue_clients import runner_finish, runner_release, runner_release_merge

STYLES = {"server-side-apply": runner_release, "merge-patch": runner_release_merge}


def _setup(kueue: Kueue, namespace: str) -> str:
    return setup_queue(kueue, namespace, 2, preemption={"withinClusterQueue": "LowerPriority"})


def _evicted(kueue: Kueue, namespace: str, names: list[str]) -> str:
    def victim() -> str | None:
        for name in names:
            found = condition(kueue.get_workload(namespace, name), "Evicted")
            if found and found["status"] == "True":
                return name
        return None

    result: str = wait_for(victim, what=f"one of {names} evicted")
    return result


@pytest.mark.parametrize("style", list(STYLES))
def test_an_acknowledged_eviction_releases_quota_and_the_victim_is_admitted_again(
    controller: ControllerProcess, kueue: Kueue, namespace: str, style: str
) -> None:
    cq = _setup(kueue, namespace)
    kueue.apply(
        workload(namespace, "low-1", "lq", cpu="1", priority=1),
        workload(namespace, "low-2", "lq", cpu="1", priority=1),
    )
    wait_admitted(kueue, namespace, "low-1")
    wait_admitted(kueue, namespace, "low-2")
    wait_quota_consistent(kueue, cq, [namespace])

    kueue.apply(workload(namespace, "high", "lq", cpu="1", priority=100))
    victim = _evicted(kueue, namespace, ["low-1", "low-2"])
    status = wait_quota_consistent(kueue, cq, [namespace])
    assert status["reservingWorkloads"] == 2  # the victim holds its quota until released

    body = kueue.get_workload(namespace, victim)
    send(kueue, "workloads", namespace, victim, STYLES[style](body, time.time()))
    wait_admitted(kueue, namespace, "high")
    released = kueue.get_workload(namespace, victim)
    assert condition(released, "QuotaReserved")["status"] == "False"
    assert "admission" not in (released.get("status") or {}), (
        "a job side's release must remove status.admission, in either of Kueue's styles"
    )
    wait_quota_consistent(kueue, cq, [namespace])

    # The runner finishes `high` when its time is up: the victim is admitted again.
    send(
        kueue,
        "workloads",
        namespace,
        "high",
        runner_finish(kueue.get_workload(namespace, "high"), time.time()),
    )
    readmitted = wait_admitted(kueue, namespace, victim)
    assert condition(readmitted, "Evicted")["status"] == "False"
    assert condition(readmitted, "Evicted")["reason"] == "QuotaReserved"
    status = wait_quota_consistent(kueue, cq, [namespace])
    assert status["reservingWorkloads"] == 2


def test_the_runner_finishing_every_workload_returns_all_quota(
    controller: ControllerProcess, kueue: Kueue, namespace: str
) -> None:
    cq = _setup(kueue, namespace)
    names = [f"w{i}" for i in range(4)]
    kueue.apply(*(workload(namespace, name, "lq", cpu="1") for name in names))
    finished: set[str] = set()

    def runner_step() -> bool:
        """One pass of the runner's reconciler: finish whatever is admitted."""
        for name in names:
            body = kueue.get_workload(namespace, name)
            if name not in finished and is_admitted(body):
                send(kueue, "workloads", namespace, name, runner_finish(body, time.time()))
                finished.add(name)
        return len(finished) == len(names)

    wait_for(runner_step, timeout=60, what="every Workload admitted and finished in turn")
    status = wait_quota_consistent(kueue, cq, [namespace])
    assert status["reservingWorkloads"] == 0
    for name in names:
        body: dict[str, Any] = kueue.get_workload(namespace, name)
        assert condition(body, "Finished")["reason"] == "ByTest"
        managers = {e["manager"] for e in body["metadata"]["managedFields"]}
        assert {"kueue-admission", "kueue-job-controller-Finished"} <= managers
