"""A slow API server (every write of the scenario's Workloads, pods and Jobs waits) and a
refusing one (429 Too Many Requests, then 500), made by a validating webhook the API
server calls (tests/cluster/admission_faults.py): admission slows down or waits, and
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


def test_every_write_slowed(scenario: Any, admission_faults: Any) -> None:
    s = scenario()
    faults = admission_faults(s)
    faults.delay(0.3)
    s.load.create(bare=100, jobs=15, pods=15)
    s.load.wait_admitting(12)
    time.sleep(6)  # admission goes on, slowly
    faults.allow()
    print(f"{faults.reviewed} writes slowed by 0.3 s")
    s.end(expected=130)


def test_writes_refused_for_a_while(scenario: Any, admission_faults: Any) -> None:
    s = scenario()
    faults = admission_faults(s)
    s.load.create(bare=100, jobs=15, pods=15)
    s.load.wait_admitting(12)
    faults.refuse(429)
    time.sleep(5)
    faults.refuse(500)
    time.sleep(3)
    faults.allow()
    print(f"{faults.refused} writes refused")
    assert faults.refused > 0
    s.end(expected=130)
