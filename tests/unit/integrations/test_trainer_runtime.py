"""The JobSet Kueue derives for a TrainJob from its runtime
(controller/integrations/trainer_runtime.py), case by case as the Trainer's runtime
framework (v2.3.0) builds it: counts per ML policy, resourcesPerNode, runtime patches,
the trainer's and initializers' overrides, the coscheduling label."""

from __future__ import annotations

from typing import Any

import pytest

from controller.integrations.trainer_runtime import (
    ANCESTOR_LABEL,
    UnsupportedRuntime,
    child_jobset,
    runtime_ref,
    strategic_merge,
)


def container(name: str = "node", cpu: str | None = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "image": "runtime-image", **extra}
    if cpu is not None:
        body["resources"] = {"requests": {"cpu": cpu}}
    return body


def replicated_job(
    name: str,
    step: str | None = None,
    parallelism: int | None = None,
    replicas: int = 1,
    containers: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    template: dict[str, Any] = {
        "spec": {"template": {"spec": {"containers": containers or [container()]}}}
    }
    if parallelism is not None:
        template["spec"]["parallelism"] = parallelism
    if step is not None:
        template["metadata"] = {"labels": {ANCESTOR_LABEL: step}}
    return {"name": name, "replicas": replicas, "template": template}


def runtime(*jobs: dict[str, Any], ml_policy: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"template": {"spec": {"replicatedJobs": list(jobs)}}}
    if ml_policy is not None:
        spec["mlPolicy"] = ml_policy
    return {"spec": spec}


def trainjob(trainer: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"runtimeRef": {"name": "rt"}, **spec}
    if trainer is not None:
        body["trainer"] = trainer
    return {"metadata": {"name": "train", "namespace": "ns"}, "spec": body}


def shape(jobset: dict[str, Any]) -> list[tuple[str, int, int, int]]:
    """(name, replicas, parallelism, completions) per replicatedJob."""
    return [
        (
            rj["name"],
            rj.get("replicas", 1),
            rj["template"]["spec"]["parallelism"],
            rj["template"]["spec"]["completions"],
        )
        for rj in jobset["spec"]["replicatedJobs"]
    ]


def node_container(jobset: dict[str, Any], job: str) -> dict[str, Any]:
    rj = next(rj for rj in jobset["spec"]["replicatedJobs"] if rj["name"] == job)
    found: dict[str, Any] = rj["template"]["spec"]["template"]["spec"]["containers"][0]
    return found


TORCH = runtime(
    replicated_job(
        "dataset-initializer", "dataset-initializer", containers=[container("dataset-initializer")]
    ),
    replicated_job("node", "trainer", replicas=3),
    ml_policy={"numNodes": 2, "torch": {}},
)


def test_the_trainer_step_runs_the_trainjobs_nodes_one_replica_of_each_step() -> None:
    assert shape(child_jobset(trainjob(), TORCH)) == [
        ("dataset-initializer", 1, 1, 1),
        ("node", 1, 2, 2),  # the runtime's mlPolicy.numNodes, one replica
    ]
    assert shape(child_jobset(trainjob({"numNodes": 5}), TORCH))[1] == ("node", 1, 5, 5)


@pytest.mark.parametrize("policy", [None, {"jax": {}}, {"xgboost": {}}, {"flux": {}}])
def test_every_policy_but_mpi_gives_the_first_trainer_step_the_trainjobs_nodes(
    policy: dict[str, Any] | None,
) -> None:
    rt = runtime(
        replicated_job("prep", parallelism=2),
        replicated_job("node", "trainer"),
        replicated_job("other", "trainer", parallelism=3),
        ml_policy=policy,
    )
    counts = [count for _, _, count, _ in shape(child_jobset(trainjob({"numNodes": 4}), rt))]
    assert counts[:2] == [2, 4]
    # A second trainer step keeps its count: with an ML policy its mlPolicy.numNodes (1 here),
    # without one its parallelism.
    assert counts[2] == (3 if policy is None else 1)


def test_mpi_runs_one_node_less_as_workers_when_the_launcher_is_a_node() -> None:
    workers = replicated_job("node", containers=[container(cpu="1")])
    launcher = replicated_job("launcher", "trainer", containers=[container(cpu="1")])
    mpi = {"numNodes": 1, "mpi": {"numProcPerNode": 1, "runLauncherAsNode": True}}
    derived = child_jobset(
        trainjob({"numNodes": 4, "resourcesPerNode": {"requests": {"cpu": "2"}}}),
        runtime(workers, launcher, ml_policy=mpi),
    )
    assert shape(derived) == [("node", 1, 3, 3), ("launcher", 1, 1, 1)]
    for job in ("node", "launcher"):  # both get resourcesPerNode
        assert node_container(derived, job)["resources"] == {"requests": {"cpu": "2"}}
    plain = {"numNodes": 1, "mpi": {"numProcPerNode": 1}}
    derived = child_jobset(trainjob({"numNodes": 4}), runtime(workers, launcher, ml_policy=plain))
    assert shape(derived) == [("node", 1, 4, 4), ("launcher", 1, 1, 1)]


def test_resources_per_node_merge_key_by_key_into_the_trainers_node_container() -> None:
    rt = runtime(
        replicated_job(
            "node",
            "trainer",
            containers=[
                container("sidecar", cpu="100m"),
                container(
                    "node",
                    resources={
                        "requests": {"cpu": "1", "memory": "2Gi"},
                        "limits": {"memory": "4Gi"},
                    },
                ),
            ],
        ),
        ml_policy={"torch": {}},
    )
    per_node = {"requests": {"cpu": "4", "nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}
    derived = child_jobset(trainjob({"resourcesPerNode": per_node}), rt)
    sidecar, node = derived["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
        "containers"
    ]
    assert sidecar["resources"] == {"requests": {"cpu": "100m"}}
    assert node["resources"] == {
        "requests": {"cpu": "4", "memory": "2Gi", "nvidia.com/gpu": "1"},
        "limits": {"memory": "4Gi", "nvidia.com/gpu": "1"},
    }
    # Without an ML policy the Trainer does not apply resourcesPerNode.
    rt["spec"].pop("mlPolicy")
    derived = child_jobset(trainjob({"resourcesPerNode": per_node}), rt)
    pod = derived["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pod["containers"][1]["resources"] == {
        "requests": {"cpu": "1", "memory": "2Gi"},
        "limits": {"memory": "4Gi"},
    }


def test_runtime_patches_merge_in_order_and_keep_the_runtimes_job_order() -> None:
    b = replicated_job("b")
    b["template"]["spec"]["template"]["spec"]["tolerations"] = [{"key": "rt", "operator": "Exists"}]
    rt = runtime(replicated_job("a"), b)

    def patch(manager: str, job: str, pod_spec: dict[str, Any]) -> dict[str, Any]:
        return {
            "manager": manager,
            "trainingRuntimeSpec": {
                "template": {
                    "spec": {
                        "replicatedJobs": [
                            {"name": job, "template": {"spec": {"template": {"spec": pod_spec}}}}
                        ]
                    }
                }
            },
        }

    tj = trainjob(
        runtimePatches=[
            patch("example.com/one", "b", {"nodeSelector": {"zone": "one", "disk": "ssd"}}),
            patch(
                "example.com/two",
                "b",
                {
                    "nodeSelector": {"zone": "two"},
                    "tolerations": [{"key": "t", "operator": "Exists"}],
                },
            ),
            patch(
                "kueue.x-k8s.io/manager",
                "a",
                {"containers": [{"name": "node", "env": [{"name": "X", "value": "1"}]}]},
            ),
        ]
    )
    derived = child_jobset(tj, rt)
    assert [rj["name"] for rj in derived["spec"]["replicatedJobs"]] == ["a", "b"]
    pod_b = derived["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]
    assert pod_b["nodeSelector"] == {"zone": "two", "disk": "ssd"}
    assert pod_b["tolerations"] == [{"key": "t", "operator": "Exists"}]  # replaced, not merged
    assert node_container(derived, "a") == {
        "name": "node",
        "image": "runtime-image",
        "env": [{"name": "X", "value": "1"}],
    }


def test_the_trainer_and_initializer_overrides() -> None:
    rt = runtime(
        replicated_job(
            "dataset-initializer",
            "dataset-initializer",
            containers=[
                container("dataset-initializer", env=[{"name": "STORAGE_URI", "value": "old"}])
            ],
        ),
        replicated_job(
            "model-initializer",
            "model-initializer",
            replicas=2,
            containers=[container("model-initializer")],
        ),
        replicated_job(
            "node", "trainer", containers=[container(env=[{"name": "A", "value": "runtime"}])]
        ),
        ml_policy={"torch": {}},
    )
    tj = trainjob(
        {
            "image": "mine",
            "command": ["python"],
            "args": ["train.py"],
            "env": [{"name": "A", "value": "job"}, {"name": "B", "value": "job"}],
        },
        initializer={
            "dataset": {"storageUri": "hf://data", "env": [{"name": "D", "value": "1"}]},
            "model": {"secretRef": {"name": "token"}},
        },
    )
    derived = child_jobset(tj, rt)
    assert node_container(derived, "dataset-initializer")["env"] == [
        {"name": "STORAGE_URI", "value": "hf://data"},
        {"name": "D", "value": "1"},
    ]
    model = node_container(derived, "model-initializer")
    assert model["envFrom"] == [{"secretRef": {"name": "token"}}] and "env" not in model
    assert shape(derived)[1] == ("model-initializer", 1, 1, 1)
    node = node_container(derived, "node")
    assert (node["image"], node["command"], node["args"]) == ("mine", ["python"], ["train.py"])
    assert node["env"] == [{"name": "A", "value": "job"}, {"name": "B", "value": "job"}]


def test_a_coscheduling_runtime_labels_every_pod_with_its_pod_group() -> None:
    rt = runtime(replicated_job("a"), replicated_job("node", "trainer"))
    rt["spec"]["podGroupPolicy"] = {"coscheduling": {"scheduleTimeoutSeconds": 60}}
    for rj in child_jobset(trainjob(), rt)["spec"]["replicatedJobs"]:
        labels = rj["template"]["spec"]["template"]["metadata"]["labels"]
        assert labels == {"scheduling.x-k8s.io/pod-group": "train"}


def test_the_runtime_reference_defaults_to_a_cluster_training_runtime() -> None:
    assert runtime_ref(trainjob()) == ("ClusterTrainingRuntime", "rt")
    namespaced = trainjob(runtimeRef={"name": "mine", "kind": "TrainingRuntime"})
    assert runtime_ref(namespaced) == ("TrainingRuntime", "mine")
    with pytest.raises(UnsupportedRuntime, match=r"unsupported runtime: Other\.example\.com"):
        runtime_ref(trainjob(runtimeRef={"name": "x", "kind": "Other", "apiGroup": "example.com"}))


def test_the_strategic_merge_patch() -> None:
    original = {
        "containers": [{"name": "a", "env": [{"name": "X", "value": "1"}]}, {"name": "b"}],
        "volumes": [{"name": "v", "emptyDir": {}}],
        "tolerations": [{"key": "k"}],
        "nodeSelector": {"keep": "1", "drop": "2"},
    }
    patch = {
        "containers": [{"name": "b", "env": [{"name": "Y", "value": "2"}]}, {"name": "c"}],
        "volumes": [{"name": "w", "secret": {"secretName": "s"}}],
        "tolerations": [{"key": "t"}],
        "nodeSelector": {"drop": None, "new": "3"},
    }
    assert strategic_merge(original, patch) == {
        "containers": [
            {"name": "a", "env": [{"name": "X", "value": "1"}]},
            {"name": "b", "env": [{"name": "Y", "value": "2"}]},
            {"name": "c"},
        ],
        "volumes": [{"name": "v", "emptyDir": {}}, {"name": "w", "secret": {"secretName": "s"}}],
        "tolerations": [{"key": "t"}],
        "nodeSelector": {"keep": "1", "new": "3"},
    }
    assert original["nodeSelector"] == {"keep": "1", "drop": "2"}  # not changed in place
