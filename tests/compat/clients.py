"""Send Kueue clients' writes (tools/bench/kueue_clients.py) with the test's client,
and check that quota is neither lost nor double counted."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from api.workload_status import has_quota_reservation, is_finished
from tests.cluster.fixtures import wait_for
from tests.integration.kueue import GROUP, VERSION, Kueue, cluster_queue, flavor, local_queue
from tools.bench.kueue_clients import Write

APPLY = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"


def send(
    kueue: Kueue, plural: str, namespace: str | None, name: str, write: Write
) -> dict[str, Any]:
    """Make the request `write` describes, as the Kueue client would."""
    custom: client.CustomObjectsApi = kueue.custom
    options: dict[str, Any] = {
        "field_manager": write.field_manager,
        "_content_type": APPLY if write.apply else MERGE,
    }
    if write.force:
        options["force"] = True
    result: dict[str, Any]
    if namespace is None:
        result = custom.patch_cluster_custom_object(
            GROUP, VERSION, plural, name, write.body, **options
        )
    elif write.subresource == "status":
        result = custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, namespace, plural, name, write.body, **options
        )
    else:
        result = custom.patch_namespaced_custom_object(
            GROUP, VERSION, namespace, plural, name, write.body, **options
        )
    return result


def reserved_cpu(workloads: list[dict[str, Any]]) -> tuple[int, int]:
    """(Workloads holding quota, their reserved cpu in milli-units), by Kueue's rule: the
    QuotaReserved condition, with the usage in `status.admission`; a Finished Workload
    keeps the condition but has returned its quota."""
    from api.quantities import Quantity

    count = total = 0
    for wl in workloads:
        if not has_quota_reservation(wl) or is_finished(wl):
            continue
        count += 1
        for assignment in wl["status"]["admission"]["podSetAssignments"]:
            total += Quantity.parse(assignment["resourceUsage"].get("cpu", "0")).milli
    return count, total


def wait_quota_consistent(kueue: Kueue, cq: str, namespaces: list[str]) -> dict[str, Any]:
    """Wait until the ClusterQueue's status counts exactly the Workloads that hold quota in
    `namespaces` (its only users): none lost, none counted twice. Returns the status."""
    from api.quantities import Quantity

    def consistent() -> dict[str, Any] | None:
        workloads = [wl for ns in namespaces for wl in kueue.workloads(ns)]
        count, cpu = reserved_cpu(workloads)
        status = kueue.get_cluster_queue(cq).get("status") or {}
        reserved = sum(
            Quantity.parse(r.get("total", "0")).milli
            for flavor in status.get("flavorsReservation") or ()
            for r in flavor.get("resources") or ()
            if r.get("name") == "cpu"
        )
        if status.get("reservingWorkloads", 0) == count and reserved == cpu:
            return status
        return None

    result: dict[str, Any] = wait_for(
        consistent, timeout=30, what=f"ClusterQueue {cq} status matching the reserving Workloads"
    )
    return result


def setup_queue(kueue: Kueue, namespace: str, cpu: int, **cluster_queue_options: Any) -> str:
    """A flavor, a ClusterQueue with `cpu` cpus of it and LocalQueue `lq` in `namespace`;
    returns the ClusterQueue's name."""
    cq = f"{namespace}-cq"
    kueue.apply(
        flavor(f"{namespace}-rf"),
        cluster_queue(cq, {f"{namespace}-rf": {"cpu": cpu}}, **cluster_queue_options),
        local_queue(namespace, "lq", cq),
    )
    return cq
