"""etcd killed (-9) and started again while the leader admits: the API server answers
errors and timeouts meanwhile, its watch cache starts again; the replicas ride it out and
nothing is lost, doubled or over-used (tests/faults/replay.py)."""

from __future__ import annotations

from typing import Any


def test_etcd_restarted_during_admission(scenario: Any) -> None:
    s = scenario()
    s.load.create(bare=120, jobs=20, pods=20)
    s.load.wait_admitting(12)
    outage = s.faults.restart("etcd", down_seconds=2)
    print(f"etcd down {outage.seconds:.1f}s")
    s.end(expected=160)
