"""`python -m tests.cluster fault …` against `make cluster-up`'s control plane: one
component restarted while the others keep running, one that exits by itself reported and
started again, etcd compacted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.kueue import REPO


def _cluster(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tests.cluster", *args],
        cwd=REPO,
        env={**os.environ, "QUOTAGATE_CLUSTER_DIR": str(state)},
        capture_output=True,
        text=True,
        timeout=240,
    )


def _kubectl(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(state.parent / "bin" / "kubectl"), *args], capture_output=True, text=True, timeout=60
    )


@pytest.fixture
def state(tmp_path: Path) -> Iterator[Path]:
    state = tmp_path / "cluster"
    up = _cluster(state, "up")
    assert up.returncode == 0, up.stderr
    try:
        yield state
    finally:
        _cluster(state, "down")


def _pid(state: Path, component: str) -> int:
    status = _cluster(state, "fault", "status").stdout
    line = next(line for line in status.splitlines() if line.startswith(f"{component}:"))
    return int(line.rsplit("pid ", 1)[1])


def test_fault_commands(state: Path) -> None:
    restarted = _cluster(state, "fault", "restart", "kube-apiserver", "--down", "1")
    assert restarted.returncode == 0, restarted.stderr
    assert restarted.stdout.startswith("kube-apiserver restarted: down ")
    assert _kubectl(state, "get", "nodes").returncode == 0

    os.kill(_pid(state, "kube-scheduler"), signal.SIGKILL)  # by hand: the others stay up
    status = ""
    for _ in range(50):
        status = _cluster(state, "fault", "status").stdout
        if "kube-scheduler: exited" in status:
            break
    assert "kube-scheduler: exited" in status and "etcd: running" in status, status
    started = _cluster(state, "fault", "start", "kube-scheduler")
    assert started.returncode == 0, started.stderr
    assert "kube-scheduler: running" in _cluster(state, "fault", "status").stdout

    compacted = _cluster(state, "fault", "compact-etcd")
    assert compacted.stdout.startswith("etcd compacted to revision ")
    refused = _cluster(state, "fault", "start", "etcd")
    assert refused.returncode == 1 and refused.stderr.strip() == "error: etcd is running"
