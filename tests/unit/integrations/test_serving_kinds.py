"""The kinds that run through their pods — Deployment, StatefulSet, LeaderWorkerSet
(controller/integrations/kinds/, pod_parents.py): their Workloads with Kueue's pod-set
names and counts, which Workload a pod is of, and the webhook's answers (templates marked
on creation and update, Kueue's refusals)."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import jsonpatch  # type: ignore[import-untyped]

from api.constants import (
    MANAGED_LABEL,
    MAX_EXEC_TIME_LABEL,
    POD_GROUP_SERVING_ANNOTATION,
    POD_INDEX_OFFSET_ANNOTATION,
    POD_SET_GROUP_NAME_ANNOTATION,
    POD_SUSPENDING_PARENT_ANNOTATION,
    PRIORITY_CLASS_LABEL,
    QUEUE_NAME_LABEL,
    ROLE_HASH_ANNOTATION,
)
from controller.core.model import from_api
from controller.integrations.framework.registry import by_kind, frameworks
from controller.integrations.framework.workload_names import workload_name
from controller.integrations.framework.workloads import object_workload, workload_pod_set
from controller.integrations.kinds import leaderworkerset, statefulset
from controller.integrations.kinds.leaderworkerset import LeaderWorkerSet
from controller.integrations.kinds.statefulset import StatefulSet
from controller.integrations.parent_workloads import pod_sets_differ
from controller.integrations.pod_parents import queue_update_problems, shape_problems
from controller.integrations.webhook import pod_patch, review_response, webhook_configuration

SERVING = ["deployment", "statefulset", "leaderworkerset.x-k8s.io/leaderworkerset", "pod"]


def template(cpu: str = "1", **meta: Any) -> dict[str, Any]:
    return {
        "metadata": dict(meta),
        "spec": {
            "containers": [
                {"name": "c", "image": "nginx", "resources": {"requests": {"cpu": cpu}}}
            ],
        },
    }


def sts(replicas: int | None = 3, labels: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"serviceName": "web", "template": template()}
    if replicas is not None:
        spec["replicas"] = replicas
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {
            "name": "web",
            "namespace": "ns",
            "uid": "sts-uid",
            "labels": {QUEUE_NAME_LABEL: "lq", **(labels or {})},
        },
        "spec": spec,
    }


def lws(replicas: int = 2, size: int = 3, leader: bool = True) -> dict[str, Any]:
    lwt: dict[str, Any] = {
        "size": size,
        "workerTemplate": template(
            "2",
            labels={
                "leaderworkerset.sigs.k8s.io/name": "srv",
                "leaderworkerset.sigs.k8s.io/x": "y",
            },
        ),
    }
    if leader:
        lwt["leaderTemplate"] = template("1")
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {
            "name": "srv",
            "namespace": "ns",
            "uid": "lws-uid",
            "labels": {QUEUE_NAME_LABEL: "lq"},
        },
        "spec": {"replicas": replicas, "leaderWorkerTemplate": lwt},
    }


def deployment(labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "api",
            "namespace": "ns",
            "labels": {QUEUE_NAME_LABEL: "lq", **(labels or {})},
        },
        "spec": {"replicas": 2, "template": template()},
    }


def review(
    group: str, kind: str, obj: dict[str, Any], old: dict[str, Any] | None = None
) -> dict[str, Any]:
    request: dict[str, Any] = {
        "uid": "r",
        "operation": "UPDATE" if old is not None else "CREATE",
        "kind": {"group": group, "version": "v1", "kind": kind},
        "object": obj,
    }
    if old is not None:
        request["oldObject"] = old
    answer: dict[str, Any] = review_response({"request": request}, by_kind(SERVING))["response"]
    return answer


def patched(obj: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    if "patch" not in answer:
        return obj
    ops = json.loads(base64.b64decode(answer["patch"]))
    result: dict[str, Any] = jsonpatch.apply_patch(obj, ops)
    return result


# -- the Workloads ---------------------------------------------------------------------------

WEB = workload_name("StatefulSet", "apps", "web", "sts-uid")
"""Kueue's name of the StatefulSet `web`'s Workload."""


def test_a_statefulset_is_one_workload_of_replicas_pods_and_none_at_zero() -> None:
    [(name, pod_sets)] = StatefulSet(sts(3)).workloads().items()
    assert name == WEB == workload_name("StatefulSet", "apps", "web", "sts-uid")
    assert [(ps["name"], ps["count"]) for ps in pod_sets] == [("main", 3)]
    assert [ps["count"] for ps in StatefulSet(sts(None)).workloads()[WEB]] == [1]
    assert StatefulSet(sts(0)).workloads() == {}


def test_a_leaderworkerset_is_one_workload_per_group_with_leader_and_workers() -> None:
    groups = LeaderWorkerSet(lws(replicas=2, size=3)).workloads()
    assert list(groups) == ["leaderworkerset-srv-0", "leaderworkerset-srv-1"]
    pod_sets = groups["leaderworkerset-srv-0"]
    assert [(ps["name"], ps["count"]) for ps in pod_sets] == [("leader", 1), ("worker", 2)]
    # The LeaderWorkerSet's own keys leave the template, but its name.
    assert pod_sets[1]["template"]["metadata"]["labels"] == {
        "leaderworkerset.sigs.k8s.io/name": "srv"
    }
    no_leader = LeaderWorkerSet(lws(replicas=1, size=4, leader=False)).workloads()
    assert [(ps["name"], ps["count"]) for ps in no_leader["leaderworkerset-srv-0"]] == [("main", 4)]
    alone = LeaderWorkerSet(lws(replicas=1, size=1)).workloads()
    assert [(ps["name"], ps["count"]) for ps in alone["leaderworkerset-srv-0"]] == [("leader", 1)]


def test_surge_groups_of_a_rolling_update_get_workloads_too() -> None:
    obj = lws(replicas=2)
    obj["spec"]["rolloutStrategy"] = {"rollingUpdateConfiguration": {"maxSurge": 1}}
    obj["status"] = {"replicas": 3, "updatedReplicas": 1}
    assert len(LeaderWorkerSet(obj).workloads()) == 3
    obj["status"]["updatedReplicas"] = 2  # the update is done: the surge group goes
    assert len(LeaderWorkerSet(obj).workloads()) == 2


def test_which_workload_a_pod_is_of() -> None:
    owned = {
        "metadata": {
            "ownerReferences": [
                {"kind": "StatefulSet", "name": "web", "uid": "sts-uid", "controller": True}
            ]
        }
    }
    assert statefulset.pod_workload(owned) == WEB
    assert statefulset.pod_workload({"metadata": {}}) is None
    labels = {
        "leaderworkerset.sigs.k8s.io/name": "srv",
        "leaderworkerset.sigs.k8s.io/group-index": "1",
    }
    assert leaderworkerset.pod_workload({"metadata": {"labels": labels}}) == "leaderworkerset-srv-1"
    assert leaderworkerset.pod_workload({"metadata": {"labels": {}}}) is None
    parents = {n: f.pod_workload for n, f in frameworks().items() if f.pod_workload}
    assert set(parents) == {"statefulset", "leaderworkerset.x-k8s.io/leaderworkerset"}


def test_a_groups_workload_is_owned_by_its_object_with_its_labels() -> None:
    obj = lws()
    obj["metadata"]["labels"].update(
        {PRIORITY_CLASS_LABEL: "high", MAX_EXEC_TIME_LABEL: "60", "team": "a"}
    )
    parent = LeaderWorkerSet(obj)
    pod_sets = parent.workloads()["leaderworkerset-srv-1"]
    body = object_workload(
        obj,
        "leaderworkerset-srv-1",
        [workload_pod_set(ps, parent.topology_hints(ps["name"])) for ps in pod_sets],
        priority=100,
        pod_priority_class=None,
        label_keys_to_copy=("team",),
    )
    assert body["metadata"]["ownerReferences"][0]["kind"] == "LeaderWorkerSet"
    assert body["metadata"]["labels"] == {"team": "a", "kueue.x-k8s.io/job-uid": "lws-uid"}
    assert body["spec"]["priorityClassRef"]["name"] == "high" and body["spec"]["priority"] == 100
    assert body["spec"]["maximumExecutionTimeSeconds"] == 60
    workload = from_api.convert(body)  # the engine reads it as the API server stores it
    assert [(ps.name, ps.count, ps.requests["cpu"]) for ps in workload.pod_sets] == [
        ("leader", 1, 1000),
        ("worker", 2, 2000),
    ]


def test_pod_sets_that_changed_are_named() -> None:
    wanted = StatefulSet(sts(3)).workloads()[WEB]
    assert pod_sets_differ(wanted, {"spec": {"podSets": [{"name": "main", "count": 3}]}}) is None
    why = pod_sets_differ(wanted, {"spec": {"podSets": [{"name": "main", "count": 2}]}})
    assert why == "its pod sets (name, count) are now [('main', 3)], its Workload's [('main', 2)]"


# -- the webhook -----------------------------------------------------------------------------


def test_the_webhook_marks_a_statefulsets_template_on_creation() -> None:
    obj = sts(labels={PRIORITY_CLASS_LABEL: "high"})
    answer = review("apps", "StatefulSet", obj)
    assert answer["allowed"] is True
    meta = patched(obj, answer)["spec"]["template"]["metadata"]
    assert meta["labels"] == {
        QUEUE_NAME_LABEL: "lq",
        MANAGED_LABEL: "true",
        PRIORITY_CLASS_LABEL: "high",
    }
    assert meta["annotations"] == {
        POD_SUSPENDING_PARENT_ANNOTATION: "statefulset",
        POD_GROUP_SERVING_ANNOTATION: "true",
    }


def test_the_webhook_marks_a_leaderworkersets_templates_with_their_pod_sets() -> None:
    obj = lws()
    lwt = patched(obj, review("leaderworkerset.x-k8s.io", "LeaderWorkerSet", obj))["spec"][
        "leaderWorkerTemplate"
    ]
    assert lwt["leaderTemplate"]["metadata"]["annotations"][ROLE_HASH_ANNOTATION] == "leader"
    assert lwt["workerTemplate"]["metadata"]["annotations"][ROLE_HASH_ANNOTATION] == "worker"
    assert lwt["workerTemplate"]["metadata"]["labels"][QUEUE_NAME_LABEL] == "lq"
    obj = lws(leader=False)
    lwt = patched(obj, review("leaderworkerset.x-k8s.io", "LeaderWorkerSet", obj))["spec"][
        "leaderWorkerTemplate"
    ]
    assert lwt["workerTemplate"]["metadata"]["annotations"][ROLE_HASH_ANNOTATION] == "main"


def test_with_a_leader_the_workers_pod_index_is_offset_by_one() -> None:
    # Kueue's webhook (TAS on): a worker's leaderworkerset.sigs.k8s.io/worker-index counts
    # the leader (1 … size-1); its pod set's ranks start at 0.
    def worker_annotations(obj: dict[str, Any]) -> dict[str, str]:
        lwt = patched(obj, review("leaderworkerset.x-k8s.io", "LeaderWorkerSet", obj))["spec"][
            "leaderWorkerTemplate"
        ]
        annotations: dict[str, str] = lwt["workerTemplate"]["metadata"]["annotations"]
        return annotations

    assert worker_annotations(lws())[POD_INDEX_OFFSET_ANNOTATION] == "1"
    assert POD_INDEX_OFFSET_ANNOTATION not in worker_annotations(lws(leader=False))
    grouped = lws()
    grouped["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["annotations"] = {
        POD_SET_GROUP_NAME_ANNOTATION: "g"
    }
    assert POD_INDEX_OFFSET_ANNOTATION not in worker_annotations(grouped)
    [_, workers] = LeaderWorkerSet(
        patched(lws(), review("leaderworkerset.x-k8s.io", "LeaderWorkerSet", lws()))
    ).pod_sets()
    assert workers["template"]["metadata"]["annotations"][POD_INDEX_OFFSET_ANNOTATION] == "1"


def test_the_webhook_marks_a_deployments_pods_as_single_pods_with_its_limit() -> None:
    obj = deployment({MAX_EXEC_TIME_LABEL: "3600"})
    meta = patched(obj, review("apps", "Deployment", obj))["spec"]["template"]["metadata"]
    assert meta["annotations"] == {POD_SUSPENDING_PARENT_ANNOTATION: "deployment"}
    assert meta["labels"][MAX_EXEC_TIME_LABEL] == "3600"
    # Marked already: nothing to change on the next update.
    marked = patched(obj, review("apps", "Deployment", obj))
    assert "patch" not in review("apps", "Deployment", marked, old=marked)


def test_kueue_labels_the_serving_kinds_refuse_on_creation() -> None:
    obj = sts()
    obj["metadata"]["annotations"] = {"kueue.x-k8s.io/elastic-job": "true"}
    obj["metadata"]["labels"]["kueue.x-k8s.io/prebuilt-workload-name"] = "w"
    obj["metadata"]["labels"][MAX_EXEC_TIME_LABEL] = "0"
    answer = review("apps", "StatefulSet", obj)
    assert answer["allowed"] is False
    message = answer["status"]["message"]
    assert "max-exec-time-seconds]: Invalid value: 0: should be greater than 0" in message
    assert 'elastic job is not supported for "apps/v1, Kind=StatefulSet"' in message
    assert "prebuilt-workload-name]: Forbidden: Is not supported" in message
    huge = lws(replicas=2_000_000)
    answer = review("leaderworkerset.x-k8s.io", "LeaderWorkerSet", huge)
    assert "spec.replicas: Invalid value: 2000000" in answer["status"]["message"]


def test_a_queued_statefulset_scales_only_to_zero_and_back() -> None:
    old = sts(3)
    for replicas, allowed in ((0, True), (5, False), (2, False), (3, True)):
        answer = review("apps", "StatefulSet", sts(replicas), old=old)
        assert answer["allowed"] is allowed, replicas
    answer = review("apps", "StatefulSet", sts(2), old=old)
    assert answer["status"]["message"] == "spec.replicas: Invalid value: 2: field is immutable"
    scaling_up = sts(3)
    scaling_up["status"] = {"replicas": 1}  # a pod of the scale-down is still there
    answer = review("apps", "StatefulSet", scaling_up, old=sts(0))
    assert (
        answer["status"]["message"] == "spec.replicas: Forbidden: scaling down is still in progress"
    )
    scaling_up["status"] = {"replicas": 0}
    assert review("apps", "StatefulSet", scaling_up, old=sts(0))["allowed"] is True
    # Not queued (the label is neither old nor new): nothing to say.
    plain_old, plain_new = sts(3), sts(2)
    del (
        plain_old["metadata"]["labels"][QUEUE_NAME_LABEL],
        plain_new["metadata"]["labels"][QUEUE_NAME_LABEL],
    )
    assert review("apps", "StatefulSet", plain_new, old=plain_old)["allowed"] is True


def test_the_pod_templates_shape_is_immutable_while_queued() -> None:
    new = sts(3)
    new["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:2"
    assert review("apps", "StatefulSet", new, old=sts(3))["allowed"] is True  # not the shape
    new["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"
    new["spec"]["template"]["spec"]["nodeSelector"] = {"zone": "a"}
    answer = review("apps", "StatefulSet", new, old=sts(3))
    assert answer["status"]["message"] == (
        'spec.template.spec.containers[0].resources.requests: Invalid value: {"cpu": "2"}: '
        "field is immutable; "
        'spec.template.spec.nodeSelector: Invalid value: {"zone": "a"}: field is immutable'
    )
    grown = lws(size=4)
    answer = review("leaderworkerset.x-k8s.io", "LeaderWorkerSet", grown, old=lws(size=3))
    assert answer["status"]["message"] == (
        "spec.leaderWorkerTemplate.size: Invalid value: 4: field is immutable"
    )
    leaderless = lws(leader=False)
    problems = shape_problems(None, lws()["spec"]["leaderWorkerTemplate"]["leaderTemplate"], "x")
    assert problems == ["x: Invalid value: null: field is immutable"]
    answer = review("leaderworkerset.x-k8s.io", "LeaderWorkerSet", leaderless, old=lws())
    assert (
        "spec.leaderWorkerTemplate.leaderTemplate: Invalid value: null"
        in answer["status"]["message"]
    )


def test_the_queue_may_change_only_while_no_pod_is_ready() -> None:
    old, new = deployment(), deployment()
    new["metadata"]["labels"][QUEUE_NAME_LABEL] = "other"
    assert queue_update_problems(old, new) == []
    old["status"] = {"readyReplicas": 1}
    assert queue_update_problems(old, new) == [
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "other": field is immutable'
    ]
    del new["metadata"]["labels"][QUEUE_NAME_LABEL]
    old["status"] = {}
    answer = review("apps", "Deployment", new, old=old)  # removed: refused even when idle
    assert (
        answer["allowed"] is False
        and 'queue-name]: Invalid value: ""' in answer["status"]["message"]
    )
    added = deployment({PRIORITY_CLASS_LABEL: "high"})
    running = deployment()
    running["status"] = {"readyReplicas": 2}
    assert queue_update_problems(running, added) == [
        'metadata.labels[kueue.x-k8s.io/priority-class]: Invalid value: "high": '
        "WorkloadPriorityClass cannot be added to a non-suspended workload"
    ]
    assert queue_update_problems(added, deployment()) == [
        'metadata.labels[kueue.x-k8s.io/priority-class]: Invalid value: "": '
        "WorkloadPriorityClass cannot be removed from a workload"
    ]


def test_pods_a_parent_marked_are_gated_whatever_owns_them() -> None:
    """A StatefulSet's (or a LeaderWorkerSet's) pods are owned by a StatefulSet, a kind
    whose integration is on; they are gated all the same. A StatefulSet's pods its
    template did not mark are plain pods, as before."""
    enabled = by_kind(SERVING)
    pod: dict[str, Any] = {
        "metadata": {
            "labels": {QUEUE_NAME_LABEL: "lq"},
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "controller": True}
            ],
        },
        "spec": {},
    }
    assert pod_patch(copy.deepcopy(pod), enabled) != []
    pod["metadata"]["annotations"] = {POD_SUSPENDING_PARENT_ANNOTATION: "statefulset"}
    assert pod_patch(copy.deepcopy(pod), enabled) != []
    job_pod = copy.deepcopy(pod)
    job_pod["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "j"}
    ]
    del job_pod["metadata"]["annotations"]
    assert pod_patch(job_pod, by_kind(["batch/job", "pod"])) == []


def test_the_webhook_is_called_on_updates_of_every_kind() -> None:
    """Kueue's validating webhooks take creations and updates of every kind."""
    body = webhook_configuration(
        "https://h", b"ca", "quotagate-system", by_kind([*SERVING, "batch/job"])
    )
    operations = {
        w["rules"][0]["resources"][0]: w["rules"][0]["operations"] for w in body["webhooks"]
    }
    assert operations == {
        "deployments": ["CREATE", "UPDATE"],
        "statefulsets": ["CREATE", "UPDATE"],
        "leaderworkersets": ["CREATE", "UPDATE"],
        "pods": ["CREATE", "UPDATE"],
        "jobs": ["CREATE", "UPDATE"],
    }
