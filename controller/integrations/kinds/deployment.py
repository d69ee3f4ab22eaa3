"""`deployment`: an apps/v1 Deployment runs through the pod integration, each of its pods
a Workload of its own (Kueue's `pkg/controller/jobs/deployment`).

The webhook marks the pod template of a queue-labelled Deployment on creation and update
(`pod_parents.mark_template`; Kueue's Deployment webhook, which also leaves the
`max-exec-time-seconds` label to the pods: quotagate copies it onto them, so that each
pod's Workload has the Deployment's limit). Every pod its ReplicaSets create is then
gated and becomes one Workload, `pod-<pod name>`, owned by the pod: a scale-up waits for
quota pod by pod, a scale-down or a rollout returns the quota of the pods it removes
(their Workloads go with them), and an evicted pod is deleted and replaced by a gated
one. A pod's Workload finishes only when the pod ends (a Deployment's pods restart in
place), and its replacement queues anew.

The reconciler only marks a Deployment created while the webhook did not serve (its pods
are rolled out again, gated); there is no Workload of the Deployment itself.
"""

from __future__ import annotations

from typing import Any

from controller.integrations.framework.registry import Framework, register
from controller.integrations.parent_workloads import parent_integration
from controller.integrations.pod_parents import ParentAdmission, PodParent
from controller.kube.client import Resource

__all__ = ["DEPLOYMENTS", "FRAMEWORK", "DeploymentAdmission"]

DEPLOYMENTS = Resource("Deployment", "apps", "v1", "deployments", True)
NAME = "deployment"


class DeploymentAdmission(ParentAdmission):
    """Kueue's Deployment webhook: the template marked; on update, the queue and
    priority-class rules."""

    framework = NAME
    serving = False  # single pods, each its own Workload
    copy_max_exec_time = True

    def templates(self, obj: dict[str, Any]) -> list[tuple[dict[str, Any], str | None]]:
        return [(obj.setdefault("spec", {}).setdefault("template", {}), None)]


class DeploymentPods(PodParent):
    """A Deployment has no Workload of its own: its pods are single-pod Workloads."""

    framework = NAME

    def workloads(self) -> dict[str, list[dict[str, Any]]]:
        return {}


FRAMEWORK = register(
    Framework(
        NAME,
        DEPLOYMENTS,
        integration=parent_integration(DeploymentPods),
        admission=DeploymentAdmission(),
        implies=("pod",),
    )
)
