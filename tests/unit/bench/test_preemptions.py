"""Evictions judged against another run (tools/bench/preemptions.py): the preemptor is
read from Kueue's message; an eviction is needed when the other run admitted the preemptor
later or never, churn when it admitted it as early without evicting."""

from __future__ import annotations

from tools.bench.preemptions import PreemptionLog, judge, preemptor_uid

KUEUE = (
    "Preempted to accommodate a workload (UID: 4f1c-aa, JobUID: UNKNOWN) due to "
    "prioritization in the ClusterQueue; preemptor path: /co/cq; preemptee path: /co/cq"
)


def test_the_preemptor_uid_is_read_from_kueues_message() -> None:
    assert preemptor_uid(KUEUE) == "4f1c-aa"
    assert preemptor_uid(KUEUE.replace("4f1c-aa", "UNKNOWN")) is None
    assert preemptor_uid("evicted: the ClusterQueue was stopped") is None


def _run(evictions: list[tuple[str, str]], admission: dict[str, float | None]) -> dict:
    log = PreemptionLog()
    for key in admission:
        log.seen(f"uid-{key}", key)
    for at, (victim, preemptor) in enumerate(evictions):
        log.evicted(float(at), victim, KUEUE.replace("4f1c-aa", f"uid-{preemptor}"))
    return log.to_json(admission)


def test_evictions_are_needed_churn_or_unknown() -> None:
    ours = _run(
        [("cq/s1", "cq/L1"), ("cq/s2", "cq/L1"), ("cq/s3", "cq/L2"), ("cq/s4", "cq/L3")],
        {"cq/L1": 2.0, "cq/L2": 5.0, "cq/L3": 1.0, "cq/s1": 0.0},
    )
    theirs = _run([], {"cq/L1": 9.5, "cq/L2": 4.0, "cq/L3": None, "cq/s1": 0.0})

    verdict = judge(ours, theirs)

    assert verdict is not None
    # L1: they admitted it 7.5 s later (two evictions needed); L2: earlier (churn);
    # L3: never (needed, nothing to count as gained).
    assert (verdict.evictions, verdict.preemptors) == (4, 3)
    assert (verdict.needed, verdict.churn, verdict.unknown) == (3, 1, 0)
    assert verdict.gained_s == 7.5
    assert ours["preemption_log"][0] == {"at_s": 0.0, "victim": "cq/s1", "preemptor": "cq/L1"}


def test_an_unidentified_preemptor_is_unknown_and_no_log_means_no_verdict() -> None:
    log = PreemptionLog()
    log.evicted(1.0, "cq/s1", "Preempted to accommodate a workload (UID: gone, JobUID: x)")
    ours = log.to_json({"cq/s1": 0.0})
    assert ours["preemption_log"][0]["preemptor"] == "gone"
    verdict = judge(ours, {"time_to_admission_s": {"cq/s1": 0.0}})
    assert verdict is not None and verdict.unknown == 1
    assert judge({}, ours) is None
