"""kueuectl's `list workload` against quotagate: its POSITION IN QUEUE column, reproduced
from Kueue's code (cmd/kueuectl/app/list/list_workload.go `pendingWorkloads` and
list_workload_printer.go): for every pending Workload (Kueue's `workload.Status`: not
finished, not admitted, no quota reservation) the ClusterQueue is its admission's or its
LocalQueue's; the ClusterQueue's `pendingworkloads` is fetched once per ClusterQueue with
the default options through the visibility API (a NotFound leaves the column empty, any
other error fails the command), and the column shows the item's `positionInLocalQueue`."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from api.workload_status import has_quota_reservation, is_finished
from tests.cluster.fixtures import wait_for
from tests.integration.conftest import StartConfigured
from tests.integration.kueue import (
    Kueue,
    cluster_queue,
    condition,
    flavor,
    local_queue,
    wait_admitted,
    workload,
)
from tests.integration.visibility import (
    PREFIX,
    get,
    remove_api_service,
    start_with_visibility,
    wait_available,
)


def _pending(wl: dict[str, Any]) -> bool:
    """Kueue's `workload.Status(wl) == StatusPending`."""
    admitted = condition(wl, "Admitted")
    return not (
        is_finished(wl)
        or (admitted is not None and admitted.get("status") == "True")
        or has_quota_reservation(wl)
    )


def kueuectl_positions(
    api_client: client.ApiClient, workloads: list[dict[str, Any]], local_queues: dict[str, Any]
) -> dict[str, str]:
    """`kueuectl list workload`'s POSITION IN QUEUE per Workload name ("" when none)."""
    summaries: dict[str, dict[str, Any] | None] = {}
    column: dict[str, str] = {}
    for wl in workloads:
        name, namespace = wl["metadata"]["name"], wl["metadata"]["namespace"]
        column[name] = ""
        if not _pending(wl):
            continue
        admission = (wl.get("status") or {}).get("admission") or {}
        cq = admission.get("clusterQueue") or ""
        if not cq:
            lq = local_queues.get(f"{namespace}/{wl['spec'].get('queueName')}")
            cq = (lq or {}).get("spec", {}).get("clusterQueue", "")
        if not cq:
            continue
        if cq not in summaries:
            code, body = get(api_client, f"{PREFIX}/clusterqueues/{cq}/pendingworkloads")
            assert code in (200, 404), f"kueuectl fails: {code} {body}"
            summaries[cq] = body if code == 200 else None
        summary = summaries[cq]
        for item in (summary or {}).get("items") or ():
            meta = item["metadata"]
            if meta["name"] == name and meta["namespace"] == namespace:
                column[name] = str(item["positionInLocalQueue"])
    return column


def test_kueuectl_list_workload_shows_the_positions(
    api_client: client.ApiClient,
    configured_controller: StartConfigured,
    kueue: Kueue,
    namespace: str,
) -> None:
    start_with_visibility(configured_controller, namespace)
    try:
        wait_available(api_client)
        _check_positions(api_client, kueue, namespace)
    finally:
        remove_api_service(api_client)


def _check_positions(api_client: client.ApiClient, kueue: Kueue, namespace: str) -> None:
    cq = f"{namespace}-cq"
    kueue.apply(
        flavor(f"{namespace}-rf"),
        cluster_queue(cq, {f"{namespace}-rf": {"cpu": 1}}),
        local_queue(namespace, "main", cq),
        local_queue(namespace, "other", cq),
        workload(namespace, "running", "main", cpu="1", priority=100),
    )
    wait_admitted(kueue, namespace, "running")
    kueue.apply(
        workload(namespace, "first", "main", priority=50),
        workload(namespace, "second", "other", priority=40),
        workload(namespace, "third", "main", priority=30),
        workload(namespace, "nowhere", "missing-lq", priority=90),
    )
    local_queues = {
        f"{namespace}/{lq['metadata']['name']}": lq
        for lq in kueue.custom.list_namespaced_custom_object(
            "kueue.x-k8s.io", "v1beta2", namespace, "localqueues"
        )["items"]
    }

    def listed() -> dict[str, str] | None:
        column = kueuectl_positions(api_client, kueue.workloads(namespace), local_queues)
        return column if column.get("third") else None

    column = wait_for(listed, what="kueuectl's positions for the pending Workloads")
    # The running one has none; the rest count within their own LocalQueue, and one whose
    # LocalQueue does not exist has no ClusterQueue to ask.
    assert column == {"running": "", "first": "0", "second": "0", "third": "1", "nowhere": ""}
