"""The webhook on updates of job objects and pods (controller/integrations/job_update.py and
webhook.py), as Kueue's webhooks: `jobframework.ValidateJobOnUpdate`, the kind's create
checks on the new object (the topology annotations among them), and the Job's own update
rules (`job_webhook.go` `validateUpdate`, `validatePartialAdmissionUpdate`)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import pytest

from api.constants import (
    ADMISSION_GATE,
    ADMISSION_GATED_BY_ANNOTATION,
    ELASTIC_JOB_ANNOTATION,
    JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION,
    JOB_MIN_PARALLELISM_ANNOTATION,
    MAX_EXEC_TIME_LABEL,
    POD_SET_PREFERRED_TOPOLOGY_ANNOTATION,
    POD_SET_REQUIRED_TOPOLOGY_ANNOTATION,
    PREBUILT_WORKLOAD_LABEL,
    PRIORITY_CLASS_LABEL,
    QUEUE_NAME_LABEL,
)
from controller.integrations.webhook import review_response

QUEUE = f"metadata.labels[{QUEUE_NAME_LABEL}]"
TWO_LEVELS = (
    "Invalid value: must not contain more than one topology annotation: "
    '["kueue.x-k8s.io/podset-required-topology", "kueue.x-k8s.io/podset-preferred-topology", '
    '"kueue.x-k8s.io/podset-unconstrained-topology"]'
)


class Queues:
    """The webhook's view: namespaces with a LocalQueue named `default`."""

    def __init__(self, with_default: set[str]) -> None:
        self.with_default = with_default

    def namespace_labels(self, name: str) -> Mapping[str, str] | None:
        return {}

    def local_queue_exists(self, namespace: str, name: str) -> bool:
        return name == "default" and namespace in self.with_default


def job(suspend: bool = True, queue: str | None = "lq") -> dict[str, Any]:
    labels = {QUEUE_NAME_LABEL: queue} if queue is not None else {}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns", "labels": labels, "annotations": {}},
        "spec": {
            "suspend": suspend,
            "parallelism": 3,
            "completions": 3,
            "template": {"metadata": {"annotations": {}}, "spec": {"containers": []}},
        },
    }


def jobset(suspend: bool = True) -> dict[str, Any]:
    replicated = {
        "name": "w",
        "replicas": 1,
        "template": {
            "spec": {
                "parallelism": 2,
                "completions": 2,
                "template": {"metadata": {"annotations": {}}, "spec": {"containers": []}},
            }
        },
    }
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js", "namespace": "ns", "labels": {QUEUE_NAME_LABEL: "lq"}},
        "spec": {"suspend": suspend, "replicatedJobs": [replicated]},
    }


def pod(gated: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "labels": {QUEUE_NAME_LABEL: "lq"}},
        "spec": {
            "containers": [],
            "schedulingGates": [{"name": ADMISSION_GATE}] if gated else [],
        },
    }


def update(
    kind: str, old: dict[str, Any], new: dict[str, Any], queues: Queues | None = None
) -> str | None:
    """The webhook's refusal of the update (None: allowed)."""
    response = review_response(
        {
            "request": {
                "uid": "u",
                "kind": {"kind": kind},
                "operation": "UPDATE",
                "namespace": "ns",
                "object": new,
                "oldObject": old,
            }
        },
        lookup=queues,
    )["response"]
    if response["allowed"]:
        assert "status" not in response
        return None
    assert response["status"]["code"] == 422
    message: str = response["status"]["message"]
    return message


def changed(obj: dict[str, Any], change: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    change(out)
    return out


def test_an_unchanged_valid_job_is_let_through_suspended_or_running() -> None:
    assert update("Job", job(), job()) is None
    assert update("Job", job(suspend=False), job(suspend=False)) is None
    assert update("Job", job(), job(suspend=False)) is None


def test_topology_annotations_added_on_update_are_refused_naming_the_template() -> None:
    """`validateTopologyRequest(newJob)` runs on every update: a suspended Job's template
    given both required and preferred topology is refused."""

    def both(obj: dict[str, Any]) -> None:
        obj["spec"]["template"]["metadata"]["annotations"].update(
            {
                POD_SET_REQUIRED_TOPOLOGY_ANNOTATION: "cloud.com/block",
                POD_SET_PREFERRED_TOPOLOGY_ANNOTATION: "cloud.com/rack",
            }
        )

    assert update("Job", job(), changed(job(), both)) == (
        f"spec.template.metadata.annotations: {TWO_LEVELS}"
    )


def test_a_jobsets_topology_annotations_are_checked_on_update() -> None:
    def required_not_a_label(obj: dict[str, Any]) -> None:
        template = obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
        template["metadata"]["annotations"][POD_SET_REQUIRED_TOPOLOGY_ANNOTATION] = "not a label"

    message = update("JobSet", jobset(), changed(jobset(), required_not_a_label))
    assert message is not None
    assert message.startswith(
        "spec.replicatedJobs[0].template.spec.template.metadata.annotations"
        f'[{POD_SET_REQUIRED_TOPOLOGY_ANNOTATION}]: Invalid value: "not a label"'
    )


def test_a_running_jobs_queue_is_immutable_a_suspended_ones_is_not() -> None:
    def other_queue(obj: dict[str, Any]) -> None:
        obj["metadata"]["labels"][QUEUE_NAME_LABEL] = "other"

    running = job(suspend=False)
    assert update("Job", running, changed(running, other_queue)) == (
        f'{QUEUE}: Invalid value: "other": field is immutable'
    )
    assert update("Job", job(), changed(job(), other_queue)) is None


def test_a_queue_is_never_removed_in_a_namespace_with_a_default_local_queue() -> None:
    unlabelled = job(queue=None)
    assert update("Job", job(), unlabelled, Queues({"ns"})) == (
        f'{QUEUE}: Invalid value: "": queue-name must not be empty in namespace with default queue'
    )
    assert update("Job", job(), unlabelled, Queues(set())) is None


def test_max_exec_time_changes_only_while_the_job_stays_suspended() -> None:
    def limit(value: str) -> Any:
        return lambda obj: obj["metadata"]["labels"].__setitem__(MAX_EXEC_TIME_LABEL, value)

    assert update("Job", changed(job(), limit("60")), changed(job(), limit("90"))) is None
    running = job(suspend=False)
    assert update("Job", changed(running, limit("60")), changed(running, limit("90"))) == (
        f'metadata.labels[{MAX_EXEC_TIME_LABEL}]: Invalid value: "90": field is immutable'
    )
    # Unsuspending with a new limit is a change while not suspended.
    assert update("Job", changed(job(), limit("60")), changed(running, limit("90"))) == (
        f'metadata.labels[{MAX_EXEC_TIME_LABEL}]: Invalid value: "90": field is immutable'
    )


def test_a_workload_priority_class_is_not_added_to_a_running_job_nor_ever_removed() -> None:
    def high(obj: dict[str, Any]) -> None:
        obj["metadata"]["labels"][PRIORITY_CLASS_LABEL] = "high"

    path = f"metadata.labels[{PRIORITY_CLASS_LABEL}]"
    running = job(suspend=False)
    assert update("Job", running, changed(running, high)) == (
        f'{path}: Invalid value: "high": WorkloadPriorityClass cannot be added to a '
        "non-suspended workload"
    )
    assert update("Job", job(), changed(job(), high)) is None
    assert update("Job", changed(job(), high), job()) == (
        f'{path}: Invalid value: "": WorkloadPriorityClass cannot be removed from a workload'
    )


def test_the_elastic_job_annotation_is_immutable() -> None:
    def elastic(obj: dict[str, Any]) -> None:
        obj["metadata"]["annotations"][ELASTIC_JOB_ANNOTATION] = "true"

    assert update("Job", job(), changed(job(), elastic)) == (
        f"metadata.annotations[{ELASTIC_JOB_ANNOTATION}]: Invalid value: true: field is immutable"
    )


def test_admission_gates_are_never_added_after_creation() -> None:
    def gated(obj: dict[str, Any]) -> None:
        obj["metadata"]["annotations"][ADMISSION_GATED_BY_ANNOTATION] = "example.com/gate"

    assert update("Job", job(), changed(job(), gated)) == (
        f"metadata.annotations[{ADMISSION_GATED_BY_ANNOTATION}]: Forbidden: cannot add "
        "admission gate after creation"
    )
    assert update("Job", changed(job(), gated), job()) is None


def test_a_running_jobs_prebuilt_workload_is_immutable() -> None:
    def prebuilt(name: str) -> Any:
        return lambda obj: obj["metadata"]["labels"].__setitem__(PREBUILT_WORKLOAD_LABEL, name)

    running = job(suspend=False)
    assert update("Job", changed(running, prebuilt("a")), changed(running, prebuilt("b"))) == (
        f'metadata.labels[{PREBUILT_WORKLOAD_LABEL}]: Invalid value: "b": field is immutable'
    )
    assert update("Job", changed(job(), prebuilt("a")), changed(job(), prebuilt("b"))) is None


def test_partial_admission_keeps_a_running_jobs_parallelism() -> None:
    def min_parallelism(obj: dict[str, Any]) -> None:
        obj["metadata"]["annotations"][JOB_MIN_PARALLELISM_ANNOTATION] = "1"

    def parallelism(count: int) -> Any:
        return lambda obj: obj["spec"].__setitem__("parallelism", count)

    running = changed(job(suspend=False), min_parallelism)
    assert update("Job", running, changed(running, parallelism(2))) == (
        "spec.parallelism: Forbidden: cannot change when partial admission is enabled and the "
        "job is not suspended"
    )
    suspended = changed(job(), min_parallelism)
    assert update("Job", suspended, changed(suspended, parallelism(2))) is None


def test_min_parallelism_is_checked_on_update_only_when_it_changes() -> None:
    """Kueue re-checks the annotation only when it changed: a running Job that partial
    admission shrank below it is left alone."""

    def min_parallelism(value: str) -> Any:
        return lambda obj: obj["metadata"]["annotations"].__setitem__(
            JOB_MIN_PARALLELISM_ANNOTATION, value
        )

    old = changed(job(), min_parallelism("2"))
    shrunk = changed(old, lambda obj: obj["spec"].update(parallelism=2, suspend=False))
    assert update("Job", old, shrunk) is None
    assert update("Job", old, changed(old, min_parallelism("3"))) == (
        f"metadata.annotations[{JOB_MIN_PARALLELISM_ANNOTATION}]: Invalid value: 3: should be "
        "between 0 and 2"
    )


def test_completions_equal_parallelism_is_immutable_while_the_job_runs() -> None:
    def synced(obj: dict[str, Any]) -> None:
        obj["metadata"]["annotations"][JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION] = "true"
        obj["spec"]["completionMode"] = "Indexed"

    running = job(suspend=False)
    assert update("Job", running, changed(running, synced)) == (
        f"metadata.annotations[{JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION}]: Forbidden: "
        "field is immutable while the job is not suspended"
    )
    assert update("Job", job(), changed(job(), synced)) is None


@pytest.mark.parametrize(
    ("kind", "make", "update_first"),
    [("Job", job, False), ("JobSet", jobset, True)],
)
def test_each_kind_reports_in_kueues_order(kind: str, make: Any, update_first: bool) -> None:
    """The Job's webhook reports its create checks first, then `ValidateJobOnUpdate`; the
    JobSet's the other way round."""

    def both(obj: dict[str, Any]) -> None:
        obj["metadata"]["labels"][QUEUE_NAME_LABEL] = "other"
        obj["metadata"]["labels"][MAX_EXEC_TIME_LABEL] = "0"

    running = make(suspend=False)
    message = update(kind, running, changed(running, both))
    assert message is not None
    queue = message.index(f"{QUEUE}: Invalid value")
    limit = message.index(f"metadata.labels[{MAX_EXEC_TIME_LABEL}]: Invalid value: 0:")
    assert (queue < limit) is update_first


def test_a_pods_topology_annotations_are_checked_on_update() -> None:
    def both(obj: dict[str, Any]) -> None:
        obj["metadata"]["annotations"] = {
            POD_SET_REQUIRED_TOPOLOGY_ANNOTATION: "cloud.com/block",
            POD_SET_PREFERRED_TOPOLOGY_ANNOTATION: "cloud.com/rack",
        }

    assert update("Pod", pod(), changed(pod(), both)) == f"metadata.annotations: {TWO_LEVELS}"


def test_a_pods_queue_is_immutable_once_it_is_released() -> None:
    def other_queue(obj: dict[str, Any]) -> None:
        obj["metadata"]["labels"][QUEUE_NAME_LABEL] = "other"

    assert update("Pod", pod(gated=False), changed(pod(gated=False), other_queue)) == (
        f'{QUEUE}: Invalid value: "other": field is immutable'
    )
    assert update("Pod", pod(), changed(pod(), other_queue)) is None
    # Releasing a gated pod (our controller's update) is let through.
    assert update("Pod", pod(), pod(gated=False)) is None


def test_an_update_of_an_object_never_queued_is_not_checked() -> None:
    def both(obj: dict[str, Any]) -> None:
        obj["spec"]["template"]["metadata"]["annotations"].update(
            {
                POD_SET_REQUIRED_TOPOLOGY_ANNOTATION: "cloud.com/block",
                POD_SET_PREFERRED_TOPOLOGY_ANNOTATION: "cloud.com/rack",
            }
        )

    unqueued = job(queue=None)
    assert update("Job", unqueued, changed(unqueued, both)) is None


def test_partial_admission_and_an_elastic_job_are_refused_together() -> None:
    """Kueue's `validatePartialAdmissionCreate`, on creation and on an update changing the
    min-parallelism annotation."""

    def partial(obj: dict[str, Any]) -> None:
        obj["metadata"]["annotations"][JOB_MIN_PARALLELISM_ANNOTATION] = "1"

    def elastic(obj: dict[str, Any]) -> None:
        obj["metadata"]["annotations"][ELASTIC_JOB_ANNOTATION] = "true"

    old = changed(job(), elastic)
    assert update("Job", old, changed(old, partial)) == (
        f'metadata.annotations[{JOB_MIN_PARALLELISM_ANNOTATION}]: Invalid value: "1": partial '
        "admission and elastic job cannot be used together"
    )
