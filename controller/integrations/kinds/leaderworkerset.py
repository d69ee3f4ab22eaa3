"""`leaderworkerset.x-k8s.io/leaderworkerset`: a LeaderWorkerSet is one Workload per
replica (group), `leaderworkerset-<name>-<group index>`, run through the pod integration
as a serving unit (Kueue's `pkg/controller/jobs/leaderworkerset`).

A group's pod sets, with Kueue's names: `leader` (1 pod, the leader template) and
`worker` (size − 1 pods, the worker template) when the LeaderWorkerSet has a leader
template; otherwise `main` (size pods of the worker template, the leader among them).
The webhook marks both templates: the queue, the serving annotation and the pod set each
template's pods belong to (`kueue.x-k8s.io/role-hash`). The LeaderWorkerSet controller
makes a leader StatefulSet and one worker StatefulSet per group; their pods are gated,
and a pod belongs to the Workload of its `leaderworkerset.sigs.k8s.io/group-index`.
Admitted, the leader and the workers are ungated with their own pod set's flavor.

Scaling `spec.replicas` up makes a Workload per new group, each waiting for quota;
scaling down deletes the Workloads of the groups removed once their pods are gone, and
their quota returns.
During a rolling update with `maxSurge` the surge groups get Workloads too (Kueue's
rule). The group size and the templates' shape may not change while queued (Kueue's
webhook with `LWSImmutableGroupSize`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from api.constants import (
    DEFAULT_POD_SET_NAME,
    POD_INDEX_OFFSET_ANNOTATION,
    POD_SET_GROUP_NAME_ANNOTATION,
)
from api.validation.field_errors import Path, aggregate
from api.validation.tas_annotations import TemplateTopology, annotations_of, validate_templates
from controller.integrations.framework.generic_job import TopologyHints
from controller.integrations.framework.registry import Framework, register
from controller.integrations.parent_workloads import parent_integration
from controller.integrations.pod_parents import ParentAdmission, PodParent, shape_problems
from controller.kube.client import Resource

__all__ = [
    "FRAMEWORK",
    "LEADERWORKERSETS",
    "LeaderWorkerSet",
    "LeaderWorkerSetAdmission",
]

LEADERWORKERSETS = Resource(
    "LeaderWorkerSet", "leaderworkerset.x-k8s.io", "v1", "leaderworkersets", True
)
NAME = "leaderworkerset.x-k8s.io/leaderworkerset"
LEADER, WORKER = "leader", "worker"
PREFIX = "leaderworkerset.sigs.k8s.io/"
NAME_LABEL = f"{PREFIX}name"
GROUP_INDEX_LABEL = f"{PREFIX}group-index"
WORKER_INDEX_LABEL = f"{PREFIX}worker-index"
MAX_REPLICAS = 1_000_000  # Kueue's sanity bound on per-replica Workloads
_LWT = "spec.leaderWorkerTemplate"


def _replicas(obj: Mapping[str, Any]) -> int:
    replicas = (obj.get("spec") or {}).get("replicas")
    return int(replicas) if replicas is not None else 1  # the CRD's default


def _size(obj: Mapping[str, Any]) -> int:
    size = ((obj.get("spec") or {}).get("leaderWorkerTemplate") or {}).get("size")
    return int(size) if size is not None else 1  # the CRD's default


def _without_lws_keys(template: Mapping[str, Any]) -> dict[str, Any]:
    """The template as its Workload keeps it: the LeaderWorkerSet's own labels and
    annotations dropped, but its name (Kueue's `dropLWSPrefixedKeys`)."""
    out = dict(template)
    meta = dict(out.get("metadata") or {})
    for field in ("labels", "annotations"):
        if meta.get(field):
            meta[field] = {
                k: v for k, v in meta[field].items() if not k.startswith(PREFIX) or k == NAME_LABEL
            }
    out["metadata"] = meta
    return out


def _topology_templates(obj: Mapping[str, Any]) -> list[TemplateTopology]:
    """The leader's (when there is one) and the workers' templates, with their pod sets'
    counts as Kueue's `podSets` gives them (the workers `size - 1` beside a leader, even
    none), as Kueue's LeaderWorkerSet webhook checks their topology annotations."""
    lwt = (obj.get("spec") or {}).get("leaderWorkerTemplate") or {}
    size = _size(obj)
    templates = []
    worker_count = size
    if lwt.get("leaderTemplate") is not None:
        path = Path(_LWT).child("leaderTemplate", "metadata")
        templates.append(TemplateTopology(path, annotations_of(lwt["leaderTemplate"]), 1))
        worker_count = size - 1
    path = Path(_LWT).child("workerTemplate", "metadata")
    templates.append(
        TemplateTopology(path, annotations_of(lwt.get("workerTemplate")), worker_count)
    )
    return templates


class LeaderWorkerSetAdmission(ParentAdmission):
    """Kueue's LeaderWorkerSet webhook: both templates marked with their pod set; the
    replicas bounded; on update, the queue and priority-class rules, the templates'
    shape and the group size."""

    framework = NAME

    def templates(self, obj: dict[str, Any]) -> list[tuple[dict[str, Any], str | None]]:
        lwt = obj.setdefault("spec", {}).setdefault("leaderWorkerTemplate", {})
        worker = lwt.setdefault("workerTemplate", {})
        if lwt.get("leaderTemplate") is not None:
            return [(lwt["leaderTemplate"], LEADER), (worker, WORKER)]
        return [(worker, DEFAULT_POD_SET_NAME)]

    def default(self, obj: dict[str, Any]) -> None:
        """The templates marked; with a leader template, the workers' pod index offset
        (`kueue.x-k8s.io/pod-index-offset: "1"`: their worker index counts the leader,
        their pod set does not), unless they share a `podset-group-name` with the leader
        (the ranks then count on from the leader's), as Kueue's webhook does."""
        super().default(obj)
        lwt = (obj.get("spec") or {}).get("leaderWorkerTemplate") or {}
        if self.managed_by_another(obj) or lwt.get("leaderTemplate") is None:
            return
        annotations = lwt["workerTemplate"].setdefault("metadata", {}).setdefault("annotations", {})
        if POD_SET_GROUP_NAME_ANNOTATION not in annotations:
            annotations[POD_INDEX_OFFSET_ANNOTATION] = "1"

    def validate_create(self, obj: Mapping[str, Any]) -> list[str]:
        """The replicas in Kueue's range, and the templates' topology annotations."""
        problems = []
        replicas = _replicas(obj)
        if not 0 <= replicas <= MAX_REPLICAS:
            problems.append(
                f"spec.replicas: Invalid value: {replicas}: invalid LeaderWorkerSet replicas: "
                f"must be between 0 and {MAX_REPLICAS}"
            )
        errors = validate_templates(_topology_templates(obj))
        return [*problems, aggregate(errors)] if errors else problems

    def refusals(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
        lwt_new = (new.get("spec") or {}).get("leaderWorkerTemplate") or {}
        lwt_old = (old.get("spec") or {}).get("leaderWorkerTemplate") or {}
        problems = self.validate_create(new)
        problems += shape_problems(
            lwt_new.get("leaderTemplate"), lwt_old.get("leaderTemplate"), f"{_LWT}.leaderTemplate"
        )
        problems += shape_problems(
            lwt_new.get("workerTemplate") or {},
            lwt_old.get("workerTemplate") or {},
            f"{_LWT}.workerTemplate",
        )
        if _size(new) != _size(old):
            problems.append(f"{_LWT}.size: Invalid value: {_size(new)}: field is immutable")
        return problems


class LeaderWorkerSet(PodParent):
    """A LeaderWorkerSet's Workloads, one per group."""

    framework = NAME

    def _groups(self) -> int:
        """spec.replicas, or the groups there are during a rolling update with surge
        (Kueue's `filterWorkloads`)."""
        replicas = _replicas(self.obj)
        status = self.obj.get("status") or {}
        config = (self.spec.get("rolloutStrategy") or {}).get("rollingUpdateConfiguration") or {}
        surge = str(config.get("maxSurge", 0))
        with_surge = surge.isdigit() and int(surge) > 0
        current = int(status.get("replicas") or 0)
        if with_surge and int(status.get("updatedReplicas") or 0) < replicas < current:
            return current
        return replicas

    def pod_sets(self) -> list[dict[str, Any]]:
        """Kueue's `podSets`: leader and workers, or `main`. A worker pod set of no pods
        (a leader template and size 1) is left out: a Workload's pod sets count at least
        one pod here."""
        lwt = self.spec.get("leaderWorkerTemplate") or {}
        worker = _without_lws_keys(lwt.get("workerTemplate") or {})
        size = _size(self.obj)
        if lwt.get("leaderTemplate") is None:
            return [{"name": DEFAULT_POD_SET_NAME, "count": size, "template": worker}]
        pod_sets = [
            {"name": LEADER, "count": 1, "template": _without_lws_keys(lwt["leaderTemplate"])}
        ]
        if size > 1:
            pod_sets.append({"name": WORKER, "count": size - 1, "template": worker})
        return pod_sets

    def workloads(self) -> dict[str, list[dict[str, Any]]]:
        name = str(self.obj["metadata"]["name"])
        pod_sets = self.pod_sets()
        return {
            replica_workload_name(name, index): pod_sets
            for index in range(min(self._groups(), MAX_REPLICAS))
        }

    def pod_selector(self, workload: str) -> str | None:
        index = workload.rsplit("-", 1)[1]
        return f"{NAME_LABEL}={self.obj['metadata']['name']},{GROUP_INDEX_LABEL}={index}"

    def topology_hints(self, pod_set: str) -> TopologyHints:
        if pod_set == LEADER:
            return TopologyHints()
        return TopologyHints(pod_index_label=WORKER_INDEX_LABEL)


def replica_workload_name(name: object, index: object) -> str:
    """A replica's Workload: `leaderworkerset-<name>-<index>`. Not Kueue's name, which adds
    a hash of the LeaderWorkerSet's uid (`workload_names.py`): its pods, through which the
    pod integration finds their Workload, do not carry that uid."""
    return f"leaderworkerset-{name}-{index}"[:253]


def pod_workload(pod: Mapping[str, Any]) -> str | None:
    """The Workload of the pod's group: its LeaderWorkerSet's name and group index labels
    (set by the LeaderWorkerSet controller's pod webhook)."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    name, index = labels.get(NAME_LABEL), labels.get(GROUP_INDEX_LABEL)
    if not name or index is None:
        return None
    return replica_workload_name(name, index)


FRAMEWORK = register(
    Framework(
        NAME,
        LEADERWORKERSETS,
        integration=parent_integration(LeaderWorkerSet),
        admission=LeaderWorkerSetAdmission(),
        pod_workload=pod_workload,
        implies=("pod",),
    )
)
