"""`ray.io/raycluster`: a KubeRay RayCluster is one Workload with a pod set `head` (1 pod)
and one per worker group, named after the group (lower-cased), counting its replicas ×
numOfHosts (Kueue's `pkg/controller/jobs/raycluster`).

The head pod set accounts for what KubeRay adds to the head pod beyond its template, as
Kueue does: the Redis cleanup Job's requests when GCS fault tolerance is on (the Ray
container's requests raised to at least 200m cpu and 256Mi memory) and the autoscaler
sidecar when in-tree autoscaling is on. Admission puts each pod set's flavors into the
head's and each worker group's template and unsuspends the cluster; KubeRay creates the
pods. Eviction suspends it and restores the templates in the same patch (KubeRay deletes
the pods). A RayCluster never finishes (Kueue: "technically a RayCluster is never
finished"); it is active and its pods ready while its state is `ready`.

The helpers here are the RayJob's too (`rayjob.py`): a RayJob's cluster spec has the same
pod sets. A RayCluster a queue-labelled RayJob created (KubeRay copies the RayJob's labels)
is the RayJob's, not a Workload of its own: the job framework's ancestor rule
(`framework/ancestors.py`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from api.quantities import Quantity
from api.validation.field_errors import Path
from api.validation.tas_annotations import TemplateTopology, annotations_of
from controller.integrations.framework.generic_job import Finished, GenericJob
from controller.integrations.framework.podset_info import (
    PodSetInfo,
    PodSetInfoError,
    merge,
    restore,
)
from controller.integrations.framework.registry import Framework, register
from controller.kube.client import Resource

__all__ = [
    "FRAMEWORK",
    "HEAD",
    "RAYCLUSTERS",
    "RayCluster",
    "build_pod_sets",
    "expected_pod_sets_count",
    "restore_cluster_spec",
    "run_cluster_spec",
    "validate_cluster_spec",
]

RAYCLUSTERS = Resource("RayCluster", "ray.io", "v1", "rayclusters", True)
HEAD = "head"
"""The head group's pod set (Kueue's `headGroupPodSetName`); no worker group may use it."""
READY = "ready"
"""KubeRay's `rayv1.Ready` cluster state."""
MAX_POD_SETS = 18
"""Kueue's `jobframework.MaxPodSets`: the most pod sets a Workload may have."""
FT_ENABLED_ANNOTATION = "ray.io/ft-enabled"
REDIS_CLEANUP_REQUESTS = {"cpu": "200m", "memory": "256Mi"}
"""What KubeRay's Redis cleanup Job requests (GCS fault tolerance), hard-coded in KubeRay."""
AUTOSCALER_CONTAINER = "autoscaler"
AUTOSCALER_RESOURCES = {
    "requests": {"cpu": "500m", "memory": "512Mi"},
    "limits": {"cpu": "500m", "memory": "512Mi"},
}
"""KubeRay's autoscaler sidecar, when `autoscalerOptions.resources` does not set them."""


def _worker_count(group: Mapping[str, Any]) -> int:
    """replicas (1 when absent, as Kueue's `effectiveWorkerCount`; the CRD defaults it to
    0) × numOfHosts when above 1."""
    replicas = group.get("replicas")
    count = int(replicas) if replicas is not None else 1
    hosts = int(group.get("numOfHosts") or 0)
    return count * hosts if hosts > 1 else count


def _gcs_fault_tolerance(spec: Mapping[str, Any], annotations: Mapping[str, str]) -> bool:
    """KubeRay's `IsGCSFaultToleranceEnabled`."""
    flag = str(annotations.get(FT_ENABLED_ANNOTATION, "")).lower() == "true"
    return flag or spec.get("gcsFaultToleranceOptions") is not None


def _keep_max(requests: Mapping[str, Any], extra: Mapping[str, str]) -> dict[str, Any]:
    """Kueue's `MergeResourceListKeepMax`: every resource of both, the larger value."""
    merged = dict(requests)
    for name, value in extra.items():
        if name not in merged or Quantity.parse(merged[name]) < Quantity.parse(value):
            merged[name] = value
    return merged


def _head_template(spec: Mapping[str, Any], annotations: Mapping[str, str]) -> dict[str, Any]:
    template = copy.deepcopy(((spec.get("headGroupSpec") or {}).get("template")) or {})
    pod = template.setdefault("spec", {})
    containers = pod.setdefault("containers", [])
    if _gcs_fault_tolerance(spec, annotations) and containers:
        resources = containers[0].setdefault("resources", {})
        resources["requests"] = _keep_max(resources.get("requests") or {}, REDIS_CLEANUP_REQUESTS)
    if spec.get("enableInTreeAutoscaling") is True:
        options = spec.get("autoscalerOptions") or {}
        resources = options.get("resources")
        containers.append(
            {
                "name": AUTOSCALER_CONTAINER,
                "resources": copy.deepcopy(
                    resources if resources is not None else AUTOSCALER_RESOURCES
                ),
            }
        )
    return template


def build_pod_sets(spec: Mapping[str, Any], annotations: Mapping[str, str]) -> list[dict[str, Any]]:
    """The pod sets of a RayCluster spec (Kueue's `BuildPodSets`): `head`, then one per
    worker group in order."""
    pod_sets = [{"name": HEAD, "count": 1, "template": _head_template(spec, annotations)}]
    for group in spec.get("workerGroupSpecs") or ():
        pod_sets.append(
            {
                "name": str(group.get("groupName", "")).lower(),
                "count": _worker_count(group),
                "template": copy.deepcopy(group.get("template") or {}),
            }
        )
    return pod_sets


def topology_templates(spec: Mapping[str, Any], spec_path: Path) -> list[TemplateTopology]:
    """The head's and each worker group's template, as Kueue's Ray webhooks check their
    topology annotations (`ValidateTopologyRequest`), under `spec_path`."""
    head = spec.get("headGroupSpec") or {}
    templates = [
        TemplateTopology(
            spec_path.child("headGroupSpec", "template", "metadata"),
            annotations_of(head.get("template")),
            1,
        )
    ]
    for i, group in enumerate(spec.get("workerGroupSpecs") or ()):
        templates.append(
            TemplateTopology(
                spec_path.child("workerGroupSpecs").index(i).child("template", "metadata"),
                annotations_of(group.get("template")),
                _worker_count(group),
            )
        )
    return templates


def expected_pod_sets_count(spec: Mapping[str, Any]) -> int:
    return len(spec.get("workerGroupSpecs") or ()) + 1


def _templates(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The head's and each worker group's pod template, in pod set order (in place)."""
    head: dict[str, Any] = spec.setdefault("headGroupSpec", {}).setdefault("template", {})
    workers = [group.setdefault("template", {}) for group in spec.get("workerGroupSpecs") or ()]
    return [head, *workers]


def run_cluster_spec(spec: dict[str, Any], infos: Sequence[PodSetInfo]) -> None:
    """Merge each pod set's admitted info into its template (Kueue's
    `UpdateRayClusterSpecToRunWithPodSetsInfo`); `infos` starts with the cluster's."""
    for template, info in zip(_templates(spec), infos, strict=False):
        merge(template, info)


def restore_cluster_spec(spec: dict[str, Any], infos: Sequence[PodSetInfo]) -> bool:
    """Put the templates back (Kueue's `RestorePodSetsInfo`); nothing when the count of
    pod sets is not the cluster's."""
    if len(infos) != expected_pod_sets_count(spec):
        return False
    changed = False
    for template, info in zip(_templates(spec), infos, strict=True):
        changed = restore(template, info) or changed
    return changed


def validate_cluster_spec(spec: Mapping[str, Any], path: str) -> list[str]:
    """Kueue's checks of a queued RayCluster spec (`raycluster.ValidateCreate`): no
    in-tree autoscaling (Kueue allows it only for an elastic job, and quotagate implements
    no Workload slices), at most 18 pod sets, no worker group named `head`."""
    problems = []
    if spec.get("enableInTreeAutoscaling") is True:
        problems.append(
            f"{path}.enableInTreeAutoscaling: Invalid value: true: a kueue managed job should "
            "only use autoscaling when workload slicing is enabled (quotagate implements no "
            "Workload slices)"
        )
    count = expected_pod_sets_count(spec)
    if count > MAX_POD_SETS:
        problems.append(
            f"{path}.workerGroupSpecs: Too many: {count}: must have at most {MAX_POD_SETS} items"
        )
    for index, group in enumerate(spec.get("workerGroupSpecs") or ()):
        if group.get("groupName") == HEAD:
            problems.append(
                f"{path}.workerGroupSpecs[{index}].groupName: Forbidden: "
                f'"{HEAD}" is reserved for the head group'
            )
    return problems


class RayCluster(GenericJob):
    """A ray.io/v1 RayCluster."""

    def pod_sets(self) -> list[dict[str, Any]]:
        return build_pod_sets(self.spec, self.metadata.get("annotations") or {})

    def topology_templates(self) -> list[TemplateTopology]:
        return topology_templates(self.spec, Path("spec"))

    def is_suspended(self) -> bool:
        return self.spec.get("suspend") is True

    def suspend(self) -> None:
        self.spec["suspend"] = True

    def run_with_pod_sets_info(self, infos: Sequence[PodSetInfo]) -> None:
        expected = expected_pod_sets_count(self.spec)
        if len(infos) != expected:
            raise PodSetInfoError(f"expecting {expected} pod sets, got {len(infos)}")
        self.spec["suspend"] = False
        run_cluster_spec(self.spec, infos)

    def restore_pod_sets_info(self, infos: Sequence[PodSetInfo]) -> bool:
        return restore_cluster_spec(self.spec, infos)

    def finished(self) -> Finished | None:
        return None

    def is_active(self) -> bool:
        return self.status.get("state") == READY

    def pods_ready(self) -> bool:
        return self.status.get("state") == READY

    def supports_elastic_job(self) -> bool:
        return True

    def validate_on_create(self) -> list[str]:
        return validate_cluster_spec(self.spec, "spec")


FRAMEWORK = register(Framework("ray.io/raycluster", RAYCLUSTERS, job=RayCluster))
