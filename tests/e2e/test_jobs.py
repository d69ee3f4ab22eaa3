"""Jobs behind quota on the full local control plane (issue 7): the API server calls our
webhook over TLS, kube-scheduler places the pods, the Job controller runs the Job."""

from __future__ import annotations

import json

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from api.constants import MAX_EXEC_TIME_LABEL
from tests.cluster.fixtures import wait_for
from tests.cluster.nodes import queued_job
from tests.integration.kueue import (
    ControllerProcess,
    Kueue,
    cluster_queue,
    condition,
    flavor,
    local_queue,
)

TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}


def test_job_waits_suspended_until_quota_then_runs_to_completion(
    webhook_controller: ControllerProcess, api_client: client.ApiClient, namespace: str
) -> None:
    kueue = Kueue(api_client)
    batch = client.BatchV1Api(api_client)
    cq = f"{namespace}-cq"
    kueue.apply(
        flavor(f"{namespace}-rf", {"topology.kubernetes.io/zone": "node-b"}, [TOLERATION]),
        cluster_queue(cq, {f"{namespace}-rf": {"cpu": 2}}),
        local_queue(namespace, "lq", cq),
    )
    created = batch.create_namespaced_job(namespace, queued_job("three", parallelism=3))
    assert created.spec.suspend is True  # the webhook suspended it at creation
    workload = wait_for(
        lambda: next(iter(kueue.workloads(namespace)), None), what="the Job's Workload"
    )
    assert workload["metadata"]["ownerReferences"][0]["kind"] == "Job"
    assert workload["spec"]["podSets"][0]["count"] == 3
    wait_for(
        lambda: condition(
            kueue.get_workload(namespace, kueue.workload_name(namespace, "Job", "three")),
            "QuotaReserved",
        ),
        what="pending reason",
    )
    assert (
        "insufficient quota for cpu"
        in condition(
            kueue.get_workload(namespace, kueue.workload_name(namespace, "Job", "three")),
            "QuotaReserved",
        )["message"]
    )
    assert batch.read_namespaced_job("three", namespace).spec.suspend is True
    assert not client.CoreV1Api(api_client).list_namespaced_pod(namespace).items

    # Raise the quota: admitted, unsuspended with the flavor's node labels, runs, finishes.
    kueue.custom.patch_cluster_custom_object(
        "kueue.x-k8s.io",
        "v1beta2",
        "clusterqueues",
        cq,
        {
            "spec": {
                "resourceGroups": cluster_queue(cq, {f"{namespace}-rf": {"cpu": 3}})["spec"][
                    "resourceGroups"
                ]
            }
        },
    )
    job = wait_for(
        lambda: (j := batch.read_namespaced_job("three", namespace)).status.succeeded == 3 and j,
        timeout=90,
        what="the Job to complete",
    )
    assert job.spec.template.spec.node_selector == {"topology.kubernetes.io/zone": "node-b"}
    # The flavor's tolerations reach the Job's pods too, as Kueue's PodSetInfo merge does.
    [toleration] = job.spec.template.spec.tolerations
    assert (toleration.key, toleration.value, toleration.effect) == (
        "dedicated",
        "batch",
        "NoSchedule",
    )
    wait_for(
        lambda: condition(
            kueue.get_workload(namespace, kueue.workload_name(namespace, "Job", "three")),
            "Finished",
        ),
        timeout=30,
        what="Workload Finished",
    )
    # waitForPodsReady is off (the default): as in Kueue, the job side writes no PodsReady.
    assert (
        condition(
            kueue.get_workload(namespace, kueue.workload_name(namespace, "Job", "three")),
            "PodsReady",
        )
        is None
    )
    status = wait_for(
        lambda: (
            (s := kueue.get_cluster_queue(cq).get("status", {})).get("reservingWorkloads") == 0
            and s
        ),
        what="quota returned",
    )
    assert status["flavorsReservation"][0]["resources"][0]["total"] == "0"


def test_unlabelled_pod_is_untouched(
    webhook_controller: ControllerProcess, api_client: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(api_client)
    created = core.create_namespaced_pod(
        namespace,
        {"metadata": {"name": "free"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}},
    )
    assert not created.spec.scheduling_gates
    assert not created.metadata.finalizers
    wait_for(
        lambda: core.read_namespaced_pod("free", namespace).status.phase == "Running",
        timeout=60,
        what="Running",
    )


def test_labelled_pod_is_gated_by_the_webhook(
    webhook_controller: ControllerProcess, api_client: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(api_client)
    created = core.create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": "queued", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        },
    )
    assert [g.name for g in created.spec.scheduling_gates] == [
        "kueue.x-k8s.io/admission",
        "kueue.x-k8s.io/topology",
    ]
    assert core.read_namespaced_pod("queued", namespace).status.phase == "Pending"


def test_a_jobs_max_exec_time_label_sets_its_workloads_limit_and_a_bad_one_is_refused(
    webhook_controller: ControllerProcess, api_client: client.ApiClient, namespace: str
) -> None:
    """Kueue's `kueue.x-k8s.io/max-exec-time-seconds`: the Workload's
    `spec.maximumExecutionTimeSeconds` at creation, following the label while it waits; the
    webhook refuses an invalid value, naming the label."""
    kueue = Kueue(api_client)
    batch = client.BatchV1Api(api_client)
    cq = f"{namespace}-cq"
    kueue.apply(
        flavor(f"{namespace}-rf"),
        cluster_queue(cq, {f"{namespace}-rf": {"cpu": 0}}),  # nothing is admitted here
        local_queue(namespace, "lq", cq),
    )
    limited = queued_job("limited")
    limited["metadata"]["labels"][MAX_EXEC_TIME_LABEL] = "600"
    batch.create_namespaced_job(namespace, limited)
    workload = wait_for(
        lambda: (
            kueue.workloads(namespace)
            and kueue.get_workload(namespace, kueue.workload_name(namespace, "Job", "limited"))
        ),
        what="the Job's Workload",
    )
    assert workload["spec"]["maximumExecutionTimeSeconds"] == 600
    batch.patch_namespaced_job(
        "limited", namespace, {"metadata": {"labels": {MAX_EXEC_TIME_LABEL: "900"}}}
    )
    wait_for(
        lambda: (
            kueue.get_workload(namespace, kueue.workload_name(namespace, "Job", "limited"))[
                "spec"
            ].get("maximumExecutionTimeSeconds")
            == 900
        ),
        what="the Workload to follow the label",
    )

    bad = queued_job("bad")
    bad["metadata"]["labels"][MAX_EXEC_TIME_LABEL] = "10m"
    with pytest.raises(ApiException) as refused:
        batch.create_namespaced_job(namespace, bad)
    assert refused.value.status == 422
    assert (
        f'metadata.labels[{MAX_EXEC_TIME_LABEL}]: Invalid value: "10m": must be a whole number '
        "of seconds"
    ) in json.loads(refused.value.body)["message"]


def test_a_job_asking_two_topology_levels_is_refused_naming_the_annotations(
    webhook_controller: ControllerProcess, api_client: client.ApiClient, namespace: str
) -> None:
    """Kueue's `ValidateTASPodSetRequest`: a pod template may ask one of required,
    preferred or unconstrained topology; the API server, calling our webhook, refuses a
    Job asking two and names the template's annotations (a queued pod likewise)."""
    both = {
        "kueue.x-k8s.io/podset-required-topology": "cloud.com/block",
        "kueue.x-k8s.io/podset-preferred-topology": "cloud.com/rack",
    }
    expected = (
        "Invalid value: must not contain more than one topology annotation: "
        '["kueue.x-k8s.io/podset-required-topology", "kueue.x-k8s.io/podset-preferred-topology", '
        '"kueue.x-k8s.io/podset-unconstrained-topology"]'
    )
    job = queued_job("two-levels")
    job["spec"]["template"]["metadata"]["annotations"].update(both)
    with pytest.raises(ApiException) as refused:
        client.BatchV1Api(api_client).create_namespaced_job(namespace, job)
    assert refused.value.status == 422
    message = json.loads(refused.value.body)["message"]
    assert f"spec.template.metadata.annotations: {expected}" in message
    pod = {
        "metadata": {
            "name": "two-levels",
            "labels": {"kueue.x-k8s.io/queue-name": "lq"},
            "annotations": both,
        },
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    with pytest.raises(ApiException) as refused:
        client.CoreV1Api(api_client).create_namespaced_pod(namespace, pod)
    assert refused.value.status == 422
    assert f"metadata.annotations: {expected}" in json.loads(refused.value.body)["message"]
    one = queued_job("one-level")
    one["spec"]["template"]["metadata"]["annotations"][
        "kueue.x-k8s.io/podset-required-topology"
    ] = "cloud.com/block"
    created = client.BatchV1Api(api_client).create_namespaced_job(namespace, one)
    assert created.spec.suspend is True


def test_an_update_giving_a_job_or_a_pod_two_topology_levels_is_refused(
    webhook_controller: ControllerProcess, api_client: client.ApiClient, namespace: str
) -> None:
    """Kueue's webhooks run their create checks on updates: the API server, calling our
    webhook, refuses a patch adding preferred topology to a suspended Job's template that
    asks required topology, naming the template's annotations, and the same on a queued,
    gated pod; the Job and the pod keep what they had. (Their queue does not exist, so
    nothing admits them meanwhile.)"""
    expected = (
        "Invalid value: must not contain more than one topology annotation: "
        '["kueue.x-k8s.io/podset-required-topology", "kueue.x-k8s.io/podset-preferred-topology", '
        '"kueue.x-k8s.io/podset-unconstrained-topology"]'
    )
    required = {"kueue.x-k8s.io/podset-required-topology": "cloud.com/block"}
    preferred = {"kueue.x-k8s.io/podset-preferred-topology": "cloud.com/rack"}
    batch = client.BatchV1Api(api_client)
    job = queued_job("later-two-levels", queue="absent")
    job["spec"]["template"]["metadata"]["annotations"].update(required)
    assert batch.create_namespaced_job(namespace, job).spec.suspend is True
    patch = {"spec": {"template": {"metadata": {"annotations": preferred}}}}
    with pytest.raises(ApiException) as refused:
        batch.patch_namespaced_job("later-two-levels", namespace, patch)
    assert refused.value.status == 422
    message = json.loads(refused.value.body)["message"]
    assert f"spec.template.metadata.annotations: {expected}" in message
    stored = batch.read_namespaced_job("later-two-levels", namespace)
    assert (
        stored.spec.template.metadata.annotations.get("kueue.x-k8s.io/podset-preferred-topology")
        is None
    )

    core = client.CoreV1Api(api_client)
    pod = {
        "metadata": {
            "name": "later-two-levels",
            "labels": {"kueue.x-k8s.io/queue-name": "absent"},
            "annotations": required,
        },
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    core.create_namespaced_pod(namespace, pod)
    with pytest.raises(ApiException) as refused:
        core.patch_namespaced_pod(
            "later-two-levels", namespace, {"metadata": {"annotations": preferred}}
        )
    assert refused.value.status == 422
    assert f"metadata.annotations: {expected}" in json.loads(refused.value.body)["message"]


def test_a_job_waits_for_its_workload_priority_class_and_its_admission_gates(
    webhook_controller: ControllerProcess, api_client: client.ApiClient, namespace: str
) -> None:
    """Kueue's API refuses a Workload whose priorityClassRef has no priority, so a Job
    labelled with a WorkloadPriorityClass that does not exist gets no Workload (Kueue's
    WorkloadPriorityClassNotFound Event) until the class exists; then its Workload carries
    the class and its value. The Job's admission-gated-by annotation holds the Workload
    (AdmissionGated) until the gate is removed from the Job."""
    kueue = Kueue(api_client)
    batch = client.BatchV1Api(api_client)
    core = client.CoreV1Api(api_client)
    cq, high = f"{namespace}-cq", f"{namespace}-high"
    kueue.apply(
        flavor(f"{namespace}-rf"),
        cluster_queue(cq, {f"{namespace}-rf": {"cpu": 2}}),
        local_queue(namespace, "lq", cq),
    )
    job = queued_job("classy")
    job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = high
    job["metadata"]["annotations"] = {"kueue.x-k8s.io/admission-gated-by": "example.com/hold"}
    batch.create_namespaced_job(namespace, job)
    event = wait_for(
        lambda: next(
            (
                e
                for e in core.list_namespaced_event(
                    namespace, field_selector="involvedObject.name=classy"
                ).items
                if e.reason == "WorkloadPriorityClassNotFound"
            ),
            None,
        ),
        what="the WorkloadPriorityClassNotFound Event",
    )
    assert event.message == f'WorkloadPriorityClass "{high}" not found'
    assert not kueue.workloads(namespace)
    kueue.apply(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": high},
            "value": 500,
        }
    )
    try:
        workload = wait_for(
            lambda: next(iter(kueue.workloads(namespace)), None), timeout=90, what="the Workload"
        )
        assert workload["spec"]["priority"] == 500
        assert workload["spec"]["priorityClassRef"]["name"] == high
        gated = wait_for(
            lambda: condition(
                kueue.get_workload(namespace, kueue.workload_name(namespace, "Job", "classy")),
                "QuotaReserved",
            ),
            what="the pending reason",
        )
        assert (gated["reason"], gated["message"]) == (
            "AdmissionGated",
            "Admission is gated by: example.com/hold",
        )
        batch.patch_namespaced_job(
            "classy",
            namespace,
            {"metadata": {"annotations": {"kueue.x-k8s.io/admission-gated-by": None}}},
        )
        wait_for(
            lambda: (
                (
                    condition(
                        kueue.get_workload(
                            namespace, kueue.workload_name(namespace, "Job", "classy")
                        ),
                        "Admitted",
                    )
                    or {}
                ).get("status")
                == "True"
            ),
            timeout=60,
            what="the Workload admitted once the gate is gone",
        )
    finally:
        kueue.delete_cluster_scoped("workloadpriorityclasses", high)
