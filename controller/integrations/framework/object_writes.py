"""The job framework's two writes besides the Workload's status: a job object changed by its
adapter (a JSON merge patch of the change, with the object's resourceVersion as a
precondition: a stale copy gets 409 and the next round decides on the newer one), and a
Workload's metadata or spec (a merge patch, as the field manager `quotagate`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubernetes.aio import client as aio_client

from api.constants import GROUP, VERSION
from controller.integrations.framework.patches import merge_patch
from controller.kube.client import Resource

__all__ = ["MERGE_PATCH", "patch_object", "patch_workload"]

MERGE_PATCH = "application/merge-patch+json"


async def patch_object(
    custom: aio_client.CustomObjectsApi,
    resource: Resource,
    old: Mapping[str, Any],
    new: Mapping[str, Any],
) -> None:
    """Send what changed from `old` to `new` (status aside); nothing when nothing did."""
    patch = merge_patch(
        {k: v for k, v in old.items() if k != "status"},
        {k: v for k, v in new.items() if k != "status"},
    )
    if not patch:
        return
    meta = old["metadata"]
    patch.setdefault("metadata", {})["resourceVersion"] = meta.get("resourceVersion")
    await custom.patch_namespaced_custom_object(
        resource.group,
        resource.version,
        meta["namespace"],
        resource.plural,
        meta["name"],
        patch,
        field_manager="quotagate",
        _content_type=MERGE_PATCH,
    )


async def patch_workload(
    custom: aio_client.CustomObjectsApi, workload: Mapping[str, Any], patch: dict[str, Any]
) -> None:
    meta = workload["metadata"]
    await custom.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        meta["namespace"],
        "workloads",
        meta["name"],
        patch,
        field_manager="quotagate",
        _content_type=MERGE_PATCH,
    )
