"""`statefulset`: an apps/v1 StatefulSet is one Workload, `statefulset-<name>`, with one
pod set `main` of `spec.replicas` pods, run through the pod integration as a serving
unit (Kueue's `pkg/controller/jobs/statefulset`).

The webhook marks the pod template of a queue-labelled StatefulSet; its pods are gated
when the StatefulSet controller creates them. The integration makes the Workload (owned
by the StatefulSet); once it is admitted the pod integration ungates the pods with the
flavor's node labels and tolerations, one by one as the StatefulSet creates them. It is
never finished. Evicted, its pods are deleted; the StatefulSet recreates them, gated, and
they wait for the next admission.

Replicas, as in Kueue: a queued StatefulSet scales only to zero and back (the webhook
refuses any other change of `spec.replicas`, and 0 → N while pods of the scale-down are
still there). At zero its Workload is deleted once its pods are gone, and the quota
returns (Kueue keeps it with `QuotaReserved=False` reason `OnHold`, released at once;
quotagate deletes it); scaling up makes a new one, which waits for quota. The pod template's shape (requests, ports, node selector,
affinity, tolerations, …) may not change while queued: a rollout that changes only the
rest (the image, say) replaces the pods under the same admission.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from api.constants import DEFAULT_POD_SET_NAME
from controller.integrations.framework.generic_job import TopologyHints
from controller.integrations.framework.registry import Framework, register
from controller.integrations.framework.workload_names import workload_name
from controller.integrations.parent_workloads import parent_integration
from controller.integrations.pod_parents import (
    ParentAdmission,
    PodParent,
    controller_of,
    shape_problems,
)
from controller.kube.client import Resource

__all__ = ["FRAMEWORK", "STATEFULSETS", "StatefulSet", "StatefulSetAdmission"]

STATEFULSETS = Resource("StatefulSet", "apps", "v1", "statefulsets", True)
NAME = "statefulset"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"


def _replicas(obj: Mapping[str, Any]) -> int:
    replicas = (obj.get("spec") or {}).get("replicas")
    return int(replicas) if replicas is not None else 1  # the API's default


class StatefulSetAdmission(ParentAdmission):
    """Kueue's StatefulSet webhook: the template marked; on update, the queue and
    priority-class rules, the template's shape, and replicas only to zero and back."""

    framework = NAME

    def templates(self, obj: dict[str, Any]) -> list[tuple[dict[str, Any], str | None]]:
        return [(obj.setdefault("spec", {}).setdefault("template", {}), None)]

    def refusals(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
        problems = shape_problems(
            (new.get("spec") or {}).get("template") or {},
            (old.get("spec") or {}).get("template") or {},
            "spec.template",
        )
        before, after = _replicas(old), _replicas(new)
        if before and after and before != after:
            problems.append(f"spec.replicas: Invalid value: {after}: field is immutable")
        if before == 0 and after > 0 and int((new.get("status") or {}).get("replicas") or 0):
            problems.append("spec.replicas: Forbidden: scaling down is still in progress")
        return problems


class StatefulSet(PodParent):
    """A StatefulSet's one Workload."""

    framework = NAME

    def workloads(self) -> dict[str, list[dict[str, Any]]]:
        replicas = _replicas(self.obj)
        if replicas == 0:
            return {}
        meta = self.obj["metadata"]
        name = workload_name("StatefulSet", "apps", str(meta["name"]), str(meta.get("uid") or ""))
        template = self.spec.get("template") or {}
        return {name: [{"name": DEFAULT_POD_SET_NAME, "count": replicas, "template": template}]}

    def topology_hints(self, pod_set: str) -> TopologyHints:
        return TopologyHints(pod_index_label=POD_INDEX_LABEL)

    def pod_selector(self, workload: str) -> str | None:
        labels = (self.spec.get("selector") or {}).get("matchLabels") or {}
        return ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or None


def pod_workload(pod: Mapping[str, Any]) -> str | None:
    """The Workload of the StatefulSet that controls the pod."""
    owner = controller_of(pod)
    if owner is None or owner.get("kind") != "StatefulSet":
        return None
    return workload_name("StatefulSet", "apps", str(owner.get("name")), str(owner.get("uid")))


FRAMEWORK = register(
    Framework(
        NAME,
        STATEFULSETS,
        integration=parent_integration(StatefulSet),
        admission=StatefulSetAdmission(),
        pod_workload=pod_workload,
        implies=("pod",),
    )
)
