"""controller/integrations/job_management.py and the webhook that applies it: Kueue's
manageJobsWithoutQueueName, managedJobsNamespaceSelector and the LocalQueue named default,
for job kinds and plain pods."""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Mapping
from typing import Any

import jsonpatch  # type: ignore[import-untyped]
import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.config_sections import default_namespace_selector, parse_namespace_selector
from controller.integrations.framework.registry import frameworks
from controller.integrations.job_management import JobManagement, describe_selector
from controller.integrations.pod_units import managed
from controller.integrations.webhook import review_response, webhook_selectors

QUEUE = "kueue.x-k8s.io/queue-name"
DEFAULT_SELECTOR = default_namespace_selector("kueue-system")


def management(without_queue_name: bool = False) -> JobManagement:
    return JobManagement(
        without_queue_name,
        parse_namespace_selector(DEFAULT_SELECTOR, "kueue-system"),
        describe_selector(DEFAULT_SELECTOR),
    )


class Cluster:
    """What the webhook looks up: namespaces' labels and LocalQueues."""

    def __init__(self, queues: set[tuple[str, str]]) -> None:
        self.queues = queues

    def namespace_labels(self, name: str) -> Mapping[str, str] | None:
        return {"kubernetes.io/metadata.name": name}

    def local_queue_exists(self, namespace: str, name: str) -> bool:
        return (namespace, name) in self.queues


def test_kueues_rules_in_order() -> None:
    rules = management()
    assert not rules.decide({QUEUE: "main"}, "kube-system", None).managed  # always respected
    labelled = rules.decide({QUEUE: "main"}, "team", None)
    assert (labelled.managed, labelled.queue_name) == (True, "main")
    defaulted = rules.decide({}, "team", None, default_queue_exists=True)
    assert (defaulted.managed, defaulted.queue_name, defaulted.default_queue) == (
        True,
        "default",
        True,
    )
    assert not rules.decide({}, "team", None).managed
    assert "manageJobsWithoutQueueName is false" in rules.decide({}, "team", None).reason
    loose = management(without_queue_name=True).decide({}, "team", None)
    assert (loose.managed, loose.queue_name) == (True, "")
    assert "kubernetes.io/metadata.name notin (kube-system,kueue-system)" in (
        rules.decide({}, "kueue-system", None).reason
    )


@given(
    st.booleans(),
    st.booleans(),
    st.sampled_from(["team", "kube-system", "kueue-system"]),
    st.booleans(),
)
def test_nothing_outside_the_selector_is_ever_managed(
    without: bool, labelled: bool, namespace: str, default: bool
) -> None:
    decision = management(without).decide(
        {QUEUE: "q"} if labelled else {}, namespace, None, default
    )
    if namespace != "team":
        assert not decision.managed
    else:
        assert decision.managed == (labelled or default or without)


def job(labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "j", "namespace": "team"}
    if labels is not None:
        meta["labels"] = labels
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}},
    }


def patch_of(
    kind: str, obj: dict[str, Any], rules: JobManagement, cluster: Cluster
) -> list[dict[str, Any]]:
    group = "batch" if kind == "Job" else ""
    response = review_response(
        {
            "request": {
                "uid": "u",
                "kind": {"group": group, "kind": kind},
                "namespace": "team",
                "operation": "CREATE",
                "object": obj,
            }
        },
        None,
        rules,
        cluster,
    )["response"]
    assert response["allowed"]
    return json.loads(base64.b64decode(response["patch"])) if "patch" in response else []


@pytest.mark.parametrize("labels", [None, {"app": "x"}])
def test_an_unlabelled_job_gets_the_default_local_queue_and_is_suspended(
    labels: dict[str, str] | None,
) -> None:
    patch = patch_of("Job", job(labels), management(), Cluster({("team", "default")}))
    ops = {(op["op"], op["path"]): op.get("value") for op in patch}
    assert ops[("add", "/spec/suspend")] is True
    if labels is None:
        assert ops[("add", "/metadata/labels")] == {QUEUE: "default"}
    else:
        assert ops[("add", "/metadata/labels/kueue.x-k8s.io~1queue-name")] == "default"


def test_an_unlabelled_job_is_suspended_only_with_manage_jobs_without_queue_name() -> None:
    assert patch_of("Job", job(), management(), Cluster(set())) == []
    patch = patch_of("Job", job(), management(without_queue_name=True), Cluster(set()))
    assert patch == [{"op": "add", "path": "/spec/suspend", "value": True}]


def test_an_unlabelled_pod_is_gated_with_the_default_local_queue() -> None:
    pod = {"metadata": {"name": "p", "namespace": "team"}, "spec": {"containers": []}}
    patch = patch_of("Pod", pod, management(), Cluster({("team", "default")}))
    assert patch == [
        {"op": "add", "path": "/metadata/labels", "value": {QUEUE: "default"}},
        {
            "op": "add",
            "path": "/spec/schedulingGates",
            "value": [{"name": "kueue.x-k8s.io/admission"}, {"name": "kueue.x-k8s.io/topology"}],
        },
    ]
    assert patch_of("Pod", pod, management(), Cluster(set())) == []


def test_webhook_selectors_send_unlabelled_jobs_and_pods_only_when_they_can_be_managed() -> None:
    known = frameworks()
    job_entry = webhook_selectors(known["batch/job"], "qs", False, DEFAULT_SELECTOR)
    assert "objectSelector" not in job_entry
    values = job_entry["namespaceSelector"]["matchExpressions"]
    assert values[0]["values"] == ["kube-node-lease", "kube-system", "qs"]
    assert values[1] == DEFAULT_SELECTOR["matchExpressions"][0]
    assert "objectSelector" in webhook_selectors(known["pod"], "qs", False, None)
    assert "objectSelector" not in webhook_selectors(known["pod"], "qs", True, None)
    labelled = webhook_selectors(known["pod"], "qs", True, {"matchLabels": {"team": "a"}})
    assert labelled["namespaceSelector"]["matchLabels"] == {"team": "a"}


# -- the kinds that run through their pods (Deployment, StatefulSet, LeaderWorkerSet) ------

PARENT_ANNOTATION = "kueue.x-k8s.io/pod-suspending-parent"


def serving_patch(
    kind: str,
    obj: dict[str, Any],
    rules: JobManagement,
    cluster: Cluster,
    old: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    request: dict[str, Any] = {
        "uid": "u",
        "kind": {"group": "apps", "kind": kind},
        "namespace": "team",
        "operation": "CREATE" if old is None else "UPDATE",
        "object": obj,
    }
    if old is not None:
        request["oldObject"] = old
    response = review_response({"request": request}, None, rules, cluster)["response"]
    assert response["allowed"], response
    return json.loads(base64.b64decode(response["patch"])) if "patch" in response else []


def statefulset(labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "web", "namespace": "team"}
    if labels is not None:
        meta["labels"] = labels
    template = {"metadata": {}, "spec": {"containers": [{"name": "c"}]}}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": meta,
        "spec": {"replicas": 2, "template": template},
    }


def template_after(patch: list[dict[str, Any]], obj: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = jsonpatch.apply_patch(obj, patch)
    return result


def test_an_unlabelled_statefulset_gets_the_default_local_queue_on_its_pods_too() -> None:
    obj = statefulset()
    after = template_after(
        serving_patch("StatefulSet", obj, management(), Cluster({("team", "default")})), obj
    )
    assert after["metadata"]["labels"] == {QUEUE: "default"}
    meta = after["spec"]["template"]["metadata"]
    assert meta["labels"][QUEUE] == "default"
    assert meta["annotations"][PARENT_ANNOTATION] == "statefulset"


def test_an_unlabelled_statefulset_is_marked_only_with_manage_jobs_without_queue_name() -> None:
    obj = statefulset()
    assert serving_patch("StatefulSet", obj, management(), Cluster(set())) == []
    after = template_after(
        serving_patch("StatefulSet", obj, management(without_queue_name=True), Cluster(set())),
        obj,
    )
    meta = after["spec"]["template"]["metadata"]
    assert meta["annotations"][PARENT_ANNOTATION] == "statefulset"
    assert QUEUE not in meta["labels"]  # no queue: its Workload waits until it gets one
    assert meta["labels"]["kueue.x-k8s.io/managed"] == "true"


def test_the_default_local_queue_is_given_on_creation_only() -> None:
    """An update of a running unlabelled object is not relabelled (the queue of a running
    object may not change)."""
    old = statefulset()
    old["status"] = {"readyReplicas": 2}
    new = copy.deepcopy(old)
    new["spec"]["replicas"] = 3
    assert (
        serving_patch("StatefulSet", new, management(), Cluster({("team", "default")}), old) == []
    )


def test_webhook_selectors_send_the_serving_kinds_unlabelled() -> None:
    known = frameworks()
    for name in ("deployment", "statefulset", "leaderworkerset.x-k8s.io/leaderworkerset"):
        assert "objectSelector" not in webhook_selectors(known[name], "qs", False, None)


def test_pods_a_parent_marked_follow_the_rules_whatever_owns_them() -> None:
    """A StatefulSet's pods (owned by a StatefulSet) are the pod integration's when their
    template is marked, labelled or (with manageJobsWithoutQueueName) not; a pod of a Job
    never is."""
    owner = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "controller": True}
    job_kinds = {("batch", "Job"), ("apps", "StatefulSet")}
    pod: dict[str, Any] = {
        "metadata": {
            "namespace": "team",
            "annotations": {PARENT_ANNOTATION: "statefulset"},
            "ownerReferences": [owner],
        }
    }
    assert not managed(pod, management(), None, job_kinds)
    assert managed(pod, management(without_queue_name=True), None, job_kinds)
    pod["metadata"]["labels"] = {QUEUE: "lq"}
    assert managed(pod, management(), None, job_kinds)
    unmarked = copy.deepcopy(pod)
    del unmarked["metadata"]["annotations"]
    assert not managed(unmarked, management(), None, job_kinds)
    assert not managed(
        {
            "metadata": {
                "namespace": "team",
                "labels": {QUEUE: "lq"},
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j"}],
            }
        },
        management(),
    )


def test_the_reconcilers_manage_what_the_rules_manage() -> None:
    def labels(namespace: str) -> Mapping[str, str] | None:
        return {"kubernetes.io/metadata.name": namespace}

    assert management().manages({"metadata": {"namespace": "team", "labels": {QUEUE: "q"}}}, labels)
    assert not management().manages({"metadata": {"namespace": "team"}}, labels)
    assert management(True).manages({"metadata": {"namespace": "team"}}, labels)
    assert not management(True).manages({"metadata": {"namespace": "kube-system"}}, labels)
