"""`trainer.kubeflow.org/trainjob`: a Kubeflow Trainer v2 TrainJob is one Workload with the
pod sets of the JobSet the Trainer runs for it — one per replicatedJob of its runtime,
named after it (Kueue's `pkg/controller/jobs/trainjob`).

That JobSet is derived from the TrainingRuntime or ClusterTrainingRuntime the TrainJob
names (`controller/integrations/trainer_runtime.py`), so the runtimes are the framework's
`related` kinds: a TrainJob whose runtime does not exist waits for it.

Admission goes where Kueue puts it: into the TrainJob's runtime patch of manager
`kueue.x-k8s.io/manager` (`spec.runtimePatches`), one replicatedJob patch per pod set with
the pod set's labels, annotations, node selector, tolerations and scheduling gates, written
with `suspend: false` in one request (the Trainer's webhook accepts a runtime patch changed
by the request that resumes the TrainJob); the Trainer merges it into the JobSet it resumes.
Eviction suspends the TrainJob and, once its jobs are no longer active (the Trainer's
webhook refuses a changed runtime patch before), empties that patch. Finished is the
TrainJob's `Complete` or `Failed` condition; pods are ready when every child Job is ready or
succeeded. No partial admission, as in Kueue.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from controller.integrations.framework.generic_job import (
    Finished,
    GenericJob,
    RelatedObjectMissing,
    TopologyHints,
    finished_by_conditions,
)
from controller.integrations.framework.podset_info import PodSetInfo, PodSetInfoError
from controller.integrations.framework.registry import Framework, register
from controller.integrations.kinds.jobset import JobSet
from controller.integrations.trainer_runtime import (
    CLUSTER_TRAINING_RUNTIME,
    UnsupportedRuntime,
    child_jobset,
    runtime_ref,
)
from controller.kube.client import Resource

__all__ = [
    "CLUSTER_TRAINING_RUNTIMES",
    "FRAMEWORK",
    "KUEUE_PATCH_MANAGER",
    "TRAINING_RUNTIMES",
    "TRAINJOBS",
    "TrainJob",
]

TRAINJOBS = Resource("TrainJob", "trainer.kubeflow.org", "v1alpha1", "trainjobs", True)
TRAINING_RUNTIMES = Resource(
    "TrainingRuntime", "trainer.kubeflow.org", "v1alpha1", "trainingruntimes", True
)
CLUSTER_TRAINING_RUNTIMES = Resource(
    "ClusterTrainingRuntime", "trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes", False
)
KUEUE_PATCH_MANAGER = "kueue.x-k8s.io/manager"


def _replicated_job_patch(info: PodSetInfo) -> dict[str, Any]:
    """One pod set's admission as a replicatedJob patch (Kueue's `ReplicatedJobPatch`)."""
    metadata: dict[str, Any] = {}
    if info.annotations:
        metadata["annotations"] = dict(info.annotations)
    if info.labels:
        metadata["labels"] = dict(info.labels)
    spec: dict[str, Any] = {}
    if info.node_selector:
        spec["nodeSelector"] = dict(info.node_selector)
    if info.tolerations:
        spec["tolerations"] = [dict(t) for t in info.tolerations]
    if info.scheduling_gates:
        spec["schedulingGates"] = [dict(g) for g in info.scheduling_gates]
    return {
        "name": info.name,
        "template": {"spec": {"template": {"metadata": metadata, "spec": spec}}},
    }


class TrainJob(GenericJob):
    """A trainer.kubeflow.org/v1alpha1 TrainJob."""

    restores_while_suspending = False

    def _runtime(self) -> Mapping[str, Any]:
        """The runtime the TrainJob names, from the cache."""
        try:
            kind, name = runtime_ref(self.obj)
        except UnsupportedRuntime as exc:
            raise RelatedObjectMissing(str(exc)) from None
        if kind == CLUSTER_TRAINING_RUNTIME:
            found = self.related(CLUSTER_TRAINING_RUNTIMES, None, name)
        else:
            found = self.related(TRAINING_RUNTIMES, self.metadata.get("namespace"), name)
        if found is None:
            raise RelatedObjectMissing(f"runtime '{name}' not found ({kind})")
        return found

    def child(self) -> JobSet:
        """The JobSet the Trainer runs for this TrainJob, as Kueue derives it."""
        return JobSet(child_jobset(self.obj, self._runtime()))

    def pod_sets(self) -> list[dict[str, Any]]:
        return self.child().pod_sets()

    def is_suspended(self) -> bool:
        return self.spec.get("suspend") is True

    def suspend(self) -> None:
        self.spec["suspend"] = True

    def _kueue_patch(self) -> dict[str, Any] | None:
        """The runtime patch Kueue's admissions go in (None: the TrainJob has none)."""
        for patch in self.spec.get("runtimePatches") or ():
            if patch.get("manager") == KUEUE_PATCH_MANAGER:
                found: dict[str, Any] = patch
                return found
        return None

    def run_with_pod_sets_info(self, infos: Sequence[PodSetInfo]) -> None:
        """Kueue writes the admission into its runtime patch, whose entry its webhook
        created with the TrainJob; a TrainJob created without it (before the webhook, or
        suspended by its author) gets it now, where Kueue's would not start."""
        jobs = self.child().replicated_jobs
        if len(infos) != len(jobs):
            raise PodSetInfoError(f"expecting {len(jobs)} pod sets, got {len(infos)}")
        patch = self._kueue_patch()
        if patch is None:  # as Kueue's webhook creates it
            patch = {
                "manager": KUEUE_PATCH_MANAGER,
                "trainingRuntimeSpec": {"template": {"spec": {}}},
            }
            self.spec.setdefault("runtimePatches", []).append(patch)
        template = patch.setdefault("trainingRuntimeSpec", {}).setdefault("template", {})
        template.setdefault("spec", {})["replicatedJobs"] = [
            _replicated_job_patch(info) for info in infos
        ]
        self.spec["suspend"] = False

    def restore_pod_sets_info(self, infos: Sequence[PodSetInfo]) -> bool:
        """Empty Kueue's runtime patch (Kueue's `RestorePodSetsInfo`: the runtime's own
        templates are untouched); whether it held anything."""
        patch = self._kueue_patch()
        spec = (((patch or {}).get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec")
        if not spec or not spec.get("replicatedJobs"):
            return False
        del spec["replicatedJobs"]
        return True

    def template_mutable(self) -> bool:
        """The Trainer's webhook accepts a changed runtime patch of a suspended TrainJob
        once its JobSet has no active Job."""
        return self.is_suspended() and not self.is_active()

    def finished(self) -> Finished | None:
        return finished_by_conditions(self.status, "Complete", "Failed")

    def _jobs_status(self) -> list[Mapping[str, Any]]:
        statuses: list[Mapping[str, Any]] = self.status.get("jobsStatus") or []
        return statuses

    def is_active(self) -> bool:
        return any(int(s.get("active") or 0) > 0 for s in self._jobs_status())

    def pods_ready(self) -> bool:
        """Every child Job ready or succeeded (Kueue's TrainJob `PodsReady`: the derived
        JobSet's replicas against the ready and succeeded Jobs of `status.jobsStatus`);
        False while the runtime is missing."""
        try:
            child = self.child()
        except RelatedObjectMissing:
            return False
        replicas = sum(int(rj.get("replicas", 1)) for rj in child.replicated_jobs)
        ready = sum(
            int(s.get("ready") or 0) + int(s.get("succeeded") or 0) for s in self._jobs_status()
        )
        return replicas == ready

    def topology_hints(self, index: int) -> TopologyHints:
        return self.child().topology_hints(index)


FRAMEWORK = register(
    Framework(
        "trainer.kubeflow.org/trainjob",
        TRAINJOBS,
        job=TrainJob,
        related=(TRAINING_RUNTIMES, CLUSTER_TRAINING_RUNTIMES),
    )
)
