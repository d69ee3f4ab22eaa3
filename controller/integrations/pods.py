"""Plain pods, pod groups and core `scheduling.k8s.io` PodGroups: one Workload per unit.

The webhook gates every pod labelled `kueue.x-k8s.io/queue-name` (Job pods excepted: the
Job is queued instead). This integration (leader only) keeps each unit of pods and its
Workload in step, level-triggered and idempotent:

- a *unit* is a single pod (Workload `pod-<name>`), the pods sharing the label
  `kueue.x-k8s.io/pod-group-name` (Workload `group-<name>`, created only once
  `kueue.x-k8s.io/pod-group-total-count` pods exist, all agreeing on that count), or the
  pods whose `spec.schedulingGroup.podGroupName` names a core PodGroup (Workload
  `podgroup-<name>`: minCount from its gang policy, priority from it, its
  `disruptionMode` as the Workload's);
- Workload admitted → each gated pod gets ONE JSON patch: the flavor's node labels and
  tolerations added, then our gate removed by index after a `test` of that index (another
  controller's gates are never touched);
- Workload evicted → its running pods are deleted (their grace period is respected); once
  none is running the eviction is acknowledged (quota reservation cleared), and pods
  their owner recreates are gated again by the webhook and wait for the next admission;
- an admitted Workload shrunk by a `DisruptionMode: Pod` preemption → the newest pods
  beyond the admitted count are deleted;
- every pod of the unit terminated → the Workload is `Finished` and its quota returns;
- with waitForPodsReady configured, the Workload's `PodsReady` condition follows its pods'
  readiness (`pods_ready.py`: as many Ready or Succeeded pods as the admission allows).

The Workload is owned by the pods' common controller (a ReplicaSet, say) when they have
one, so it and its eviction history survive the pods being recreated; otherwise by the
pods themselves, so garbage collection removes it with the last of them.

The pure part (units, the Workload of a unit, the ungate patch) is `pod_units.py`; this
module is the reconciler and its API calls.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Mapping
from typing import Any

from cachetools import TTLCache
from kubernetes.aio import client as aio_client
from kubernetes.aio.client.exceptions import ApiException

from api import workload_status
from api.constants import (
    ADMISSION_GATE,
    DEFAULT_POD_SET_NAME,
    GROUP,
    PREEMPTIBILITY_LABEL,
    PRIORITY_CLASS_LABEL,
    TOPOLOGY_SCHEDULING_GATE,
    VERSION,
)
from api.workload_status import Condition, has_quota_reservation
from controller.integrations.framework.owned_workloads import OwnedWorkloads
from controller.integrations.framework.podset_info import PodSetInfoError, with_check_updates
from controller.integrations.host import ControllerView, placement_of
from controller.integrations.job_labels import WorkloadPriorityClassNotFound
from controller.integrations.job_management import JobManagement
from controller.integrations.pod_units import (
    CORE_GROUP,
    PARENT,
    PodWorkload,
    Unit,
    admitted_count,
    admitted_counts,
    copied_labels,
    gated,
    group_total,
    managed,
    newest_first,
    pod_group_settings,
    role_of,
    running,
    serving,
    terminated,
    topology_release,
    ungate_patch,
    unit_of,
    workload_for,
)
from controller.integrations.pods_ready import unit_pods_ready
from controller.integrations.serial import SerialReconciler
from controller.integrations.workload_writes import PodsReadyWriter, apply_workload_status
from controller.kube.client import status_of

log = logging.getLogger(__name__)

JSON_PATCH = "application/json-patch+json"


def patch_did_not_apply(exc: ApiException) -> bool:
    """A 422 for a JSON patch that could not be applied (a failed `test`, a missing path):
    json-patch's "test failed" in the message, or Kubernetes' bare "Invalid" without the
    field causes a validation error has."""
    if "test failed" in str(exc.body):
        return True
    status = status_of(exc.body)
    return status.get("reason") == "Invalid" and not (status.get("details") or {}).get("causes")


async def ungate_pod(
    core: aio_client.CoreV1Api, pod: Mapping[str, Any], patch: list[dict[str, Any]]
) -> bool:
    """Send an ungating JSON patch (`pod_units.ungate_patch`) to a pod; False when its gate
    list changed meanwhile (nothing written)."""
    meta = pod.get("metadata") or {}
    try:
        await core.patch_namespaced_pod(
            meta["name"],
            meta["namespace"],
            patch,
            field_manager="quotagate",
            _content_type=JSON_PATCH,
        )
    except ApiException as exc:
        # 422 from the `test` op: the gate list changed since this copy (most often: the
        # pod is already ungated and its event is on its way); the next event decides
        # again. The API server says only "Invalid" with no causes when a JSON patch does
        # not apply (Kubernetes 1.36 leaves out json-patch's "test failed"); a refusal of
        # the patched pod names its causes, and it, like any other refusal (an admission
        # policy, say), is retried.
        if exc.status != 422 or not patch_did_not_apply(exc):
            raise
        log.debug("ungating %s/%s skipped: %s", meta["namespace"], meta["name"], exc.reason)
        return False
    return True


# Where the core PodGroup is served: v1beta1 from Kubernetes 1.37, v1alpha2 before.
POD_GROUP_VERSIONS = ("v1beta1", "v1alpha2")


class PodIntegration:
    """Reconciles units of queue-labelled pods against their Workloads."""

    def __init__(
        self,
        api_client: aio_client.ApiClient,
        view: ControllerView,
        owner_cache_seconds: float = 60.0,
        settle_seconds: float = 1.0,
        label_keys_to_copy: tuple[str, ...] = (),
        management: JobManagement | None = None,
        job_kinds: Collection[tuple[str, str]] = (),
        parents: Mapping[str, PodWorkload] | None = None,
    ) -> None:
        self.label_keys_to_copy = label_keys_to_copy
        self.management = management
        self.job_kinds = job_kinds
        self.parents = dict(parents or {})  # framework name → which Workload a pod is of
        self.core = aio_client.CoreV1Api(api_client)
        self.custom = aio_client.CustomObjectsApi(api_client)
        self.view = view
        self.pods_ready = PodsReadyWriter(self.custom, view)
        self.pods: dict[str, dict[str, Any]] = {}  # pod key → pod
        self.members: dict[Unit, set[str]] = {}  # unit → pod keys
        self.unit_by_pod: dict[str, Unit] = {}
        self.owned = OwnedWorkloads(view)  # by pod uid
        self.owner_labels: TTLCache[tuple[str, str, str], dict[str, Any] | None] = TTLCache(
            maxsize=4096, ttl=owner_cache_seconds
        )
        self.reported: dict[Unit, str] = {}
        self.settle_seconds = settle_seconds
        self._counts: dict[Unit, tuple[int, float]] = {}
        self._serial: SerialReconciler[Unit] = SerialReconciler(
            self.reconcile,
            lambda: view.leading,
            lambda unit: f"{unit.kind} {unit.namespace}/{unit.name}",
            log,
            keep=self.members.__contains__,
        )

    # -- events --------------------------------------------------------------------------------

    def on_pod_event(self, event_type: str | None, pod: dict[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        unit = unit_of(pod, self.parents)
        previous = self.unit_by_pod.pop(key, None)
        if previous is not None and previous != unit:
            self._leave(previous, key)  # its parent has now said which Workload it is of
        labels = self.view.namespace_labels(str(meta.get("namespace") or ""))
        if event_type == "DELETED" or not managed(pod, self.management, labels, self.job_kinds):
            self.pods.pop(key, None)
            self.owned.forget(str(meta.get("uid")))
            self._leave(unit, key)
            return
        self.pods[key] = pod
        self.unit_by_pod[key] = unit
        self.members.setdefault(unit, set()).add(key)
        self.kick(unit)

    def _leave(self, unit: Unit, key: str) -> None:
        self.members.get(unit, set()).discard(key)
        if not self.members.get(unit):
            self.members.pop(unit, None)
        self.kick(unit)

    def on_workload_event(self, workload: dict[str, Any]) -> None:
        meta = workload.get("metadata") or {}
        kind = (meta.get("labels") or {}).get("quotagate.x-k8s.io/unit")
        namespace = str(meta.get("namespace", ""))
        for owner in meta.get("ownerReferences") or ():
            if owner.get("kind") == "Pod" and owner.get("apiVersion") == "v1":
                self.owned.add(str(owner.get("uid")), f"{namespace}/{meta.get('name')}")
                # its pods' unit, whatever the Workload's name (Kueue's, or one adopted)
                unit = self.unit_by_pod.get(f"{namespace}/{owner.get('name')}")
                if unit is not None:
                    self.kick(unit)
        if kind == "pod":
            return  # owned by its pod: kicked above
        if kind == "group":  # owned by its pods or their common controller
            name = str(meta.get("name", ""))
            self.kick(Unit(kind, namespace, name.removeprefix("group-")))
            self.kick(Unit(kind, namespace, name))
            return
        if kind == "podgroup":
            self.kick(Unit(kind, namespace, str(meta.get("name", ""))[len(kind) + 1 :]))
            return
        parent = Unit(PARENT, str(meta.get("namespace", "")), str(meta.get("name", "")))
        if parent in self.members:  # made by a parent's integration (StatefulSet, …)
            self.kick(parent)

    def resync(self) -> None:
        for unit in list(self.members):
            self.kick(unit)

    # The job framework's `Integration` (framework/registry.py): the pods' informer.
    on_object_event = on_pod_event

    def known_keys(self) -> set[str]:
        return set(self.pods)

    def stop_leading(self) -> None:
        """The term ended: cancel the reconciles in progress (`SerialReconciler.cancel_all`)."""
        self._serial.cancel_all()

    def kick(self, unit: Unit) -> None:
        self._serial.kick(unit)

    # -- the reconcile -------------------------------------------------------------------------

    def _workload_of(
        self, unit: Unit, pods: list[dict[str, Any]]
    ) -> tuple[str, dict[str, Any] | None]:
        """The unit's Workload (key and newest copy): the one of its name (Kueue's), else
        one its pods own, whatever its name (Kueue's owner index), else for a group an older
        quotagate's `group-<name>` owned by the group (by its pods' common controller, which
        owns other Workloads too). A parent's is the one it names."""
        workload = self.view.workload(unit.key)
        if workload is not None or unit.kind == PARENT:
            return unit.key, workload
        for pod in pods:
            uid = str((pod.get("metadata") or {}).get("uid"))
            owned = self.owned.of(uid)
            if owned:
                key = min(owned)
                return key, owned[key]
        if unit.kind == "group":  # an older quotagate's `group-<name>`, owned by the group
            key = f"{unit.namespace}/group-{unit.name}"[:253]
            found = self.view.workload(key)
            owners = {str(o.get("uid")) for o in _refs(found)}
            if found is not None and owners & _uids_and_controllers(pods):
                return key, found
        return unit.key, None

    async def reconcile(self, unit: Unit) -> None:
        if not self.view.leading or not self.view.workloads_listed:
            return  # kicked again once they are (`resync`)
        pods = [self.pods[k] for k in sorted(self.members.get(unit, ())) if k in self.pods]
        if unit.kind == PARENT and not unit.name:
            return  # their parent has not said yet which Workload they are of
        key, workload = self._workload_of(unit, pods)
        if workload is None:
            # A parent's Workload is its integration's to make: its pods wait for it.
            if unit.kind != PARENT and pods and not any(terminated(p) for p in pods):
                await self._maybe_create(unit, pods)
            return
        if not pods:
            self.pods_ready.forget(key)
            return
        if workload_status.is_finished(workload):
            self.pods_ready.forget(key)
            return
        reserved = has_quota_reservation(workload)
        never_finished = unit.kind == PARENT or serving(pods)
        if reserved and not never_finished and all(terminated(p) for p in pods):
            failed = any((p.get("status") or {}).get("phase") == "Failed" for p in pods)
            reason = "Failed" if failed else "Succeeded"
            await apply_workload_status(
                self.custom,
                workload,
                workload_status.finish(workload, reason, f"Pods finished: {reason}", time.time()),
            )
            return
        if self.view.wait_for_pods_ready:
            # Kueue's step 5: the condition first; the Workload's event brings the rest.
            needed = admitted_count(workload) if reserved else 0
            if await self.pods_ready.sync(key, workload, unit_pods_ready(pods, needed)):
                return
        if reserved and workload_status.is_evicted(workload):
            live = [p for p in pods if running(p)]
            for pod in live:
                await self._delete(pod)
            if not live:
                await apply_workload_status(
                    self.custom, workload, workload_status.release(workload, time.time())
                )
            return
        if not reserved:
            pending = workload_status.condition(workload, Condition.QUOTA_RESERVED)
            if pending is not None and pending.get("reason") in (
                "Misconfigured",
                "Suspended",
                "Deactivated",
            ):
                # e.g. the LocalQueue does not exist: the pods stay gated, and say why.
                await self._report(unit, pods, str(pending["reason"]), str(pending.get("message")))
            return
        if workload_status.is_admitted(workload):
            status = workload.get("status") or {}
            for pod_set, allowed in admitted_counts(workload).items():
                members = [p for p in pods if self._pod_set_of(unit, p) == pod_set]
                live = [p for p in members if running(p)]
                for extra in newest_first(live)[: max(0, len(live) - allowed)]:
                    await self._delete(extra)  # DisruptionMode Pod: the admission shrank
                placement = placement_of(self.view, status, pod_set)
                try:
                    updates = with_check_updates(
                        workload, pod_set, placement.node_labels, placement.tolerations
                    )
                except PodSetInfoError as exc:  # Kueue: the pods are not started
                    await self._report(unit, pods, "FailedToStart", str(exc))
                    continue
                placed = topology_release(workload, pod_set, key.partition("/")[2])
                if placed is not None:  # the topology ungater finds them, and places them
                    updates.labels.update(placed[0])
                    updates.annotations.update(placed[1])
                waiting = [p for p in members if gated(p) and not terminated(p)]
                for pod in waiting[: max(0, allowed - len(live))]:
                    patch = ungate_patch(
                        pod,
                        updates.node_selector,
                        updates.tolerations,
                        updates.labels,
                        updates.annotations,
                        # Kueue: no topology assignment, no topology gate
                        also=() if placed is not None else (TOPOLOGY_SCHEDULING_GATE,),
                    )
                    if patch and await self._patch_pod(pod, patch):
                        group = unit.kind != "pod"
                        self.view.scheduling_gate_removed(ADMISSION_GATE, workload, group)

    @staticmethod
    def _pod_set_of(unit: Unit, pod: Mapping[str, Any]) -> str:
        """A parent's pods name their pod set (a LeaderWorkerSet's leader and workers);
        every other unit's Workload has the one pod set `main`."""
        return role_of(pod) if unit.kind == PARENT else DEFAULT_POD_SET_NAME

    async def _maybe_create(self, unit: Unit, pods: list[dict[str, Any]]) -> None:
        settings: dict[str, Any] = {}
        if unit.kind == "group":
            total, problem = group_total(pods)
            if problem is not None:
                await self._report(unit, pods, "InvalidPodGroup", problem)
                return
            assert total is not None
            if len(pods) < total:
                return  # wait for the rest of the group
            count = total
        elif unit.kind == "podgroup":
            pod_group = await self._read_pod_group(unit)
            if pod_group is None:
                await self._report(
                    unit, pods, "PodGroupNotFound", f"PodGroup {unit.name} does not exist (yet)"
                )
                return
            settings = pod_group_settings(pod_group)
            needed = settings["min_count"] or 1
            if len(pods) < needed or not self._settled(unit, len(pods)):
                return
            count = len(pods)
        else:
            count = 1
        copied, problem = copied_labels(pods, self.label_keys_to_copy)
        if problem is not None:
            await self._report(unit, pods, "InvalidPodGroup", problem)
            return
        first = pods[0]
        labels = (first.get("metadata") or {}).get("labels") or {}
        wpc = labels.get(PRIORITY_CLASS_LABEL)
        priority_class = settings.get("priority_class") or (first.get("spec") or {}).get(
            "priorityClassName"
        )
        priority = settings.get("priority")
        if wpc:
            priority = self.view.priority_of_class(wpc)
            if priority is None:
                missing = WorkloadPriorityClassNotFound(wpc)
                await self._report(unit, pods, missing.reason, str(missing))
                raise missing  # retried after a backoff, as Kueue requeues it
        elif priority is None:
            priority = (first.get("spec") or {}).get("priority")
        body = workload_for(
            unit,
            pods,
            count,
            min_count=settings.get("min_count"),
            priority=priority,
            priority_class=None if wpc else priority_class,
            workload_priority_class=wpc,
            disruption_mode=settings.get("disruption_mode"),
            owner_preemptibility=await self._owner_preemptibility(first),
            labels_to_copy=copied,
        )
        try:
            created = await self.custom.create_namespaced_custom_object(
                GROUP, VERSION, unit.namespace, "workloads", body
            )
        except ApiException as exc:
            if exc.status != 409:
                raise
            return
        self.view.workload_created("Pod", first, created)
        self.reported.pop(unit, None)
        if self.view.events:
            for pod in pods:
                await self.view.events(
                    pod, "Normal", "CreatedWorkload", f"Created Workload {unit.workload_name}"
                )

    def _settled(self, unit: Unit, count: int) -> bool:
        """A PodGroup declares no total: its Workload counts the pods present once their
        number has not changed for `settle_seconds` (pods arriving later stay gated)."""
        now = time.monotonic()
        seen = self._counts.get(unit)
        if seen is None or seen[0] != count:
            self._counts[unit] = (count, now)
            self._serial.kick_later(unit, self.settle_seconds)
            return False
        if now - seen[1] < self.settle_seconds:
            self._serial.kick_later(unit, self.settle_seconds - (now - seen[1]))
            return False
        self._counts.pop(unit, None)
        return True

    async def _report(self, unit: Unit, pods: list[dict[str, Any]], reason: str, text: str) -> None:
        if self.reported.get(unit) == text:
            return
        self.reported[unit] = text
        log.warning("%s: %s", unit.key, text)
        if self.view.events:
            for pod in pods:
                await self.view.events(pod, "Warning", reason, text)

    async def _read_pod_group(self, unit: Unit) -> dict[str, Any] | None:
        for version in POD_GROUP_VERSIONS:
            try:
                found: Any = await self.custom.get_namespaced_custom_object(
                    CORE_GROUP, version, unit.namespace, "podgroups", unit.name
                )
                return dict(found)
            except ApiException as exc:
                if exc.status != 404:
                    raise
        return None

    async def _owner_preemptibility(self, pod: Mapping[str, Any]) -> list[str]:
        """The preemptibility label of each owner, nearest first, walking controller
        references up to the top owner ("" where an owner has none). Owners are read
        through a bounded TTL cache."""
        chain: list[str] = []
        meta: Mapping[str, Any] = pod.get("metadata") or {}
        namespace = str(meta.get("namespace") or "")
        for _ in range(8):  # owner chains are short; never loop on a cycle
            owner = next(
                (o for o in meta.get("ownerReferences") or () if o.get("controller")), None
            )
            if owner is None:
                break
            found = await self._owner(namespace, owner)
            if found is None:
                break
            chain.append(
                str(
                    ((found.get("metadata") or {}).get("labels") or {}).get(
                        PREEMPTIBILITY_LABEL, ""
                    )
                )
            )
            meta = found.get("metadata") or {}
        return chain if any(chain) else []

    async def _owner(self, namespace: str, owner: Mapping[str, Any]) -> dict[str, Any] | None:
        api_version, kind, name = (
            str(owner.get("apiVersion")),
            str(owner.get("kind")),
            str(owner.get("name")),
        )
        cache_key = (namespace, f"{api_version}/{kind}", name)
        if cache_key in self.owner_labels:
            return self.owner_labels[cache_key]
        group, _, version = api_version.rpartition("/")
        plural = kind.lower() + ("es" if kind.lower().endswith("s") else "s")
        try:
            if group:
                found: Any = await self.custom.get_namespaced_custom_object(
                    group, version, namespace, plural, name
                )
                value: dict[str, Any] | None = dict(found)
            else:
                value = None  # core kinds (e.g. a Pod) do not own pods in practice
        except ApiException as exc:
            if exc.status not in (403, 404):
                raise
            value = None
        self.owner_labels[cache_key] = value
        return value

    async def _delete(self, pod: Mapping[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            return
        try:
            await self.core.delete_namespaced_pod(
                meta["name"],
                meta["namespace"],
                body=aio_client.V1DeleteOptions(
                    preconditions=aio_client.V1Preconditions(uid=meta.get("uid"))
                ),
            )
        except ApiException as exc:
            if exc.status not in (404, 409):
                raise
            return
        if self.view.events:
            await self.view.events(
                dict(pod), "Normal", "Stopped", "Deleted: its Workload was evicted or shrunk"
            )

    async def _patch_pod(self, pod: Mapping[str, Any], patch: list[dict[str, Any]]) -> bool:
        """Ungate the pod; False when its gate list changed meanwhile (nothing written)."""
        return await ungate_pod(self.core, pod, patch)


def _refs(obj: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    return list(((obj or {}).get("metadata") or {}).get("ownerReferences") or ())


def _uids_and_controllers(pods: list[dict[str, Any]]) -> set[str]:
    """The pods' uids and their controllers' (a group's Workload is owned by one or the
    other)."""
    uids = {str((p.get("metadata") or {}).get("uid")) for p in pods}
    return uids | {str(o.get("uid")) for p in pods for o in _refs(p) if o.get("controller")}
