"""The Kubeflow adapters (controller/integrations/kinds/trainjob.py, mpijob.py) on plain
objects, with the cases of Kueue's trainjob and mpijob controller tests: pod sets, the
admission written where Kueue writes it, restored, finished, active, ready; and the cache
of related objects the TrainJob reads its runtime from."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from api.constants import ELASTIC_JOB_ANNOTATION, POD_SET_LABEL, QUEUE_NAME_LABEL
from controller.integrations.framework.podset_info import PodSetInfo, PodSetInfoError
from controller.integrations.framework.registry import frameworks
from controller.integrations.framework.related import RelatedCache, RelatedObjectMissing
from controller.integrations.kinds.mpijob import MPIJob
from controller.integrations.kinds.trainjob import (
    CLUSTER_TRAINING_RUNTIMES,
    KUEUE_PATCH_MANAGER,
    TRAINING_RUNTIMES,
    TrainJob,
)
from controller.integrations.webhook import review_response
from controller.kube.client import Resource

TOLERATION = {"key": "t1k", "operator": "Equal", "value": "t1v", "effect": "NoExecute"}


def pod(cpu: str, **spec: Any) -> dict[str, Any]:
    return {
        "spec": {
            "containers": [{"name": "node", "image": "i", "resources": {"requests": {"cpu": cpu}}}],
            **spec,
        }
    }


RUNTIME = {
    "metadata": {"name": "torch"},
    "spec": {
        "mlPolicy": {"numNodes": 1, "torch": {}},
        "template": {
            "spec": {
                "replicatedJobs": [
                    {
                        "name": "node",
                        "replicas": 1,
                        "template": {
                            "metadata": {
                                "labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
                            },
                            "spec": {"template": pod("1")},
                        },
                    },
                    {
                        "name": "foo",
                        "replicas": 2,
                        "template": {"spec": {"parallelism": 3, "template": pod("500m")}},
                    },
                ]
            }
        },
    },
}


def trainjob(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "train", "namespace": "ns", "uid": "u"},
        "spec": {"runtimeRef": {"name": "torch"}, **spec},
    }


def cluster_runtimes(resource: Resource, namespace: str | None, name: str) -> dict[str, Any] | None:
    if resource == CLUSTER_TRAINING_RUNTIMES and namespace is None and name == "torch":
        return RUNTIME
    return None


def info(name: str, **fields: Any) -> PodSetInfo:
    return PodSetInfo(name, 1, labels={POD_SET_LABEL: name}, **fields)


def kueue_patch(job: TrainJob) -> dict[str, Any]:
    return next(p for p in job.spec["runtimePatches"] if p["manager"] == KUEUE_PATCH_MANAGER)


# -- TrainJob ------------------------------------------------------------------------------


def test_a_trainjobs_pod_sets_are_its_runtimes_jobs() -> None:
    job = TrainJob(trainjob(trainer={"numNodes": 2}), cluster_runtimes)
    assert [(ps["name"], ps["count"]) for ps in job.pod_sets()] == [("node", 2), ("foo", 6)]
    node = job.pod_sets()[0]["template"]
    assert node["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "1"}}


def test_a_trainjob_whose_runtime_is_missing_waits_for_it() -> None:
    job = TrainJob(
        trainjob(runtimeRef={"name": "mine", "kind": "TrainingRuntime"}), cluster_runtimes
    )
    with pytest.raises(RelatedObjectMissing, match="runtime 'mine' not found"):
        job.pod_sets()
    assert job.pods_ready() is False
    found = TrainJob(
        trainjob(runtimeRef={"name": "mine", "kind": "TrainingRuntime"}),
        lambda r, ns, n: RUNTIME if (r, ns, n) == (TRAINING_RUNTIMES, "ns", "mine") else None,
    )
    assert len(found.pod_sets()) == 2


def test_admission_goes_into_kueues_runtime_patch_beside_the_users() -> None:
    user = {
        "manager": "example.com/user-manager",
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "spec": {
                                    "template": {"spec": {"nodeSelector": {"disktype": "sdd"}}}
                                }
                            },
                        }
                    ]
                }
            }
        },
    }
    empty = {"manager": KUEUE_PATCH_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {}}}}
    job = TrainJob(trainjob(suspend=True, runtimePatches=[user, empty]), cluster_runtimes)
    job.run_with_pod_sets_info(
        [
            info(
                "node",
                annotations={"a": "b"},
                node_selector={"gpu": "nvidia"},
                tolerations=[TOLERATION],
            ),
            info("foo", scheduling_gates=[{"name": "gate"}]),
        ]
    )
    assert job.spec["suspend"] is False
    assert job.spec["runtimePatches"][0] == user
    assert kueue_patch(job)["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"] == [
        {
            "name": "node",
            "template": {
                "spec": {
                    "template": {
                        "metadata": {"annotations": {"a": "b"}, "labels": {POD_SET_LABEL: "node"}},
                        "spec": {"nodeSelector": {"gpu": "nvidia"}, "tolerations": [TOLERATION]},
                    }
                }
            },
        },
        {
            "name": "foo",
            "template": {
                "spec": {
                    "template": {
                        "metadata": {"labels": {POD_SET_LABEL: "foo"}},
                        "spec": {"schedulingGates": [{"name": "gate"}]},
                    }
                }
            },
        },
    ]
    # The Trainer merges the patches into the JobSet it resumes: the user's first, Kueue's over.
    node = job.child().replicated_jobs[0]["template"]["spec"]["template"]
    assert node["spec"]["nodeSelector"] == {"disktype": "sdd", "gpu": "nvidia"}
    assert node["metadata"]["labels"][POD_SET_LABEL] == "node"

    # Eviction empties Kueue's patch, once; the user's stays.
    assert job.restore_pod_sets_info([]) is True
    assert kueue_patch(job) == empty and job.spec["runtimePatches"][0] == user
    assert job.restore_pod_sets_info([]) is False


def test_a_trainjob_without_kueues_runtime_patch_gets_it_at_admission() -> None:
    job = TrainJob(trainjob(suspend=True), cluster_runtimes)
    assert job.restore_pod_sets_info([]) is False and "runtimePatches" not in job.spec
    job.run_with_pod_sets_info([info("node"), info("foo")])
    [patch] = job.spec["runtimePatches"]
    assert patch["manager"] == KUEUE_PATCH_MANAGER
    assert [
        rj["name"] for rj in patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    ] == ["node", "foo"]


def test_an_admission_of_other_pod_sets_is_refused_and_changes_nothing() -> None:
    job = TrainJob(trainjob(suspend=True), cluster_runtimes)
    with pytest.raises(PodSetInfoError, match="expecting 2 pod sets, got 1"):
        job.run_with_pod_sets_info([info("node")])
    assert job.obj == trainjob(suspend=True)


def test_a_trainjobs_state_from_its_status() -> None:
    job = TrainJob(trainjob(suspend=True), cluster_runtimes)
    assert job.finished() is None and not job.is_active() and job.template_mutable()
    job.obj["status"] = {
        "jobsStatus": [
            {"name": "node", "active": 1, "ready": 1, "succeeded": 0},
            {"name": "foo", "active": 2, "ready": 1, "succeeded": 1},
        ]
    }
    assert job.is_active() and not job.template_mutable()
    assert job.pods_ready() is True  # 3 replicas: 1 + 1 ready, 1 succeeded
    job.obj["status"]["jobsStatus"][1]["ready"] = 0
    assert job.pods_ready() is False
    job.obj["status"]["conditions"] = [
        {"type": "Complete", "status": "True", "message": "jobset completed"}
    ]
    finished = job.finished()
    assert finished is not None and finished.success and finished.message == "jobset completed"
    job.obj["status"]["conditions"] = [{"type": "Failed", "status": "True", "message": "no"}]
    finished = job.finished()
    assert finished is not None and not finished.success


def test_the_trainjob_framework_reads_the_runtimes() -> None:
    framework = frameworks()["trainer.kubeflow.org/trainjob"]
    assert framework.related == (TRAINING_RUNTIMES, CLUSTER_TRAINING_RUNTIMES)
    reads = [rule for rule in framework.rbac if rule.verbs == ("get", "list", "watch")]
    assert [rule.resources for rule in reads] == [
        ("trainingruntimes",),
        ("clustertrainingruntimes",),
    ]


# -- MPIJob --------------------------------------------------------------------------------


def mpijob(launcher: bool = True, worker_replicas: int | None = 2) -> dict[str, Any]:
    specs: dict[str, Any] = {}
    if launcher:
        specs["Launcher"] = {"replicas": 1, "template": pod("1")}
    worker: dict[str, Any] = {"template": pod("2")}
    if worker_replicas is not None:
        worker["replicas"] = worker_replicas
    specs["Worker"] = worker
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "pi", "namespace": "ns"},
        "spec": {"runPolicy": {"suspend": True}, "mpiReplicaSpecs": specs},
    }


def test_an_mpijobs_pod_sets_are_its_launcher_then_its_workers() -> None:
    assert [(ps["name"], ps["count"]) for ps in MPIJob(mpijob()).pod_sets()] == [
        ("launcher", 1),
        ("worker", 2),
    ]
    assert [(ps["name"], ps["count"]) for ps in MPIJob(mpijob(False, None)).pod_sets()] == [
        ("worker", 1)
    ]


def test_an_mpijob_runs_with_each_pod_sets_flavor_and_is_restored() -> None:
    job = MPIJob(mpijob())
    assert job.is_suspended()
    job.run_with_pod_sets_info(
        [
            info("launcher", node_selector={"zone": "a"}),
            info("worker", node_selector={"zone": "b"}, tolerations=[TOLERATION]),
        ]
    )
    specs = job.spec["mpiReplicaSpecs"]
    assert not job.is_suspended()
    assert specs["Launcher"]["template"]["spec"]["nodeSelector"] == {"zone": "a"}
    assert specs["Worker"]["template"]["spec"]["nodeSelector"] == {"zone": "b"}
    assert specs["Worker"]["template"]["spec"]["tolerations"] == [TOLERATION]
    original = mpijob()["spec"]["mpiReplicaSpecs"]
    infos = [
        PodSetInfo("launcher", 1),
        PodSetInfo("worker", 2),
    ]
    job.suspend()
    assert job.restore_pod_sets_info(infos) is True
    for kind, replica in job.spec["mpiReplicaSpecs"].items():
        assert replica["template"]["spec"] == original[kind]["template"]["spec"]
        assert not replica["template"].get("metadata")  # the pod set label gone
    assert job.restore_pod_sets_info(infos) is False
    assert job.restore_pod_sets_info(infos[:1]) is False  # Kueue: a count mismatch restores nothing
    with pytest.raises(PodSetInfoError, match="expecting 2 pod sets, got 1"):
        job.run_with_pod_sets_info(infos[:1])


def test_an_mpijobs_state_from_its_status() -> None:
    job = MPIJob(mpijob())
    assert job.finished() is None and not job.is_active() and not job.pods_ready()
    job.obj["status"] = {
        "replicaStatuses": {"Launcher": {"active": 1}, "Worker": {}},
        "conditions": [{"type": "Running", "status": "True"}],
    }
    assert job.is_active() and job.pods_ready()
    job.obj["status"]["conditions"].append(
        {"type": "Succeeded", "status": "True", "message": "MPIJob ns/pi successfully completed."}
    )
    finished = job.finished()
    assert finished is not None and finished.success
    assert finished.message == "MPIJob ns/pi successfully completed."


def test_an_mpijobs_priority_class_as_the_mpi_operator_chooses_it() -> None:
    body = mpijob()
    specs = body["spec"]["mpiReplicaSpecs"]
    specs["Worker"]["template"]["spec"]["priorityClassName"] = "workers"
    assert MPIJob(body).priority_class() == "workers"
    specs["Launcher"]["template"]["spec"]["priorityClassName"] = "launcher"
    assert MPIJob(body).priority_class() == "launcher"
    body["spec"]["runPolicy"]["schedulingPolicy"] = {"priorityClass": "policy"}
    assert MPIJob(body).priority_class() == "policy"


# -- the related objects' cache ------------------------------------------------------------


def test_the_related_cache_holds_each_kind_and_says_when_it_changed() -> None:
    changes: list[int] = []
    cache = RelatedCache((TRAINING_RUNTIMES, CLUSTER_TRAINING_RUNTIMES), lambda: changes.append(1))
    (namespaced, trainings), (cluster, clusters) = cache.sinks()
    assert (namespaced, cluster) == (TRAINING_RUNTIMES, CLUSTER_TRAINING_RUNTIMES)
    trainings.apply_event(None, {"metadata": {"namespace": "ns", "name": "a"}, "spec": {}})
    clusters.apply_event("ADDED", {"metadata": {"name": "b"}})
    assert cache.lookup(TRAINING_RUNTIMES, "ns", "a") is not None
    assert cache.lookup(TRAINING_RUNTIMES, "other", "a") is None
    assert cache.lookup(CLUSTER_TRAINING_RUNTIMES, None, "b") == {"metadata": {"name": "b"}}
    assert clusters.known_keys() == {"/b"} and trainings.known_keys() == {"ns/a"}
    assert not cache.listed()
    trainings.mark_listed()
    clusters.mark_listed()
    assert cache.listed()
    clusters.apply_event("DELETED", {"metadata": {"name": "b"}})
    assert cache.lookup(CLUSTER_TRAINING_RUNTIMES, None, "b") is None
    assert len(changes) == 5


# -- the webhook ---------------------------------------------------------------------------


def review(kind: dict[str, str], obj: dict[str, Any]) -> dict[str, Any]:
    return {"request": {"uid": "r", "operation": "CREATE", "kind": kind, "object": obj}}


MPI_KIND = {"group": "kubeflow.org", "version": "v2beta1", "kind": "MPIJob"}
TRAINJOB_KIND = {"group": "trainer.kubeflow.org", "version": "v1alpha1", "kind": "TrainJob"}


def test_the_webhook_creates_queue_labelled_kubeflow_jobs_suspended() -> None:
    body = mpijob()
    body["metadata"]["labels"] = {QUEUE_NAME_LABEL: "lq"}
    del body["spec"]["runPolicy"]
    answer = review_response(review(MPI_KIND, body))["response"]
    assert answer["allowed"] is True
    assert json.loads(base64.b64decode(answer["patch"])) == [
        {"op": "add", "path": "/spec/runPolicy", "value": {"suspend": True}}
    ]
    train = trainjob()
    train["metadata"]["labels"] = {QUEUE_NAME_LABEL: "lq"}
    answer = review_response(review(TRAINJOB_KIND, train))["response"]
    assert json.loads(base64.b64decode(answer["patch"])) == [
        {"op": "add", "path": "/spec/suspend", "value": True}
    ]


def test_the_webhook_offsets_the_workers_of_a_launcher_run_as_worker() -> None:
    """Kueue's MPIJob webhook with topology-aware scheduling: `runLauncherAsWorker` makes
    the launcher rank 0, so the worker template gets `kueue.x-k8s.io/pod-index-offset:
    "1"`; not without a launcher, nor when the launcher names a pod set group."""
    body = mpijob()
    body["metadata"]["labels"] = {QUEUE_NAME_LABEL: "lq"}
    body["spec"]["runLauncherAsWorker"] = True
    answer = review_response(review(MPI_KIND, body))["response"]
    assert json.loads(base64.b64decode(answer["patch"])) == [
        {
            "op": "add",
            "path": "/spec/mpiReplicaSpecs/Worker/template/metadata",
            "value": {"annotations": {"kueue.x-k8s.io/pod-index-offset": "1"}},
        }
    ]
    for change in ("no launcher", "group", "not as worker"):
        job = MPIJob(mpijob(launcher=change != "no launcher"))
        job.spec["runLauncherAsWorker"] = change != "not as worker"
        if change == "group":
            job.spec["mpiReplicaSpecs"]["Launcher"]["template"]["metadata"] = {
                "annotations": {"kueue.x-k8s.io/podset-group-name": "g"}
            }
        job.default()
        assert "metadata" not in job.spec["mpiReplicaSpecs"]["Worker"]["template"], change


@pytest.mark.parametrize(
    ("kind", "body", "name"),
    [
        (MPI_KIND, mpijob(), "kubeflow.org/v2beta1, Kind=MPIJob"),
        (TRAINJOB_KIND, trainjob(), "trainer.kubeflow.org/v1alpha1, Kind=TrainJob"),
    ],
)
def test_the_webhook_refuses_an_elastic_kubeflow_job_as_kueue_does(
    kind: dict[str, str], body: dict[str, Any], name: str
) -> None:
    body["metadata"]["labels"] = {QUEUE_NAME_LABEL: "lq"}
    body["metadata"]["annotations"] = {ELASTIC_JOB_ANNOTATION: "true"}
    answer = review_response(review(kind, body))["response"]
    assert answer["allowed"] is False
    assert answer["status"]["message"] == (
        f"metadata.annotations[{ELASTIC_JOB_ANNOTATION}]: Forbidden: elastic job is not "
        f'supported for "{name}"'
    )
