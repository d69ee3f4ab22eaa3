"""A bare Workload's lifecycle, written as Kueue's clients write it: created, admitted,
finished or deleted; and a Workload whose QuotaReserved condition was cleared by a writer
that left `status.admission` behind is pending, and admitting it replaces that admission
(Kueue decides by the condition, `workload.HasQuotaReservation`). Quota is neither lost nor
double counted at any step (issue 17)."""

from __future__ import annotations

import time

from tests.compat.clients import send, setup_queue, wait_quota_consistent
from tests.integration.kueue import (
    ControllerProcess,
    Kueue,
    flavor,
    wait_admitted,
    workload,
)
from tools.bench.kueue_clients import runner_finish


def test_created_admitted_finished_and_deleted(
    controller: ControllerProcess, kueue: Kueue, namespace: str
) -> None:
    cq = setup_queue(kueue, namespace, 2)
    kueue.apply(workload(namespace, "a", "lq", cpu="2"))
    wait_admitted(kueue, namespace, "a")
    kueue.apply(workload(namespace, "b", "lq", cpu="2"))
    assert wait_quota_consistent(kueue, cq, [namespace])["reservingWorkloads"] == 1
    send(
        kueue,
        "workloads",
        namespace,
        "a",
        runner_finish(kueue.get_workload(namespace, "a"), time.time()),
    )
    wait_admitted(kueue, namespace, "b")
    assert wait_quota_consistent(kueue, cq, [namespace])["reservingWorkloads"] == 1
    kueue.custom.delete_namespaced_custom_object(
        "kueue.x-k8s.io", "v1beta2", namespace, "workloads", "b"
    )
    assert wait_quota_consistent(kueue, cq, [namespace])["reservingWorkloads"] == 0


def test_a_stale_admission_is_replaced_when_the_workload_is_admitted_again(
    controller: ControllerProcess, kueue: Kueue, namespace: str
) -> None:
    cq = setup_queue(kueue, namespace, 2)
    kueue.apply(flavor(f"{namespace}-old"))
    stale = workload(namespace, "w", "lq", cpu="1")
    kueue.apply(stale)
    wait_admitted(kueue, namespace, "w")
    # Another writer (a merge patch, field manager "other") clears the condition but leaves
    # an admission of its own: two pod sets in a flavor this queue does not have.
    body = kueue.get_workload(namespace, "w")
    conditions = [
        {**c, "status": "False", "reason": "Pending", "message": "cleared by another writer"}
        if c["type"] in ("QuotaReserved", "Admitted")
        else c
        for c in body["status"]["conditions"]
    ]
    admission = {
        "clusterQueue": cq,
        "podSetAssignments": [
            {
                "name": "main",
                "count": 1,
                "flavors": {"cpu": f"{namespace}-old"},
                "resourceUsage": {"cpu": "1"},
            },
            {
                "name": "ghost",
                "count": 5,
                "flavors": {"cpu": f"{namespace}-old"},
                "resourceUsage": {"cpu": "5"},
            },
        ],
    }
    kueue.custom.patch_namespaced_custom_object_status(
        "kueue.x-k8s.io",
        "v1beta2",
        namespace,
        "workloads",
        "w",
        {"status": {"conditions": conditions, "admission": admission}},
        field_manager="other",
    )

    # The patch above made it pending (read back at once, it is); quotagate admits it again.
    wl = wait_admitted(kueue, namespace, "w")
    assert wl["status"]["admission"]["podSetAssignments"] == [
        {
            "name": "main",
            "count": 1,
            "flavors": {"cpu": f"{namespace}-rf"},
            "resourceUsage": {"cpu": "1"},
        }
    ]
    assert wait_quota_consistent(kueue, cq, [namespace])["reservingWorkloads"] == 1
