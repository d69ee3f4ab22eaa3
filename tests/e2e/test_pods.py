"""Pods and pod groups behind quota on the full local control plane (issue 7): the webhook
gates them, quotagate makes one Workload per unit and ungates the pods on admission,
kube-scheduler binds them, preemption deletes them and their owner recreates them gated."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.cluster.fixtures import wait_for
from tests.cluster.nodes import RUN_SECONDS
from tests.integration.kueue import (
    ControllerProcess,
    Kueue,
    cluster_queue,
    condition,
    flavor,
    local_queue,
)

GATE = "kueue.x-k8s.io/admission"
# Kueue's webhook holds every pod it gates by the topology gate too
GATES = [GATE, "kueue.x-k8s.io/topology"]
ZONE = "topology.kubernetes.io/zone"


def _pod_template(
    group: str, total: int, seconds: int, priority_class: str | None = None, restart: str = "Never"
) -> dict[str, Any]:
    labels = {"kueue.x-k8s.io/queue-name": "lq", "kueue.x-k8s.io/pod-group-name": group}
    if priority_class:
        labels["kueue.x-k8s.io/priority-class"] = priority_class
    return {
        "metadata": {
            "labels": labels,
            "annotations": {
                "kueue.x-k8s.io/pod-group-total-count": str(total),
                RUN_SECONDS: str(seconds),
            },
        },
        "spec": {
            "restartPolicy": restart,
            "containers": [
                {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
            ],
        },
    }


def _set_quota(kueue: Kueue, cq: str, rf: str, cpu: int) -> None:
    kueue.custom.patch_cluster_custom_object(
        "kueue.x-k8s.io",
        "v1beta2",
        "clusterqueues",
        cq,
        {
            "spec": {
                "resourceGroups": cluster_queue(cq, {rf: {"cpu": cpu}})["spec"]["resourceGroups"]
            }
        },
    )


def _gates(pod: Any) -> list[str]:
    return [g.name for g in pod.spec.scheduling_gates or []]


def test_pod_group_is_gated_as_a_whole_until_quota_covers_all_of_it(
    webhook_controller: ControllerProcess, api_client: client.ApiClient, namespace: str
) -> None:
    kueue = Kueue(api_client)
    core = client.CoreV1Api(api_client)
    cq, rf = f"{namespace}-cq", f"{namespace}-rf"
    kueue.apply(
        flavor(rf, {ZONE: "node-b"}),
        cluster_queue(cq, {rf: {"cpu": 3}}),
        local_queue(namespace, "lq", cq),
    )
    for i in range(4):
        template = _pod_template("train", 4, 600)
        core.create_namespaced_pod(
            namespace,
            {"metadata": {"name": f"train-{i}", **template["metadata"]}, "spec": template["spec"]},
        )
    workload = wait_for(
        lambda: next(iter(kueue.workloads(namespace)), None), what="the group's Workload"
    )
    assert workload["metadata"]["name"] == "train"
    assert workload["spec"]["podSets"][0]["count"] == 4
    assert {r["kind"] for r in workload["metadata"]["ownerReferences"]} == {"Pod"}
    pending = wait_for(
        lambda: condition(kueue.get_workload(namespace, "train"), "QuotaReserved"),
        what="the pending reason",
    )
    assert "insufficient quota for cpu" in pending["message"]
    pods = core.list_namespaced_pod(namespace).items
    assert len(pods) == 4 and all(_gates(p) == GATES for p in pods)

    _set_quota(kueue, cq, rf, 4)

    def bound() -> list[Any] | None:
        items = core.list_namespaced_pod(namespace).items
        return items if len(items) == 4 and all(p.spec.node_name for p in items) else None

    pods = wait_for(bound, timeout=60, what="all 4 pods ungated and bound")
    for pod in pods:
        assert not _gates(pod)
        assert pod.spec.node_selector == {ZONE: "node-b"}
        assert pod.spec.node_name == "node-b"


def test_job_preempts_a_pod_group_whose_owner_recreates_its_pods_gated(
    webhook_controller: ControllerProcess, api_client: client.ApiClient, namespace: str
) -> None:
    kueue = Kueue(api_client)
    core = client.CoreV1Api(api_client)
    apps = client.AppsV1Api(api_client)
    batch = client.BatchV1Api(api_client)
    cq, rf = f"{namespace}-cq", f"{namespace}-rf"
    kueue.apply(
        flavor(rf, {ZONE: "node-a"}),
        cluster_queue(cq, {rf: {"cpu": 2}}, preemption={"withinClusterQueue": "LowerPriority"}),
        local_queue(namespace, "lq", cq),
    )
    for name, value in (("low", 10), ("high", 1000)):
        kueue.custom.create_cluster_custom_object(
            "kueue.x-k8s.io",
            "v1beta2",
            "workloadpriorityclasses",
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": f"{namespace}-{name}"},
                "value": value,
            },
        )
    template = _pod_template("serve", 2, 600, f"{namespace}-low", restart="Always")
    apps.create_namespaced_replica_set(
        namespace,
        {
            "metadata": {"name": "serve"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"kueue.x-k8s.io/pod-group-name": "serve"}},
                "template": template,
            },
        },
    )

    def admitted() -> dict[str, Any] | None:
        for w in kueue.workloads(namespace):
            admitted = condition(w, "Admitted")
            if w["metadata"]["name"] == "serve" and admitted and admitted["status"] == "True":
                return w
        return None

    workload = wait_for(admitted, timeout=60, what="the group admitted")
    assert workload["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet"
    wait_for(
        lambda: all(p.spec.node_name for p in core.list_namespaced_pod(namespace).items),
        timeout=60,
        what="the group's pods bound",
    )
    old = {p.metadata.uid for p in core.list_namespaced_pod(namespace).items}

    batch.create_namespaced_job(
        namespace,
        {
            "metadata": {
                "name": "urgent",
                "labels": {
                    "kueue.x-k8s.io/queue-name": "lq",
                    "kueue.x-k8s.io/priority-class": f"{namespace}-high",
                },
            },
            "spec": {
                "parallelism": 2,
                "completions": 2,
                "template": {
                    "metadata": {"annotations": {RUN_SECONDS: "600"}},
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            {
                                "name": "c",
                                "image": "busybox",
                                "resources": {"requests": {"cpu": "1"}},
                            }
                        ],
                    },
                },
            },
        },
    )
    wait_for(
        lambda: batch.read_namespaced_job("urgent", namespace).spec.suspend is False,
        timeout=90,
        what="the Job admitted after the group's pods are gone",
    )
    group = kueue.get_workload(namespace, "serve")
    evictions = group["status"]["schedulingStats"]["evictions"]
    assert {"reason": "Preempted", "underlyingCause": "", "count": 1} in evictions

    def recreated_and_gated() -> list[Any] | None:
        pods = [
            p
            for p in core.list_namespaced_pod(
                namespace, label_selector="kueue.x-k8s.io/pod-group-name=serve"
            ).items
            if p.metadata.uid not in old and not p.metadata.deletion_timestamp
        ]
        return pods if len(pods) == 2 and all(_gates(p) == GATES for p in pods) else None

    wait_for(recreated_and_gated, timeout=60, what="the ReplicaSet's new pods, gated")
    group = kueue.get_workload(namespace, "serve")
    assert not group["status"].get("admission")
    assert condition(group, "QuotaReserved")["status"] == "False"


def _core_pod_group(
    namespace: str, name: str, min_count: int, mode: str, priority_class: str
) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "schedulingPolicy": {"gang": {"minCount": min_count}},
            "disruptionMode": mode,
            "priorityClassName": priority_class,
        },
    }


def _grouped_pod(name: str, group: str, priority_class: str | None = None) -> dict[str, Any]:
    labels = {"kueue.x-k8s.io/queue-name": "lq"}
    if priority_class:
        labels["kueue.x-k8s.io/priority-class"] = priority_class
    return {
        "metadata": {"name": name, "labels": labels, "annotations": {RUN_SECONDS: "600"}},
        "spec": {
            "schedulingGroup": {"podGroupName": group},
            "restartPolicy": "Never",
            "containers": [
                {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
            ],
        },
    }


def _created_unless_class_unknown(create: Any) -> bool:
    try:
        create()
    except ApiException as exc:
        if exc.status == 403 and "no PriorityClass" in str(exc.body):
            return False
        raise
    return True


def test_core_pod_group_is_one_workload_admitted_together_and_preempted_pod_by_pod(
    webhook_controller: ControllerProcess, api_client: client.ApiClient, namespace: str
) -> None:
    kueue = Kueue(api_client)
    core = client.CoreV1Api(api_client)
    cq, rf = f"{namespace}-cq", f"{namespace}-rf"
    kueue.apply(
        flavor(rf, {ZONE: "node-a"}),
        cluster_queue(cq, {rf: {"cpu": 3}}, preemption={"withinClusterQueue": "LowerPriority"}),
        local_queue(namespace, "lq", cq),
    )
    client.SchedulingV1Api(api_client).create_priority_class(
        {"metadata": {"name": f"{namespace}-batch"}, "value": 10}
    )
    # The API server's Priority admission plugin reads PriorityClasses from its informer:
    # right after the create it may refuse (403 "no PriorityClass") until the cache has it.
    wait_for(
        lambda: _created_unless_class_unknown(
            lambda: kueue.custom.create_namespaced_custom_object(
                "scheduling.k8s.io",
                "v1alpha2",
                namespace,
                "podgroups",
                _core_pod_group(namespace, "batch", 1, "Pod", f"{namespace}-batch"),
            )
        ),
        timeout=10,
        what="the PodGroup created once its PriorityClass is known",
    )
    for i in range(3):
        created = core.create_namespaced_pod(namespace, _grouped_pod(f"batch-{i}", "batch"))
        assert created.spec.scheduling_group.pod_group_name == "batch"

    def admitted() -> dict[str, Any] | None:
        for w in kueue.workloads(namespace):
            cond = condition(w, "Admitted")
            if w["metadata"]["name"] == "podgroup-batch" and cond and cond["status"] == "True":
                return w
        return None

    workload = wait_for(admitted, timeout=60, what="the PodGroup's Workload admitted")
    assert workload["spec"]["disruptionMode"] == "Pod"
    assert workload["spec"]["priority"] == 10
    assert workload["spec"]["priorityClassRef"]["name"] == f"{namespace}-batch"
    podset = workload["spec"]["podSets"][0]
    assert (podset["count"], podset["minCount"]) == (3, 1)
    wait_for(
        lambda: all(
            p.spec.node_name and not _gates(p) for p in core.list_namespaced_pod(namespace).items
        ),
        timeout=60,
        what="the 3 pods ungated together and bound",
    )

    # A higher-priority single pod needs 1 cpu: DisruptionMode Pod gives up one pod, not
    # the whole group.
    kueue.custom.create_cluster_custom_object(
        "kueue.x-k8s.io",
        "v1beta2",
        "workloadpriorityclasses",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": f"{namespace}-urgent"},
            "value": 1000,
        },
    )
    single = _grouped_pod("urgent", "unused", f"{namespace}-urgent")
    del single["spec"]["schedulingGroup"]
    core.create_namespaced_pod(namespace, single)
    wait_for(
        lambda: (p := core.read_namespaced_pod("urgent", namespace)).spec.node_name and p,
        timeout=90,
        what="the urgent pod admitted and bound",
    )
    group_pods = [
        p
        for p in core.list_namespaced_pod(namespace).items
        if p.metadata.name.startswith("batch-") and not p.metadata.deletion_timestamp
    ]
    assert len(group_pods) == 2
    shrunk = kueue.get_workload(namespace, "podgroup-batch")
    assert shrunk["status"]["admission"]["podSetAssignments"][0]["count"] == 2


def test_pod_naming_a_missing_local_queue_stays_gated_and_says_why(
    webhook_controller: ControllerProcess, api_client: client.ApiClient, namespace: str
) -> None:
    kueue = Kueue(api_client)
    core = client.CoreV1Api(api_client)
    pod = _grouped_pod("lost", "unused")
    del pod["spec"]["schedulingGroup"]
    pod["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "nope"
    core.create_namespaced_pod(namespace, pod)
    pending = wait_for(
        lambda: (
            (w := next(iter(kueue.workloads(namespace)), None)) and condition(w, "QuotaReserved")
        ),
        timeout=30,
        what="the pending Workload",
    )
    assert pending["message"] == "LocalQueue nope doesn't exist"  # Kueue's text
    assert pending["reason"] == "Misconfigured"

    def warning() -> Any:
        events = core.list_namespaced_event(
            namespace, field_selector="involvedObject.kind=Pod,involvedObject.name=lost"
        ).items
        return next((e for e in events if e.type == "Warning"), None)

    event = wait_for(warning, timeout=30, what="a Warning Event on the pod")
    assert "nope" in event.message
    assert _gates(core.read_namespaced_pod("lost", namespace)) == GATES


def test_pod_group_metadata_kueue_refuses_is_refused_naming_the_field(
    webhook_controller: ControllerProcess, api_client: client.ApiClient, namespace: str
) -> None:
    """Kueue's pod webhook (`validatePodGroupMetadata`): a group name needs a positive
    total count, refused on creation and on update, with the annotation named."""
    core = client.CoreV1Api(api_client)
    count = "kueue.x-k8s.io/pod-group-total-count"
    path = f"metadata.annotations[{count}]"

    def pod(name: str, total: str | None) -> dict[str, Any]:
        body = _pod_template("g", 1, 60)
        body["metadata"]["name"] = name
        del body["metadata"]["annotations"][count]
        if total is not None:
            body["metadata"]["annotations"][count] = total
        return body

    def refusal(create: Any) -> str:
        with pytest.raises(ApiException) as refused:
            create()
        assert refused.value.status == 422
        message: str = json.loads(refused.value.body)["message"]
        return message

    missing = refusal(lambda: core.create_namespaced_pod(namespace, pod("no-count", None)))
    assert (
        f"{path}: Required value: both the '{count}' annotation and the "
        "'kueue.x-k8s.io/pod-group-name' label should be set"
    ) in missing
    zero = refusal(lambda: core.create_namespaced_pod(namespace, pod("zero", "0")))
    assert (
        f"{path}: Invalid value: \"0\": incorrect annotation value '{count}=0': group total "
        "count should be greater than zero"
    ) in zero
    assert core.list_namespaced_pod(namespace).items == []

    core.create_namespaced_pod(namespace, pod("ok", "1"))
    emptied = refusal(
        lambda: core.patch_namespaced_pod(
            "ok", namespace, {"metadata": {"annotations": {count: "0"}}}
        )
    )
    assert f'{path}: Invalid value: "0"' in emptied
    renamed = refusal(
        lambda: core.patch_namespaced_pod(
            "ok", namespace, {"metadata": {"labels": {"kueue.x-k8s.io/pod-group-name": "h"}}}
        )
    )
    assert (
        'metadata.labels[kueue.x-k8s.io/pod-group-name]: Invalid value: "h": field is immutable'
    ) in renamed
