"""`quotagate run` against the real API server: bare Workloads admitted, queued, released,
borrowing in a cohort, queue status, printer columns, invalid objects (issue 6)."""

from __future__ import annotations

import re
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

from kubernetes.client.exceptions import ApiException

from tests.cluster.build import bin_dir
from tests.cluster.controlplane import free_port
from tests.cluster.fixtures import wait_for
from tests.integration.kueue import (
    ControllerProcess,
    Kueue,
    cluster_queue,
    condition,
    flavor,
    is_admitted,
    local_queue,
    wait_admitted,
    wait_pending_reason,
    workload,
)


def test_admits_within_quota_queues_the_rest_and_admits_after_finish(
    controller: ControllerProcess, kueue: Kueue, namespace: str
) -> None:
    cq = f"{namespace}-cq"
    kueue.apply(
        flavor(f"{namespace}-rf"),
        cluster_queue(cq, {f"{namespace}-rf": {"cpu": 4}}),
        local_queue(namespace, "lq", cq),
        workload(namespace, "first", "lq", cpu="1", count=3),
    )
    first = wait_admitted(kueue, namespace, "first")
    kueue.apply(workload(namespace, "second", "lq", cpu="1", count=3))
    assert first["status"]["admission"]["clusterQueue"] == cq
    assignment = first["status"]["admission"]["podSetAssignments"][0]
    assert assignment["flavors"] == {"cpu": f"{namespace}-rf"}
    assert assignment["count"] == 3
    assert assignment["resourceUsage"] == {"cpu": "3"}

    reason = wait_pending_reason(kueue, namespace, "second")
    assert reason == (
        f"insufficient quota for cpu in flavor {namespace}-rf: requested 3, available 1 "
        "(nominal 4, reserved 3, borrowable 0)"
    )
    cq_status = wait_for(
        lambda: (
            (s := kueue.get_cluster_queue(cq).get("status", {})).get("pendingWorkloads") == 1
            and s.get("admittedWorkloads") == 1
            and s
        ),
        what="ClusterQueue status: 1 pending, 1 admitted",
    )
    assert cq_status["reservingWorkloads"] == 1
    assert cq_status["flavorsReservation"] == [
        {"name": f"{namespace}-rf", "resources": [{"name": "cpu", "total": "3", "borrowed": "0"}]}
    ]
    assert condition({"status": cq_status}, "Active")["status"] == "True"

    kueue.finish(namespace, "first")
    second = wait_admitted(kueue, namespace, "second")
    assert second["status"]["admission"]["clusterQueue"] == cq


def test_borrows_unused_quota_from_the_cohort(
    controller: ControllerProcess, kueue: Kueue, namespace: str
) -> None:
    rf, cohort = f"{namespace}-rf", f"{namespace}-cohort"
    kueue.apply(
        flavor(rf),
        cluster_queue(f"{namespace}-a", {rf: {"cpu": (2, 4)}}, cohort=cohort),
        cluster_queue(f"{namespace}-b", {rf: {"cpu": 4}}, cohort=cohort),
        local_queue(namespace, "lq-a", f"{namespace}-a"),
        workload(namespace, "big", "lq-a", cpu="1", count=5),
    )
    admitted = wait_admitted(kueue, namespace, "big")
    assert admitted["status"]["admission"]["clusterQueue"] == f"{namespace}-a"
    status = wait_for(
        lambda: (
            (s := kueue.get_cluster_queue(f"{namespace}-a").get("status", {})).get(
                "admittedWorkloads"
            )
            == 1
            and s
        ),
        what="borrowing ClusterQueue status",
    )
    assert status["flavorsReservation"][0]["resources"] == [
        {"name": "cpu", "total": "5", "borrowed": "3"}
    ]
    # Beyond the borrowing limit (2 nominal + 4 borrowable = 6): 2 more do not fit.
    kueue.apply(workload(namespace, "more", "lq-a", cpu="1", count=2))
    reason = wait_pending_reason(kueue, namespace, "more")
    assert "insufficient quota for cpu" in reason


def test_kubectl_shows_the_printer_columns(
    controller: ControllerProcess, kueue: Kueue, namespace: str, kubeconfig_path: str
) -> None:
    cq = f"{namespace}-cq"
    kueue.apply(
        flavor(f"{namespace}-rf"),
        cluster_queue(cq, {f"{namespace}-rf": {"cpu": 2}}),
        local_queue(namespace, "lq", cq),
        {**workload(namespace, "shown", "lq", cpu="1", priority=7)},
    )
    wait_admitted(kueue, namespace, "shown")

    def table(*extra: str) -> list[dict[str, str]]:
        output = subprocess.run(
            [
                str(bin_dir() / "kubectl"),
                "--kubeconfig",
                kubeconfig_path,
                "get",
                "workloads.kueue.x-k8s.io",
                "-n",
                namespace,
                *extra,
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        header, *rows = output.splitlines()
        # kubectl pads columns with at least three spaces ("RESERVED IN" has one); a
        # column's cells start where its title does, empty cells included.
        starts = [m.start() for m in re.finditer(r"(?:^|(?<=\s{3}))\S", header)]
        names = [header[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
        return [
            {
                n: row[a:b].strip()
                for n, a, b in zip(names, starts, [*starts[1:], None], strict=True)
            }
            for row in rows
        ]

    # Kueue's columns by default...
    (row,) = table()
    assert list(row) == ["NAME", "QUEUE", "RESERVED IN", "ADMITTED", "FINISHED", "AGE"]
    assert row["NAME"] == "shown" and row["QUEUE"] == "lq" and row["RESERVED IN"] == cq
    assert row["ADMITTED"] == "True" and row["FINISHED"] == ""
    # ...and quotagate's own with -o wide.
    (row,) = table("-o", "wide")
    assert list(row)[-3:] == ["PRIORITY", "COST", "PREEMPTIBILITY"]
    assert row["PRIORITY"] == "7" and row["PREEMPTIBILITY"] == "preemptible"


def test_invalid_references_make_queues_inactive_with_a_reason(
    controller: ControllerProcess, kueue: Kueue, namespace: str
) -> None:
    cq = f"{namespace}-cq"
    kueue.apply(
        cluster_queue(cq, {f"{namespace}-missing": {"cpu": 2}}),
        local_queue(namespace, "orphan", f"{namespace}-nowhere"),
        local_queue(namespace, "lq", cq),
        workload(namespace, "stuck", "lq", cpu="1"),
    )
    active = wait_for(
        lambda: condition(kueue.get_cluster_queue(cq), "Active"),
        what="ClusterQueue Active condition",
    )
    assert active["status"] == "False"
    assert active["reason"] == "FlavorNotFound"
    assert f"{namespace}-missing" in active["message"]
    lq = wait_for(
        lambda: condition(
            kueue.custom.get_namespaced_custom_object(
                "kueue.x-k8s.io", "v1beta2", namespace, "localqueues", "orphan"
            ),
            "Active",
        ),
        what="LocalQueue Active condition",
    )
    assert lq["status"] == "False"
    assert lq["reason"] == "ClusterQueueDoesNotExist"
    reason = wait_pending_reason(kueue, namespace, "stuck")
    assert f"{namespace}-missing" in reason
    assert not is_admitted(kueue.get_workload(namespace, "stuck"))
    # The controller is still alive and deciding: fix the flavor and the Workload is admitted.
    kueue.apply(flavor(f"{namespace}-missing"))
    wait_admitted(kueue, namespace, "stuck")
    assert controller.process is not None and controller.process.poll() is None


def test_metrics_use_kueue_names(
    controller: ControllerProcess, kueue: Kueue, namespace: str
) -> None:
    cq = f"{namespace}-cq"
    kueue.apply(
        flavor(f"{namespace}-rf"),
        cluster_queue(cq, {f"{namespace}-rf": {"cpu": 2}}),
        local_queue(namespace, "lq", cq),
        workload(namespace, "one", "lq", cpu="2"),
        workload(namespace, "two", "lq", cpu="2"),
    )
    # Same priority and creation second: the UID decides which one is admitted.
    wait_for(
        lambda: sum(is_admitted(wl) for wl in kueue.workloads(namespace)) == 1, what="one admitted"
    )

    def scrape() -> str | None:
        try:
            url = f"http://127.0.0.1:{controller.metrics_port}/metrics"
            with urllib.request.urlopen(url, timeout=2) as response:
                text = response.read().decode()
        except OSError:
            return None
        wanted = (
            f'kueue_pending_workloads{{cluster_queue="{cq}",replica_role="leader",'
            'status="inadmissible"} 1.0'
        )
        return text if wanted in text else None

    text = wait_for(scrape, timeout=30, what="pending gauge in /metrics")
    labels = (
        f'cluster_queue="{cq}",cohort="",flavor="{namespace}-rf",replica_role="leader",'
        'resource="cpu"'
    )
    assert (
        f'kueue_admitted_workloads_total{{cluster_queue="{cq}",priority_class="",'
        'replica_role="leader"} 1.0'
    ) in text
    assert f"kueue_cluster_queue_nominal_quota{{{labels}}} 2.0" in text
    assert f"kueue_cluster_queue_resource_reservation{{{labels}}} 2.0" in text
    assert "kueue_admission_wait_time_seconds_bucket" in text
    assert "quotagate_cycle_duration_seconds_count" in text
    assert "quotagate_leader 1.0" in text
    assert 'kueue_build_info{build_date="",compiler="cpython"' in text
    # The admission's answer came back on the real watch: its delay was measured.
    delays = re.search(r"^quotagate_watch_delay_seconds_count (\S+)$", text, re.MULTILINE)
    assert delays is not None and float(delays.group(1)) >= 1


def test_preemption_evicts_the_cheapest_equal_priority_victim(
    controller: ControllerProcess, kueue: Kueue, namespace: str
) -> None:
    cq = f"{namespace}-cq"
    kueue.apply(
        flavor(f"{namespace}-rf"),
        {
            **cluster_queue(
                cq,
                {f"{namespace}-rf": {"cpu": 4}},
                preemption={"withinClusterQueue": "LowerPriority"},
            ),
        },
        local_queue(namespace, "lq", cq),
        workload(namespace, "dear", "lq", cpu="2", priority=5),
        workload(namespace, "cheap", "lq", cpu="2", priority=5),
        workload(namespace, "guarded", "lq", cpu="1", priority=1, preemptibility="non-preemptible"),
    )
    for name in ("dear", "cheap"):
        wait_admitted(kueue, namespace, name)
    kueue.patch_workload_status(namespace, "dear", {"preemptionCost": "5"})
    kueue.patch_workload_status(namespace, "cheap", {"preemptionCost": "1"})
    guarded = wait_for(
        lambda: (
            (wl := kueue.get_workload(namespace, "guarded"))
            .get("status", {})
            .get("resolvedPreemptibility")
            and wl
        ),
        what="resolvedPreemptibility written",
    )
    assert guarded["status"]["resolvedPreemptibility"]["value"] == "non-preemptible"
    assert guarded["status"]["resolvedPreemptibility"]["source"] == "spec"

    kueue.apply(workload(namespace, "urgent", "lq", cpu="2", priority=100))

    def evicted() -> dict | None:
        wl = kueue.get_workload(namespace, "cheap")
        return wl if condition(wl, "Evicted") else None

    victim = wait_for(evicted, what="the cheaper victim evicted")
    assert condition(victim, "Evicted")["reason"] == "Preempted"
    assert condition(victim, "Preempted")["reason"] == "InClusterQueue"
    urgent = kueue.get_workload(namespace, "urgent")["metadata"]["uid"]
    assert condition(victim, "Evicted")["message"] == (
        f"Preempted to accommodate a workload (UID: {urgent}, JobUID: UNKNOWN) due to "
        f"prioritization in the ClusterQueue; preemptor path: /{cq}; preemptee path: /{cq}"
    )
    assert victim["status"]["schedulingStats"]["evictions"] == [
        {"reason": "Preempted", "underlyingCause": "", "count": 1}
    ]
    assert not condition(kueue.get_workload(namespace, "dear"), "Evicted")
    reason = wait_pending_reason(kueue, namespace, "urgent")
    assert reason == "waiting for 1 preempted workload to release quota"
    assert (
        condition(kueue.get_workload(namespace, "urgent"), "QuotaReserved")["reason"]
        == "WaitingForPreemptedWorkloads"
    )

    kueue.acknowledge_eviction(namespace, "cheap")  # the owner stops it: quota is released
    wait_admitted(kueue, namespace, "urgent")
    cheap = kueue.get_workload(namespace, "cheap")
    # Kueue's job side applies the status without `admission`: it is removed, not just
    # ignored, because quotagate wrote it as the same field manager (kueue-admission).
    assert "admission" not in (cheap.get("status") or {})
    assert condition(cheap, "QuotaReserved")["status"] == "False"
    assert condition(cheap, "Evicted")["status"] == "True"


def test_a_cluster_queue_deleted_and_created_again_gets_its_status_again(
    controller: ControllerProcess, kueue: Kueue, namespace: str
) -> None:
    """The status writer writes only what changed; a ClusterQueue created again under the
    same name starts with no status, so the same status must be written again."""
    cq = f"{namespace}-again"
    kueue.apply(flavor(f"{namespace}-rf"), cluster_queue(cq, {f"{namespace}-rf": {"cpu": 1}}))

    def active() -> dict[str, Any] | None:
        try:
            return condition(kueue.get_cluster_queue(cq), "Active")
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    first = wait_for(active, what="the first Active condition")
    assert first["status"] == "True"
    kueue.delete_cluster_scoped("clusterqueues", cq)
    wait_for(lambda: active() is None, what="the ClusterQueue to go")
    kueue.apply(cluster_queue(cq, {f"{namespace}-rf": {"cpu": 1}}))
    again = wait_for(active, what="the Active condition on the new ClusterQueue")
    assert (again["status"], again["reason"]) == ("True", "Ready")


def test_a_controller_stopped_while_it_starts_exits_cleanly(
    kubeconfig_path: str, crds_installed: list[str], system_namespace: str, tmp_path: Path
) -> None:
    """A controller pod deleted right after it was created: SIGTERM while `quotagate run`
    is still importing its libraries, or just after its loop started, ends it with exit
    status 0 (not killed by the signal, not left running)."""
    for delay in (0.3, 1.0, 2.5):
        process = ControllerProcess(
            kubeconfig_path,
            tmp_path,
            name=f"early-stop-{delay}",
            lease_name=f"early-stop-{int(delay * 10)}",
            extra=["--metrics-port", str(free_port())],
        ).start()
        assert process.process is not None
        time.sleep(delay)
        process.stop(timeout=30)
        assert process.process.returncode == 0, (delay, process.log()[-2000:])
