"""The job framework on a real API server (no Job controller runs here: Jobs are created
suspended by the test, as the webhook would): Kueue's labels and annotations on job
objects (prebuilt-workload-name, the topology annotations, elastic-job,
labelKeysToCopy) and the `integrations.frameworks` switch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from api.constants import (
    ELASTIC_JOB_ANNOTATION,
    JOB_UID_LABEL,
    POD_SET_REQUIRED_TOPOLOGY_ANNOTATION,
    PREBUILT_WORKLOAD_LABEL,
    QUEUE_NAME_LABEL,
)
from controller.integrations.framework.workload_names import workload_name
from tests.cluster.fixtures import install_crds, wait_for
from tests.cluster.modules import ensure_module
from tests.integration.conftest import StartConfigured
from tests.integration.kueue import (
    REPO,
    Kueue,
    cluster_queue,
    condition,
    flavor,
    local_queue,
    maybe_workload,
    wait_admitted,
    workload,
)

JOBSET = ("jobset.x-k8s.io", "v1alpha2", "jobsets")


@pytest.fixture(scope="module")
def jobset_crd(api_client: client.ApiClient) -> list[str]:
    """The JobSet CRD of sigs.k8s.io/jobset (tests/cluster/modules.py)."""
    return install_crds(api_client, ensure_module("jobset").crds)


def queue(kueue: Kueue, namespace: str, cpu: int = 4) -> None:
    cq = f"{namespace}-cq"
    kueue.apply(
        flavor(f"{namespace}-rf"),
        cluster_queue(cq, {f"{namespace}-rf": {"cpu": cpu}}),
        local_queue(namespace, "lq", cq),
    )


def suspended_job(
    name: str,
    parallelism: int = 1,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    template_annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {QUEUE_NAME_LABEL: "lq", **(labels or {})}}
    if annotations:
        meta["annotations"] = annotations
    return {
        "metadata": meta,
        "spec": {
            "suspend": True,
            "parallelism": parallelism,
            "completions": parallelism,
            "template": {
                "metadata": {"annotations": template_annotations or {}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
                    ],
                },
            },
        },
    }


def suspended_jobset(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "labels": {QUEUE_NAME_LABEL: "lq"}},
        "spec": {
            "suspend": True,
            "replicatedJobs": [
                {
                    "name": "workers",
                    "replicas": 2,
                    "template": {
                        "spec": {
                            "parallelism": 1,
                            "template": {
                                "spec": {
                                    "restartPolicy": "Never",
                                    "containers": [
                                        {
                                            "name": "c",
                                            "image": "busybox",
                                            "resources": {"requests": {"cpu": "1"}},
                                        }
                                    ],
                                }
                            },
                        }
                    },
                }
            ],
        },
    }


@pytest.fixture
def batch(api_client: client.ApiClient) -> client.BatchV1Api:
    return client.BatchV1Api(api_client)


def test_label_keys_to_copy_and_a_topology_request_reach_the_workload(
    configured_controller: StartConfigured,
    kueue: Kueue,
    batch: client.BatchV1Api,
    namespace: str,
) -> None:
    configured_controller(
        {"integrations": {"frameworks": ["batch/job"], "labelKeysToCopy": ["team", "absent"]}},
        namespace,
    )
    queue(kueue, namespace)
    batch.create_namespaced_job(
        namespace,
        suspended_job(
            "labelled",
            labels={"team": "ml", "other": "x"},
            template_annotations={POD_SET_REQUIRED_TOPOLOGY_ANNOTATION: "cloud.com/rack"},
        ),
    )
    name = kueue.workload_name(namespace, "Job", "labelled")
    created = wait_for(lambda: maybe_workload(kueue, namespace, name), what="the Job's Workload")
    labels = created["metadata"]["labels"]
    assert labels["team"] == "ml" and "other" not in labels and "absent" not in labels
    assert created["spec"]["podSets"][0]["topologyRequest"] == {
        "required": "cloud.com/rack",
        "podIndexLabel": "batch.kubernetes.io/job-completion-index",
    }
    # its flavor has no topology: a pod set asking for one stays pending (Kueue's rule)
    pending = wait_for(
        lambda: condition(kueue.get_workload(namespace, name), "QuotaReserved"),
        what="the Workload's QuotaReserved=False",
    )
    assert pending["status"] == "False"
    assert f'Flavor "{namespace}-rf" does not support TopologyAwareScheduling' in pending["message"]


def test_a_job_runs_under_its_prebuilt_workload(
    configured_controller: StartConfigured,
    kueue: Kueue,
    batch: client.BatchV1Api,
    namespace: str,
) -> None:
    configured_controller({"integrations": {"frameworks": ["batch/job"]}}, namespace)
    queue(kueue, namespace)
    job = suspended_job("runner", parallelism=2, labels={PREBUILT_WORKLOAD_LABEL: "prebuilt"})
    created = batch.create_namespaced_job(namespace, job)
    # It waits (suspended) for its Workload, which is made later, by someone else.
    prebuilt = workload(namespace, "prebuilt", "lq", count=2)
    kueue.apply(prebuilt)
    adopted = wait_for(
        lambda: (
            (w := kueue.get_workload(namespace, "prebuilt"))["metadata"].get("ownerReferences")
            and w
        ),
        what="the prebuilt Workload adopted",
    )
    [owner] = adopted["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("Job", "runner", created.metadata.uid)
    assert adopted["metadata"]["labels"][JOB_UID_LABEL] == created.metadata.uid
    wait_admitted(kueue, namespace, "prebuilt")
    wait_for(
        lambda: batch.read_namespaced_job("runner", namespace).spec.suspend is False,
        what="the Job resumed under its prebuilt Workload",
    )
    # no Workload of its own
    assert [w["metadata"]["name"] for w in kueue.workloads(namespace)] == ["prebuilt"]


@pytest.mark.parametrize("made_by", ["kueue", "an older quotagate"])
def test_a_workload_the_job_owns_is_adopted_whatever_its_name(
    made_by: str,
    configured_controller: StartConfigured,
    kueue: Kueue,
    batch: client.BatchV1Api,
    namespace: str,
) -> None:
    """After a switch from Kueue (its name, owner reference and job-uid label) or an upgrade
    from a quotagate that named Workloads `<kind>-<name>`, the Workload a job already owns
    is its Workload: admitted and run, never made again beside it."""
    queue(kueue, namespace)
    created = batch.create_namespaced_job(namespace, suspended_job("existing", parallelism=2))
    uid = created.metadata.uid
    name = "job-existing" if made_by != "kueue" else workload_name("Job", "batch", "existing", uid)
    owned = workload(namespace, name, "lq", count=2)
    owned["metadata"]["labels"] = {JOB_UID_LABEL: uid}
    owned["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": "existing",
            "uid": uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    kueue.apply(owned)
    configured_controller({"integrations": {"frameworks": ["batch/job"]}}, namespace)
    wait_admitted(kueue, namespace, name)
    wait_for(
        lambda: batch.read_namespaced_job("existing", namespace).spec.suspend is False,
        what="the Job resumed under the Workload it owned",
    )
    assert [w["metadata"]["name"] for w in kueue.workloads(namespace)] == [name]


def test_a_prebuilt_workload_that_is_not_the_jobs_is_finished_out_of_sync(
    configured_controller: StartConfigured,
    kueue: Kueue,
    batch: client.BatchV1Api,
    namespace: str,
) -> None:
    configured_controller({"integrations": {"frameworks": ["batch/job"]}}, namespace)
    queue(kueue, namespace, cpu=0)  # nothing is admitted: the check is made before
    kueue.apply(workload(namespace, "other-shape", "lq", count=5))
    batch.create_namespaced_job(
        namespace,
        suspended_job("mismatch", parallelism=2, labels={PREBUILT_WORKLOAD_LABEL: "other-shape"}),
    )
    finished = wait_for(
        lambda: condition(kueue.get_workload(namespace, "other-shape"), "Finished"),
        what="the prebuilt Workload finished",
    )
    assert (finished["status"], finished["reason"]) == ("True", "OutOfSync")
    assert "out of sync" in finished["message"]
    assert batch.read_namespaced_job("mismatch", namespace).spec.suspend is True


def test_an_elastic_job_is_reported(
    configured_controller: StartConfigured,
    kueue: Kueue,
    batch: client.BatchV1Api,
    core: client.CoreV1Api,
    namespace: str,
) -> None:
    configured_controller({"integrations": {"frameworks": ["batch/job"]}}, namespace)
    queue(kueue, namespace)
    batch.create_namespaced_job(
        namespace, suspended_job("elastic", annotations={ELASTIC_JOB_ANNOTATION: "true"})
    )

    def warned() -> Any:
        events = core.list_namespaced_event(
            namespace, field_selector="involvedObject.kind=Job,involvedObject.name=elastic"
        ).items
        return next((e for e in events if e.reason == "ElasticJobNotSupported"), None)

    event = wait_for(warned, what="the elastic job reported")
    assert event.type == "Warning"
    assert ELASTIC_JOB_ANNOTATION in event.message


def test_the_frameworks_list_switches_integrations_on_and_off(
    configured_controller: StartConfigured,
    kueue: Kueue,
    batch: client.BatchV1Api,
    custom: client.CustomObjectsApi,
    jobset_crd: list[str],
    namespace: str,
    api_client: client.ApiClient,
) -> None:
    """With only batch/job, a queue-labelled JobSet is left alone (no Workload) while a Job
    beside it is queued; with jobset.x-k8s.io/jobset on, the JobSet is queued too."""
    off = configured_controller({"integrations": {"frameworks": ["batch/job"]}}, namespace)
    queue(kueue, namespace)
    custom.create_namespaced_custom_object(
        *JOBSET[:2], namespace, JOBSET[2], suspended_jobset("ignored")
    )
    batch.create_namespaced_job(namespace, suspended_job("queued"))
    job = kueue.workload_name(namespace, "Job", "queued")
    wait_for(lambda: maybe_workload(kueue, namespace, job), what="the Job's Workload")
    jobset = kueue.workload_name(namespace, "JobSet", "ignored")
    assert maybe_workload(kueue, namespace, jobset) is None
    assert "integrations enabled: batch/job" in off.log()
    off.stop()
    on = configured_controller(
        {"integrations": {"frameworks": ["batch/job", "jobset.x-k8s.io/jobset"]}}, namespace
    )
    created = wait_for(
        lambda: maybe_workload(kueue, namespace, jobset), what="the JobSet's Workload"
    )
    assert [(ps["name"], ps["count"]) for ps in created["spec"]["podSets"]] == [("workers", 2)]
    wait_admitted(kueue, namespace, jobset)
    wait_for(
        lambda: (
            custom.get_namespaced_custom_object(*JOBSET[:2], namespace, JOBSET[2], "ignored")[
                "spec"
            ]["suspend"]
            is False
        ),
        what="the JobSet resumed",
    )
    assert "integrations enabled: batch/job, jobset.x-k8s.io/jobset" in on.log()


def test_a_kueue_framework_quotagate_does_not_implement_is_listed_not_fatal(
    tmp_path: Path,
) -> None:
    def check(frameworks: str) -> subprocess.CompletedProcess[str]:
        config = tmp_path / "config.yaml"
        config.write_text(f"integrations:\n  frameworks: {frameworks}\n")
        return subprocess.run(
            [sys.executable, "-m", "controller.cli", "config", "check", str(config)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
        )

    result = check("[batch/job, ray.io/rayservice]")
    assert result.returncode == 0
    assert (
        "integrations.frameworks[1]: ray.io/rayservice: quotagate has no such integration (it "
        "has batch/job, deployment, jobset.x-k8s.io/jobset, kubeflow.org/mpijob, "
        "leaderworkerset.x-k8s.io/leaderworkerset, pod, ray.io/raycluster, ray.io/rayjob, "
        "statefulset, trainer.kubeflow.org/trainjob); its objects are left alone"
    ) in result.stdout
    result = check("[batch/jobs]")
    assert result.returncode == 2
    assert "integrations.frameworks: [0]: 'batch/jobs' is not a Kueue framework" in result.stderr
