"""The leader cut off from the API server while the standby takes over: the old leader has
stopped writing before the standby starts (fencing by lease: its writes, as the API
server's audit log records them, all arrived before the standby acquired the Lease); then
the new leader killed while its writes are in flight, and the old one leads again.
Nothing is lost, doubled or over-used (tests/faults/replay.py)."""

from __future__ import annotations

import re
import time
from datetime import datetime
from typing import Any

from tests.cluster.fixtures import wait_for

WRITES = {"create", "update", "patch", "delete", "deletecollection"}


def _when(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def test_partitioned_leader_stops_before_the_standby_starts(
    scenario: Any, fault_cluster: Any
) -> None:
    s = scenario()
    s.load.create(bare=120, jobs=20, pods=20)
    s.load.wait_admitting(6)
    old = s.leader()
    new = s.replicas.other(old)
    cut = time.time()
    old.proxy.partition()
    wait_for(
        lambda: old.metric("quotagate_leader") == 0, timeout=30, what="the old leader to step down"
    )
    wait_for(new.leading, timeout=30, what=f"{new.name} to take over")
    old.proxy.heal()
    # The new leader killed while its writes are in flight (a crash: no Lease release);
    # the old one, a follower now, must lead again on a sound view: its watches resumed
    # after its connections were reset when it stepped down.
    s.load.wait_admitting(6)
    s.kill(new)
    wait_for(old.leading, timeout=30, what=f"{old.name} to lead again")
    s.end(expected=160)

    events = [e for e in fault_cluster.audit_events() if _when(e["requestReceivedTimestamp"]) > cut]

    def lease_writes(replica: Any) -> list[float]:
        return sorted(
            _when(e["requestReceivedTimestamp"])
            for e in events
            if e["user"]["username"] == replica.name
            and e["objectRef"].get("resource") == "leases"
            and e.get("responseStatus", {}).get("code") in (200, 201)
        )

    acquired = lease_writes(new)[0]
    # The standby's term lasts until the old leader holds the Lease again (when the
    # scenario ends, the new leader stops first and gives the Lease up).
    regained = next((t for t in lease_writes(old) if t > acquired), float("inf"))
    late = [
        f"{e['verb']} {e['objectRef'].get('resource')}/{e['objectRef'].get('name')} at "
        f"{e['requestReceivedTimestamp']}"
        for e in events
        if e["user"]["username"] == old.name
        and e["verb"] in WRITES
        and e["objectRef"].get("resource") != "leases"
        and acquired <= _when(e["requestReceivedTimestamp"]) < regained
    ]
    assert not late, f"the old leader wrote after {new.name} acquired the Lease: {late[:10]}"
    # Its own account: it stepped down before the standby's term began.
    stepped = re.findall(r'"ts": "([^"]+)"[^\n]*lost lease', old.log())
    began = re.findall(r'"ts": "([^"]+)"[^\n]*acquired lease', new.log())
    assert stepped and began
    assert _when(stepped[-1]) < _when(began[-1]), (stepped, began)
    print(
        f"old leader stepped down {_when(stepped[-1]) - cut:.2f}s after the cut, the standby "
        f"took over {acquired - cut:.2f}s after it"
    )
