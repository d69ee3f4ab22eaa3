"""How the Job and pod integrations write a Workload's status: as Kueue's job side does."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubernetes.aio import client as aio_client

from api.constants import GROUP, VERSION
from api.workload_status import ADMISSION_FIELD_MANAGER, apply_body

APPLY_PATCH = "application/apply-patch+yaml"


async def apply_workload_status(
    custom: aio_client.CustomObjectsApi, workload: Mapping[str, Any], status: dict[str, Any]
) -> None:
    """Server-side apply of the Workload's admission status (a transition from
    `api.workload_status`) as the field manager `kueue-admission` with force, from the copy
    it was computed on: a newer object makes it fail with 409 and the caller decides again."""
    meta = workload["metadata"]
    await custom.patch_namespaced_custom_object_status(
        GROUP,
        VERSION,
        meta["namespace"],
        "workloads",
        meta["name"],
        apply_body(workload, status),
        field_manager=ADMISSION_FIELD_MANAGER,
        force=True,
        _content_type=APPLY_PATCH,
    )
