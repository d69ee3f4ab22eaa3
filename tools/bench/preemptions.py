"""Who preempted whom in a live run, and whether another run needed the evictions.

A preempted Workload's `Evicted` condition carries Kueue's message (quotagate writes it
word for word): `Preempted to accommodate a workload (UID: <uid>, JobUID: <uid>) due to …`.
The log maps each eviction to its preemptor through that UID, and the run's report keeps,
per Workload (by its scenario key, the same in every run of a scenario), its time to
admission. Two runs of the same scenario can then be compared eviction by eviction: an
eviction in one run is *needed* when the other run admitted the same preemptor later, or
never — the eviction bought an earlier admission. An eviction whose preemptor the other run
admitted at least as early, without it, is churn.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["PreemptionLog", "Verdict", "judge", "preemptor_uid"]

_UID = re.compile(r"^Preempted to accommodate a workload \(UID: ([^,)\s]+)")


def preemptor_uid(message: str) -> str | None:
    """The preemptor's UID in Kueue's preemption message (None: not such a message, or the
    UID is unknown)."""
    match = _UID.match(message or "")
    if match is None or match.group(1) == "UNKNOWN":
        return None
    return match.group(1)


@dataclass
class PreemptionLog:
    """Evictions by preemption as a run observes them, keyed by scenario key."""

    keys: dict[str, str] = field(default_factory=dict)  # uid → scenario key
    evictions: list[tuple[float, str, str]] = field(default_factory=list)  # at, victim, uid

    def seen(self, uid: str, key: str) -> None:
        self.keys[uid] = key

    def evicted(self, at: float, victim: str, message: str) -> None:
        uid = preemptor_uid(message)
        self.evictions.append((at, victim, uid or "UNKNOWN"))

    def to_json(self, admission_s: Mapping[str, float | None]) -> dict[str, Any]:
        """The report's part: every eviction (time, victim, preemptor — its scenario key,
        or its UID when the run never saw it) and every Workload's time to admission (None:
        never admitted)."""
        return {
            "preemption_log": [
                {"at_s": round(at, 3), "victim": victim, "preemptor": self.keys.get(uid, uid)}
                for at, victim, uid in self.evictions
            ],
            "time_to_admission_s": {
                key: None if value is None else round(value, 3)
                for key, value in admission_s.items()
            },
        }


@dataclass(frozen=True)
class Verdict:
    """The evictions of one run judged against another run of the same scenario."""

    evictions: int
    preemptors: int
    needed: int  # evictions whose preemptor the other run admitted later or never
    churn: int  # evictions whose preemptor the other run admitted as early or earlier
    unknown: int  # preemptor not identified, or not in the other run
    # Σ over needed preemptors the other run admitted of (its admission − this run's).
    gained_s: float

    def to_json(self) -> dict[str, Any]:
        return {
            "evictions": self.evictions,
            "preemptors": self.preemptors,
            "needed": self.needed,
            "churn": self.churn,
            "unknown": self.unknown,
            "admission_gained_s": round(self.gained_s, 3),
        }


def judge(run: Mapping[str, Any], other: Mapping[str, Any]) -> Verdict | None:
    """Judge `run`'s evictions against `other` (both reports' JSON, as `to_json` wrote
    them); None when either has no log (a simulated run, an older report)."""
    if "preemption_log" not in run or "time_to_admission_s" not in other:
        return None
    mine: Mapping[str, float | None] = run.get("time_to_admission_s") or {}
    theirs: Mapping[str, float | None] = other["time_to_admission_s"]
    needed = churn = unknown = 0
    gained = 0.0
    counted: set[str] = set()
    preemptors: set[str] = set()
    for entry in run["preemption_log"]:
        preemptor = entry["preemptor"]
        preemptors.add(preemptor)
        if preemptor not in theirs or mine.get(preemptor) is None:
            unknown += 1
            continue
        here, there = mine[preemptor], theirs[preemptor]
        assert here is not None
        if there is None or there > here:
            needed += 1
            if preemptor not in counted:
                counted.add(preemptor)
                gained += (there if there is not None else here) - here
        else:
            churn += 1
    return Verdict(len(run["preemption_log"]), len(preemptors), needed, churn, unknown, gained)
