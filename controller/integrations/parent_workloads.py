"""The reconciler of a kind that runs through its pods (`pod_parents.py`): it keeps each
managed object's Workloads (queue-labelled, or unlabelled under
`manageJobsWithoutQueueName`: `job_management.py`) in step with it, on the leader only,
level-triggered and idempotent (Kueue's StatefulSet and LeaderWorkerSet reconcilers); the
pods themselves
are the pod integration's (gated, ungated with each pod set's flavor, deleted on
eviction, `PodsReady`).

- An object whose templates are not marked (created while the webhook did not serve) is
  marked now: its controller rolls its pods out again, and the new ones are gated.
- Each Workload the object should have (`PodParent.workloads`: a StatefulSet's one, one
  per LeaderWorkerSet replica) is created when missing, owned by the object (garbage
  collection removes it with the object): a scale-up waits for quota.
- A Workload the object should no longer have (a StatefulSet scaled to zero, a
  LeaderWorkerSet replica scaled away) is deleted once none of its pods runs (they are
  listed by the kind's `pod_selector`): its quota returns, never before the pods that
  used it are gone or going (Kueue releases it at once).
- A Workload whose pod sets (names, counts) no longer match the object is made again
  while it holds no quota; while it does, a Warning Event says so and it keeps the
  admitted shape (the webhook refuses such changes; `kubectl scale` on a StatefulSet goes
  around it).
- While a Workload holds no quota its queue and maximum execution time follow the
  object's labels.

Serving Workloads never finish: they hold their quota until evicted, scaled away or
deleted with their object.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from typing import Any

from kubernetes.aio import client as aio_client
from kubernetes.aio.client.exceptions import ApiException

from api import workload_status
from api.constants import GROUP, PRIORITY_CLASS_LABEL, VERSION
from controller.integrations.framework.object_writes import patch_object, patch_workload
from controller.integrations.framework.registry import (
    Framework,
    Integration,
    IntegrationFactory,
    IntegrationSettings,
)
from controller.integrations.framework.workload_names import api_group
from controller.integrations.framework.workloads import (
    followed_spec,
    object_workload,
    workload_pod_set,
)
from controller.integrations.host import ControllerView
from controller.integrations.job_labels import PriorityClassNotFound, WorkloadPriorityClassNotFound
from controller.integrations.pod_parents import ParentAdmission, PodParent
from controller.integrations.pod_units import running
from controller.integrations.serial import ObjectReconciles, SerialReconciler

__all__ = ["ParentReconciler", "parent_integration", "pod_sets_differ"]

log = logging.getLogger(__name__)


def pod_sets_differ(wanted: list[dict[str, Any]], workload: Mapping[str, Any]) -> str | None:
    """How the pod sets the object asks for differ from the Workload's (names and counts:
    what admission decided on), None when they do not."""
    want = [(ps["name"], ps["count"]) for ps in wanted]
    have = [
        (ps.get("name"), ps.get("count", 1))
        for ps in (workload.get("spec") or {}).get("podSets") or ()
    ]
    if want == have:
        return None
    return f"its pod sets (name, count) are now {want}, its Workload's {have}"


class ParentReconciler(ObjectReconciles):
    """Reconciles the managed objects of one parent kind against the Workloads
    they should have (see the module docstring)."""

    def __init__(
        self,
        api_client: aio_client.ApiClient,
        view: ControllerView,
        framework: Framework,
        settings: IntegrationSettings,
        parent: type[PodParent],
    ) -> None:
        assert isinstance(framework.admission, ParentAdmission)
        self.framework = framework
        self.admission: ParentAdmission = framework.admission
        self.parent = parent
        self.custom = aio_client.CustomObjectsApi(api_client)
        self.core = aio_client.CoreV1Api(api_client)
        self.view = view
        self.settings = settings
        self.objects: dict[str, dict[str, Any]] = {}
        self.owned: dict[str, set[str]] = {}  # object key → names of Workloads it owns
        self.reported: dict[str, str] = {}
        kind = framework.resource.kind
        self._serial: SerialReconciler[str] = SerialReconciler(
            self.reconcile, lambda: view.leading, lambda key: f"{kind} {key}", log
        )

    # -- events --------------------------------------------------------------------------------

    def on_object_event(self, event_type: str | None, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        managed = self.settings.management.manages(obj, self.view.namespace_labels)
        if event_type == "DELETED" or not managed:
            self.objects.pop(key, None)
            self.reported.pop(key, None)
            self.owned.pop(key, None)
            return  # its Workloads go with it (owner references)
        self.objects[key] = obj
        self.kick(key)

    def on_workload_event(self, workload: dict[str, Any]) -> None:
        meta = workload.get("metadata") or {}
        resource = self.framework.resource
        for owner in meta.get("ownerReferences") or ():
            group = api_group(str(owner.get("apiVersion", "")))
            if owner.get("kind") == resource.kind and group == resource.group:
                key = f"{meta.get('namespace')}/{owner.get('name')}"
                self.owned.setdefault(key, set()).add(str(meta.get("name")))
                self.kick(key)

    # -- the reconcile -------------------------------------------------------------------------

    async def reconcile(self, key: str) -> None:
        obj = self.objects.get(key)
        if obj is None or not self.view.leading or not self.view.workloads_listed:
            return  # kicked again once they are (`resync`)
        if self.admission.managed_by_another(obj):
            return
        marked = copy.deepcopy(obj)
        self.admission.default(marked)
        if marked != obj:
            await patch_object(self.custom, self.framework.resource, obj, marked)
            await self._event(
                obj,
                "Normal",
                "Queued",
                "Pod templates marked for queueing (created while the webhook did not "
                "serve): its pods are replaced by gated ones",
            )
            return  # the object's event brings the rest
        parent = self.parent(copy.deepcopy(obj))
        wanted = parent.workloads()
        for name, pod_sets in wanted.items():
            await self._sync(key, obj, parent, name, pod_sets)
        namespace = str((obj.get("metadata") or {}).get("namespace"))
        for name in sorted(self.owned.get(key, set()) - wanted.keys()):
            workload = self.view.workload(f"{namespace}/{name}")
            if workload is None:
                self.owned[key].discard(name)
            elif self._owns(obj, workload):
                if await self._pods_gone(parent, namespace, name):
                    await self._delete(obj, workload, "scaled away")
                else:
                    # Their deletions are on the way.
                    self._serial.kick_later(key, self.pods_poll_seconds)

    pods_poll_seconds = 1.0

    async def _pods_gone(self, parent: PodParent, namespace: str, name: str) -> bool:
        """None of the Workload's pods may hold resources any more: each is gone,
        terminated, being deleted or still gated."""
        selector = parent.pod_selector(name)
        if selector is None:
            return True
        listed = await self.core.list_namespaced_pod(namespace, label_selector=selector)
        pods = self.core.api_client.sanitize_for_serialization(listed.items)
        return not any(running(pod) for pod in pods)

    async def _sync(
        self,
        key: str,
        obj: dict[str, Any],
        parent: PodParent,
        name: str,
        pod_sets: list[dict[str, Any]],
    ) -> None:
        namespace = str((obj.get("metadata") or {}).get("namespace"))
        workload = self.view.workload(f"{namespace}/{name}")
        if workload is None:
            await self._create(key, obj, parent, name, pod_sets)
            return
        if not self._owns(obj, workload):
            await self._report(
                key, obj, "WorkloadNameConflict", f"the Workload {name} belongs to another object"
            )
            return
        if workload_status.is_finished(workload):
            return
        reserved = workload_status.has_quota_reservation(workload)
        why = pod_sets_differ(pod_sets, workload)
        if why is not None:
            if not reserved:
                await self._delete(obj, workload, why)
                await self._create(key, obj, parent, name, pod_sets)
            else:
                await self._report(
                    key,
                    obj,
                    "ChangedWhileAdmitted",
                    f"the Workload {name} holds quota for its admitted shape and keeps it: "
                    f"{why}; scale to 0 and back to resize",
                )
            return
        if not reserved:
            follow = followed_spec(obj, workload)
            if follow:
                await patch_workload(self.custom, workload, {"spec": follow})

    async def _create(
        self,
        key: str,
        obj: dict[str, Any],
        parent: PodParent,
        name: str,
        pod_sets: list[dict[str, Any]],
    ) -> None:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        cls = labels.get(PRIORITY_CLASS_LABEL)
        try:
            body = object_workload(
                obj,
                name,
                [workload_pod_set(ps, parent.topology_hints(ps["name"])) for ps in pod_sets],
                priority=self.view.priority_of_class(cls) if cls else None,
                pod_priority_class=parent.priority_class(),
                priority_of_pod_class=self.view.priority_of_pod_class,
                label_keys_to_copy=self.settings.label_keys_to_copy,
            )
        except (WorkloadPriorityClassNotFound, PriorityClassNotFound) as exc:
            await self._report(key, obj, exc.reason, str(exc))
            raise  # reconciled again after a backoff, as Kueue requeues it
        # 409: it exists (a stale view, or one just deleted and not gone yet): the error
        # makes the round go again after a backoff.
        created = await self.custom.create_namespaced_custom_object(
            GROUP, VERSION, body["metadata"]["namespace"], "workloads", body
        )
        self.view.workload_created(str(obj.get("kind") or ""), obj, created)
        await self._event(obj, "Normal", "CreatedWorkload", f"Created Workload {name}")

    async def _delete(self, obj: dict[str, Any], workload: Mapping[str, Any], why: str) -> None:
        meta = workload.get("metadata") or {}
        try:
            await self.custom.delete_namespaced_custom_object(
                GROUP,
                VERSION,
                meta["namespace"],
                "workloads",
                meta["name"],
                body=aio_client.V1DeleteOptions(
                    preconditions=aio_client.V1Preconditions(uid=meta.get("uid"))
                ),
            )
        except ApiException as exc:
            if exc.status not in (404, 409):
                raise
            return
        await self._event(
            obj, "Normal", "DeletedWorkload", f"Deleted Workload {meta['name']}: {why}"
        )

    @staticmethod
    def _owns(obj: Mapping[str, Any], workload: Mapping[str, Any]) -> bool:
        uid = (obj.get("metadata") or {}).get("uid")
        return any(
            o.get("uid") == uid
            for o in (workload.get("metadata") or {}).get("ownerReferences") or ()
        )

    async def _event(self, obj: dict[str, Any], kind: str, reason: str, text: str) -> None:
        if self.view.events:
            await self.view.events(obj, kind, reason, text)

    async def _report(self, key: str, obj: dict[str, Any], reason: str, text: str) -> None:
        """A Warning Event on the object, once per distinct problem."""
        if self.reported.get(key) == text:
            return
        self.reported[key] = text
        log.warning("%s %s: %s", self.framework.resource.kind, key, text)
        await self._event(obj, "Warning", reason, text)


def parent_integration(parent: type[PodParent]) -> IntegrationFactory:
    """The integration factory of a parent kind (`Framework(integration=...)`)."""

    def make(
        api_client: aio_client.ApiClient,
        view: ControllerView,
        framework: Framework,
        settings: IntegrationSettings,
    ) -> Integration:
        return ParentReconciler(api_client, view, framework, settings, parent)

    return make
