"""Leader election and restart safety of `quotagate run` on the real API server (issue 6).

A watcher thread samples every Workload's `status.admission` throughout each test and
records the highest total reserved CPU seen, so "never over quota" is checked over the
whole run, not only at the end.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from api.quantities import parse_quantity
from tests.cluster.fixtures import wait_for
from tests.integration.kueue import (
    ControllerProcess,
    Kueue,
    cluster_queue,
    flavor,
    is_admitted,
    local_queue,
    workload,
)

FAST_LEASE = (
    "leaderElection: {leaseDurationSeconds: 4, renewDeadlineSeconds: 3, retryPeriodSeconds: 1}\n"
)


class UsageWatcher:
    """Samples reserved CPU (milli) in one namespace until stopped; keeps the maximum."""

    def __init__(self, kueue: Kueue, namespace: str) -> None:
        self.kueue, self.namespace = kueue, namespace
        self.max_reserved = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> UsageWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def reserved(self) -> int:
        total = 0
        for wl in self.kueue.workloads(self.namespace):
            admission = (wl.get("status") or {}).get("admission")
            finished = any(
                c["type"] == "Finished" and c["status"] == "True"
                for c in wl.get("status", {}).get("conditions", [])
            )
            if admission and not finished:
                for assignment in admission.get("podSetAssignments", []):
                    total += parse_quantity(assignment["resourceUsage"]["cpu"]).milli
        return total

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self.max_reserved = max(self.max_reserved, self.reserved())
            self.samples += 1


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(FAST_LEASE)
    return path


@pytest.fixture
def replicas(crds_installed: list[str], system_namespace: str) -> Iterator[list[ControllerProcess]]:
    """Controller processes started by a test; all killed afterwards."""
    made: list[ControllerProcess] = []
    yield made
    for replica in made:
        replica.kill()


def _setup(kueue: Kueue, namespace: str, quota: int, count: int) -> str:
    cq = f"{namespace}-cq"
    kueue.apply(
        flavor(f"{namespace}-rf"),
        cluster_queue(cq, {f"{namespace}-rf": {"cpu": quota}}),
        local_queue(namespace, "lq", cq),
    )
    for i in range(count):
        kueue.apply(workload(namespace, f"w{i:02d}", "lq", cpu="1"))
    return cq


def _admitted(kueue: Kueue, namespace: str) -> list[str]:
    return sorted(wl["metadata"]["name"] for wl in kueue.workloads(namespace) if is_admitted(wl))


def test_only_the_leader_admits_and_the_standby_takes_over(
    kueue: Kueue,
    namespace: str,
    kubeconfig_path: str,
    tmp_path: Path,
    config_file: Path,
    replicas: list[ControllerProcess],
) -> None:
    lease = f"ha-{namespace}"
    first = ControllerProcess(
        kubeconfig_path, tmp_path, "first", lease, ["--config", str(config_file)]
    ).start()
    replicas.append(first)
    wait_for(first.is_leader, timeout=30, what="first replica to lead")
    second = ControllerProcess(
        kubeconfig_path, tmp_path, "second", lease, ["--config", str(config_file)]
    ).start()
    replicas.append(second)

    with UsageWatcher(kueue, namespace) as watcher:
        _setup(kueue, namespace, quota=4, count=10)
        wait_for(lambda: len(_admitted(kueue, namespace)) == 4, what="4 admitted")
        assert not second.is_leader(), (
            "the standby must not decide while the leader holds the Lease"
        )

        first.kill()  # a crash: no Lease release, the standby waits out the lease duration
        for name in _admitted(kueue, namespace)[:2]:
            kueue.finish(namespace, name)
        wait_for(second.is_leader, timeout=30, what="the standby to take the Lease")
        wait_for(
            lambda: len(_admitted(kueue, namespace)) == 6,
            timeout=30,
            what="2 more admitted by the new leader",
        )
        assert watcher.reserved() == 4000

    assert watcher.samples > 10
    assert watcher.max_reserved <= 4000, f"reserved {watcher.max_reserved}m CPU of a 4-CPU quota"


def test_restart_mid_stream_neither_double_admits_nor_forgets(
    kueue: Kueue,
    namespace: str,
    kubeconfig_path: str,
    tmp_path: Path,
    config_file: Path,
    replicas: list[ControllerProcess],
) -> None:
    lease = f"restart-{namespace}"
    with UsageWatcher(kueue, namespace) as watcher:
        first = ControllerProcess(
            kubeconfig_path, tmp_path, "before", lease, ["--config", str(config_file)]
        ).start()
        replicas.append(first)
        wait_for(first.is_leader, timeout=30, what="controller to lead")
        _setup(kueue, namespace, quota=10, count=20)
        wait_for(lambda: len(_admitted(kueue, namespace)) >= 1, what="admissions to begin")
        first.kill()  # admissions may be in flight
        before = _admitted(kueue, namespace)

        again = ControllerProcess(
            kubeconfig_path, tmp_path, "after", lease, ["--config", str(config_file)]
        ).start()
        replicas.append(again)
        wait_for(
            lambda: len(_admitted(kueue, namespace)) == 10,
            timeout=40,
            what="10 admitted after restart",
        )
        after = _admitted(kueue, namespace)
        assert set(before) <= set(after), "an admission made before the restart was forgotten"
        pending = [wl for wl in kueue.workloads(namespace) if not is_admitted(wl)]
        assert len(pending) == 10
        for wl in pending:
            assert not (wl.get("status") or {}).get("admission")

    assert watcher.max_reserved <= 10_000, f"reserved {watcher.max_reserved}m CPU of a 10-CPU quota"
