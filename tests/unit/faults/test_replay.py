"""tests/faults/replay.py finds each broken invariant in a history, and none in a sound one:
the fault suite's assertions are only as good as this."""

from __future__ import annotations

from typing import Any

from tests.faults.recorder import Change
from tests.faults.replay import Quotas, replay

QUOTAS = Quotas({"a": 2000, "b": 2000}, {"a": None, "b": 0})


def wl(
    name: str,
    uid: str = "",
    cq: str | None = None,
    cpu: str = "1",
    evicted: bool = False,
    finished: bool = False,
    pending: str | None = None,
    owner: tuple[str, str] | None = None,
    count: int = 1,
) -> dict[str, Any]:
    conditions = []
    status: dict[str, Any] = {"conditions": conditions}
    if cq is not None:
        status["admission"] = {
            "clusterQueue": cq,
            "podSetAssignments": [{"name": "main", "count": count, "resourceUsage": {"cpu": cpu}}],
        }
        conditions.append({"type": "QuotaReserved", "status": "True"})
    elif pending is not None:
        conditions.append({"type": "QuotaReserved", "status": "False", "message": pending})
    if evicted:
        conditions.append({"type": "Evicted", "status": "True"})
    if finished:
        conditions.append({"type": "Finished", "status": "True"})
    meta: dict[str, Any] = {"name": name, "uid": uid or name}
    if owner:
        meta["ownerReferences"] = [{"kind": owner[0], "uid": owner[1]}]
    return {"metadata": meta, "status": status}


def history(*objects: tuple[str, str, dict[str, Any] | None]) -> list[Change]:
    return [
        Change(revision, kind, "ns", name, obj)
        for revision, (kind, name, obj) in enumerate(objects, 1)
    ]


def test_a_sound_history_has_no_violation() -> None:
    result = replay(
        history(
            ("Workload", "w1", wl("w1", pending="waiting")),
            ("Workload", "w1", wl("w1", cq="a")),
            ("Workload", "w2", wl("w2", cq="a")),
            ("Workload", "w3", wl("w3", cq="a", cpu="2")),  # borrows b's nominal quota
            ("Workload", "w1", wl("w1", cq="a", evicted=True)),
            ("Workload", "w1", wl("w1", pending="evicted", evicted=True)),
            ("Workload", "w2", wl("w2", cq="a", finished=True)),
            ("Workload", "w1", wl("w1", cq="a")),
            ("Workload", "w1", wl("w1", cq="a", finished=True)),
        ),
        QUOTAS,
    )
    assert result.violations == []
    assert (result.admissions, result.evictions) == (4, 1)
    assert result.end_states() == {"finished": 2, "holding quota": 1}


def test_over_use_in_a_queue_and_in_the_cohort() -> None:
    result = replay(
        history(
            ("Workload", "w1", wl("w1", cq="b", cpu="2")),
            ("Workload", "w2", wl("w2", cq="b")),  # b may not borrow: 3 > 2
            ("Workload", "w3", wl("w3", cq="a", cpu="2")),  # the cohort: 5 > 4
        ),
        QUOTAS,
    )
    assert any("ClusterQueue b holds 3000m" in v for v in result.violations)
    assert any("the cohort holds 5000m" in v for v in result.violations)


def test_a_reservation_released_without_eviction_is_a_lost_admission() -> None:
    result = replay(
        history(
            ("Workload", "w1", wl("w1", cq="a")),
            ("Workload", "w1", wl("w1", pending="cleared")),
        ),
        QUOTAS,
    )
    assert result.violations == [
        "admission of ns/w1 lost at revision 2: quota released without an eviction"
    ]


def test_an_admission_written_over_another_is_written_twice() -> None:
    result = replay(
        history(
            ("Workload", "w1", wl("w1", cq="a")),
            ("Workload", "w1", wl("w1", cq="b")),
            ("Workload", "w2", wl("w2", cq="a", count=2, cpu="2")),
            ("Workload", "w2", wl("w2", cq="a", count=1, cpu="1")),  # a partial preemption
        ),
        QUOTAS,
    )
    assert len(result.violations) == 1
    assert result.violations[0].startswith("ns/w1 admitted again over its admission")


def test_a_pod_ungated_or_a_job_unsuspended_without_quota() -> None:
    gated = {"spec": {"schedulingGates": [{"name": "kueue.x-k8s.io/admission"}]}}
    result = replay(
        history(
            ("Pod", "p1", {**gated, "metadata": {"uid": "p1-uid"}}),
            ("Workload", "p1-w", wl("p1-w", pending="waiting", owner=("Pod", "p1-uid"))),
            ("Pod", "p1", {"spec": {}, "metadata": {"uid": "p1-uid"}}),
            ("Job", "j1", {"spec": {"suspend": True}, "metadata": {"uid": "j1-uid"}}),
            # its Workload is the one it owns, whatever its name
            ("Workload", "j1-w", wl("j1-w", cq="a", owner=("Job", "j1-uid"))),
            ("Job", "j1", {"spec": {"suspend": False}, "metadata": {"uid": "j1-uid"}}),  # fine
            ("Job", "j2", {"spec": {"suspend": True}, "metadata": {"uid": "j2-uid"}}),
            # a Workload of another job holding quota is not j2's
            ("Workload", "j3-w", wl("j3-w", cq="a", owner=("Job", "j3-uid"))),
            ("Job", "j2", {"spec": {"suspend": False}, "metadata": {"uid": "j2-uid"}}),
        ),
        QUOTAS,
    )
    assert result.violations == [
        "Pod ns/p1 ungated without quota at revision 3",
        "Job ns/j2 unsuspended without quota at revision 9",
    ]


def test_two_workloads_for_one_job() -> None:
    result = replay(
        history(
            ("Workload", "job-j1", wl("job-j1", uid="u1", owner=("Job", "j"))),
            ("Workload", "job-j1-again", wl("job-j1-again", uid="u2", owner=("Job", "j"))),
        ),
        QUOTAS,
    )
    assert result.violations == [
        "Job j has 2 Workloads at revision 2: ['ns/job-j1', 'ns/job-j1-again']"
    ]


def test_ends_pending_without_a_reason_or_evicted_holding_quota() -> None:
    result = replay(
        history(
            ("Workload", "w1", wl("w1")),
            ("Workload", "w2", wl("w2", cq="a", evicted=True)),
        ),
        QUOTAS,
    )
    assert result.violations == ["ns/w2 ended evicted and still holding quota"]
    assert result.end_states() == {"pending without a reason": 1, "holding quota": 1}
    assert result.violations[-1].startswith("ns/w1 ended pending without a reason")
