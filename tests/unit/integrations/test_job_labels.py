"""Kueue's Job-level labels and annotations (controller/integrations/job_labels.py): how a
Job's or pod's `kueue.x-k8s.io/max-exec-time-seconds` becomes the Workload's
`spec.maximumExecutionTimeSeconds`, its `kueue.x-k8s.io/admission-gated-by` the Workload's
annotation, its priority class the Workload's with its priority, and how the webhook
refuses a bad one."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from api.constants import (
    ADMISSION_GATED_BY_ANNOTATION,
    MAX_EXEC_TIME_LABEL,
    PRIORITY_CLASS_LABEL,
    QUEUE_NAME_LABEL,
)
from api.validation import validate
from controller.integrations.framework.workloads import new_workload
from controller.integrations.job_labels import (
    PriorityClassNotFound,
    WorkloadPriorityClassNotFound,
    admission_gated_by,
    max_exec_time_problem,
    max_exec_time_seconds,
)
from controller.integrations.kinds.job import Job
from controller.integrations.pod_units import Unit
from controller.integrations.pod_units import workload_for as workload_for_unit
from controller.integrations.webhook import review_response

PATH = f"metadata.labels[{MAX_EXEC_TIME_LABEL}]"


def labelled(value: str | None, queue: bool = True) -> dict[str, Any]:
    labels = {QUEUE_NAME_LABEL: "lq"} if queue else {}
    if value is not None:
        labels[MAX_EXEC_TIME_LABEL] = value
    return {"metadata": {"name": "j", "namespace": "ns", "uid": "u", "labels": labels}}


@pytest.mark.parametrize(
    ("value", "seconds", "problem"),
    [
        (None, None, None),
        ("600", 600, None),
        ("1", 1, None),
        ("0", None, f"{PATH}: Invalid value: 0: should be greater than 0"),
        ("-5", None, f"{PATH}: Invalid value: -5: should be greater than 0"),
        ("10m", None, f'{PATH}: Invalid value: "10m": must be a whole number of seconds'),
        ("1.5", None, f'{PATH}: Invalid value: "1.5": must be a whole number of seconds'),
        ("", None, f'{PATH}: Invalid value: "": must be a whole number of seconds'),
        ("2147483648", None, f"{PATH}: Invalid value: 2147483648: must be at most 2147483647"),
    ],
)
def test_the_label_is_read_as_kueue_reads_it(
    value: str | None, seconds: int | None, problem: str | None
) -> None:
    obj = labelled(value)
    assert max_exec_time_seconds(obj) == seconds
    assert max_exec_time_problem(obj) == problem


def job(value: str | None) -> dict[str, Any]:
    out = labelled(value)
    out["apiVersion"], out["kind"] = "batch/v1", "Job"
    out["spec"] = {"parallelism": 1, "template": {"spec": {"containers": []}}}
    return out


def test_a_jobs_label_becomes_the_workloads_maximum_execution_time() -> None:
    assert (
        new_workload(Job(job("3600")), priority=None)["spec"]["maximumExecutionTimeSeconds"] == 3600
    )
    assert "maximumExecutionTimeSeconds" not in new_workload(Job(job(None)), priority=None)["spec"]


def test_a_pod_units_label_comes_from_its_first_pod() -> None:
    pod = labelled("90")
    pod["spec"] = {"containers": []}
    body = workload_for_unit(Unit("pod", "ns", "j"), [pod], 1)
    assert body["spec"]["maximumExecutionTimeSeconds"] == 90


def review(
    kind: str, obj: dict[str, Any], operation: str = "CREATE", old: dict[str, Any] | None = None
) -> dict[str, Any]:
    request = {"uid": "r1", "kind": {"kind": kind}, "operation": operation, "object": obj}
    if old is not None:
        request["oldObject"] = old
    return review_response({"request": request})["response"]


@pytest.mark.parametrize("kind", ["Job", "Pod"])
def test_the_webhook_refuses_a_bad_label_naming_it(kind: str) -> None:
    obj = job("10m") if kind == "Job" else labelled("10m") | {"spec": {"containers": []}}
    response = review(kind, obj)
    assert response["allowed"] is False
    assert response["status"] == {
        "code": 422,
        "reason": "Invalid",
        "message": f'{PATH}: Invalid value: "10m": must be a whole number of seconds',
    }
    assert "patch" not in response


def test_the_webhook_lets_a_good_label_through_and_still_suspends() -> None:
    response = review("Job", job("60"))
    assert response["allowed"] is True
    patch = json.loads(base64.b64decode(response["patch"]))
    assert patch == [{"op": "add", "path": "/spec/suspend", "value": True}]


def test_the_webhook_leaves_what_it_does_not_queue_alone() -> None:
    assert review("Job", labelled("10m", queue=False) | {"spec": {}})["allowed"] is True
    unqueued = job("10m")
    del unqueued["metadata"]["labels"][QUEUE_NAME_LABEL]
    assert review("Job", unqueued, operation="UPDATE", old=unqueued)["allowed"] is True


def test_an_update_of_a_queued_job_is_checked_as_its_creation_is() -> None:
    """Kueue's Job webhook runs `ValidateJobOnCreate` on the new object of every update:
    a bad label is refused on update too, even when it was already there."""
    response = review("Job", job("10m"), operation="UPDATE", old=job("10m"))
    assert response["allowed"] is False
    assert response["status"]["message"] == (
        f'{PATH}: Invalid value: "10m": must be a whole number of seconds'
    )


def test_a_workload_priority_class_comes_with_its_priority_or_not_at_all() -> None:
    """Kueue's rules refuse a priorityClassRef without a priority: a Job labelled with a
    WorkloadPriorityClass that does not exist gets no Workload yet (Kueue: the
    WorkloadPriorityClassNotFound event, and the Job is reconciled again)."""
    labelled_job = job(None)
    labelled_job["metadata"]["labels"][PRIORITY_CLASS_LABEL] = "high"
    body = new_workload(Job(labelled_job), priority=1000)
    assert body["spec"]["priority"] == 1000
    assert body["spec"]["priorityClassRef"]["name"] == "high"
    with pytest.raises(
        WorkloadPriorityClassNotFound, match='WorkloadPriorityClass "high" not found'
    ):
        new_workload(Job(labelled_job), priority=None)
    # The pod template's PriorityClass: its value comes with it, or no Workload.
    with_class = job(None)
    with_class["spec"]["template"]["spec"]["priorityClassName"] = "batch"
    values = {"batch": 7}
    spec = new_workload(Job(with_class), priority=None, priority_of_pod_class=values.get)["spec"]
    assert spec["priorityClassRef"] == {
        "group": "scheduling.k8s.io",
        "kind": "PriorityClass",
        "name": "batch",
    }
    assert spec["priority"] == 7
    with pytest.raises(PriorityClassNotFound, match='PriorityClass "batch" not found'):
        new_workload(Job(with_class), priority=None)
    unit = Unit("single", "ns", "p")
    pod = {**labelled(None), "spec": {"containers": []}}
    for priority, ref in ((None, False), (50, True)):
        spec = workload_for_unit(unit, [pod], 1, priority=priority, priority_class="low")["spec"]
        assert ("priorityClassRef" in spec) is ref and ("priority" in spec) is ref
        assert (
            validate(
                {"kind": "Workload", "spec": {**spec, "podSets": [{"name": "main", "count": 1}]}}
            )
            == []
        )


def test_admission_gates_go_from_the_job_or_pod_to_its_workload() -> None:
    """Kueue's PropagateAdmissionGatedByAnnotation; the webhook refuses a malformed value."""
    gated = job(None)
    gated["metadata"]["annotations"] = {ADMISSION_GATED_BY_ANNOTATION: "example.com/a"}
    assert admission_gated_by(gated) == "example.com/a"
    assert new_workload(Job(gated), priority=None)["metadata"]["annotations"] == {
        ADMISSION_GATED_BY_ANNOTATION: "example.com/a"
    }
    assert "annotations" not in new_workload(Job(job(None)), priority=None)["metadata"]
    pod = {**gated, "spec": {"containers": []}}
    body = workload_for_unit(Unit("single", "ns", "p"), [pod], 1)
    assert body["metadata"]["annotations"][ADMISSION_GATED_BY_ANNOTATION] == "example.com/a"
    bad = job(None)
    bad["metadata"]["annotations"] = {ADMISSION_GATED_BY_ANNOTATION: "gate"}
    review = {
        "request": {"uid": "1", "operation": "CREATE", "kind": {"kind": "Job"}, "object": bad}
    }
    response = review_response(review)["response"]
    assert response["allowed"] is False
    assert response["status"]["message"] == (
        f'metadata.annotations[{ADMISSION_GATED_BY_ANNOTATION}]: Invalid value: "gate": '
        'must be a domain-prefixed path (such as "acme.io/foo")'
    )
