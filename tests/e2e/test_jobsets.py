"""JobSets behind quota on the full local control plane, with the real JobSet controller
(sigs.k8s.io/jobset v0.8.2, built from its Go module with its own CRD and webhooks:
tests/cluster/operators.py). The API server calls quotagate's webhook, which creates a
queue-labelled JobSet suspended; quotagate admits its Workload (one pod set per
replicatedJob), puts each pod set's flavor into its replicatedJob's template and resumes
it; the JobSet controller creates the child Jobs, kube-scheduler places their pods and the
fake nodes run them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from api.constants import ELASTIC_JOB_ANNOTATION, POD_SET_LABEL, QUEUE_NAME_LABEL
from tests.cluster.controlplane import ControlPlane
from tests.cluster.fixtures import wait_for
from tests.cluster.nodes import RUN_SECONDS
from tests.cluster.operators import JobSetController
from tests.e2e.conftest import webhook_controller_running
from tests.e2e.custom_jobs import (
    TOLERATION,
    ZONE,
    CustomJobs,
    check_never_over_committed,
    second_waits_while_the_first_holds_the_quota,
    set_quota,
    set_stop_policy,
    two_flavor_queue,
    wait_finished_and_returned,
    wait_released,
)
from tests.e2e.quota_watch import quota_watch
from tests.integration.kueue import (
    ControllerProcess,
    Kueue,
    condition,
)

JOBSET = ("jobset.x-k8s.io", "v1alpha2", "jobsets")


@pytest.fixture(scope="module")
def jobset_quotagate(
    full_cluster: ControlPlane,
    jobset_controller: JobSetController,
    kubeconfig_path: str,
    crds_installed: list[str],
    api_client: client.ApiClient,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ControllerProcess]:
    """quotagate queueing Jobs and JobSets, with its webhook."""
    with webhook_controller_running(
        kubeconfig_path,
        api_client,
        tmp_path_factory.mktemp("jobsets"),
        "jobsets",
        {"integrations": {"frameworks": ["batch/job", "jobset.x-k8s.io/jobset"]}},
    ) as process:
        yield process


def _non_empty(metadata: dict[str, Any] | None) -> dict[str, Any]:
    return {key: value for key, value in (metadata or {}).items() if value}


def pod_template(cpu: str, seconds: int | None) -> dict[str, Any]:
    """A pod the fake nodes run for `seconds`, or until the test completes it (None)."""
    return {
        "metadata": {"annotations": {RUN_SECONDS: str(seconds)} if seconds is not None else {}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}
            ],
        },
    }


def jobset(name: str, seconds: int | None = 1, queue: str = "lq") -> dict[str, Any]:
    """A driver (1 pod) and workers (2 Jobs of 2 pods), 1 cpu each: pod sets of 1 and 4."""
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "labels": {QUEUE_NAME_LABEL: queue}},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "driver",
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "parallelism": 1,
                            "completions": 1,
                            "backoffLimit": 0,
                            "template": pod_template("1", seconds),
                        }
                    },
                },
                {
                    "name": "workers",
                    "replicas": 2,
                    "template": {
                        "spec": {
                            "parallelism": 2,
                            "completions": 2,
                            "backoffLimit": 0,
                            "template": pod_template("1", seconds),
                        }
                    },
                },
            ]
        },
    }


class JobSets(CustomJobs):
    group, version, plural, kind = *JOBSET, "JobSet"
    name_label = "jobset.sigs.k8s.io/jobset-name"


def templates(js: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {rj["name"]: rj["template"]["spec"]["template"] for rj in js["spec"]["replicatedJobs"]}


def test_a_jobset_is_queued_admitted_per_pod_set_evicted_restored_and_finished(
    jobset_quotagate: ControllerProcess,
    full_cluster: ControlPlane,
    api_client: client.ApiClient,
    namespace: str,
) -> None:
    kueue = Kueue(api_client)
    jobsets = JobSets(api_client, namespace)
    cq, rf_a, rf_b = two_flavor_queue(kueue, namespace, cpu_a=1, cpu_b=3)
    with quota_watch(api_client, namespace) as watch:
        created = jobsets.create(jobset("train", seconds=None))  # runs until completed
        assert created["spec"]["suspend"] is True  # quotagate's webhook
        workload = wait_for(
            lambda: next(iter(kueue.workloads(namespace)), None), what="the JobSet's Workload"
        )
        assert workload["metadata"]["name"] == kueue.workload_name(namespace, "JobSet", "train")
        assert workload["metadata"]["ownerReferences"][0]["kind"] == "JobSet"
        # Kueue's pod sets: one per replicatedJob, replicas × min(parallelism, completions).
        assert [(ps["name"], ps["count"]) for ps in workload["spec"]["podSets"]] == [
            ("driver", 1),
            ("workers", 4),
        ]
        reason = wait_for(
            lambda: condition(
                kueue.get_workload(namespace, kueue.workload_name(namespace, "JobSet", "train")),
                "QuotaReserved",
            ),
            what="the pending reason",
        )
        assert "podset workers: insufficient quota for cpu" in reason["message"]
        assert jobsets.get("train")["spec"]["suspend"] is True
        assert not jobsets.pods("train")

        # Quota for both pod sets: the driver gets flavor a, the workers flavor b.
        set_quota(kueue, cq, {rf_a: {"cpu": 1}, rf_b: {"cpu": 4}})
        admitted = wait_for(
            lambda: (js := jobsets.get("train"))["spec"].get("suspend") is False and js,
            timeout=30,
            what="the JobSet resumed",
        )
        workload = kueue.get_workload(namespace, kueue.workload_name(namespace, "JobSet", "train"))
        assignments = {
            a["name"]: (a["count"], a["flavors"]["cpu"])
            for a in workload["status"]["admission"]["podSetAssignments"]
        }
        assert assignments == {"driver": (1, rf_a), "workers": (4, rf_b)}
        driver, workers = templates(admitted)["driver"], templates(admitted)["workers"]
        assert driver["spec"]["nodeSelector"] == {ZONE: "node-a"}
        assert workers["spec"]["nodeSelector"] == {ZONE: "node-b"}
        assert workers["spec"]["tolerations"] == [TOLERATION]
        assert "tolerations" not in driver["spec"]
        assert driver["metadata"]["labels"][POD_SET_LABEL] == "driver"
        # The JobSet controller runs the child Jobs; their pods land on their flavor's node.
        running = jobsets.running("train", 5)
        nodes = {
            p.metadata.labels["jobset.sigs.k8s.io/replicatedjob-name"]: p.spec.node_name
            for p in running
        }
        assert nodes == {"driver": "node-a", "workers": "node-b"}

        # Drain the ClusterQueue: evicted, suspended, templates restored, pods gone, released.
        set_stop_policy(kueue, cq, "HoldAndDrain")
        wait_released(kueue, namespace, kueue.workload_name(namespace, "JobSet", "train"))
        stopped = jobsets.get("train")
        assert stopped["spec"]["suspend"] is True
        made_from = {
            ps["name"]: ps["template"]
            for ps in kueue.get_workload(
                namespace, kueue.workload_name(namespace, "JobSet", "train")
            )["spec"]["podSets"]
        }
        for name, template in templates(stopped).items():
            assert "nodeSelector" not in template["spec"]
            assert "tolerations" not in template["spec"]
            original = made_from[name]
            # restored as they were; an empty map and no map are the same object to
            # Kubernetes (Kueue's typed restore leaves an empty one out too)
            assert _non_empty(template.get("metadata")) == _non_empty(original.get("metadata"))
            assert template["spec"] == original["spec"]
        wait_for(lambda: not jobsets.pods("train"), timeout=60, what="the JobSet's pods gone")
        evicted = condition(
            kueue.get_workload(namespace, kueue.workload_name(namespace, "JobSet", "train")),
            "Evicted",
        )
        assert evicted is not None and evicted["reason"] == "ClusterQueueStopped"

        # Resume: admitted again, runs to completion, the Workload finishes, quota returns.
        set_stop_policy(kueue, cq, "None")
        jobsets.complete(full_cluster.lifecycle, "train", 5)  # type: ignore[attr-defined]
        wait_finished_and_returned(
            kueue, namespace, kueue.workload_name(namespace, "JobSet", "train"), cq
        )
        finished = jobsets.get("train")
        assert condition(finished, "Completed")["status"] == "True"
    check_never_over_committed(watch, rf_a, rf_b, cpu_b=4)


def test_a_second_jobset_waits_suspended_while_the_first_holds_the_quota(
    jobset_quotagate: ControllerProcess,
    full_cluster: ControlPlane,
    api_client: client.ApiClient,
    namespace: str,
) -> None:
    second_waits_while_the_first_holds_the_quota(
        api_client,
        JobSets(api_client, namespace),
        full_cluster.lifecycle,  # type: ignore[attr-defined]
        jobset("first", seconds=None),  # runs until completed
        jobset("second", seconds=1),
        pods=5,
    )


def test_the_webhook_refuses_an_elastic_jobset_as_kueue_does(
    jobset_quotagate: ControllerProcess, api_client: client.ApiClient, namespace: str
) -> None:
    body = jobset("elastic")
    body["metadata"]["annotations"] = {ELASTIC_JOB_ANNOTATION: "true"}
    with pytest.raises(ApiException) as refused:
        JobSets(api_client, namespace).create(body)
    assert refused.value.status == 422
    assert (
        f"metadata.annotations[{ELASTIC_JOB_ANNOTATION}]: Forbidden: elastic job is not "
        'supported for "jobset.x-k8s.io/v1alpha2, Kind=JobSet"'
    ) in json.loads(refused.value.body)["message"]
