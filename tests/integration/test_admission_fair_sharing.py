"""Admission fair sharing on the real API server with `quotagate run`: a ClusterQueue with
`admissionScope.admissionMode: UsageBasedAdmissionFairSharing` admits the Workload of the
LocalQueue with the lower recent usage first (before priority), writes each LocalQueue's
consumed usage to `status.fairSharing` every sampling interval with the usage gauge, and a
restarted controller carries on from the written history (Kueue's "should retain the
LocalQueue's historical usage across a restart"). Without the configuration section nothing
of it happens, and the fields are reported as having no effect (Kueue's "Scheduler with
AdmissionFairSharing = nil ... should ignore FairSharing")."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest

from api import workload_status as ws
from api.quantities import exact_value
from tests.cluster.fixtures import wait_for
from tests.integration.conftest import StartConfigured
from tests.integration.kueue import (
    GROUP,
    VERSION,
    ControllerProcess,
    Kueue,
    cluster_queue,
    condition,
    flavor,
    local_queue,
    wait_admitted,
    wait_pending_reason,
    workload,
)

StartController = Callable[..., ControllerProcess]

# A long half-life keeps the history steady over the test; a 1s interval samples often.
CONFIG = {"admissionFairSharing": {"usageHalfLifeTime": "1h", "usageSamplingInterval": "1s"}}


@pytest.fixture
def start_controller(configured_controller: StartConfigured) -> StartController:
    """`quotagate run --config` with admission fair sharing (or without, `fair=False`),
    managing only the test's namespace."""

    def start(namespace: str, fair: bool = True) -> ControllerProcess:
        return configured_controller(CONFIG if fair else {}, namespace)

    return start


def _fair_status(kueue: Kueue, namespace: str, name: str) -> dict[str, Any] | None:
    status = kueue.get_local_queue(namespace, name).get("status") or {}
    found: dict[str, Any] | None = (status.get("fairSharing") or {}).get(
        "admissionFairSharingStatus"
    )
    return found


def _consumed_cpu(kueue: Kueue, namespace: str, name: str) -> float:
    found = _fair_status(kueue, namespace, name) or {}
    return float(exact_value((found.get("consumedResources") or {}).get("cpu", 0)))


def _written_since(kueue: Kueue, namespace: str, name: str, since: float) -> bool:
    found = _fair_status(kueue, namespace, name)
    written = ws.parse_rfc3339(found.get("lastUpdate")) if found else None
    return written is not None and written > since


def _usage_gauge(process: ControllerProcess, namespace: str, name: str) -> float | None:
    url = f"http://127.0.0.1:{process.metrics_port}/metrics"
    with urllib.request.urlopen(url) as response:
        text = response.read().decode()
    for line in text.splitlines():
        if line.startswith("kueue_local_queue_admission_fair_sharing_usage{") and all(
            f'{key}="{value}"' in line for key, value in (("name", name), ("namespace", namespace))
        ):
            return float(line.rsplit(" ", 1)[1])
    return None


def _fair_cluster_queue(namespace: str) -> tuple[str, dict[str, Any]]:
    """The namespace's ClusterQueue (4 cpu of its flavor), ordering by LocalQueue usage."""
    cq = f"{namespace}-cq"
    spec = cluster_queue(cq, {f"{namespace}-rf": {"cpu": 4}})
    spec["spec"]["admissionScope"] = {"admissionMode": "UsageBasedAdmissionFairSharing"}
    return cq, spec


def test_the_less_used_local_queue_goes_first_and_its_history_survives_a_restart(
    start_controller: StartController, kueue: Kueue, namespace: str
) -> None:
    cq, spec = _fair_cluster_queue(namespace)
    kueue.apply(
        flavor(f"{namespace}-rf"),
        spec,
        local_queue(namespace, "busy", cq),
        local_queue(namespace, "idle", cq),
    )
    # busy used 100 cpus recently, as an earlier controller recorded in its status.
    kueue.custom.patch_namespaced_custom_object_status(
        GROUP,
        VERSION,
        namespace,
        "localqueues",
        "busy",
        {
            "status": {
                "fairSharing": {
                    "weightedShare": 0,
                    "admissionFairSharingStatus": {
                        "consumedResources": {"cpu": "100"},
                        "lastUpdate": "2026-01-01T00:00:00Z",
                    },
                }
            }
        },
    )
    # Only one fits; busy's is the one the usual order (priority) would take.
    kueue.apply(
        workload(namespace, "busy-1", "busy", cpu="4", priority=10),
        workload(namespace, "idle-1", "idle", cpu="4", priority=0),
    )
    first = start_controller(namespace)
    wait_admitted(kueue, namespace, "idle-1")
    assert "insufficient quota for cpu" in wait_pending_reason(kueue, namespace, "busy-1")
    assert not ws.has_quota_reservation(kueue.get_workload(namespace, "busy-1"))

    # A sampling interval later: idle's consumed usage (its entry penalty settled, then
    # 4 cpus folded in) and busy's history, written by the controller, with the gauge.
    wait_for(
        lambda: _consumed_cpu(kueue, namespace, "idle") > 0,
        timeout=30,
        what="idle's consumed usage in its status",
    )
    wait_for(
        lambda: _written_since(kueue, namespace, "busy", time.time() - 120),
        timeout=30,
        what="busy's history written by the controller",
    )
    assert 99 < _consumed_cpu(kueue, namespace, "busy") <= 100
    gauge = wait_for(
        lambda: _usage_gauge(first, namespace, "busy"), timeout=10, what="the usage gauge"
    )
    assert 99 < gauge <= 100
    status = kueue.get_local_queue(namespace, "idle")["status"]["fairSharing"]
    assert status["weightedShare"] == 0

    # A new Workload of idle waits; the controller stops with the history written.
    kueue.apply(workload(namespace, "idle-2", "idle", cpu="4", priority=0))
    wait_pending_reason(kueue, namespace, "idle-2")
    first.stop()
    frozen = _consumed_cpu(kueue, namespace, "busy")
    restarted_at = time.time()
    second = start_controller(namespace)

    # Quota frees: busy-1 (priority 10, older) and idle-2 compete. The restarted controller
    # read busy's history back from its status, so idle-2 goes first.
    kueue.finish(namespace, "idle-1")
    wait_admitted(kueue, namespace, "idle-2")
    assert not ws.has_quota_reservation(kueue.get_workload(namespace, "busy-1"))
    wait_for(
        lambda: _written_since(kueue, namespace, "busy", restarted_at),
        timeout=30,
        what="busy's history written by the restarted controller",
    )
    assert _consumed_cpu(kueue, namespace, "busy") > frozen * 0.99  # retained, not reset
    assert (condition(kueue.get_workload(namespace, "busy-1"), "QuotaReserved") or {}).get(
        "status"
    ) == "False"
    assert second.process is not None and second.process.poll() is None


def test_without_the_configuration_section_nothing_is_sampled_and_the_fields_are_reported(
    start_controller: StartController, kueue: Kueue, namespace: str
) -> None:
    cq, spec = _fair_cluster_queue(namespace)
    lq = local_queue(namespace, "lq", cq)
    lq["spec"]["fairSharing"] = {"weight": "1"}
    kueue.apply(flavor(f"{namespace}-rf"), spec, lq, workload(namespace, "w", "lq", cpu="4"))
    start_controller(namespace, fair=False)
    wait_admitted(kueue, namespace, "w")
    on_cluster_queue = wait_for(
        lambda: condition(kueue.get_cluster_queue(cq), "UnsupportedFields"),
        what="the ClusterQueue's UnsupportedFields condition",
    )
    on_local_queue = wait_for(
        lambda: condition(kueue.get_local_queue(namespace, "lq"), "UnsupportedFields"),
        what="the LocalQueue's UnsupportedFields condition",
    )
    off = "admission fair sharing is off in the controller configuration"
    assert on_cluster_queue["message"].startswith(f"spec.admissionScope: {off}")
    assert on_local_queue["message"].startswith(f"spec.fairSharing: {off}")
    # The status was written (its counts say the Workload is admitted), without fairSharing.
    wait_for(
        lambda: (
            (kueue.get_local_queue(namespace, "lq").get("status") or {}).get("admittedWorkloads")
            == 1
        ),
        what="the LocalQueue's status",
    )
    assert "fairSharing" not in kueue.get_local_queue(namespace, "lq")["status"]
