"""The generic job reconciler: one per enabled integration with an adapter, keeping each
queue-labelled object of its kind and its Workload in step (Kueue's
`JobReconciler.ReconcileGenericJob`), level-triggered and idempotent, on the leader only:

- an object that is not queued (`skip`: a RayJob on an existing cluster) is left alone;
  one that belongs to a queued ancestor (a RayJob's RayCluster: `ancestors.py`) gets no
  Workload and is suspended while it runs without its ancestor's Workload admitted;
- the job on hold (`is_on_hold`: a RayJob KubeRay refused) → its Workload's quota
  reservation is released with QuotaReserved=False `OnHold`, and it is not queued again;
- its Workload is the one it owns, whatever its name (Kueue's, an older quotagate's: it is
  adopted after a switch or an upgrade), else the one named as Kueue names it
  (`workload_names.py`);
- no Workload → a running object is suspended first, and once none of its pods is active
  the Workload is created (`workloads.new_workload`); an object naming a prebuilt Workload
  (`kueue.x-k8s.io/prebuilt-workload-name`) runs under that one instead: it waits for it,
  adopts it (owner reference and job-uid label), and finishes it as `OutOfSync` when its
  pod sets are not the object's;
- the object finished → the Workload is `Finished` (Succeeded or Failed) and its quota
  returns;
- the Workload holds no quota → its queue and `maximumExecutionTimeSeconds` follow the
  object's labels;
- waitForPodsReady configured → the Workload's `PodsReady` condition follows the adapter's
  `pods_ready`, written before anything else (Kueue's step 5);
- the Workload evicted → the object is suspended and its templates restored from the
  Workload's pod sets; once its pods are gone the eviction is acknowledged (the quota
  reservation released) and the Workload queues again;
- the Workload admitted and the object suspended → each pod set's admitted flavors (node
  selector, tolerations, the pod set label) and counts go into its template and it is
  unsuspended; an admission that does not fit the object finishes the Workload as
  `FailedToStart`;
- the object running without an admitted Workload → suspended again;
- an object of another kind the adapter needs (`Framework.related`: a TrainJob's
  TrainingRuntime) missing → a Warning Event `ErrWorkloadCompose`, and the object waits
  until that kind's next event.

Objects are changed by a JSON merge patch computed from the adapter's change, with the
object's resourceVersion as a precondition (a stale copy gets 409 and is retried on the
newer one).
"""

from __future__ import annotations

import copy
import json
import logging
import time
from collections.abc import Mapping
from typing import Any, cast

from kubernetes.aio import client as aio_client
from kubernetes.aio.client.exceptions import ApiException

from api import workload_status
from api.constants import (
    ADMISSION_GATED_BY_ANNOTATION,
    ELASTIC_JOB_ANNOTATION,
    GROUP,
    JOB_UID_LABEL,
    PRIORITY_CLASS_LABEL,
    VERSION,
    QuotaReservedReason,
)
from api.validation import aggregate
from api.validation.admission_gates import validate_gates_update
from controller.integrations.framework.ancestors import managed_ancestor, owner_framework
from controller.integrations.framework.generic_job import GenericJob
from controller.integrations.framework.object_writes import patch_object, patch_workload
from controller.integrations.framework.owned_workloads import OwnedWorkloads
from controller.integrations.framework.podset_info import (
    FlavorPlacement,
    PodSetInfoError,
    from_admission,
    from_pod_set,
)
from controller.integrations.framework.registry import Framework, IntegrationSettings, by_kind
from controller.integrations.framework.related import RelatedCache, RelatedObjectMissing
from controller.integrations.framework.workload_names import api_group, object_workload_name
from controller.integrations.framework.workloads import (
    followed_spec,
    new_workload,
    owner_reference,
    pod_sets_match,
    prebuilt_workload_name,
)
from controller.integrations.host import ControllerView
from controller.integrations.job_labels import (
    PriorityClassNotFound,
    WorkloadPriorityClassNotFound,
    admission_gated_by,
)
from controller.integrations.serial import ObjectReconciles, SerialReconciler
from controller.integrations.workload_writes import PodsReadyWriter, apply_workload_status

__all__ = ["FAILED_TO_START", "OUT_OF_SYNC", "GenericReconciler"]

log = logging.getLogger(__name__)

FAILED_TO_START = "FailedToStart"
"""Kueue's `FailedToStartFinishedReason`: the admission could not be put into the job."""
OUT_OF_SYNC = "OutOfSync"
"""Kueue's `WorkloadFinishedReasonOutOfSync`: a prebuilt Workload that is not the job's."""


class GenericReconciler(ObjectReconciles):
    """Reconciles the queue-labelled objects of one framework against their Workloads (see
    the module docstring)."""

    def __init__(
        self,
        api_client: aio_client.ApiClient,
        view: ControllerView,
        framework: Framework,
        settings: IntegrationSettings,
    ) -> None:
        assert framework.job is not None
        self.framework = framework
        self.adapter: type[GenericJob] = framework.job
        self.custom = aio_client.CustomObjectsApi(api_client)
        self.view = view
        self.settings = settings
        self.enabled = by_kind(settings.enabled)
        self.objects: dict[str, dict[str, Any]] = {}
        self.prebuilt: dict[str, set[str]] = {}  # Workload key → keys of objects naming it
        self.owned = OwnedWorkloads(view)
        self.pods_ready = PodsReadyWriter(self.custom, view)
        self.reported: dict[str, str] = {}
        self.related = RelatedCache(framework.related, self._related_changed)
        self._waiting: set[str] = set()  # keys whose adapter misses a related object
        kind = framework.resource.kind
        self._serial: SerialReconciler[str] = SerialReconciler(
            self.reconcile, lambda: view.leading, lambda key: f"{kind} {key}", log
        )

    # -- events --------------------------------------------------------------------------------

    def on_object_event(self, event_type: str | None, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        gone = event_type == "DELETED" or not self.settings.management.manages(
            obj, self.view.namespace_labels
        )
        previous = self.objects.pop(key, None) if gone else self.objects.get(key)
        if previous is not None:
            self._forget_prebuilt(key, previous)
        if gone:
            self.pods_ready.forget(self._workload_key(previous or obj))
            self.reported.pop(key, None)
            self.owned.forget(str(meta.get("uid")))
            return
        self.objects[key] = obj
        name = prebuilt_workload_name(obj)
        if name:
            self.prebuilt.setdefault(f"{meta.get('namespace')}/{name}", set()).add(key)
        self.kick(key)

    def on_workload_event(self, workload: dict[str, Any]) -> None:
        meta = workload.get("metadata") or {}
        namespace = meta.get("namespace")
        resource = self.framework.resource
        for owner in meta.get("ownerReferences") or ():
            group = api_group(str(owner.get("apiVersion", "")))
            if owner.get("kind") == resource.kind and group == resource.group:
                self.owned.add(str(owner.get("uid")), f"{namespace}/{meta.get('name')}")
                self.kick(f"{namespace}/{owner.get('name')}")
        for key in self.prebuilt.get(f"{namespace}/{meta.get('name')}", ()):
            self.kick(key)

    def _related_changed(self) -> None:
        waiting, self._waiting = self._waiting, set()
        for key in waiting:
            self.kick(key)

    def _forget_prebuilt(self, key: str, obj: Mapping[str, Any]) -> None:
        name = prebuilt_workload_name(obj)
        if name:
            wl_key = f"{(obj.get('metadata') or {}).get('namespace')}/{name}"
            self.prebuilt.get(wl_key, set()).discard(key)
            if not self.prebuilt.get(wl_key):
                self.prebuilt.pop(wl_key, None)

    def _workload_key(self, obj: Mapping[str, Any]) -> str:
        """The object's Workload: the prebuilt one it names, else one it owns (Kueue
        finds them by their owner reference, whatever their name), else the one it gets."""
        meta = obj.get("metadata") or {}
        prebuilt = prebuilt_workload_name(obj)
        if prebuilt:
            return f"{meta.get('namespace')}/{prebuilt}"
        wanted = f"{meta.get('namespace')}/{object_workload_name(obj)}"
        owned = self.owned.of(str(meta.get("uid")))
        if not owned or wanted in owned:
            return wanted
        # Made by Kueue or an older quotagate under another name: adopted as it is.
        # Several (not made by quotagate): the first not finished, in name order.
        return min(owned, key=lambda k: (workload_status.is_finished(owned[k]), k))

    # -- the reconcile -------------------------------------------------------------------------

    def _job(self, obj: dict[str, Any]) -> GenericJob:
        """The adapter on a copy of the cached object (it changes the copy)."""
        return self.adapter(copy.deepcopy(obj), self.related.lookup)

    async def reconcile(self, key: str) -> None:
        try:
            await self._reconcile(key)
        except RelatedObjectMissing as exc:
            self._waiting.add(key)
            obj = self.objects.get(key)
            if obj is not None and self.related.listed():  # else it may not have arrived yet
                await self._report(key, obj, "ErrWorkloadCompose", str(exc))

    async def _reconcile(self, key: str) -> None:
        obj = self.objects.get(key)
        if obj is None or not self.view.leading or not self.view.workloads_listed:
            return  # kicked again once they are (the integrations' resync)
        wl_key = self._workload_key(obj)
        workload = self.view.workload(wl_key)
        prebuilt = prebuilt_workload_name(obj)
        job = self._job(obj)  # read only here: `_start` and `_stop` change copies of their own
        if job.skip():
            return
        if owner_framework(obj, self.enabled) is not None:
            ancestor = await managed_ancestor(self.custom, obj, self.enabled)
            if ancestor is not None:
                await self._child(obj, job, ancestor)
                return
        if job.is_on_hold():  # Kueue's step 2
            if workload is not None and workload_status.has_quota_reservation(workload):
                await apply_workload_status(
                    self.custom,
                    workload,
                    workload_status.unset_quota_reservation(
                        workload, QuotaReservedReason.ON_HOLD, "Job is on hold", time.time()
                    ),
                )
            return
        finished = job.finished()
        if prebuilt:
            workload = await self._prebuilt(key, obj, workload, finished is not None)
            if workload is None:
                return
        elif workload is None:
            if finished is None:
                await self._no_workload(key, obj)
            return
        if workload_status.is_finished(workload):
            self.pods_ready.forget(wl_key)
            return
        if finished is not None:
            reason = "Succeeded" if finished.success else "Failed"
            await apply_workload_status(
                self.custom,
                workload,
                workload_status.finish(
                    workload, reason, finished.message or f"Job finished: {reason}", time.time()
                ),
            )
            return
        reserved = workload_status.has_quota_reservation(workload)
        if not reserved and not prebuilt:
            follow = followed_spec(obj, workload)
            if follow:
                await patch_workload(self.custom, workload, {"spec": follow})
                return  # the Workload's event brings the rest
            if await self._propagate_gates(key, obj, workload):
                return
        # Kueue's step 5: the PodsReady condition first; the Workload's event brings the rest.
        if self.view.wait_for_pods_ready and await self.pods_ready.sync(
            wl_key, workload, job.pods_ready()
        ):
            return
        if workload_status.is_evicted(workload):
            eviction = workload_status.condition(workload, "Evicted") or {}
            stopped = await self._stop(
                obj, workload, str(eviction.get("message") or "The Workload was evicted")
            )
            if stopped and reserved and not job.is_active():
                await apply_workload_status(
                    self.custom, workload, workload_status.release(workload, time.time())
                )
            return
        if job.is_suspended():
            if workload_status.is_admitted(workload):
                await self._start(obj, workload)
            return
        if not workload_status.is_admitted(workload):
            await self._stop(obj, workload, "Not admitted by cluster queue")

    async def _child(self, obj: dict[str, Any], job: GenericJob, ancestor: dict[str, Any]) -> None:
        """A job of a queued ancestor has no Workload of its own: it runs as part of the
        ancestor's, and is suspended while it runs without that Workload admitted (Kueue's
        `shouldSuspendChildJob`)."""
        if job.finished() is not None or job.is_suspended():
            return
        meta = ancestor.get("metadata") or {}
        name = prebuilt_workload_name(ancestor) or await self._owned_name(ancestor)
        workload = self.view.workload(f"{meta.get('namespace')}/{name}")
        if (
            workload is not None
            and not workload_status.is_finished(workload)
            and workload_status.is_admitted(workload)
        ):
            return
        await self._stop(
            obj, None, f"its {ancestor.get('kind')} {meta.get('name')} is not admitted"
        )

    async def _owned_name(self, obj: Mapping[str, Any]) -> str:
        """The name of the Workload of `obj`, an object of another kind: the one named as
        Kueue names it, else one labelled with its uid (Kueue's and quotagate's carry
        `kueue.x-k8s.io/job-uid`), listed from the API server."""
        meta = obj.get("metadata") or {}
        name = object_workload_name(obj)
        if self.view.workload(f"{meta.get('namespace')}/{name}") is not None:
            return name
        found = await self.custom.list_namespaced_custom_object(
            GROUP,
            VERSION,
            str(meta.get("namespace")),
            "workloads",
            label_selector=f"{JOB_UID_LABEL}={meta.get('uid')}",
        )
        names = sorted(
            str(w["metadata"]["name"]) for w in cast(dict[str, Any], found).get("items") or ()
        )
        return names[0] if names else name

    async def _no_workload(self, key: str, obj: dict[str, Any]) -> None:
        """Suspend a running object first (Kueue: "job with no matching workload,
        suspending"), then, once none of its pods is active, create its Workload."""
        job = self._job(obj)
        if not job.is_suspended():
            await self._stop(obj, None, "Missing Workload; unable to restore pod templates")
            return
        if job.is_active():
            return  # its pods are still going
        labels = (obj.get("metadata") or {}).get("labels") or {}
        cls = labels.get(PRIORITY_CLASS_LABEL)
        try:
            body = new_workload(
                job,
                priority=self.view.priority_of_class(cls) if cls else None,
                priority_of_pod_class=self.view.priority_of_pod_class,
                label_keys_to_copy=self.settings.label_keys_to_copy,
            )
        except (WorkloadPriorityClassNotFound, PriorityClassNotFound) as exc:
            await self._report(key, obj, exc.reason, str(exc))
            raise  # reconciled again after a backoff, as Kueue requeues it
        try:
            created = await self.custom.create_namespaced_custom_object(
                GROUP, VERSION, body["metadata"]["namespace"], "workloads", body
            )
        except ApiException as exc:
            if exc.status == 409:
                return
            if exc.status == 422:  # said on the object too; retried with a backoff
                await self._report(key, obj, "CreateWorkloadFailed", _message(exc))
            raise
        self.view.workload_created(str(obj.get("kind") or ""), obj, created)
        self.reported.pop(key, None)
        if self.view.events:
            await self.view.events(
                obj, "Normal", "CreatedWorkload", f"Created Workload {body['metadata']['name']}"
            )
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        if annotations.get(ELASTIC_JOB_ANNOTATION) == "true":
            await self._report(
                key,
                obj,
                "ElasticJobNotSupported",
                f"{ELASTIC_JOB_ANNOTATION}: elastic jobs (Workload slices) are not implemented "
                "by quotagate: the job runs with the pods it was admitted with, and a change "
                "of its size is not admitted",
            )

    async def _prebuilt(
        self,
        key: str,
        obj: dict[str, Any],
        workload: dict[str, Any] | None,
        finished: bool,
    ) -> dict[str, Any] | None:
        """The prebuilt Workload the object runs under, once it is the object's own; None
        while it is not (waiting for it, adopting it, or finishing it as out of sync)."""
        name = prebuilt_workload_name(obj)
        if workload is None:
            if not finished and not self._job(obj).is_suspended():
                await self._stop(obj, None, f"Waiting for the prebuilt Workload {name}")
            await self._report(
                key, obj, "PrebuiltWorkloadNotFound", f"the prebuilt Workload {name} does not exist"
            )
            return None
        uid = (obj.get("metadata") or {}).get("uid")
        owner = next(
            (
                o
                for o in (workload.get("metadata") or {}).get("ownerReferences") or ()
                if o.get("controller")
            ),
            None,
        )
        if owner is not None and owner.get("uid") != uid:
            await self._report(
                key,
                obj,
                "PrebuiltWorkloadNotOwned",
                f"the prebuilt Workload {name} is controlled by {owner.get('kind')} "
                f"{owner.get('name')}",
            )
            return None
        if owner is None:
            refs = [
                *((workload.get("metadata") or {}).get("ownerReferences") or ()),
                owner_reference(obj),
            ]
            await patch_workload(
                self.custom,
                workload,
                {"metadata": {"ownerReferences": refs, "labels": {JOB_UID_LABEL: uid}}},
            )
            return None  # the Workload's event brings the rest
        self.reported.pop(key, None)
        if (
            not finished
            and not workload_status.is_finished(workload)
            and not workload_status.has_quota_reservation(workload)
        ):
            why = pod_sets_match(self._job(obj), workload)
            if why is not None:
                await apply_workload_status(
                    self.custom,
                    workload,
                    workload_status.finish(
                        workload,
                        OUT_OF_SYNC,
                        f"The prebuilt workload is out of sync with its user job: {why}",
                        time.time(),
                    ),
                )
                return None
        return workload

    async def _start(self, obj: dict[str, Any], workload: dict[str, Any]) -> None:
        """Unsuspend with the admission in the templates (Kueue's `startJob`)."""
        job = self._job(obj)
        try:
            # the checks' podSetUpdates may conflict here: as Kueue, a permanent error
            job.run_with_pod_sets_info(from_admission(workload, self._placement))
        except PodSetInfoError as exc:
            await apply_workload_status(
                self.custom,
                workload,
                workload_status.finish(workload, FAILED_TO_START, str(exc), time.time()),
            )
            if self.view.events:
                await self.view.events(obj, "Warning", FAILED_TO_START, str(exc))
            return
        await patch_object(self.custom, self.framework.resource, obj, job.obj)
        if self.view.events:
            admission = (workload.get("status") or {}).get("admission") or {}
            await self.view.events(
                obj,
                "Normal",
                "Started",
                f"Admitted by ClusterQueue {admission.get('clusterQueue')}",
            )

    async def _stop(
        self, obj: dict[str, Any], workload: Mapping[str, Any] | None, message: str
    ) -> bool:
        """Suspend the object and restore its templates from the Workload's pod sets
        (Kueue's `stopJob`); True once both are done. A kind whose API server refuses the
        restore while the object still runs (`restores_while_suspending` off) is restored
        in a later round, once `template_mutable`."""
        job = self._job(obj)
        infos = (
            [from_pod_set(ps) for ps in (workload.get("spec") or {}).get("podSets") or ()]
            if workload is not None
            else None
        )
        if not job.is_suspended():
            job.suspend()
            if infos and job.restores_while_suspending:
                job.restore_pod_sets_info(infos)
            await patch_object(self.custom, self.framework.resource, obj, job.obj)
            if self.view.events:
                await self.view.events(obj, "Normal", "Stopped", f"Suspended: {message}")
            return False
        if not infos or not job.restore_pod_sets_info(infos):
            return True
        if job.template_mutable():
            await patch_object(self.custom, self.framework.resource, obj, job.obj)
        return False

    def _placement(self, flavor: str) -> FlavorPlacement | None:
        found = self.view.flavor_placement(flavor)
        if found is None:
            return None
        return FlavorPlacement(dict(found.node_labels), tuple(found.tolerations))

    async def _propagate_gates(
        self, key: str, obj: dict[str, Any], workload: dict[str, Any]
    ) -> bool:
        """Kueue's `UpdateAdmissionGatedBy`: the object's admission gates become the pending
        Workload's. Gates are only ever removed after creation (Kueue's rule; a gate added
        to the object later is reported, not propagated). Whether the Workload was patched."""
        gates = admission_gated_by(obj)
        if admission_gated_by(workload) == gates:
            return False
        annotations = {ADMISSION_GATED_BY_ANNOTATION: gates}
        wanted = {**workload, "metadata": {**workload["metadata"], "annotations": annotations}}
        refused = validate_gates_update(workload, wanted)
        if refused:
            await self._report(key, obj, "AdmissionGatedBy", aggregate(refused))
            return False
        await patch_workload(self.custom, workload, {"metadata": {"annotations": annotations}})
        if self.view.events:
            text = f'Updated workload AdmissionGatedBy to "{gates or ""}"'
            await self.view.events(obj, "Normal", "UpdatedWorkload", text)
        return True

    async def _report(self, key: str, obj: dict[str, Any], reason: str, text: str) -> None:
        """A Warning Event on the object, once per distinct problem."""
        if self.reported.get(key) == text:
            return
        self.reported[key] = text
        log.warning("%s %s: %s", self.framework.resource.kind, key, text)
        if self.view.events:
            await self.view.events(obj, "Warning", reason, text)


def _message(exc: ApiException) -> str:
    try:
        return str(json.loads(exc.body or "{}").get("message") or exc.reason)
    except (ValueError, AttributeError):
        return str(exc.reason)
