"""`kubeflow.org/mpijob`: an MPI operator v2beta1 MPIJob is one Workload with a pod set per
replica type, `launcher` then `worker` (those the MPIJob has), each counting its replicas
(default 1) (Kueue's `pkg/controller/jobs/mpijob`).

Admission merges each pod set's flavors into its replica's pod template and resumes the
MPIJob (`spec.runPolicy.suspend`); the MPI operator creates the workers from their
template and, resuming a suspended launcher Job, copies the launcher template's scheduling
directives into it. Eviction suspends the MPIJob and restores the templates in the same
patch. Finished is the MPIJob's `Succeeded` or `Failed` condition; pods are ready when its
`Running` condition is True. The Workload's PriorityClass is
`spec.runPolicy.schedulingPolicy.priorityClass`, else the launcher's, else the workers'.
No partial admission, as in Kueue.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from api.constants import POD_INDEX_OFFSET_ANNOTATION, POD_SET_GROUP_NAME_ANNOTATION
from api.validation.field_errors import Path
from api.validation.tas_annotations import TemplateTopology, annotations_of
from controller.integrations.framework.generic_job import (
    Finished,
    GenericJob,
    TopologyHints,
    finished_by_conditions,
)
from controller.integrations.framework.podset_info import (
    PodSetInfo,
    PodSetInfoError,
    merge,
    restore,
)
from controller.integrations.framework.registry import Framework, register
from controller.kube.client import Resource

__all__ = ["FRAMEWORK", "MPIJOBS", "MPIJob"]

MPIJOBS = Resource("MPIJob", "kubeflow.org", "v2beta1", "mpijobs", True)
REPLICA_TYPES = ("Launcher", "Worker")  # Kueue's `orderedReplicaTypes`
REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"


class MPIJob(GenericJob):
    """A kubeflow.org/v2beta1 MPIJob."""

    @property
    def run_policy(self) -> dict[str, Any]:
        policy: dict[str, Any] = self.spec.setdefault("runPolicy", {})
        return policy

    def _replica_specs(self) -> list[tuple[str, dict[str, Any]]]:
        """(replica type, its spec) of the replica types the MPIJob has, launcher first."""
        specs = self.spec.get("mpiReplicaSpecs") or {}
        return [(kind, specs[kind]) for kind in REPLICA_TYPES if specs.get(kind) is not None]

    def _template(self, replica: dict[str, Any]) -> dict[str, Any]:
        template: dict[str, Any] = replica.setdefault("template", {})
        return template

    def pod_sets(self) -> list[dict[str, Any]]:
        return [
            {
                "name": kind.lower(),
                "count": int(replica["replicas"]) if replica.get("replicas") is not None else 1,
                "template": replica.get("template") or {},
            }
            for kind, replica in self._replica_specs()
        ]

    def topology_templates(self) -> list[TemplateTopology]:
        return [
            TemplateTopology(
                Path("spec.mpiReplicaSpecs").key(kind).child("template", "metadata"),
                annotations_of(pod_set["template"]),
                pod_set["count"],
            )
            for (kind, _), pod_set in zip(self._replica_specs(), self.pod_sets(), strict=True)
        ]

    def is_suspended(self) -> bool:
        return (self.spec.get("runPolicy") or {}).get("suspend") is True

    def suspend(self) -> None:
        self.run_policy["suspend"] = True

    def run_with_pod_sets_info(self, infos: Sequence[PodSetInfo]) -> None:
        self.run_policy["suspend"] = False
        replicas = self._replica_specs()
        if len(infos) != len(replicas):
            raise PodSetInfoError(f"expecting {len(replicas)} pod sets, got {len(infos)}")
        for (_, replica), info in zip(replicas, infos, strict=True):
            merge(self._template(replica), info)

    def restore_pod_sets_info(self, infos: Sequence[PodSetInfo]) -> bool:
        replicas = self._replica_specs()
        if len(infos) != len(replicas):
            return False  # Kueue: a pod set count mismatch restores nothing
        changed = False
        for (_, replica), info in zip(replicas, infos, strict=True):
            changed = restore(self._template(replica), info) or changed
        return changed

    def finished(self) -> Finished | None:
        return finished_by_conditions(self.status, "Succeeded", "Failed")

    def is_active(self) -> bool:
        statuses = self.status.get("replicaStatuses") or {}
        return any(int((status or {}).get("active") or 0) != 0 for status in statuses.values())

    def pods_ready(self) -> bool:
        """The MPIJob's `Running` condition is True (the launcher runs and every worker)."""
        return any(
            c.get("type") == "Running" and c.get("status") == "True"
            for c in self.status.get("conditions") or ()
        )

    def priority_class(self) -> str | None:
        """`runPolicy.schedulingPolicy.priorityClass`, else the launcher's
        `priorityClassName`, else the workers' (Kueue's, after the MPI operator's)."""
        scheduling = (self.spec.get("runPolicy") or {}).get("schedulingPolicy") or {}
        if scheduling.get("priorityClass"):
            return str(scheduling["priorityClass"])
        for _, replica in self._replica_specs():
            name = ((replica.get("template") or {}).get("spec") or {}).get("priorityClassName")
            if name:
                return str(name)
        return None

    def topology_hints(self, index: int) -> TopologyHints:
        return TopologyHints(pod_index_label=REPLICA_INDEX_LABEL)

    def default(self) -> None:
        """With `runLauncherAsWorker`, the launcher is rank 0 and the workers' replica
        indexes count from 1: the worker template gets `kueue.x-k8s.io/pod-index-offset:
        "1"` so that the topology ungater ranks them from 0 (Kueue's MPIJob webhook; not
        when the launcher's template names a pod set group, whose ranks the ungater
        offsets itself)."""
        specs = self.spec.get("mpiReplicaSpecs") or {}
        launcher, worker = specs.get("Launcher"), specs.get("Worker")
        if self.spec.get("runLauncherAsWorker") is not True or launcher is None or worker is None:
            return
        launcher_annotations = ((launcher.get("template") or {}).get("metadata") or {}).get(
            "annotations"
        ) or {}
        if POD_SET_GROUP_NAME_ANNOTATION in launcher_annotations:
            return
        meta = self._template(worker).setdefault("metadata", {})
        meta.setdefault("annotations", {})[POD_INDEX_OFFSET_ANNOTATION] = "1"


FRAMEWORK = register(Framework("kubeflow.org/mpijob", MPIJOBS, job=MPIJob))
