"""`jobset.x-k8s.io/jobset`: a JobSet is one Workload with one pod set per replicatedJob,
named after it, counting replicas × min(parallelism, completions) pods (Kueue's
`pkg/controller/jobs/jobset`).

Admission puts each pod set's flavors into its replicatedJob's pod template and
unsuspends the JobSet; the JobSet controller creates (or updates and resumes) the child
Jobs. Eviction suspends it and restores the templates in the same patch (the JobSet
webhook accepts template changes of a JobSet being suspended). Finished is the JobSet's
`Completed` or `Failed` condition; pods are ready when every child Job is ready or
succeeded. No partial admission, as in Kueue.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

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
from controller.integrations.pods_ready import job_pods_count
from controller.kube.client import Resource

__all__ = ["FRAMEWORK", "JOBSETS", "JobSet"]

JOBSETS = Resource("JobSet", "jobset.x-k8s.io", "v1alpha2", "jobsets", True)
COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
JOB_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"


def pods_per_replica(replicated_job: dict[str, Any]) -> int:
    """min(parallelism, completions) of the replicatedJob's Job template (Kueue's
    `PodsCountPerReplica`)."""
    return job_pods_count(replicated_job.get("template") or {})


def _replicas(replicated_job: dict[str, Any]) -> int:
    replicas = replicated_job.get("replicas")
    return int(replicas) if replicas is not None else 1  # the JobSet CRD's default


class JobSet(GenericJob):
    """A jobset.x-k8s.io/v1alpha2 JobSet."""

    @property
    def replicated_jobs(self) -> list[dict[str, Any]]:
        jobs: list[dict[str, Any]] = self.spec.get("replicatedJobs") or []
        return jobs

    def _template(self, index: int) -> dict[str, Any]:
        job_template = self.replicated_jobs[index].setdefault("template", {})
        template: dict[str, Any] = job_template.setdefault("spec", {}).setdefault("template", {})
        return template

    def pod_sets(self) -> list[dict[str, Any]]:
        return [
            {
                "name": str(rj.get("name")),
                "count": max(1, _replicas(rj) * pods_per_replica(rj)),
                "template": ((rj.get("template") or {}).get("spec") or {}).get("template") or {},
            }
            for rj in self.replicated_jobs
        ]

    def topology_templates(self) -> list[TemplateTopology]:
        return [
            TemplateTopology(
                Path("spec.replicatedJobs")
                .index(i)
                .child("template", "spec", "template", "metadata"),
                annotations_of(pod_set["template"]),
                pod_set["count"],
            )
            for i, pod_set in enumerate(self.pod_sets())
        ]

    def is_suspended(self) -> bool:
        return self.spec.get("suspend") is True

    def suspend(self) -> None:
        self.spec["suspend"] = True

    def run_with_pod_sets_info(self, infos: Sequence[PodSetInfo]) -> None:
        self.spec["suspend"] = False
        if len(infos) != len(self.replicated_jobs):
            raise PodSetInfoError(
                f"expecting {len(self.replicated_jobs)} pod sets, got {len(infos)}"
            )
        for index, info in enumerate(infos):
            merge(self._template(index), info)

    def restore_pod_sets_info(self, infos: Sequence[PodSetInfo]) -> bool:
        if len(infos) != len(self.replicated_jobs):
            return False  # Kueue: a pod set count mismatch restores nothing
        changed = False
        for index, info in enumerate(infos):
            changed = restore(self._template(index), info) or changed
        return changed

    def finished(self) -> Finished | None:
        return finished_by_conditions(self.status, "Completed", "Failed")

    def is_active(self) -> bool:
        return any(int(s.get("active") or 0) > 0 for s in self._statuses())

    def pods_ready(self) -> bool:
        """Every child Job ready or succeeded (Kueue's JobSet `PodsReady`: the sum of the
        replicas against the sum of ready and succeeded Jobs)."""
        replicas = sum(_replicas(rj) for rj in self.replicated_jobs)
        ready = sum(
            int(s.get("ready") or 0) + int(s.get("succeeded") or 0) for s in self._statuses()
        )
        return replicas == ready

    def _statuses(self) -> list[dict[str, Any]]:
        statuses: list[dict[str, Any]] = self.status.get("replicatedJobsStatus") or []
        return statuses

    def topology_hints(self, index: int) -> TopologyHints:
        return TopologyHints(
            pod_index_label=COMPLETION_INDEX_ANNOTATION,
            sub_group_index_label=JOB_INDEX_LABEL,
            sub_group_count=_replicas(self.replicated_jobs[index]),
        )


FRAMEWORK = register(Framework("jobset.x-k8s.io/jobset", JOBSETS, job=JobSet))
