"""The fault suite's fixtures: one hurtable cluster for the session, and per test a
scenario — fresh queues and namespaces, two replicas, the etcd recorder, the job side —
whose invariants are checked when it ends (tests/faults/replay.py)."""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.cluster import FaultCluster, Replica, Replicas
from tests.faults.load import Load
from tests.faults.recorder import EtcdRecorder
from tests.faults.replay import Quotas, Replay, replay


@pytest.fixture(scope="session")
def fault_cluster() -> Iterator[FaultCluster]:
    cluster = FaultCluster().start()
    try:
        yield cluster
    finally:
        cluster.stop()


class Scenario:
    """One scenario's load, replicas and history."""

    def __init__(self, cluster: FaultCluster, workdir: Path, nominal: int) -> None:
        self.cluster = cluster
        self.workdir = workdir
        self.faults = cluster.faults
        self.started = time.monotonic()
        self.load = Load(cluster, f"f{uuid.uuid4().hex[:6]}", nominal)
        self.recorder = EtcdRecorder(
            cluster.plane.etcd_url, set(self.load.namespaces), self.faults.etcd_revision() + 1
        ).start()
        self.load.setup()
        self.replicas = Replicas(cluster, self.load.namespaces, workdir).start()
        self.load.start_job_side()
        self.killed: set[str] = set()  # replicas the scenario killed on purpose
        self.ended = False
        self.phases = [("set up", time.monotonic())]  # (what ended, when)

    def phase(self, what: str) -> None:
        self.phases.append((what, time.monotonic()))

    @property
    def quotas(self) -> Quotas:
        nominal = {cq: self.load.nominal * 1000 for cq in self.load.cluster_queues.values()}
        return Quotas(nominal, dict.fromkeys(nominal))

    def leader(self) -> Replica:
        leader = self.replicas.leader()
        assert leader is not None, "no replica leads"
        return leader

    def kill(self, replica: Replica) -> None:
        self.killed.add(replica.name)
        replica.process.kill()

    def end(self, expected: int, timeout: float = 180) -> Replay:
        """Wait until all `expected` Workloads finished; then check that no replica exited
        on its own, that each stops cleanly, and every invariant on the whole history."""
        self.ended = True
        self.phase("scenario")
        try:
            self.load.wait_finished(expected, timeout)
        finally:
            self.load.stop_job_side()
        self.phase("all finished")
        exited = [
            f"{r.name} exited with {r.process.process.returncode}: {r.log()[-2000:]}"
            for r in self.replicas.all
            if r.name not in self.killed and not r.running and r.process.process is not None
        ]
        assert not exited, "a replica exited during a recoverable outage:\n" + "\n".join(exited)
        self.recorder.wait_for(self.faults.etcd_revision())
        result = replay(self.recorder.changes, self.quotas)
        ends = result.end_states()
        self.phase("replayed")
        statuses = {name: code for name, code in self.replicas.stop().items() if code is not None}
        self.phase("stopped")
        times, last = [], self.started
        for what, at in self.phases:
            times.append(f"{what} {at - last:.1f}s")
            last = at
        print(
            f"\n{self.load.tag}: {len(self.recorder.changes)} changes replayed, "
            f"{result.admissions} admissions, {result.evictions} evictions, "
            f"{result.ungated} pods ungated, {result.unsuspended} Jobs unsuspended, "
            f"peak {result.peak}, ends {ends}, recorder reconnects {self.recorder.reconnects}, "
            f"exit statuses {statuses}, {time.monotonic() - self.started:.1f}s ({', '.join(times)})"
        )
        if result.violations:
            kept = self.keep_history()
            raise AssertionError("\n".join([*result.violations, f"etcd's history: {kept}"]))
        assert all(code == 0 for code in statuses.values()), statuses
        return result

    def keep_history(self) -> Path:
        """The recorded history, one change a line (JSON), beside the replicas' logs in the
        test's directory (kept by pytest; `--basetemp` to choose where)."""
        path = self.workdir / "etcd-history.jsonl"
        with path.open("w") as out:
            for change in sorted(self.recorder.changes, key=lambda c: c.revision):
                out.write(json.dumps(dataclasses.asdict(change)) + "\n")
        return path

    def close(self) -> None:
        self.load.stop_job_side()
        self.recorder.stop()
        for replica in self.replicas.all:
            if not self.ended or replica.running:
                replica.stop()
            print(f"--- {replica.name} log tail ---\n{replica.log()[-1500:]}")


@pytest.fixture
def scenario(fault_cluster: FaultCluster, tmp_path: Path) -> Iterator[type[Scenario]]:
    """`scenario(nominal=…)` starts one; it is torn down after the test."""
    made: list[Scenario] = []

    def start(nominal: int = 16) -> Scenario:
        made.append(Scenario(fault_cluster, tmp_path, nominal))
        return made[-1]

    yield start  # type: ignore[misc]
    for one in made:
        one.close()
