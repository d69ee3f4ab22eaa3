"""kueuectl's stop and resume against quotagate (each a merge patch computed from Kueue's
typed object, cmd/kueuectl/app/stop, resume, options): ClusterQueue and LocalQueue
`spec.stopPolicy` Hold / HoldAndDrain, Workload `spec.active: false`. Evictions are
acknowledged as Kueue's runner job side does; the ClusterQueue status always counts
exactly the Workloads that hold quota (issue 17)."""

from __future__ import annotations

import time

import pytest

from tests.cluster.fixtures import wait_for
from tests.compat.clients import send, setup_queue, wait_quota_consistent
from tests.integration.kueue import (
    ControllerProcess,
    Kueue,
    condition,
    local_queue,
    wait_admitted,
    workload,
)
from tools.bench.kueue_clients import (
    kueuectl_resume_queue,
    kueuectl_stop_queue,
    kueuectl_workload_active,
    runner_release,
)


def _setup(kueue: Kueue, namespace: str) -> str:
    cq = setup_queue(kueue, namespace, 4)
    kueue.apply(workload(namespace, "running", "lq", cpu="1"))
    wait_admitted(kueue, namespace, "running")
    return cq


def _wait_evicted(kueue: Kueue, namespace: str, name: str, reason: str) -> None:
    def evicted() -> bool:
        found = condition(kueue.get_workload(namespace, name), "Evicted")
        return bool(found and found["status"] == "True" and found["reason"] == reason)

    wait_for(evicted, what=f"{namespace}/{name} evicted ({reason})")
    send(
        kueue,
        "workloads",
        namespace,
        name,
        runner_release(kueue.get_workload(namespace, name), time.time()),
    )


def _wait_pending(kueue: Kueue, namespace: str, name: str, reason: str) -> str:
    def pending() -> str | None:
        found = condition(kueue.get_workload(namespace, name), "QuotaReserved")
        if found and found["status"] == "False" and found["reason"] == reason:
            return str(found["message"])
        return None

    message: str = wait_for(pending, what=f"{namespace}/{name} pending ({reason})")
    return message


@pytest.mark.parametrize("keep_already_running", [False, True])
def test_stop_and_resume_clusterqueue(
    controller: ControllerProcess, kueue: Kueue, namespace: str, keep_already_running: bool
) -> None:
    cq = _setup(kueue, namespace)
    send(kueue, "clusterqueues", None, cq, kueuectl_stop_queue(keep_already_running))
    # The stop is seen (the ClusterQueue says so) before a new Workload arrives: the
    # Workload and ClusterQueue watches are separate streams.
    active = wait_for(
        lambda: (
            (c := condition(kueue.get_cluster_queue(cq), "Active")) and c["status"] == "False" and c
        ),
        what="ClusterQueue Active=False",
    )
    assert active["reason"] == "Stopped"
    kueue.apply(workload(namespace, "new", "lq", cpu="1"))
    message = _wait_pending(kueue, namespace, "new", "Suspended")
    assert message.startswith(f"ClusterQueue {cq} is inactive")
    if keep_already_running:  # Hold: what runs keeps running
        assert condition(kueue.get_workload(namespace, "running"), "Admitted")["status"] == "True"
    else:  # HoldAndDrain
        _wait_evicted(kueue, namespace, "running", "ClusterQueueStopped")
    wait_quota_consistent(kueue, cq, [namespace])

    send(kueue, "clusterqueues", None, cq, kueuectl_resume_queue())
    wait_admitted(kueue, namespace, "new")
    wait_admitted(kueue, namespace, "running")
    status = wait_quota_consistent(kueue, cq, [namespace])
    assert status["reservingWorkloads"] == 2


@pytest.mark.parametrize("keep_already_running", [False, True])
def test_stop_and_resume_localqueue(
    controller: ControllerProcess, kueue: Kueue, namespace: str, keep_already_running: bool
) -> None:
    cq = _setup(kueue, namespace)
    kueue.apply(local_queue(namespace, "other", cq))
    send(kueue, "localqueues", namespace, "lq", kueuectl_stop_queue(keep_already_running))
    wait_for(
        lambda: (
            (c := condition(kueue.get_local_queue(namespace, "lq"), "Active"))
            and c["status"] == "False"
            and c["reason"] == "Stopped"
        ),
        what="LocalQueue Active=False (Stopped)",
    )
    kueue.apply(
        workload(namespace, "held", "lq", cpu="1"),
        workload(namespace, "elsewhere", "other", cpu="1"),
    )
    wait_admitted(kueue, namespace, "elsewhere")  # another LocalQueue of the same ClusterQueue
    message = _wait_pending(kueue, namespace, "held", "Suspended")
    assert message.startswith("LocalQueue lq is inactive")
    if not keep_already_running:
        _wait_evicted(kueue, namespace, "running", "LocalQueueStopped")
    wait_quota_consistent(kueue, cq, [namespace])

    send(kueue, "localqueues", namespace, "lq", kueuectl_resume_queue())
    wait_admitted(kueue, namespace, "held")
    wait_admitted(kueue, namespace, "running")
    status = wait_quota_consistent(kueue, cq, [namespace])
    assert status["reservingWorkloads"] == 3


def test_stop_and_resume_workload(
    controller: ControllerProcess, kueue: Kueue, namespace: str
) -> None:
    cq = _setup(kueue, namespace)
    send(kueue, "workloads", namespace, "running", kueuectl_workload_active(False))
    _wait_evicted(kueue, namespace, "running", "Deactivated")
    message = _wait_pending(kueue, namespace, "running", "Deactivated")
    assert message == "The workload is deactivated"
    status = wait_quota_consistent(kueue, cq, [namespace])
    assert status["reservingWorkloads"] == 0

    send(kueue, "workloads", namespace, "running", kueuectl_workload_active(True))
    wait_admitted(kueue, namespace, "running")
    status = wait_quota_consistent(kueue, cq, [namespace])
    assert status["reservingWorkloads"] == 1
