"""The Job adapter (controller/integrations/kinds/job.py) as the reconciler drives it:
admission injects the flavors' node labels and tolerations into the template; eviction
restores it exactly, from the Workload's pod set, keeping the labels the Job controller
manages; partial admission runs the Job with the admitted parallelism."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonpatch  # type: ignore[import-untyped]
import pytest

from api.constants import (
    JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION,
    JOB_MIN_PARALLELISM_ANNOTATION,
    POD_SET_LABEL,
)
from controller.integrations.framework.patches import merge_patch
from controller.integrations.framework.podset_info import (
    FlavorPlacement,
    PodSetInfoError,
    from_admission,
    from_pod_set,
)
from controller.integrations.framework.workloads import new_workload
from controller.integrations.kinds.job import Job

TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}
OWN = {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}
MANAGED = {"batch.kubernetes.io/controller-uid": "u1", "batch.kubernetes.io/job-name": "j"}


def job(
    node_selector: dict[str, str] | None,
    tolerations: list[dict[str, Any]] | None,
    annotations: dict[str, str] | None = None,
    parallelism: int = 1,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": []}
    if node_selector is not None:
        spec["nodeSelector"] = node_selector
    if tolerations is not None:
        spec["tolerations"] = tolerations
    meta: dict[str, Any] = {"name": "j", "namespace": "ns", "uid": "u1", "resourceVersion": "1"}
    if annotations:
        meta["annotations"] = annotations
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": {
            "suspend": True,
            "parallelism": parallelism,
            "template": {"metadata": {"labels": dict(MANAGED)}, "spec": spec},
        },
    }


def merge(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """RFC 7386 JSON merge patch, as the API server applies it."""
    out = json.loads(json.dumps(target))
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def workload_of(obj: dict[str, Any], count: int | None = None) -> dict[str, Any]:
    """The Job's Workload, admitted to flavor `rf` (with `count` pods when given)."""
    body = new_workload(Job(copy.deepcopy(obj)), priority=None)
    assignment: dict[str, Any] = {"name": "main", "flavors": {"cpu": "rf"}}
    if count is not None:
        assignment["count"] = count
    body["status"] = {"admission": {"clusterQueue": "cq", "podSetAssignments": [assignment]}}
    return body


def placement(name: str) -> FlavorPlacement | None:
    return FlavorPlacement({"zone": "b"}, (TOLERATION,)) if name == "rf" else None


def started(obj: dict[str, Any], workload: dict[str, Any]) -> dict[str, Any]:
    running = Job(copy.deepcopy(obj))
    running.run_with_pod_sets_info(from_admission(workload, placement))
    return merge(obj, merge_patch(obj, running.obj))


def stopped(obj: dict[str, Any], workload: dict[str, Any]) -> dict[str, Any]:
    """Suspended, then (the Job controller having stopped its pods) restored."""
    suspending = Job(copy.deepcopy(obj))
    suspending.suspend()
    obj = merge(obj, merge_patch(obj, suspending.obj))
    obj["status"] = {"conditions": [{"type": "Suspended", "status": "True"}], "active": 0}
    restoring = Job(copy.deepcopy(obj))
    assert restoring.template_mutable()
    infos = [from_pod_set(ps) for ps in workload["spec"]["podSets"]]
    restoring.restore_pod_sets_info(infos)
    return merge(obj, merge_patch(obj, restoring.obj))


def test_admission_adds_labels_and_tolerations_and_eviction_restores_them() -> None:
    for selector, tolerations in [(None, None), ({"disk": "ssd"}, [OWN]), ({}, [TOLERATION])]:
        original = job(selector, tolerations)
        workload = workload_of(original)
        admitted = started(original, workload)
        spec = admitted["spec"]["template"]["spec"]
        assert admitted["spec"]["suspend"] is False
        assert spec["nodeSelector"] == {**(selector or {}), "zone": "b"}
        assert spec["tolerations"].count(TOLERATION) == 1  # never added twice
        assert all(t in spec["tolerations"] for t in tolerations or [])
        labels = admitted["spec"]["template"]["metadata"]["labels"]
        assert labels == {**MANAGED, POD_SET_LABEL: "main"}
        restored = stopped(admitted, workload)
        assert restored["spec"]["suspend"] is True
        assert restored["spec"]["template"]["spec"].get("nodeSelector") in (selector, None, {})
        assert restored["spec"]["template"]["spec"].get("tolerations") in (tolerations, None)
        # The Job controller's labels stay (its selector needs them); the pod set label goes.
        assert restored["spec"]["template"]["metadata"]["labels"] == MANAGED
        assert jsonpatch.make_patch(
            restored["spec"]["template"], original["spec"]["template"]
        ).patch in (
            [],
            [{"op": "add", "path": "/spec/nodeSelector", "value": {}}],
            [{"op": "add", "path": "/spec/tolerations", "value": []}],
        )


def test_the_workload_leaves_out_the_job_controllers_uid_labels() -> None:
    [pod_set] = new_workload(Job(job(None, None)), priority=None)["spec"]["podSets"]
    assert pod_set["template"]["metadata"]["labels"] == {"batch.kubernetes.io/job-name": "j"}


def test_a_template_restore_waits_for_the_job_controller() -> None:
    """Kubernetes accepts a changed template of a suspended Job only once it never started
    or its Suspended condition is True, and no pod is active."""
    obj = job(None, None)
    obj["status"] = {"startTime": "2026-01-01T00:00:00Z", "active": 2}
    assert not Job(obj).template_mutable()
    obj["status"] = {"startTime": "2026-01-01T00:00:00Z", "active": 0}
    assert not Job(obj).template_mutable()
    obj["status"]["conditions"] = [{"type": "Suspended", "status": "True"}]
    assert Job(obj).template_mutable()
    assert Job(job(None, None)).template_mutable()  # never started


def test_a_conflicting_node_selector_cannot_start() -> None:
    original = job({"zone": "a"}, None)
    running = Job(copy.deepcopy(original))
    with pytest.raises(PodSetInfoError, match="nodeSelector"):
        running.run_with_pod_sets_info(from_admission(workload_of(original), placement))


def test_partial_admission_runs_with_the_admitted_parallelism_and_eviction_restores_it() -> None:
    original = job(
        None,
        None,
        {JOB_MIN_PARALLELISM_ANNOTATION: "2", JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION: "true"},
        parallelism=5,
    )
    original["spec"]["completions"] = 5
    original["spec"]["completionMode"] = "Indexed"
    assert Job(original).validate_on_create() == []
    workload = workload_of(original, count=3)
    [pod_set] = workload["spec"]["podSets"]
    assert (pod_set["count"], pod_set["minCount"]) == (5, 2)
    admitted = started(original, workload)
    assert (admitted["spec"]["parallelism"], admitted["spec"]["completions"]) == (3, 3)
    restored = stopped(admitted, workload)
    assert (restored["spec"]["parallelism"], restored["spec"]["completions"]) == (5, 5)


def test_without_the_annotation_the_parallelism_is_never_changed() -> None:
    original = job(None, None, parallelism=4)
    admitted = started(original, workload_of(original, count=4))
    assert admitted["spec"]["parallelism"] == 4
    assert "minCount" not in workload_of(original)["spec"]["podSets"][0]


@pytest.mark.parametrize(
    ("annotations", "problem"),
    [
        ({JOB_MIN_PARALLELISM_ANNOTATION: "0"}, "Invalid value: 0: should be between 0 and 3"),
        ({JOB_MIN_PARALLELISM_ANNOTATION: "4"}, "Invalid value: 4: should be between 0 and 3"),
        ({JOB_MIN_PARALLELISM_ANNOTATION: "x"}, 'Invalid value: "x": not a number'),
        ({JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION: "maybe"}, "not a boolean"),
        (
            {JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION: "true"},
            "should not be enabled for NonIndexed jobs",
        ),
    ],
)
def test_kueues_job_annotations_are_checked_on_creation(
    annotations: dict[str, str], problem: str
) -> None:
    problems = Job(job(None, None, annotations, parallelism=4)).validate_on_create()
    assert any(problem in p for p in problems), problems
