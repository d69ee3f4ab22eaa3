"""The objects of one ProvisioningRequest attempt, as Kueue's provisioning controller
writes them (pure; `syncOwnedProvisionRequest`): a PodTemplate per request entry
(`pod_sets.py`) and the `autoscaling.x-k8s.io/v1` ProvisioningRequest naming them, both
labelled `kueue.x-k8s.io/managed=true` and controlled by the Workload until the request
exists (its PodTemplates are then handed over to it)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from api.provisioningrequestconfig import PodSetMergePolicy
from controller.kube.owners import controller_reference
from controller.provisioning.pod_sets import FlavorPlacement, merged_pod_sets, pod_template
from controller.provisioning.requests import pod_template_name

__all__ = ["MANAGED_LABELS", "PROVREQ_ANNOTATION_PREFIX", "request_objects"]

MANAGED_LABELS: Final = {"kueue.x-k8s.io/managed": "true"}
PROVREQ_ANNOTATION_PREFIX: Final = "provreq.kueue.x-k8s.io/"
"""A Workload annotation `provreq.kueue.x-k8s.io/<name>` is the request's parameter
<name> (Kueue's `passProvReqParams`)."""


def request_objects(
    workload: Mapping[str, Any],
    name: str,
    spec: Mapping[str, Any],
    placement: Callable[[str], FlavorPlacement | None],
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The PodTemplates and the ProvisioningRequest `name` for a Workload holding quota,
    from the ProvisioningRequestConfig `spec`; raises `PodSetInfoError` (a template the
    admission cannot be merged into) or `InconsistentAssignments`."""
    meta = workload["metadata"]
    namespace = str(meta["namespace"])
    owner = controller_reference(
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": meta}
    )
    policy = spec.get("podSetMergePolicy")
    entries = merged_pod_sets(
        workload, spec.get("managedResources") or (), PodSetMergePolicy(policy) if policy else None
    )
    templates: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "PodTemplate",
            "metadata": {
                "name": pod_template_name(name, entry.name),
                "namespace": namespace,
                "labels": dict(MANAGED_LABELS),
                "ownerReferences": [owner],
            },
            "template": pod_template(entry, placement),
        }
        for entry in entries
    ]
    parameters = dict(spec.get("parameters") or {})
    for key, value in (meta.get("annotations") or {}).items():
        if key.startswith(PROVREQ_ANNOTATION_PREFIX):
            parameters[key.removeprefix(PROVREQ_ANNOTATION_PREFIX)] = value
    request = {
        "apiVersion": "autoscaling.x-k8s.io/v1",
        "kind": "ProvisioningRequest",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(MANAGED_LABELS),
            "ownerReferences": [owner],
        },
        "spec": {
            "provisioningClassName": spec.get("provisioningClassName"),
            "podSets": [
                {"podTemplateRef": {"name": t["metadata"]["name"]}, "count": entry.count}
                for t, entry in zip(templates, entries, strict=True)
            ],
            **({"parameters": parameters} if parameters else {}),
        },
    }
    return templates, request
