"""How the Job and pod integrations write a Workload's status: as Kueue's job side does
(the admission status as `kueue-admission`; `PodsReady` as `kueue-job-controller-PodsReady`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes.aio import client as aio_client

from api.constants import GROUP, VERSION
from api.workload_status import (
    ADMISSION_FIELD_MANAGER,
    JOB_CONTROLLER_FIELD_MANAGER,
    Condition,
    apply_body,
)
from controller.integrations import pods_ready
from controller.integrations.host import ControllerView

log = logging.getLogger(__name__)

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


PODS_READY_FIELD_MANAGER = f"{JOB_CONTROLLER_FIELD_MANAGER}-{Condition.PODS_READY.value}"
"""Kueue's `SetConditionAndUpdate(..., constants.JobControllerName)`: the job controller's
field manager with the condition type appended."""


async def apply_pods_ready(
    custom: aio_client.CustomObjectsApi, workload: Mapping[str, Any], condition: dict[str, Any]
) -> dict[str, Any]:
    """Server-side apply of the `PodsReady` condition alone, with force, as Kueue's job
    reconciler writes it: the Workload's identity (its uid, so a recreated Workload is
    refused) without a resourceVersion, and one condition (the conditions are a map keyed
    by type, so the others are untouched). Returns the Workload the API server answered."""
    meta = workload["metadata"]
    body = apply_body(workload, {"conditions": [condition]}, strict=False)
    answer: Any = await custom.patch_namespaced_custom_object_status(
        GROUP,
        VERSION,
        meta["namespace"],
        "workloads",
        meta["name"],
        body,
        field_manager=PODS_READY_FIELD_MANAGER,
        force=True,
        _content_type=APPLY_PATCH,
    )
    return dict(answer)


class PodsReadyWriter:
    """Keeps the `PodsReady` condition of the Workloads an integration manages (see
    `pods_ready.py`). It writes only when the condition's status or reason changes. Until
    the watch brings the Workload it wrote, it decides on the API server's answer to that
    write rather than on the older copy, so a reconcile in between neither writes the
    same condition again nor misses a `WaitForRecovery`."""

    def __init__(
        self,
        custom: aio_client.CustomObjectsApi,
        view: ControllerView,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.custom, self.view, self.clock = custom, view, clock
        self.writes = 0  # PodsReady writes made, for tests
        self._answers: dict[str, tuple[str | None, dict[str, Any]]] = {}

    def forget(self, key: str) -> None:
        self._answers.pop(key, None)

    def newest(self, key: str, workload: Mapping[str, Any]) -> Mapping[str, Any]:
        """The Workload to decide on: our last write's answer while the copy is the one
        that write was made on, else the copy."""
        seen = self._answers.get(key)
        version = (workload.get("metadata") or {}).get("resourceVersion")
        if seen is None:
            return workload
        if seen[0] == version:
            return seen[1]
        del self._answers[key]
        return workload

    async def sync(self, key: str, workload: Mapping[str, Any], ready: bool) -> bool:
        """Write the condition `ready` calls for if the Workload lacks it; True if written
        (the caller ends this round: the Workload's event brings the next)."""
        current = self.newest(key, workload)
        wanted = pods_ready.desired(current, ready)
        if pods_ready.unchanged(current, wanted):
            return False
        now = self.clock()
        answer = await apply_pods_ready(
            self.custom, current, pods_ready.condition_body(current, wanted, now)
        )
        self.writes += 1
        self._answers[key] = ((workload.get("metadata") or {}).get("resourceVersion"), answer)
        log.info("%s: PodsReady=%s (%s)", key, "True" if wanted.status else "False", wanted.reason)
        if wanted.first_start:
            waits = pods_ready.ready_wait_times(current, now)
            if waits is not None:
                self.view.pods_ready_started(current, *waits)
        return True
