"""batch/v1 Jobs labelled `kueue.x-k8s.io/queue-name`: one Workload per Job.

The webhook creates the Job suspended. This integration (leader only) then keeps the Job
and its Workload in step, level-triggered and idempotent:

- no Workload yet → create it (podset = the pod template × min(parallelism, completions),
  owned by the Job so garbage collection removes it with the Job; the Job's
  `kueue.x-k8s.io/max-exec-time-seconds` label becomes `spec.maximumExecutionTimeSeconds`,
  and follows the label while the Workload holds no quota);
- Workload admitted, Job suspended → add the flavors' node labels to the pod template's
  nodeSelector (remembering the original in an annotation) and unsuspend;
- Workload evicted, Job running → suspend it and restore the original template; once no
  pod is active, acknowledge the eviction (quota reservation cleared) so the Workload
  queues again;
- Job finished (Complete or Failed) → Workload `Finished=True`, which returns its quota;
- with waitForPodsReady configured, the Workload's `PodsReady` condition follows the Job's
  ready and succeeded pods (`pods_ready.py`), written before anything else is done.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from kubernetes.aio import client as aio_client
from kubernetes.aio.client.exceptions import ApiException

from api import workload_status
from api.constants import (
    GROUP,
    JOB_UID_LABEL,
    PREEMPTIBILITY_LABEL,
    PRIORITY_CLASS_LABEL,
    QUEUE_NAME_LABEL,
    VERSION,
)
from api.workload_status import has_quota_reservation
from controller.integrations.host import ControllerView, placement_of
from controller.integrations.job_labels import max_exec_time_seconds
from controller.integrations.pods_ready import job_pods_ready
from controller.integrations.serial import SerialReconciler
from controller.integrations.workload_writes import PodsReadyWriter, apply_workload_status

log = logging.getLogger(__name__)

MERGE_PATCH = "application/merge-patch+json"
ORIGINAL_SELECTOR = "quotagate.x-k8s.io/original-node-selector"
ORIGINAL_TOLERATIONS = "quotagate.x-k8s.io/original-tolerations"
PREEMPTIBILITY_VALUES = ("preemptible", "non-preemptible", "semi-preemptible")


def workload_name(job_name: str) -> str:
    return f"job-{job_name}"[:253]


def condition_true(obj: dict[str, Any], type_: str) -> bool:
    """A Job's condition (`Complete`, `Failed`) is True."""
    return any(
        c.get("type") == type_ and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


def job_finished(job: dict[str, Any]) -> str | None:
    """`Succeeded`/`Failed` for a finished Job, else None."""
    if condition_true(job, "Complete"):
        return "Succeeded"
    if condition_true(job, "Failed"):
        return "Failed"
    return None


def workload_for(job: dict[str, Any], priority: int | None) -> dict[str, Any]:
    """The Workload describing a Job (pure)."""
    meta, spec = job["metadata"], job.get("spec") or {}
    labels = meta.get("labels") or {}
    raw_parallelism = spec.get("parallelism")
    parallelism = int(raw_parallelism) if raw_parallelism is not None else 1
    completions = spec.get("completions")
    count = max(1, min(parallelism, int(completions)) if completions is not None else parallelism)
    template = json.loads(json.dumps(spec.get("template") or {}))
    template.get("metadata", {}).pop("creationTimestamp", None)
    body: dict[str, Any] = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Workload",
        "metadata": {
            "name": workload_name(meta["name"]),
            "namespace": meta["namespace"],
            "labels": {JOB_UID_LABEL: meta.get("uid", "")},
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "queueName": labels[QUEUE_NAME_LABEL],
            "podSets": [{"name": "main", "count": count, "template": template}],
        },
    }
    if labels.get(PRIORITY_CLASS_LABEL):
        body["spec"]["priorityClassRef"] = {
            "group": GROUP,
            "kind": "WorkloadPriorityClass",
            "name": labels[PRIORITY_CLASS_LABEL],
        }
        if priority is not None:
            body["spec"]["priority"] = priority
    if labels.get(PREEMPTIBILITY_LABEL) in PREEMPTIBILITY_VALUES:
        body["spec"]["preemptibility"] = labels[PREEMPTIBILITY_LABEL]
    limit = max_exec_time_seconds(job)
    if limit is not None:
        body["spec"]["maximumExecutionTimeSeconds"] = limit
    return body


def admitted_template_patch(
    job: dict[str, Any], node_labels: dict[str, str], tolerations: list[dict[str, Any]]
) -> dict[str, Any]:
    """Merge patch that injects the flavors' node labels and tolerations into the pod
    template (remembering the originals in annotations) and unsuspends (pure). A toleration
    the template already has is not added twice."""
    template_spec = ((job.get("spec") or {}).get("template") or {}).get("spec") or {}
    original = template_spec.get("nodeSelector") or {}
    original_tolerations = list(template_spec.get("tolerations") or [])
    merged = original_tolerations + [t for t in tolerations if t not in original_tolerations]
    return {
        "metadata": {
            "annotations": {
                ORIGINAL_SELECTOR: json.dumps(original, sort_keys=True),
                ORIGINAL_TOLERATIONS: json.dumps(original_tolerations, sort_keys=True),
            }
        },
        "spec": {
            "suspend": False,
            "template": {
                "spec": {"nodeSelector": {**original, **node_labels}, "tolerations": merged}
            },
        },
    }


def suspend_patch(job: dict[str, Any]) -> dict[str, Any]:
    """Merge patch that suspends and restores the original nodeSelector and tolerations (pure)."""
    annotations = (job.get("metadata") or {}).get("annotations") or {}
    patch: dict[str, Any] = {"spec": {"suspend": True}}
    template: dict[str, Any] = {}
    restored: dict[str, Any] = {}
    if ORIGINAL_SELECTOR in annotations:
        original = json.loads(annotations[ORIGINAL_SELECTOR])
        current = ((job.get("spec") or {}).get("template") or {}).get("spec", {}).get(
            "nodeSelector"
        ) or {}
        # A merge patch removes keys with null.
        template["nodeSelector"] = {key: original.get(key) for key in {*current, *original}}
        restored[ORIGINAL_SELECTOR] = None
    if ORIGINAL_TOLERATIONS in annotations:
        template["tolerations"] = json.loads(annotations[ORIGINAL_TOLERATIONS]) or None
        restored[ORIGINAL_TOLERATIONS] = None
    if template:
        patch["spec"]["template"] = {"spec": template}
        patch["metadata"] = {"annotations": restored}
    return patch


class JobIntegration:
    """Reconciles queue-labelled Jobs against their Workloads (see the module docstring)."""

    def __init__(
        self,
        api_client: aio_client.ApiClient,
        view: ControllerView,
    ) -> None:
        self.batch = aio_client.BatchV1Api(api_client)
        self.custom = aio_client.CustomObjectsApi(api_client)
        self.view = view
        self.jobs: dict[str, dict[str, Any]] = {}
        self.pods_ready = PodsReadyWriter(self.custom, view)
        self._serial: SerialReconciler[str] = SerialReconciler(
            self.reconcile, lambda: view.leading, lambda key: f"Job {key}", log
        )

    # -- events --------------------------------------------------------------------------------

    def on_job_event(self, event_type: str | None, job: dict[str, Any]) -> None:
        meta = job.get("metadata") or {}
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        if event_type == "DELETED":
            self.jobs.pop(key, None)
            self.pods_ready.forget(
                f"{meta.get('namespace')}/{workload_name(str(meta.get('name')))}"
            )
            return
        if QUEUE_NAME_LABEL not in (meta.get("labels") or {}):
            return
        self.jobs[key] = job
        self.kick(key)

    def on_workload_event(self, workload: dict[str, Any]) -> None:
        meta = workload.get("metadata") or {}
        for owner in meta.get("ownerReferences") or []:
            if owner.get("kind") == "Job" and owner.get("apiVersion", "").startswith("batch/"):
                self.kick(f"{meta.get('namespace')}/{owner.get('name')}")

    def resync(self) -> None:
        for key in list(self.jobs):
            self.kick(key)

    def stop_leading(self) -> None:
        """The term ended: cancel the reconciles in progress (`SerialReconciler.cancel_all`)."""
        self._serial.cancel_all()

    def kick(self, key: str) -> None:
        self._serial.kick(key)

    # -- the reconcile -------------------------------------------------------------------------

    async def reconcile(self, key: str) -> None:
        job = self.jobs.get(key)
        if job is None or not self.view.leading:
            return
        namespace, name = key.split("/", 1)
        wl_key = f"{namespace}/{workload_name(name)}"
        workload = self.view.workload(wl_key)
        finished = job_finished(job)
        if workload is None:
            if finished is None:
                await self._create_workload(job)
            return
        if finished is not None:
            if not workload_status.is_finished(workload):
                await apply_workload_status(
                    self.custom,
                    workload,
                    workload_status.finish(
                        workload, finished, f"Job finished: {finished}", time.time()
                    ),
                )
            return
        if not has_quota_reservation(workload):
            limit = max_exec_time_seconds(job)
            if (workload.get("spec") or {}).get("maximumExecutionTimeSeconds") != limit:
                await self._patch_workload(
                    workload, {"spec": {"maximumExecutionTimeSeconds": limit}}
                )
                return  # the Workload's event brings the rest
        # Kueue's step 5: the PodsReady condition first; the Workload's event brings the rest.
        if (
            self.view.wait_for_pods_ready
            and not workload_status.is_finished(workload)
            and await self.pods_ready.sync(wl_key, workload, job_pods_ready(job))
        ):
            return
        suspended = (job.get("spec") or {}).get("suspend") is True
        reserved = has_quota_reservation(workload)
        if reserved and workload_status.is_evicted(workload):
            if not suspended:
                await self._patch_job(job, suspend_patch(job))
                if self.view.events:
                    await self.view.events(
                        job, "Normal", "Stopped", "Suspended: the Workload was evicted"
                    )
            elif not (job.get("status") or {}).get("active"):
                await apply_workload_status(
                    self.custom, workload, workload_status.release(workload, time.time())
                )
            return
        if reserved and workload_status.is_admitted(workload) and suspended:
            status = workload.get("status") or {}
            admission = status.get("admission") or {}
            placement = placement_of(self.view, status)
            await self._patch_job(
                job, admitted_template_patch(job, placement.node_labels, placement.tolerations)
            )
            if self.view.events:
                await self.view.events(
                    job,
                    "Normal",
                    "Started",
                    f"Admitted by ClusterQueue {admission.get('clusterQueue')}",
                )

    async def _create_workload(self, job: dict[str, Any]) -> None:
        labels = (job.get("metadata") or {}).get("labels") or {}
        cls = labels.get(PRIORITY_CLASS_LABEL)
        body = workload_for(job, self.view.priority_of_class(cls) if cls else None)
        try:
            await self.custom.create_namespaced_custom_object(
                GROUP, VERSION, job["metadata"]["namespace"], "workloads", body
            )
        except ApiException as exc:
            if exc.status != 409:
                raise
            return
        if self.view.events:
            await self.view.events(
                job, "Normal", "CreatedWorkload", f"Created Workload {body['metadata']['name']}"
            )

    async def _patch_workload(self, workload: dict[str, Any], patch: dict[str, Any]) -> None:
        """A Job-level label changed while its Workload waits (Kueue rebuilds the Workload
        then): the Workload's spec follows it."""
        meta = workload["metadata"]
        await self.custom.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            meta["namespace"],
            "workloads",
            meta["name"],
            patch,
            field_manager="quotagate",
            _content_type=MERGE_PATCH,
        )

    async def _patch_job(self, job: dict[str, Any], patch: dict[str, Any]) -> None:
        meta = job["metadata"]
        await self.batch.patch_namespaced_job(
            meta["name"],
            meta["namespace"],
            patch,
            field_manager="quotagate",
            _content_type=MERGE_PATCH,
        )
