"""The JobSet a Kubeflow Trainer TrainJob runs, as Kueue derives it to describe the
TrainJob's Workload (pure).

Kueue's TrainJob integration (`trainjob.getChildJobSet`) asks the Trainer's own runtime
framework (Kubeflow Trainer v2.3.0) for the JobSet the Trainer would create, and takes
its pod sets from that JobSet. That JobSet is the runtime's template (the
`TrainingRuntime` or `ClusterTrainingRuntime` named by `spec.runtimeRef`) with:

- the TrainJob's `runtimePatches` merged into its spec, in order, as a strategic merge
  patch (replicatedJobs, containers, env, volumes, … by name; tolerations replaced);
- each replicatedJob's parallelism and completions set to its node count: the
  replicatedJob's parallelism, or the runtime's `mlPolicy.numNodes` for the trainer step
  (label `trainer.kubeflow.org/trainjob-ancestor-step: trainer`), or the TrainJob's
  `spec.trainer.numNodes` (for an MPI runtime on the replicatedJob `node`, one less with
  `runLauncherAsNode`);
- the trainer's `resourcesPerNode` merged into the `node` container's resources, its
  `image`, `command`, `args` and `env` on that container, one replica of the trainer and
  initializer steps, the initializers' `storageUri`, `env` and `secretRef`;
- with a coscheduling pod-group policy, the label `scheduling.x-k8s.io/pod-group`.

What the Trainer's ML-policy plugins add only when they build the real JobSet (the
PET_*, JAX_*, DMLC_*, OMPI_* variables, ports, SSH and hostfile volumes, Flux's installer)
is not in Kueue's pod sets and not here; neither are the command rewrites of the Flux and
torchtune plugins.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

__all__ = [
    "ANCESTOR_LABEL",
    "CLUSTER_TRAINING_RUNTIME",
    "TRAINING_RUNTIME",
    "UnsupportedRuntime",
    "child_jobset",
    "runtime_ref",
    "strategic_merge",
]

GROUP = "trainer.kubeflow.org"
TRAINING_RUNTIME = "TrainingRuntime"
CLUSTER_TRAINING_RUNTIME = "ClusterTrainingRuntime"
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
TRAINER = "trainer"
DATASET_INITIALIZER = "dataset-initializer"
MODEL_INITIALIZER = "model-initializer"
NODE = "node"  # the trainer's container, and MPI's worker replicatedJob
STORAGE_URI_ENV = "STORAGE_URI"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"

# The list fields of a JobSet spec merged item by item by a strategic merge patch, and
# their merge keys (from the Go types' `patchMergeKey`); other lists are replaced whole.
_MERGE_KEYS = {
    "replicatedJobs": "name",
    "dependsOn": "name",
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "ports": "containerPort",
    "volumeMounts": "mountPath",
    "volumes": "name",
    "imagePullSecrets": "name",
    "schedulingGates": "name",
    "resourceClaims": "name",
    "claims": "name",
}


class UnsupportedRuntime(ValueError):
    """`spec.runtimeRef` names no kind of runtime the Trainer has."""


def runtime_ref(trainjob: Mapping[str, Any]) -> tuple[str, str]:
    """(kind, name) of the runtime a TrainJob names; the kind defaults to
    ClusterTrainingRuntime, as the TrainJob CRD defaults it."""
    ref = (trainjob.get("spec") or {}).get("runtimeRef") or {}
    group = ref.get("apiGroup", GROUP)
    kind = ref.get("kind", CLUSTER_TRAINING_RUNTIME)
    if group != GROUP or kind not in (TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME):
        raise UnsupportedRuntime(f"unsupported runtime: {kind}.{group}")
    return str(kind), str(ref.get("name") or "")


# -- the strategic merge patch -------------------------------------------------------------


def strategic_merge(original: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """`patch` merged into `original` as Kubernetes' strategic merge patch merges a JSON
    patch without directives: maps key by key (a null removes the key), the lists of
    `_MERGE_KEYS` item by item (an item whose key is new is appended), anything else
    replaced."""
    merged = copy.deepcopy(dict(original))
    for key, value in patch.items():
        before = merged.get(key)
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(before, Mapping):
            merged[key] = strategic_merge(before, value)
        elif isinstance(value, list) and isinstance(before, list) and key in _MERGE_KEYS:
            merged[key] = _merge_list(before, value, _MERGE_KEYS[key])
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _merge_list(original: list[Any], patch: list[Any], merge_key: str) -> list[Any]:
    merged = copy.deepcopy(original)
    for item in patch:
        if not isinstance(item, Mapping):
            merged.append(copy.deepcopy(item))
            continue
        index = next(
            (
                i
                for i, have in enumerate(merged)
                if isinstance(have, Mapping) and have.get(merge_key) == item.get(merge_key)
            ),
            None,
        )
        if index is None:
            merged.append(copy.deepcopy(item))
        else:
            merged[index] = strategic_merge(merged[index], item)
    return merged


# -- the child JobSet ----------------------------------------------------------------------


def _labels(replicated_job: Mapping[str, Any]) -> Mapping[str, str]:
    return ((replicated_job.get("template") or {}).get("metadata") or {}).get("labels") or {}


def _pod_spec(replicated_job: dict[str, Any]) -> dict[str, Any]:
    job_spec = replicated_job.setdefault("template", {}).setdefault("spec", {})
    spec: dict[str, Any] = job_spec.setdefault("template", {}).setdefault("spec", {})
    return spec


def _containers(replicated_job: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return [c for c in _pod_spec(replicated_job).get("containers") or () if c.get("name") == name]


def _upsert_env(container: dict[str, Any], env: list[Mapping[str, Any]]) -> None:
    """The Trainer's `apply.UpsertEnvVars`: a variable of the same name is replaced in
    place, a new one appended."""
    current = list(container.get("env") or ())
    for variable in env:
        index = next(
            (i for i, e in enumerate(current) if e.get("name") == variable.get("name")), None
        )
        if index is None:
            current.append(copy.deepcopy(dict(variable)))
        else:
            current[index] = copy.deepcopy(dict(variable))
    if current:
        container["env"] = current


def _with_runtime_patches(spec: dict[str, Any], trainjob: Mapping[str, Any]) -> dict[str, Any]:
    """The runtime's JobSet spec with each runtime patch merged in, in the patches' order,
    the replicatedJobs kept in the runtime's order (Trainer's `mergeRuntimePatches`)."""
    order = {rj.get("name"): i for i, rj in enumerate(spec.get("replicatedJobs") or ())}
    for patch in (trainjob.get("spec") or {}).get("runtimePatches") or ():
        template = ((patch.get("trainingRuntimeSpec") or {}).get("template")) or {}
        if template.get("spec") is not None:
            spec = strategic_merge(spec, template["spec"])
    jobs = spec.get("replicatedJobs") or []
    spec["replicatedJobs"] = sorted(jobs, key=lambda rj: order.get(rj.get("name"), 0))
    return spec


def _node_counts(
    jobs: list[dict[str, Any]], ml_policy: Mapping[str, Any] | None, trainer: Mapping[str, Any]
) -> list[int]:
    """Each replicatedJob's pods per replica (Trainer's runtime info and ML policies)."""
    counts = []
    for rj in jobs:
        parallelism = ((rj.get("template") or {}).get("spec") or {}).get("parallelism")
        count = int(parallelism) if parallelism is not None else 1
        if _labels(rj).get(ANCESTOR_LABEL) == TRAINER and ml_policy is not None:
            count = int(ml_policy.get("numNodes") or 1)
        counts.append(max(count, 1))
    num_nodes = trainer.get("numNodes")
    if num_nodes is None:
        return counts
    mpi = (ml_policy or {}).get("mpi")
    if mpi is not None:  # the MPI plugin: the replicatedJob `node`
        index = next((i for i, rj in enumerate(jobs) if rj.get("name") == NODE), None)
        launcher_is_node = bool(mpi.get("runLauncherAsNode"))
        if index is not None:
            counts[index] = max(int(num_nodes) - 1, 1) if launcher_is_node else int(num_nodes)
    else:  # torch, JAX, XGBoost and the plain ML policy: the first trainer step
        index = next(
            (i for i, rj in enumerate(jobs) if _labels(rj).get(ANCESTOR_LABEL) == TRAINER), None
        )
        if index is not None:
            counts[index] = int(num_nodes)
    return counts


def _merge_resources(container: dict[str, Any], per_node: Mapping[str, Any]) -> None:
    """The Trainer's `MergeResourceRequirements`: `resourcesPerNode` over the container's
    resources, limits and requests key by key, claims by name."""
    merged = strategic_merge(container.get("resources") or {}, per_node)
    if merged:
        container["resources"] = merged


def _initializers(jobs: list[dict[str, Any]], initializer: Mapping[str, Any]) -> None:
    for rj in jobs:
        step = _labels(rj).get(ANCESTOR_LABEL)
        if step not in (DATASET_INITIALIZER, MODEL_INITIALIZER):
            continue
        rj["replicas"] = 1
        config = initializer.get("dataset" if step == DATASET_INITIALIZER else "model")
        if config is None:
            continue
        for container in _containers(rj, step):
            if config.get("storageUri") is not None:
                _upsert_env(container, [{"name": STORAGE_URI_ENV, "value": config["storageUri"]}])
            _upsert_env(container, list(config.get("env") or ()))
            secret = config.get("secretRef")
            if secret is not None:
                container.setdefault("envFrom", []).append(
                    {"secretRef": {"name": secret.get("name")}}
                )


def _trainer(
    jobs: list[dict[str, Any]], trainer: Mapping[str, Any], launcher_is_node: bool
) -> None:
    for rj in jobs:
        is_trainer = _labels(rj).get(ANCESTOR_LABEL) == TRAINER
        if is_trainer:
            rj["replicas"] = 1
            for container in _containers(rj, NODE):
                for key in ("image", "command", "args"):
                    if trainer.get(key) is not None:
                        container[key] = copy.deepcopy(trainer[key])
        if is_trainer or (launcher_is_node and rj.get("name") == NODE):
            for container in _containers(rj, NODE):
                _upsert_env(container, list(trainer.get("env") or ()))


def child_jobset(trainjob: Mapping[str, Any], runtime: Mapping[str, Any]) -> dict[str, Any]:
    """The JobSet (its `spec`) Kueue derives for `trainjob` from its `runtime` (see the
    module docstring)."""
    runtime_spec = runtime.get("spec") or {}
    spec = copy.deepcopy((runtime_spec.get("template") or {}).get("spec") or {})
    spec = _with_runtime_patches(spec, trainjob)
    jobs: list[dict[str, Any]] = spec["replicatedJobs"]
    ml_policy = runtime_spec.get("mlPolicy")
    trainjob_spec = trainjob.get("spec") or {}
    trainer = trainjob_spec.get("trainer") or {}
    mpi = (ml_policy or {}).get("mpi")
    launcher_is_node = mpi is not None and bool(mpi.get("runLauncherAsNode"))

    per_node = trainer.get("resourcesPerNode")
    if per_node is not None:
        for rj in jobs:
            is_trainer = _labels(rj).get(ANCESTOR_LABEL) == TRAINER and ml_policy is not None
            if is_trainer or (launcher_is_node and rj.get("name") == NODE):
                for container in _containers(rj, NODE)[:1]:
                    _merge_resources(container, per_node)

    for rj, count in zip(jobs, _node_counts(jobs, ml_policy, trainer), strict=True):
        job_spec = rj.setdefault("template", {}).setdefault("spec", {})
        job_spec["parallelism"] = count
        job_spec["completions"] = count

    _initializers(jobs, trainjob_spec.get("initializer") or {})
    _trainer(jobs, trainer, launcher_is_node)
    if ((runtime_spec.get("podGroupPolicy") or {}).get("coscheduling")) is not None:
        name = (trainjob.get("metadata") or {}).get("name")
        for rj in jobs:
            template = rj["template"]["spec"].setdefault("template", {})
            template.setdefault("metadata", {}).setdefault("labels", {})[POD_GROUP_LABEL] = name
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "spec": spec}
