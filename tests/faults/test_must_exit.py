"""What the controller cannot ride out: its credentials revoked (the API server restarted
without its token, as a rotated ServiceAccount token would leave it). That replica exits
1 with one line that says why; the other goes on leading, and the scenario's invariants
hold (tests/faults/replay.py)."""

from __future__ import annotations

from typing import Any

from tests.cluster.fixtures import wait_for


def test_revoked_credentials_exit_1_with_one_line(scenario: Any, fault_cluster: Any) -> None:
    s = scenario()
    s.load.create(bare=60)
    s.load.wait_admitting(6)
    revoked = s.replicas.all[1]
    tokens = fault_cluster.plane.dir / "pki" / "tokens.csv"
    saved = tokens.read_text()
    token = fault_cluster.plane.users[revoked.name]
    try:
        tokens.write_text("".join(line + "\n" for line in saved.splitlines() if token not in line))
        s.killed.add(revoked.name)  # it is meant to exit
        s.faults.restart("kube-apiserver")
        wait_for(lambda: not revoked.running, timeout=60, what=f"{revoked.name} to exit")
    finally:
        tokens.write_text(saved)
        s.faults.restart("kube-apiserver")
    assert revoked.process.process is not None
    assert revoked.process.process.returncode == 1
    last = [line for line in revoked.log().splitlines() if line.strip()][-1]
    print(f"{revoked.name} said: {last}")
    assert last.startswith("quotagate run: ") and "401" in last, last
    assert "Traceback" not in revoked.log()
    s.end(expected=60)
