"""The one interface every job integration implements (Kueue's `jobframework.GenericJob`).

A `GenericJob` wraps one object of its kind (a plain dict, as the API server sends it)
and answers the framework's questions about it, changing the wrapped copy in place where
Kueue's changes the object: its pod sets, whether it is suspended, suspend it, run it with
each pod set's admitted flavors in its template and restore the template on eviction,
whether it finished (and how), whether pods are active, whether they are ready. The
generic reconciler (`reconciler.py`) and the webhook (`webhook.py`) do everything else
from these answers: the Workload, the Kueue labels and annotations, admission, eviction,
finishing, `waitForPodsReady`, `maximumExecutionTimeSeconds`.

An adapter is pure: no API calls, no clock; objects of other kinds it needs (its
framework's `related` kinds, such as a TrainJob's TrainingRuntime) come from a cache
(`related`). The optional hooks have Kueue's defaults.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from api.validation.tas_annotations import TemplateTopology
from controller.integrations.framework.podset_info import PodSetInfo, PodSetInfoError
from controller.integrations.framework.related import (
    RelatedLookup,
    RelatedObjectMissing,
    no_related,
)

__all__ = [
    "Finished",
    "GenericJob",
    "PodSetInfoError",
    "RelatedObjectMissing",
    "TopologyHints",
    "finished_by_conditions",
]


@dataclass(frozen=True, slots=True)
class Finished:
    """A finished job: whether it succeeded, and its condition's message."""

    success: bool
    message: str = ""


def finished_by_conditions(
    status: Mapping[str, Any], succeeded: str, failed: str
) -> Finished | None:
    """How a job whose status has Kubernetes conditions finished: its `succeeded` or
    `failed` condition True, with that condition's message (None: neither)."""
    for condition in status.get("conditions") or ():
        if condition.get("status") != "True":
            continue
        if condition.get("type") in (succeeded, failed):
            return Finished(condition.get("type") == succeeded, str(condition.get("message") or ""))
    return None


@dataclass(frozen=True, slots=True)
class TopologyHints:
    """What a kind adds to a pod set's `topologyRequest` when a topology annotation asks
    for one (Kueue's `NewPodSetTopologyRequest(...).PodIndexLabel(...).SubGroup(...)`)."""

    pod_index_label: str | None = None
    sub_group_index_label: str | None = None
    sub_group_count: int | None = None


class GenericJob(ABC):
    """One job object as the framework sees it. Subclasses wrap their kind's object."""

    #: Whether the API server accepts the template restored in the same patch that
    #: suspends the job (a JobSet does; a batch/v1 Job only once it is suspended and its
    #: pods are gone: `template_mutable`).
    restores_while_suspending: ClassVar[bool] = True

    def __init__(self, obj: dict[str, Any], related: RelatedLookup = no_related) -> None:
        self.obj = obj
        self.related = related
        """Where the objects of the framework's `related` kinds are looked up (read only);
        a method that needs one that is missing raises `RelatedObjectMissing`."""

    # -- identity ---------------------------------------------------------------------------

    @property
    def metadata(self) -> dict[str, Any]:
        meta: dict[str, Any] = self.obj.setdefault("metadata", {})
        return meta

    @property
    def spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self.obj.setdefault("spec", {})
        return spec

    @property
    def status(self) -> Mapping[str, Any]:
        return self.obj.get("status") or {}

    # -- what Kueue's GenericJob requires ---------------------------------------------------

    @abstractmethod
    def pod_sets(self) -> list[dict[str, Any]]:
        """The Workload's pod sets: `name`, `count`, `template` (a copy) and, for partial
        admission, `minCount`; in the order `run_with_pod_sets_info` expects them."""

    @abstractmethod
    def is_suspended(self) -> bool: ...

    @abstractmethod
    def suspend(self) -> None: ...

    @abstractmethod
    def run_with_pod_sets_info(self, infos: Sequence[PodSetInfo]) -> None:
        """Unsuspend, with each pod set's admitted info merged into its template (and, for
        a kind that takes partial admission, the admitted counts). Raises
        `PodSetInfoError` when the infos do not fit the job."""

    @abstractmethod
    def restore_pod_sets_info(self, infos: Sequence[PodSetInfo]) -> bool:
        """Put the templates (and counts) back to `infos`, the pod sets the Workload was
        made from; whether anything changed."""

    @abstractmethod
    def finished(self) -> Finished | None:
        """How the job finished, or None while it has not."""

    @abstractmethod
    def is_active(self) -> bool:
        """Whether any of its pods is running (an evicted Workload is released only once
        none is)."""

    @abstractmethod
    def pods_ready(self) -> bool:
        """Whether all its pods are ready or succeeded (the `PodsReady` condition)."""

    # -- optional hooks (Kueue's optional interfaces), with Kueue's defaults ----------------

    def template_mutable(self) -> bool:
        """Whether the API server accepts a changed pod template now (the job being
        suspended): eviction restores the template only then."""
        return self.is_suspended()

    def priority_class(self) -> str | None:
        """The PriorityClass behind the Workload's priority when no WorkloadPriorityClass
        label names one (Kueue's `JobWithPriorityClass`; by default the first pod set's
        `priorityClassName`)."""
        for pod_set in self.pod_sets():
            name = ((pod_set.get("template") or {}).get("spec") or {}).get("priorityClassName")
            if name:
                return str(name)
        return None

    def topology_hints(self, index: int) -> TopologyHints:
        """What the kind adds to pod set `index`'s topology request."""
        return TopologyHints()

    def default(self) -> None:
        """What the kind's webhook changes on a queued object being created, beyond
        suspending it (Kueue's per-kind `Default`); nothing by default."""
        return None

    def topology_templates(self) -> list[TemplateTopology]:
        """The pod templates whose topology annotations Kueue's webhook checks for this
        kind (`ValidateTASPodSetRequest`), each with the path of its metadata and its pod
        set's count; none by default (a kind without pod templates of its own)."""
        return []

    def groups_pod_sets(self) -> bool:
        """Whether Kueue's webhook of this kind checks `podset-group-name` across its pod
        sets (`ValidatePodSetGroupingTopology`); the Job's, of one template, does not, and
        checks the slice bound only when the template's request is valid."""
        return True

    def validate_on_create(self) -> list[str]:
        """Why the webhook refuses the object on creation, each `field: message` (Kueue's
        `JobWithCustomValidation`); empty: allowed."""
        return []

    def validate_on_update(self, old: GenericJob) -> list[str]:
        """The kind's own checks of the new object on an update from `old`; by default its
        create checks, as most of Kueue's webhooks run them on every update."""
        return self.validate_on_create()

    def validate_after_update(self, old: GenericJob) -> list[str]:
        """The kind's own update rules, checked after Kueue's common ones (the Job's
        partial-admission rules); none by default."""
        return []

    def updates_checked_first(self) -> bool:
        """Whether Kueue's webhook of this kind reports the common update rules
        (`ValidateJobOnUpdate`) before the create checks of the new object (JobSet,
        MPIJob, RayCluster, RayJob, TrainJob) or after them (the Job)."""
        return True

    def supports_elastic_job(self) -> bool:
        """Whether Kueue runs the kind as an elastic job (`kueue.x-k8s.io/elastic-job`);
        for the others Kueue's webhook refuses the annotation, and so does quotagate's.
        quotagate implements no Workload slices: on a kind Kueue supports, the annotation
        is reported (a Warning Event) and the job runs at the size it was admitted with."""
        return False

    def skip(self) -> bool:
        """Whether the object is not queued although it is queue-labelled (Kueue's
        `JobWithSkip`: a RayJob on an existing cluster): no Workload, never suspended."""
        return False

    def is_on_hold(self) -> bool:
        """Whether the job asks for its Workload to be put on hold (Kueue's
        `JobWithOnHold`): its quota reservation released with QuotaReserved=False
        `OnHold`, and it is not queued again while it stays so."""
        return False

    def supports_prebuilt_workload(self) -> bool:
        """Whether the kind runs under a prebuilt Workload (Kueue's
        `supportedPrebuiltWlJobGVKs`)."""
        return True
