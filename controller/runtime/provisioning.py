"""The ProvisioningRequest admission check controller (`controllerName:
kueue.x-k8s.io/provisioning-request`), in the controller process and under its leader
election, switched by the configuration's `provisioningRequest` (on by default, as
Kueue's ProvisioningACC feature gate).

From the scheduling loop but in a task of its own (the admission cycle never waits on it),
whenever a watched object changed (`ProvisioningController`): its AdmissionChecks get
`Active` once their `parameters` name a ProvisioningRequestConfig that exists; for each
Workload holding quota with one of its checks Pending, it creates the pod templates and
the `autoscaling.x-k8s.io/v1` ProvisioningRequest of the current attempt (owned by the
Workload; the templates are then handed over to the request), and maps the request's
conditions to the check state (controller/provisioning/requests.py). The requests of
finished, evicted or deleted Workloads and of earlier attempts are deleted with their pod
templates, as Kueue's. The request's entries and their pod templates (pod sets merged by
the config's `podSetMergePolicy`, the assigned flavors' node labels and tolerations in the
templates) are controller/provisioning/pod_sets.py's.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Final

from kubernetes.aio.client.exceptions import ApiException

from api import workload_status
from api.constants import CheckState
from api.workload_status import rfc3339
from controller.core.model.workloads import workload_key
from controller.kube.client import ADMISSION_CHECKS, API_ERRORS, MERGE_PATCH, Resource
from controller.kube.informer import ObjectCache
from controller.kube.owners import controller_reference
from controller.provisioning.objects import request_objects
from controller.provisioning.pod_sets import (
    FlavorPlacement,
    InconsistentAssignments,
    PodSetInfoError,
)
from controller.provisioning.requests import (
    CONTROLLER_NAME,
    RetryStrategy,
    is_unused,
    next_state,
    pod_set_updates,
    request_is_needed,
    request_name,
)
from controller.runtime.context import Context
from controller.runtime.sync import WorkloadSync

log = logging.getLogger(__name__)

__all__ = ["PROVISIONING_REQUESTS", "ProvisioningController"]

PROVISIONING_REQUESTS: Final = Resource(
    "ProvisioningRequest", "autoscaling.x-k8s.io", "v1", "provisioningrequests", True
)
PROVISIONING_REQUEST_CONFIGS: Final = Resource(
    "ProvisioningRequestConfig", "kueue.x-k8s.io", "v1beta2", "provisioningrequestconfigs", False
)
POD_TEMPLATES: Final = Resource("PodTemplate", "", "v1", "podtemplates", True)
NOT_NEEDED: Final = "the provisioning request is not needed"
FIELD_MANAGER: Final = CONTROLLER_NAME
MANAGED_SELECTOR: Final = "kueue.x-k8s.io/managed=true"
# What fails one Workload's request (reported on it, tried again next pass): the API, or a
# pod template the admission cannot be merged into.
_SYNC_ERRORS: Final[tuple[type[BaseException], ...]] = (
    *API_ERRORS,
    PodSetInfoError,
    InconsistentAssignments,
)


class ProvisioningController:
    """Passes start when something they read changed: a ProvisioningRequest,
    ProvisioningRequestConfig or AdmissionCheck event (their watches: `sinks`), a Workload
    with check states changing or going, the leadership gained; or, after a pass that
    failed, once its backoff passed (1 s doubling to a minute, as a controller's rate
    limiter backs off). A pass reads only the watched copies and the Workloads' (it makes
    no request but its writes); at most one runs at a time, at most one a second. Nothing
    is lost on a restart: the watches list everything first, and the first pass resyncs it
    all."""

    def __init__(
        self,
        ctx: Context,
        sync: WorkloadSync,
        placement: Callable[[str], FlavorPlacement | None],
    ) -> None:
        self.ctx = ctx
        self.sync = sync
        self.placement = placement  # a ResourceFlavor's node labels and tolerations
        self.enabled = ctx.config.provisioning_request
        self.requests = ObjectCache(self._changed)
        self.configs = ObjectCache(self._changed)
        self.checks = ObjectCache(self._changed)
        self._dirty = True
        self._was_leading = False
        self._checked_at = float("-inf")
        self._running = False
        self._failed_passes = 0  # in a row: the backoff before the next retry
        self._retry_at: float | None = None
        sync.workload_listeners.append(self._workload_changed)
        sync.deletion_listeners.append(lambda _key: self._changed())

    def sinks(self) -> list[tuple[Resource, ObjectCache, str | None]]:
        """What to watch, into which cache, with which label selector (none when off)."""
        if not self.enabled:
            return []
        return [
            (ADMISSION_CHECKS, self.checks, None),
            (PROVISIONING_REQUEST_CONFIGS, self.configs, None),
            (PROVISIONING_REQUESTS, self.requests, MANAGED_SELECTOR),
        ]

    def _changed(self) -> None:
        self._dirty = True

    def _workload_changed(self, body: dict[str, Any]) -> None:
        if (body.get("status") or {}).get("admissionChecks"):
            self._dirty = True

    def check(self, now: float) -> None:
        """Start a pass when something changed, the watches have listed, a second has
        passed since the last and none is running (no waiting)."""
        if not self.enabled or self._running:
            return
        leading = self.ctx.leading
        if leading and not self._was_leading:
            self._dirty = True  # a new term: resync everything
        self._was_leading = leading
        due = self._dirty or (self._retry_at is not None and now >= self._retry_at)
        if not leading or not due or now - self._checked_at < 1.0:
            return
        if not (self.checks.listed and self.configs.listed and self.requests.listed):
            return  # Kueue sets the check up only once the ProvisioningRequest API is served
        if not any(
            (c.get("spec") or {}).get("controllerName") == CONTROLLER_NAME
            for c in self.checks.objects.values()
        ):
            self._dirty = False
            return
        self._checked_at = now
        self._dirty = False
        self._retry_at = None
        self._running = True
        self.ctx.spawn(self._guarded())

    async def _guarded(self) -> None:
        failed = True
        try:
            failed = not await self.reconcile()
        except API_ERRORS as exc:
            log.warning("provisioning-request pass failed (%s); retried later", exc)
        finally:
            self._running = False
            self._failed_passes = self._failed_passes + 1 if failed else 0
            if failed:
                delay = min(60.0, 2.0 ** (self._failed_passes - 1))
                self._retry_at = self.ctx.clock() + delay

    async def reconcile(self) -> bool:
        """One pass; whether every Workload's request went through."""
        clean = True
        configs: dict[str, dict[str, Any] | None] = {}
        for check in list(self.checks.objects.values()):
            spec = check.get("spec") or {}
            if spec.get("controllerName") != CONTROLLER_NAME:
                continue
            name = str(check["metadata"]["name"])
            configs[name] = self._config_of(spec.get("parameters"))
            await self._set_active(check, configs[name] is not None)
        await self._delete_unused()
        state = self.ctx.state
        for key in list(state.index.timed):
            body = self.sync.body(key)
            if body is None or not workload_status.has_quota_reservation(body):
                continue
            if workload_status.is_finished(body) or workload_status.is_evicted(body):
                continue
            for entry in (body.get("status") or {}).get("admissionChecks") or ():
                name = str(entry.get("name"))
                if name in configs and entry.get("state") == CheckState.PENDING:
                    try:
                        await self._sync_check(body, entry, configs[name])
                    except _SYNC_ERRORS as exc:
                        await self._failed(body, name, exc)  # this Workload's; others go on
                        clean = False
        return clean

    async def _delete_unused(self) -> None:
        """Delete the requests (and their pod templates) of finished, evicted or deleted
        Workloads and of earlier attempts, as Kueue does."""
        for request in list(self.requests.objects.values()):
            meta = request.get("metadata") or {}
            owner = next(
                (o for o in meta.get("ownerReferences") or () if o.get("kind") == "Workload"),
                None,
            )
            if owner is None:
                continue
            namespace = str(meta.get("namespace"))
            body = self.sync.body(workload_key(namespace, str(owner.get("name"))))
            if body is not None and (body.get("metadata") or {}).get("uid") != owner.get("uid"):
                body = None  # a new Workload of the same name
            if not is_unused(request, body):
                continue
            for pod_set in (request.get("spec") or {}).get("podSets") or ():
                template = (pod_set.get("podTemplateRef") or {}).get("name")
                await self._delete(POD_TEMPLATES, namespace, str(template))
            await self._delete(PROVISIONING_REQUESTS, namespace, str(meta.get("name")))
            log.info("deleted ProvisioningRequest %s/%s", namespace, meta.get("name"))

    async def _delete(self, resource: Resource, namespace: str, name: str) -> None:
        try:
            await self.ctx.api.request("DELETE", self.ctx.api.path(resource, name, namespace))
        except ApiException as exc:
            if exc.status != 404:
                raise

    async def _failed(self, body: dict[str, Any], check: str, exc: BaseException) -> None:
        """Kueue's `handleError`: a Warning Event on the Workload; retried next pass."""
        meta = body.get("metadata") or {}
        text = f"check {check}: {exc}".splitlines()[0]
        log.warning(
            "provisioning request for %s/%s: %s", meta.get("namespace"), meta.get("name"), text
        )
        if self.ctx.events is not None:
            await self.ctx.events(body, "Warning", "FailedCreate", text)

    def _config_of(self, parameters: Any) -> dict[str, Any] | None:
        """The ProvisioningRequestConfig the check's `parameters` name, as watched."""
        if not isinstance(parameters, dict):
            return None
        if parameters.get("apiGroup") != "kueue.x-k8s.io" or (
            parameters.get("kind") != "ProvisioningRequestConfig"
        ):
            return None
        return self.configs.objects.get(f"/{parameters.get('name')}")

    async def _set_active(self, check: dict[str, Any], active: bool) -> None:
        """Kueue's admission check reconciler: Active while the parameters resolve."""
        conditions = (check.get("status") or {}).get("conditions") or []
        current = next((c for c in conditions if c.get("type") == "Active"), None)
        wanted = "True" if active else "False"
        if current is not None and current.get("status") == wanted:
            return
        reason, message = (
            ("Active", "The admission check is active")
            if active
            else ("BadParametersRef", "the ProvisioningRequestConfig of the check is missing")
        )
        condition = {
            "type": "Active",
            "status": wanted,
            "reason": reason,
            "message": message,
            "lastTransitionTime": rfc3339(time.time()),
        }
        others = [c for c in conditions if c.get("type") != "Active"]
        await self.ctx.api.patch_cluster_status(
            ADMISSION_CHECKS, str(check["metadata"]["name"]), {"conditions": [*others, condition]}
        )

    async def _sync_check(
        self, body: dict[str, Any], entry: dict[str, Any], config: dict[str, Any] | None
    ) -> None:
        meta = body["metadata"]
        namespace, workload = str(meta["namespace"]), str(meta["name"])
        check = str(entry["name"])
        if config is None:
            return  # the check is not Active: its ClusterQueue admits nothing meanwhile
        spec = config.get("spec") or {}
        if not request_is_needed(body, spec.get("managedResources") or ()):
            await self._write(body, check, CheckState.READY, NOT_NEEDED, None, None)
            return
        retry_count = int(entry.get("retryCount") or 0)
        attempt = retry_count + 1
        name = request_name(workload, check, attempt)
        request = self.requests.objects.get(f"{namespace}/{name}")
        if request is None:
            await self._create(body, name, spec)
            return
        pod_sets = [str(ps.get("name")) for ps in (body.get("spec") or {}).get("podSets") or ()]
        selectors = (spec.get("podSetUpdates") or {}).get("nodeSelector") or ()
        update = next_state(
            request,
            attempt,
            retry_count,
            workload_status.is_admitted(body),
            (body.get("spec") or {}).get("active", True) is not False,
            RetryStrategy.from_spec(spec.get("retryStrategy")),
            pod_set_updates(request, pod_sets, selectors),
        )
        if update is None:
            return
        if (update.state, update.message) == (entry.get("state"), entry.get("message", "")):
            return
        await self._write(
            body,
            check,
            update.state,
            update.message,
            update.requeue_after_seconds,
            update.pod_set_updates,
        )

    async def _create(self, body: dict[str, Any], name: str, spec: dict[str, Any]) -> None:
        """The pod templates and the ProvisioningRequest of one attempt, owned by the
        Workload; the templates then handed over to the request, as Kueue's
        `syncProvisionRequestsPodTemplates` does (a template not handed over, the
        controller stopped in between, stays the Workload's and is deleted with the
        request)."""
        namespace = str(body["metadata"]["namespace"])
        templates, request = request_objects(body, name, spec, self.placement)
        for template in templates:
            await self._create_object(POD_TEMPLATES, namespace, template)
        created = await self._create_object(PROVISIONING_REQUESTS, namespace, request)
        if created is not None:  # seen at once: the next pass does not make it again
            self.requests.apply_event("ADDED", created)
            owner = controller_reference({**request, **created})
            api = self.ctx.api
            for template in templates:
                await api.request(
                    "PATCH",
                    api.path(POD_TEMPLATES, template["metadata"]["name"], namespace),
                    {"metadata": {"ownerReferences": [owner]}},
                    content_type=MERGE_PATCH,
                )
        log.info("created ProvisioningRequest %s/%s", namespace, name)
        if self.ctx.events is not None:
            await self.ctx.events(
                body,
                "Normal",
                "ProvisioningRequestCreated",
                f'Created ProvisioningRequest: "{name}"',
            )

    async def _create_object(
        self, resource: Resource, namespace: str, obj: dict[str, Any]
    ) -> dict[str, Any] | None:
        """The object created, or None when it was there already (an earlier pass made
        it; its watch brings it)."""
        try:
            created: dict[str, Any] = await self.ctx.api.request(
                "POST", self.ctx.api.path(resource, None, namespace), obj
            )
        except ApiException as exc:
            if exc.status != 409:
                raise
            return None
        return created

    async def _write(
        self,
        body: dict[str, Any],
        check: str,
        state: CheckState,
        message: str,
        requeue_after: int | None,
        updates: Any,
    ) -> None:
        """This check's entry of `status.admissionChecks`, the others as read (a merge
        patch of the list, refused if the Workload changed since it was read)."""
        now = rfc3339(time.time())
        before = None
        checks = []
        for entry in (body.get("status") or {}).get("admissionChecks") or ():
            entry = dict(entry)
            if entry.get("name") == check:
                before = entry.get("state")
                if entry.get("state") != state:
                    entry["lastTransitionTime"] = now
                entry.update(state=state.value, message=message)
                if requeue_after is not None:
                    entry["requeueAfterSeconds"] = requeue_after
                if updates is not None:
                    entry["podSetUpdates"] = [dict(u) for u in updates]
            checks.append(entry)
        meta = body["metadata"]
        try:
            result = await self.ctx.api.patch_workload_status(
                str(meta["namespace"]),
                str(meta["name"]),
                {"admissionChecks": checks},
                meta.get("resourceVersion"),
                field_manager=FIELD_MANAGER,
            )
        except ApiException as exc:
            if exc.status == 409:
                return  # changed meanwhile: the next pass reads it again
            raise
        self.sync.apply_event("MODIFIED", result)
        if self.ctx.events is not None and before is not None and before != state:
            text = f"Admission check {check} updated state from {before} to {state.value}"
            if message:
                text += f" with message: {message}"
            await self.ctx.events(result, "Normal", "AdmissionCheckUpdated", text)
