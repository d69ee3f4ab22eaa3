"""`ray.io/rayjob`: a KubeRay RayJob is one Workload with the pod sets of its
`rayClusterSpec` (`head`, then one per worker group: `raycluster.py`) and, when KubeRay
submits it with a Kubernetes Job (`submissionMode: K8sJobMode`, the default), a pod set
`submitter` of 1 pod (Kueue's `pkg/controller/jobs/rayjob`).

The submitter's template is `spec.submitterPodTemplate`, or KubeRay's default (one
container named `ray-job-submitter` with the head's image, requesting 500m cpu and 200Mi
memory); admission writes the default with the submitter's flavor into
`spec.submitterPodTemplate`, as Kueue does, so that KubeRay's submitter Job lands on it. In
`SidecarMode` the head pod set counts the submitter container KubeRay adds to the head pod.

Admission puts each pod set's flavors into its template and unsuspends the RayJob; KubeRay
creates the RayCluster (and the submitter Job) from them. Eviction suspends it and restores
the templates in the same patch; KubeRay deletes the cluster and the submitter Job, and
the RayJob is `Suspended`, no longer active. Finished is KubeRay's `Complete` or `Failed`
deployment status (succeeded when the Ray job `SUCCEEDED`); pods are ready when its
cluster's state is `ready`. A RayJob that runs on an existing cluster (`clusterSelector`) is
not queued (Kueue skips it); one KubeRay refused (`ValidationFailed`) is on hold: its quota
is released and it is not queued again (Kueue's `JobWithOnHold`).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any

from api.validation.field_errors import Path
from api.validation.tas_annotations import TemplateTopology
from controller.integrations.framework.generic_job import Finished, GenericJob
from controller.integrations.framework.podset_info import (
    PodSetInfo,
    PodSetInfoError,
    merge,
    restore,
)
from controller.integrations.framework.registry import Framework, register
from controller.integrations.kinds.raycluster import (
    READY,
    build_pod_sets,
    expected_pod_sets_count,
    restore_cluster_spec,
    run_cluster_spec,
    topology_templates,
    validate_cluster_spec,
)
from controller.kube.client import Resource

__all__ = ["FRAMEWORK", "RAYJOBS", "RayJob"]

RAYJOBS = Resource("RayJob", "ray.io", "v1", "rayjobs", True)
SUBMITTER = "submitter"
"""The submitter Job's pod set (Kueue's `submitterJobPodSetName`)."""
SUBMITTER_CONTAINER = "ray-job-submitter"
"""KubeRay's `SubmitterContainerName`."""
SUBMITTER_RESOURCES = {
    "limits": {"cpu": "1", "memory": "1Gi"},
    "requests": {"cpu": "500m", "memory": "200Mi"},
}
"""KubeRay's default submitter container resources (`GetDefaultSubmitterContainer`)."""
K8S_JOB_MODE = "K8sJobMode"
SIDECAR_MODE = "SidecarMode"
FINISHED_STATUSES = ("Complete", "Failed")
INACTIVE_STATUSES = ("", "Suspended")
"""KubeRay's `New` (the empty status) and `Suspended`: no pods of the RayJob run."""
VALIDATION_FAILED = "ValidationFailed"
SUCCEEDED = "SUCCEEDED"


class RayJob(GenericJob):
    """A ray.io/v1 RayJob."""

    @property
    def cluster_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self.spec.setdefault("rayClusterSpec", {})
        return spec

    @property
    def submission_mode(self) -> str:
        return str(self.spec.get("submissionMode") or K8S_JOB_MODE)  # the CRD's default

    def _default_submitter_template(self) -> dict[str, Any]:
        """KubeRay's default submitter pod (Kueue's `getSubmitterTemplate`)."""
        head = ((self.cluster_spec.get("headGroupSpec") or {}).get("template") or {}).get(
            "spec"
        ) or {}
        containers = head.get("containers") or [{}]
        return {
            "spec": {
                "containers": [
                    {
                        "name": SUBMITTER_CONTAINER,
                        "image": containers[0].get("image"),
                        "resources": copy.deepcopy(SUBMITTER_RESOURCES),
                    }
                ],
                "restartPolicy": "Never",
            }
        }

    def _submitter_template(self) -> dict[str, Any]:
        template = self.spec.get("submitterPodTemplate")
        return template if template is not None else self._default_submitter_template()

    def pod_sets(self) -> list[dict[str, Any]]:
        pod_sets = build_pod_sets(self.cluster_spec, self.metadata.get("annotations") or {})
        mode = self.submission_mode
        if mode == K8S_JOB_MODE:
            pod_sets.append(
                {
                    "name": SUBMITTER,
                    "count": 1,
                    "template": copy.deepcopy(self._submitter_template()),
                }
            )
        elif mode == SIDECAR_MODE:
            head = pod_sets[0]["template"].setdefault("spec", {}).setdefault("containers", [])
            head.append(
                {"name": SUBMITTER_CONTAINER, "resources": copy.deepcopy(SUBMITTER_RESOURCES)}
            )
        return pod_sets

    def topology_templates(self) -> list[TemplateTopology]:
        spec = self.spec.get("rayClusterSpec")
        return [] if spec is None else topology_templates(spec, Path("spec.rayClusterSpec"))

    def _expected(self) -> int:
        count = expected_pod_sets_count(self.cluster_spec)
        return count + 1 if self.submission_mode == K8S_JOB_MODE else count

    def is_suspended(self) -> bool:
        return self.spec.get("suspend") is True

    def suspend(self) -> None:
        self.spec["suspend"] = True

    def run_with_pod_sets_info(self, infos: Sequence[PodSetInfo]) -> None:
        expected = self._expected()
        if len(infos) != expected:
            raise PodSetInfoError(f"expecting {expected} pod sets, got {len(infos)}")
        self.spec["suspend"] = False
        run_cluster_spec(self.cluster_spec, infos)
        if self.submission_mode == K8S_JOB_MODE:
            template = self._submitter_template()
            merge(template, infos[-1])
            self.spec["submitterPodTemplate"] = template

    def restore_pod_sets_info(self, infos: Sequence[PodSetInfo]) -> bool:
        """The cluster's pod sets first, the submitter's last (nothing when the count of pod
        sets is not the RayJob's)."""
        if len(infos) != self._expected():
            return False
        cluster = expected_pod_sets_count(self.cluster_spec)
        changed = restore_cluster_spec(self.cluster_spec, infos[:cluster])
        template = self.spec.get("submitterPodTemplate")
        if self.submission_mode == K8S_JOB_MODE and template is not None:
            changed = restore(template, infos[-1]) or changed
        return changed

    def finished(self) -> Finished | None:
        status = self.status
        if status.get("jobDeploymentStatus") not in FINISHED_STATUSES:
            return None
        return Finished(status.get("jobStatus") == SUCCEEDED, str(status.get("message") or ""))

    def is_active(self) -> bool:
        return (self.status.get("jobDeploymentStatus") or "") not in INACTIVE_STATUSES

    def pods_ready(self) -> bool:
        return (self.status.get("rayClusterStatus") or {}).get("state") == READY

    def skip(self) -> bool:
        """A RayJob on an existing cluster (`clusterSelector`) is not Kueue's to queue."""
        return bool(self.spec.get("clusterSelector"))

    def is_on_hold(self) -> bool:
        return self.status.get("jobDeploymentStatus") == VALIDATION_FAILED

    def supports_elastic_job(self) -> bool:
        return True

    def validate_on_create(self) -> list[str]:
        """Kueue's RayJob webhook: a queued RayJob brings its own cluster
        (`rayClusterSpec`, not `clusterSelector`), deletes it when it finishes
        (`shutdownAfterJobFinishes`), and its cluster spec passes the RayCluster's checks."""
        spec = self.spec
        selector = spec.get("clusterSelector")
        has_cluster = spec.get("rayClusterSpec") is not None
        if selector and has_cluster:
            return [
                f"spec.clusterSelector: Invalid value: {json.dumps(selector)}: a kueue managed "
                "job should not use an existing cluster"
            ]
        if selector:
            return []  # on an existing cluster: not queued
        if not has_cluster:
            return [
                "spec.rayClusterSpec: Required value: rayClusterSpec is required for "
                "Kueue-managed jobs that don't use clusterSelector"
            ]
        problems = []
        if not spec.get("shutdownAfterJobFinishes"):
            problems.append(
                "spec.shutdownAfterJobFinishes: Invalid value: false: a kueue managed job "
                "should delete the cluster after finishing"
            )
        return problems + validate_cluster_spec(self.cluster_spec, "spec.rayClusterSpec")


FRAMEWORK = register(Framework("ray.io/rayjob", RAYJOBS, job=RayJob))
