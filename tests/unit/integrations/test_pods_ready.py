"""The PodsReady condition as Kueue's job side computes it (controller/integrations/
pods_ready.py): the reasons' state machine, Job and pod readiness, when nothing is
rewritten, and the wait times of the ready histograms."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from api.workload_status import rfc3339
from controller.integrations.pods_ready import (
    NOT_READY_MESSAGE,
    READY_MESSAGE,
    WAITING_FOR_RECOVERY_MESSAGE,
    PodsReadyCondition,
    condition_body,
    desired,
    job_pods_count,
    job_pods_ready,
    ready_wait_times,
    unchanged,
    unit_pods_ready,
)

T0 = 1_700_000_000.0


def workload(
    admitted: bool = True,
    pods_ready: tuple[str, str] | None = None,
    requeued_at: float | None = None,
    generation: int | None = 1,
) -> dict[str, Any]:
    conditions: list[dict[str, Any]] = []
    if admitted:
        conditions.append(
            {"type": "Admitted", "status": "True", "lastTransitionTime": rfc3339(T0 + 10)}
        )
    if pods_ready is not None:
        conditions.append(
            {
                "type": "PodsReady",
                "status": pods_ready[0],
                "reason": pods_ready[1],
                "lastTransitionTime": rfc3339(T0 + 11),
            }
        )
    if requeued_at is not None:
        conditions.append(
            {"type": "Requeued", "status": "True", "lastTransitionTime": rfc3339(requeued_at)}
        )
    meta: dict[str, Any] = {"name": "w", "namespace": "ns", "creationTimestamp": rfc3339(T0)}
    if generation is not None:
        meta["generation"] = generation
    return {"metadata": meta, "status": {"conditions": conditions}}


# -- the reasons ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("admitted", "current", "ready", "expected"),
    [
        # not admitted (pending, or evicted and requeued): WaitForStart whatever the pods say
        (False, None, False, (False, "WaitForStart")),
        (False, None, True, (False, "WaitForStart")),
        (False, ("True", "Started"), True, (False, "WaitForStart")),
        (False, ("False", "WaitForRecovery"), False, (False, "WaitForStart")),
        # admitted, first start
        (True, None, False, (False, "WaitForStart")),
        (True, ("False", "WaitForStart"), False, (False, "WaitForStart")),
        (True, None, True, (True, "Started")),
        (True, ("False", "WaitForStart"), True, (True, "Started")),
        # Kueue's old reason `PodsReady` counts as waiting for the start
        (True, ("False", "PodsReady"), False, (False, "WaitForStart")),
        (True, ("False", "PodsReady"), True, (True, "Started")),
        # readiness lost, and regained
        (True, ("True", "Started"), False, (False, "WaitForRecovery")),
        (True, ("True", "Recovered"), False, (False, "WaitForRecovery")),
        (True, ("False", "WaitForRecovery"), False, (False, "WaitForRecovery")),
        (True, ("False", "WaitForRecovery"), True, (True, "Recovered")),
        (True, ("True", "Recovered"), True, (True, "Recovered")),
        (True, ("True", "Started"), True, (True, "Started")),
    ],
)
def test_the_condition_follows_kueues_reasons(
    admitted: bool, current: tuple[str, str] | None, ready: bool, expected: tuple[bool, str]
) -> None:
    wanted = desired(workload(admitted, current), ready)
    assert (wanted.status, wanted.reason) == expected


def test_messages_are_kueues() -> None:
    assert desired(workload(True), True).message == READY_MESSAGE
    assert desired(workload(True), False).message == NOT_READY_MESSAGE
    assert (
        desired(workload(True, ("True", "Started")), False).message == WAITING_FOR_RECOVERY_MESSAGE
    )


def test_only_a_first_start_observes_the_histograms() -> None:
    assert desired(workload(True), True).first_start
    assert not desired(workload(True, ("False", "WaitForRecovery")), True).first_start
    assert not desired(workload(True), False).first_start


@given(
    admitted=st.booleans(),
    current=st.sampled_from(
        [
            None,
            ("True", "Started"),
            ("True", "Recovered"),
            ("False", "WaitForStart"),
            ("False", "WaitForRecovery"),
        ]
    ),
    ready=st.booleans(),
)
def test_writing_what_is_wanted_leaves_nothing_to_write(
    admitted: bool, current: tuple[str, str] | None, ready: bool
) -> None:
    """After the write the Workload is unchanged for the same readiness: never rewritten."""
    wl = workload(admitted, current)
    wanted = desired(wl, ready)
    body = condition_body(wl, wanted, T0 + 20)
    written = workload(admitted, (body["status"], body["reason"]))
    again = desired(written, ready)
    assert again == wanted
    assert unchanged(written, again)
    # Readiness and the condition agree exactly when the Workload is admitted.
    assert wanted.status == (admitted and ready)


def test_unchanged_ignores_message_and_time() -> None:
    wl = workload(True, ("False", "WaitForStart"))
    assert unchanged(wl, PodsReadyCondition(False, "WaitForStart", "another message"))
    assert not unchanged(wl, PodsReadyCondition(False, "WaitForRecovery", NOT_READY_MESSAGE))
    assert not unchanged(wl, PodsReadyCondition(True, "WaitForStart", NOT_READY_MESSAGE))
    assert not unchanged(workload(True), PodsReadyCondition(False, "WaitForStart", ""))


def test_condition_body_carries_the_time_of_the_write_and_the_generation() -> None:
    body = condition_body(workload(generation=3), PodsReadyCondition(True, "Started", "m"), T0)
    assert body == {
        "type": "PodsReady",
        "status": "True",
        "reason": "Started",
        "message": "m",
        "lastTransitionTime": rfc3339(T0),
        "observedGeneration": 3,
    }
    assert "observedGeneration" not in condition_body(
        workload(generation=None), PodsReadyCondition(False, "WaitForStart", "m"), T0
    )


# -- Job readiness -------------------------------------------------------------------------


def job(
    parallelism: int | None = 3,
    completions: int | None = None,
    ready: int = 0,
    succeeded: int = 0,
    uncounted: int = 0,
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if parallelism is not None:
        spec["parallelism"] = parallelism
    if completions is not None:
        spec["completions"] = completions
    status: dict[str, Any] = {"ready": ready, "succeeded": succeeded}
    if uncounted:
        status["uncountedTerminatedPods"] = {"succeeded": [f"u{i}" for i in range(uncounted)]}
    return {"spec": spec, "status": status}


def test_job_pods_count_is_min_of_parallelism_and_completions() -> None:
    assert job_pods_count(job(3)) == 3
    assert job_pods_count(job(3, 2)) == 2
    assert job_pods_count(job(2, 5)) == 2
    assert job_pods_count(job(None)) == 1


@pytest.mark.parametrize(
    ("kwargs", "ready"),
    [
        ({"ready": 3}, True),
        ({"ready": 2}, False),
        ({"ready": 2, "succeeded": 1}, True),
        ({"ready": 1, "uncounted": 1, "succeeded": 1}, True),
        ({"ready": 0}, False),
        ({"completions": 2, "ready": 2}, True),
        ({"parallelism": None, "ready": 1}, True),
    ],
)
def test_job_is_ready_when_ready_and_succeeded_pods_reach_its_count(
    kwargs: dict[str, Any], ready: bool
) -> None:
    assert job_pods_ready(job(**kwargs)) is ready


def test_a_job_without_status_is_not_ready() -> None:
    assert not job_pods_ready({"spec": {"parallelism": 1}})


# -- pod readiness -------------------------------------------------------------------------


def pod(ready: bool = True, phase: str = "Running", deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p"}
    if deleting:
        meta["deletionTimestamp"] = rfc3339(T0)
    return {
        "metadata": meta,
        "status": {
            "phase": phase,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def test_a_unit_is_ready_when_enough_pods_are_ready_or_succeeded() -> None:
    assert unit_pods_ready([pod()], 1)
    assert not unit_pods_ready([pod(ready=False)], 1)
    assert unit_pods_ready([pod(), pod(), pod()], 3)
    assert not unit_pods_ready([pod(), pod(), pod(ready=False)], 3)
    assert unit_pods_ready([pod(), pod(ready=False, phase="Succeeded"), pod()], 3)
    assert not unit_pods_ready([pod(), pod(ready=False, phase="Failed"), pod()], 3)
    # pods being deleted do not count; fewer pods than needed are never ready
    assert not unit_pods_ready([pod(), pod(deleting=True)], 2)
    assert not unit_pods_ready([pod()], 2)
    # a pod without status is not ready, and a unit needs at least one pod
    assert not unit_pods_ready([{"metadata": {"name": "p"}}], 1)
    assert not unit_pods_ready([], 0)


# -- wait times ----------------------------------------------------------------------------


def test_wait_times_from_creation_and_from_admission() -> None:
    assert ready_wait_times(workload(), T0 + 30) == (30.0, 20.0)


def test_wait_times_from_the_last_requeue() -> None:
    assert ready_wait_times(workload(requeued_at=T0 + 5), T0 + 30) == (25.0, 20.0)


def test_no_wait_times_without_an_admission() -> None:
    assert ready_wait_times(workload(admitted=False), T0 + 30) is None
