"""`batch/job`: a batch/v1 Job is one Workload with one pod set, `main` (Kueue's
`pkg/controller/jobs/job`).

The pod set counts min(parallelism, completions) pods; with the annotation
`kueue.x-k8s.io/job-min-parallelism` it may be admitted with fewer (partial admission,
its `minCount`), and then runs with the admitted parallelism (and, with
`kueue.x-k8s.io/job-completions-equal-parallelism: "true"`, as many completions).
Eviction suspends the Job first; its template is restored once the Job controller has
stopped its pods (the API server accepts a changed template of a suspended Job only then).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from api.constants import (
    ELASTIC_JOB_ANNOTATION,
    JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION,
    JOB_MIN_PARALLELISM_ANNOTATION,
)
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
from controller.integrations.pods_ready import job_pods_count, job_pods_ready
from controller.kube.client import JOBS

__all__ = ["FRAMEWORK", "Job"]

COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
# Labels the Job controller puts on the template: not copied into the Workload (but
# `batch.kubernetes.io/job-name`), kept when the template is restored.
MANAGED_LABELS = (
    "job-name",
    "controller-uid",
    "batch.kubernetes.io/job-name",
    "batch.kubernetes.io/controller-uid",
)
# What quotagate's Job integration kept on the Job before the job framework (the
# template is restored from the Workload now): dropped when a Job is restored.
LEGACY_ANNOTATIONS = (
    "quotagate.x-k8s.io/original-node-selector",
    "quotagate.x-k8s.io/original-tolerations",
)
_MIN_PARALLELISM_PATH = f"metadata.annotations[{JOB_MIN_PARALLELISM_ANNOTATION}]"
_SYNC_COMPLETIONS_PATH = f"metadata.annotations[{JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION}]"


def _parse_bool(text: str) -> bool | None:
    """Go's `strconv.ParseBool`."""
    if text in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if text in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    return None


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("annotations") or {}


class Job(GenericJob):
    """A batch/v1 Job."""

    restores_while_suspending = False

    @property
    def template(self) -> dict[str, Any]:
        template: dict[str, Any] = self.spec.setdefault("template", {})
        return template

    def pods_count(self) -> int:
        return max(1, job_pods_count(self.obj))

    def min_pods_count(self) -> int | None:
        """The min-parallelism annotation as Kueue reads it (`strconv.Atoi`; None when
        absent or not a number)."""
        text = _annotations(self.obj).get(JOB_MIN_PARALLELISM_ANNOTATION)
        if text is None:
            return None
        try:
            return int(str(text).strip())
        except ValueError:
            return None

    def sync_completions(self) -> bool:
        text = _annotations(self.obj).get(JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION)
        return text is not None and _parse_bool(str(text)) is True

    def pod_sets(self) -> list[dict[str, Any]]:
        template = {**self.template}
        meta = dict(template.get("metadata") or {})
        labels = {
            key: value
            for key, value in (meta.get("labels") or {}).items()
            if key not in MANAGED_LABELS or key == "batch.kubernetes.io/job-name"
        }
        if "labels" in meta:
            meta["labels"] = labels
        template["metadata"] = meta
        pod_set: dict[str, Any] = {"name": "main", "count": self.pods_count(), "template": template}
        minimum = self.min_pods_count()
        if minimum is not None and 0 < minimum <= pod_set["count"]:
            pod_set["minCount"] = minimum
        return [pod_set]

    def is_suspended(self) -> bool:
        return self.spec.get("suspend") is True

    def suspend(self) -> None:
        self.spec["suspend"] = True

    def _set_parallelism(self, count: int) -> None:
        self.spec["parallelism"] = count
        if self.sync_completions():
            self.spec["completions"] = count

    def run_with_pod_sets_info(self, infos: Sequence[PodSetInfo]) -> None:
        self.spec["suspend"] = False
        if len(infos) != 1:
            raise PodSetInfoError(f"expecting 1 pod set, got {len(infos)}")
        if self.min_pods_count() is not None:
            self._set_parallelism(infos[0].count)
        merge(self.template, infos[0])

    def restore_pod_sets_info(self, infos: Sequence[PodSetInfo]) -> bool:
        if not infos:
            return False
        info = infos[0]
        changed = False
        if self.min_pods_count() is not None and self.spec.get("parallelism") != info.count:
            self._set_parallelism(info.count)
            changed = True
        current = (self.template.get("metadata") or {}).get("labels") or {}
        labels = {**info.labels, **{k: v for k, v in current.items() if k in MANAGED_LABELS}}
        restored = PodSetInfo(
            info.name,
            info.count,
            info.annotations,
            labels,
            info.node_selector,
            info.tolerations,
            info.scheduling_gates,
        )
        changed = restore(self.template, restored) or changed
        annotations = self.metadata.get("annotations") or {}
        if any(key in annotations for key in LEGACY_ANNOTATIONS):
            kept = {k: v for k, v in annotations.items() if k not in LEGACY_ANNOTATIONS}
            if kept:
                self.metadata["annotations"] = kept
            else:
                self.metadata.pop("annotations", None)
            changed = True
        return changed

    def template_mutable(self) -> bool:
        """Kubernetes accepts a changed template of a suspended Job that never started or
        whose Suspended condition is True, once no pod is active."""
        status = self.status
        suspended_condition = any(
            c.get("type") == "Suspended" and c.get("status") == "True"
            for c in status.get("conditions") or ()
        )
        return (
            self.is_suspended()
            and (status.get("startTime") is None or suspended_condition)
            and not status.get("active")
        )

    def finished(self) -> Finished | None:
        return finished_by_conditions(self.status, "Complete", "Failed")

    def is_active(self) -> bool:
        return bool(self.status.get("active"))

    def pods_ready(self) -> bool:
        return job_pods_ready(self.obj)

    def topology_hints(self, index: int) -> TopologyHints:
        return TopologyHints(pod_index_label=COMPLETION_INDEX_ANNOTATION)

    def supports_elastic_job(self) -> bool:
        return True

    def topology_templates(self) -> list[TemplateTopology]:
        meta = Path("spec.template.metadata")
        return [TemplateTopology(meta, annotations_of(self.template), self.pods_count())]

    def groups_pod_sets(self) -> bool:
        return False

    def validate_on_create(self) -> list[str]:
        """Kueue's Job webhook: the min-parallelism annotation is a number between 1 and
        the pod count − 1; completions-equal-parallelism is a boolean, for Indexed Jobs
        whose completions equal their parallelism."""
        return self._partial_admission_problems() + self._sync_completion_problems()

    def validate_on_update(self, old: GenericJob) -> list[str]:
        """Kueue's `validateUpdate`: the min-parallelism annotation checked only when it
        changed, completions-equal-parallelism always."""
        problems = []
        if _annotations(self.obj).get(JOB_MIN_PARALLELISM_ANNOTATION) != _annotations(old.obj).get(
            JOB_MIN_PARALLELISM_ANNOTATION
        ):
            problems = self._partial_admission_problems()
        return problems + self._sync_completion_problems()

    def validate_after_update(self, old: GenericJob) -> list[str]:
        """Kueue's `validatePartialAdmissionUpdate`: a running Job with partial admission
        keeps its parallelism; a running Job keeps its completions-equal-parallelism."""
        problems = []
        old_spec = old.obj.get("spec") or {}
        if (
            JOB_MIN_PARALLELISM_ANNOTATION in _annotations(old.obj)
            and old_spec.get("suspend") is not True
            and old_spec.get("parallelism", 1) != self.spec.get("parallelism", 1)
        ):
            problems.append(
                "spec.parallelism: Forbidden: cannot change when partial admission is "
                "enabled and the job is not suspended"
            )
        if (
            old.is_suspended() == self.is_suspended()
            and not self.is_suspended()
            and _sync_completion(old.obj) != _sync_completion(self.obj)
        ):
            problems.append(
                f"{_SYNC_COMPLETIONS_PATH}: Forbidden: field is immutable while the job is "
                "not suspended"
            )
        return problems

    def updates_checked_first(self) -> bool:
        return False

    def _partial_admission_problems(self) -> list[str]:
        text = _annotations(self.obj).get(JOB_MIN_PARALLELISM_ANNOTATION)
        if text is None:
            return []
        problems = []
        count = self.pods_count()
        try:
            value = int(str(text).strip())
        except ValueError:
            problems.append(f'{_MIN_PARALLELISM_PATH}: Invalid value: "{text}": not a number')
        else:
            if value <= 0 or value >= count:
                problems.append(
                    f"{_MIN_PARALLELISM_PATH}: Invalid value: {value}: should be between 0 "
                    f"and {count - 1}"
                )
        if _annotations(self.obj).get(ELASTIC_JOB_ANNOTATION) == "true":
            problems.append(
                f'{_MIN_PARALLELISM_PATH}: Invalid value: "{text}": partial admission and '
                "elastic job cannot be used together"
            )
        return problems

    def _sync_completion_problems(self) -> list[str]:
        sync = _annotations(self.obj).get(JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION)
        if sync is None:
            return []
        enabled = _parse_bool(str(sync))
        if enabled is None:
            return [f'{_SYNC_COMPLETIONS_PATH}: Invalid value: "{sync}": not a boolean']
        problems: list[str] = []
        if enabled:
            if self.spec.get("completionMode", "NonIndexed") != "Indexed":
                problems.append(
                    f'{_SYNC_COMPLETIONS_PATH}: Invalid value: "{sync}": should not be '
                    "enabled for NonIndexed jobs"
                )
            if self.spec.get("parallelism", 1) != self.spec.get("completions", 1):
                problems.append(
                    f"spec.completions: Invalid value: {self.spec.get('completions')}: should "
                    f"be equal to parallelism when {JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION} "
                    "annotation is true"
                )
        return problems


def _sync_completion(obj: Mapping[str, Any]) -> bool:
    """Kueue's `syncCompletionWithParallelism`: the annotation parsed, false if it is not
    a boolean."""
    return (
        _parse_bool(str(_annotations(obj).get(JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION)))
        is True
    )


FRAMEWORK = register(Framework("batch/job", JOBS, job=Job))
