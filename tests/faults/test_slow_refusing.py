"""A slow API server (every write of the scenario's Workloads, pods and Jobs waits), then a
refusing one (429 Too Many Requests, then 500), made by a validating webhook the API
server calls (tests/cluster/admission_faults.py): admission slows down, waits, and
resumes; nothing is lost, doubled or over-used (tests/faults/replay.py)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.cluster.admission_faults import (
    JOB_WRITES,
    POD_WRITES,
    WORKLOAD_WRITES,
    AdmissionFaults,
)
from tests.faults.conftest import Scenario
from tests.integration.kueue import workload


@pytest.fixture
def admission_faults(
    fault_cluster: Any,
) -> Iterator[Callable[[Scenario], AdmissionFaults]]:
    made: list[AdmissionFaults] = []

    def start(s: Scenario) -> AdmissionFaults:
        faults = AdmissionFaults(
            fault_cluster.api_client, s.load.namespaces, [WORKLOAD_WRITES, POD_WRITES, JOB_WRITES]
        ).start()
        made.append(faults)
        probe = s.load.kueue.custom
        ns = s.load.namespaces[0]
        faults.wait_active(
            lambda: probe.create_namespaced_custom_object(
                "kueue.x-k8s.io",
                "v1beta2",
                ns,
                "workloads",
                workload(ns, "probe", "lq"),
                dry_run="All",
            )
        )
        return faults

    yield start
    for faults in made:
        faults.stop()


def test_every_write_slowed_then_writes_refused(scenario: Any, admission_faults: Any) -> None:
    s = scenario()
    faults = admission_faults(s)
    faults.delay(0.3)
    s.load.create(bare=120, jobs=20, pods=20)
    s.load.wait_admitting(12)
    time.sleep(5)  # admission goes on, slowly
    slowed = faults.reviewed
    faults.refuse(429)
    time.sleep(4)
    faults.refuse(500)  # a server error: the write may or may not have been made
    time.sleep(3)
    faults.allow()
    print(f"{slowed} writes slowed by 0.3 s, {faults.refused} refused")
    assert slowed > 0 and faults.refused > 0
    s.end(expected=160)
