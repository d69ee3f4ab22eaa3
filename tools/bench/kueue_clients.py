"""Kueue's own clients' writes, reproduced from Kueue's code (not from quotagate's), so that
the bench and the compatibility suite (tests/compat) drive quotagate exactly as Kueue's
tools do. Each builder names the Kueue function it follows (kubernetes-sigs/kueue).

- Kueue decodes Workloads into its typed Go structs: fields it does not know
  (quotagate's `spec.preemptibility`, `spec.disruptionMode`, `status.preemptionCost`,
  `status.resolvedPreemptibility`) are absent from everything it sends (`kueue_view`).
- The scheduler-perf runner's job side (test/performance/scheduler/runner/controller):
  - finishes a Workload with `workload.SetConditionAndUpdate` (`runner_finish`): a
    server-side apply, strict (resourceVersion), of the Finished condition alone, as the
    field manager `kueue-job-controller-Finished`;
  - acknowledges an eviction with `workloadpatching.PatchAdmissionStatus` +
    `workload.UnsetQuotaReservationWithCondition("Pending", "Evicted by the test runner")`
    (`runner_release`): a server-side apply as `kueue-admission` with force of the
    admission-managed status (pkg/workload/patching `admissionStatusPatch`), without
    `admission`. Under Kueue's `WorkloadRequestUseMergePatch` gate the same change goes
    out as a JSON merge patch computed from the typed object (`runner_release_merge`).
- kueuectl (cmd/kueuectl/app/stop, resume, options): `stop`/`resume` ClusterQueue and
  LocalQueue set `spec.stopPolicy` (Hold with --keep-already-running, else HoldAndDrain;
  None on resume), `stop`/`resume workload` set `spec.active`; each is a merge patch
  computed from the typed object (`client.MergeFrom`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from api import workload_status
from api.constants import API_VERSION, Kind, StopPolicy, WorkloadConditionType
from controller.kube.client import APPLY_PATCH, MERGE_PATCH, Api, Resource

__all__ = [
    "RUNNER_FINISH_MANAGER",
    "RUNNER_MERGE_MANAGER",
    "Write",
    "kueue_view",
    "kueuectl_resume_queue",
    "kueuectl_stop_queue",
    "kueuectl_workload_active",
    "runner_finish",
    "runner_release",
    "runner_release_merge",
    "send",
]

RUNNER_FINISH_MANAGER: Final = f"{workload_status.JOB_CONTROLLER_FIELD_MANAGER}-Finished"
"""`SetConditionAndUpdate(..., constants.JobControllerName)` appends the condition type."""
RUNNER_MERGE_MANAGER: Final = "runner"
"""controller-runtime's default field manager for a merge patch: the binary's name."""

# Fields of a Workload that Kueue's API types do not have.
_QUOTAGATE_SPEC_FIELDS: Final = ("preemptibility", "disruptionMode")
_QUOTAGATE_STATUS_FIELDS: Final = ("preemptionCost", "resolvedPreemptibility")


@dataclass(frozen=True, slots=True)
class Write:
    """One request a Kueue client makes: a server-side apply (force or not) or a JSON
    merge patch, on the object or its status subresource, under `field_manager`."""

    body: dict[str, Any]
    field_manager: str
    apply: bool
    force: bool = False
    subresource: str | None = "status"


def kueue_view(wl: Mapping[str, Any]) -> dict[str, Any]:
    """The Workload as Kueue's typed client decodes it: quotagate's fields are dropped.
    A shallow view (the builders below only read it): copying the whole object, managed
    fields and all, was a tenth of the bench's CPU."""
    view = dict(wl)
    for part, names in (("spec", _QUOTAGATE_SPEC_FIELDS), ("status", _QUOTAGATE_STATUS_FIELDS)):
        fields = view.get(part)
        if isinstance(fields, Mapping):
            view[part] = {k: v for k, v in fields.items() if k not in names}
    return view


def _ssa_identity(wl: Mapping[str, Any], strict: bool) -> dict[str, Any]:
    """`baseSSAWorkload`: uid, name, namespace, generation, labels, annotations and, when
    strict, the resourceVersion the change was computed from."""
    meta = wl.get("metadata") or {}
    identity: dict[str, Any] = {
        key: meta[key]
        for key in ("uid", "name", "namespace", "generation", "labels", "annotations")
        if meta.get(key)
    }
    if strict and meta.get("resourceVersion"):
        identity["resourceVersion"] = meta["resourceVersion"]
    return identity


def runner_finish(wl: Mapping[str, Any], now: float) -> Write:
    """Finished=True (reason ByTest) as `workload.SetConditionAndUpdate` applies it."""
    view = kueue_view(wl)
    generation = (view.get("metadata") or {}).get("generation")
    conditions = workload_status.set_condition(
        [], WorkloadConditionType.FINISHED, True, "ByTest", "By test runner", now, generation
    )
    body = {
        "apiVersion": API_VERSION,
        "kind": Kind.WORKLOAD.value,
        "metadata": _ssa_identity(view, strict=True),
        "status": {"conditions": conditions},
    }
    return Write(body, RUNNER_FINISH_MANAGER, apply=True)


def _unset(view: Mapping[str, Any], now: float) -> dict[str, Any]:
    return workload_status.unset_quota_reservation(
        view, "Pending", "Evicted by the test runner", now
    )


def runner_release(wl: Mapping[str, Any], now: float) -> Write:
    """The eviction acknowledged as `PatchAdmissionStatus` applies it (strict, force)."""
    view = kueue_view(wl)
    body = {
        "apiVersion": API_VERSION,
        "kind": Kind.WORKLOAD.value,
        "metadata": _ssa_identity(view, strict=True),
        "status": _unset(view, now),
    }
    return Write(body, workload_status.ADMISSION_FIELD_MANAGER, apply=True, force=True)


def runner_release_merge(wl: Mapping[str, Any], now: float) -> Write:
    """The same acknowledgement under `WorkloadRequestUseMergePatch`: the JSON merge patch
    `client.MergeFrom` computes from the typed object (strict: with its resourceVersion).
    Lists are replaced whole, so the conditions go out complete; the admission is null."""
    view = kueue_view(wl)
    status = view.get("status") or {}
    after = _unset(view, now)
    # Every condition the typed object holds, with the changed ones replaced.
    changed = {c["type"]: c for c in after["conditions"]}
    conditions = [changed.pop(c.get("type"), c) for c in status.get("conditions") or ()]
    conditions += list(changed.values())
    patch: dict[str, Any] = {"conditions": conditions}
    if status.get("admission") is not None:
        patch["admission"] = None
    meta = view.get("metadata") or {}
    body = {"metadata": {"resourceVersion": meta.get("resourceVersion")}, "status": patch}
    return Write(body, RUNNER_MERGE_MANAGER, apply=False)


def kueuectl_stop_queue(keep_already_running: bool) -> Write:
    """`kueuectl stop clusterqueue|localqueue NAME [--keep-already-running]`."""
    policy = StopPolicy.HOLD if keep_already_running else StopPolicy.HOLD_AND_DRAIN
    return Write({"spec": {"stopPolicy": policy.value}}, "kueuectl", apply=False, subresource=None)


def kueuectl_resume_queue() -> Write:
    """`kueuectl resume clusterqueue|localqueue NAME`."""
    body = {"spec": {"stopPolicy": StopPolicy.NONE.value}}
    return Write(body, "kueuectl", apply=False, subresource=None)


def kueuectl_workload_active(active: bool) -> Write:
    """`kueuectl stop workload NAME` (false) and `kueuectl resume workload NAME` (true)."""
    return Write({"spec": {"active": active}}, "kueuectl", apply=False, subresource=None)


async def send(
    api: Api, resource: Resource, namespace: str | None, name: str, write: Write
) -> dict[str, Any]:
    """Make the request `write` describes on `resource` `namespace/name`."""
    path = api.path(resource, name, namespace)
    if write.subresource:
        path += f"/{write.subresource}"
    params = {"fieldManager": write.field_manager}
    if write.force:
        params["force"] = "true"
    content_type = APPLY_PATCH if write.apply else MERGE_PATCH
    result: dict[str, Any] = await api.request(
        "PATCH", path, write.body, content_type=content_type, params=params
    )
    return result
