"""kube-apiserver restarted (kill -9, then the same command line) while the leader admits,
over an etcd compacted up to then, so that every watch resumed from before is refused (410
Gone) and listed again; and restarted while the leader evicts. The replicas ride it out
and nothing is lost, doubled or over-used (the invariants: tests/faults/replay.py)."""

from __future__ import annotations

from typing import Any

from tests.cluster.fixtures import wait_for


def test_apiserver_restarted_during_admission_and_watches_expire(scenario: Any) -> None:
    s = scenario()
    s.load.create(bare=120, jobs=20, pods=20)
    s.phase("created")
    s.load.wait_admitting(12)
    s.faults.compact_etcd(s.recorder.revision)  # no older history to resume from
    outage = s.faults.restart("kube-apiserver")
    print(f"kube-apiserver down {outage.seconds:.1f}s")
    wait_for(
        lambda: all(r.metric("quotagate_watch_expired_total") > 0 for r in s.replicas.all),
        timeout=30,
        what="both replicas' watches refused with 410 Gone",
    )
    s.end(expected=160)


def test_apiserver_restarted_during_evictions(scenario: Any) -> None:
    s = scenario()
    s.load.create(bare=50, prefix="low-", runtime_ms=4000)
    s.load.wait_admitting(32)  # the cohort's whole quota
    s.load.create(bare=40, jobs=10, pods=10, prefix="high-", priority=100)
    s.load.wait_evicting()
    outage = s.faults.restart("kube-apiserver")
    print(f"kube-apiserver down {outage.seconds:.1f}s")
    result = s.end(expected=110)
    assert result.evictions > 0
