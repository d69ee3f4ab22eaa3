"""`kubectl quotagate describe <kind> NAME` (job, jobset, rayjob, raycluster, trainjob,
mpijob, pod, deployment, statefulset, leaderworkerset): whether quotagate manages a job
object, and why — the rules of `controller/integrations/job_management.py` (Kueue's
`manageJobsWithoutQueueName`, `managedJobsNamespaceSelector`, the default LocalQueue), the
enabled integrations and the object's owners, as the controller applies them with the
configuration given (`--config`, else the controller's defaults)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from api.constants import POD_SUSPENDING_PARENT_ANNOTATION, QUEUE_NAME_LABEL
from controller.config import ControllerConfig
from controller.config_report import job_management
from controller.integrations.framework.ancestors import owner_framework
from controller.integrations.framework.registry import (
    Framework,
    by_kind,
    enabled_with_implied,
    frameworks,
)
from controller.integrations.framework.workload_names import api_group, object_workload_name
from controller.integrations.job_management import describe_selector
from controller.integrations.pod_parents import ParentAdmission
from controller.integrations.pod_units import unit_of

__all__ = ["describe_management", "render_management"]


def describe_management(
    obj: Mapping[str, Any],
    framework: Framework,
    config: ControllerConfig,
    config_source: str,
    namespace_labels: Mapping[str, str] | None,
    workloads: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """The answer as plain data (what `-o json|yaml` prints); `workloads`: those of the
    namespace (the object's are found among them)."""
    meta = obj.get("metadata") or {}
    namespace = str(meta.get("namespace") or "")
    labels = meta.get("labels") or {}
    enabled = enabled_with_implied(config.integrations.frameworks)
    kind = str(obj.get("kind") or framework.resource.kind)
    decision = job_management(config).decide(labels, namespace, namespace_labels)
    managed, why = decision.managed, decision.reason
    owner = _owner(obj, framework, by_kind(enabled))
    if framework.name not in enabled:
        managed, why = (
            False,
            f"the integration {framework.name} is not enabled (integrations.frameworks)",
        )
    elif managed and owner is not None:
        managed = False
        why = f"it runs as part of its owner {owner.resource.kind}, which is queued in its place"
    expected = _expected_workload(obj, framework, kind)
    names = {expected} if expected else set()
    uid = meta.get("uid")
    own = sorted(
        str((w.get("metadata") or {}).get("name"))
        for w in workloads
        if (w.get("metadata") or {}).get("name") in names
        or any(o.get("uid") == uid for o in (w.get("metadata") or {}).get("ownerReferences") or ())
    )
    return {
        "name": meta.get("name"),
        "namespace": namespace,
        "kind": kind,
        "integration": framework.name,
        "managed": managed,
        "reason": why,
        "queue": labels.get(QUEUE_NAME_LABEL) or None,
        "workloads": own,
        "expectedWorkload": expected,
        "note": _NOTES.get(framework.name),
        "settings": {
            "source": config_source,
            "manageJobsWithoutQueueName": config.manage_jobs_without_queue_name,
            "managedJobsNamespaceSelector": describe_selector(config.namespace_selector_spec),
        },
    }


_NOTES = {
    "deployment": "it has no Workload of its own: each of its pods is one, pod-<pod name>-<hash>",
}


def _expected_workload(obj: Mapping[str, Any], framework: Framework, kind: str) -> str | None:
    """The Workload the controller makes for the object, when its name is known from the
    object alone: a job kind's, a pod's unit's (a parent's pod: the Workload its parent
    names)."""
    if framework.job is not None:
        return object_workload_name({**obj, "kind": kind})
    if framework.name == "pod":
        parents = {n: f.pod_workload for n, f in frameworks().items() if f.pod_workload}
        return unit_of(obj, parents).workload_name or None
    return None


def _owner(
    obj: Mapping[str, Any], framework: Framework, enabled: Mapping[tuple[str, str], Framework]
) -> Framework | None:
    """The queued kind that runs the object, if any: for a job kind its controller owner
    of an enabled kind; for a kind that runs through its pods, the framework that marked
    its templates when another did (a LeaderWorkerSet's StatefulSets); for a pod not
    marked by a parent kind, any owner of an enabled job kind (a Job, a RayCluster)."""
    if framework.job is not None:
        return owner_framework(obj, enabled)
    if isinstance(framework.admission, ParentAdmission):
        others = sorted(framework.admission.markers(obj) - {framework.name})
        return frameworks().get(others[0]) if others else None
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    if POD_SUSPENDING_PARENT_ANNOTATION in annotations:
        return None  # its parent marked it: the pod integration queues it
    for owner in (obj.get("metadata") or {}).get("ownerReferences") or ():
        group = api_group(str(owner.get("apiVersion", "")))
        found = enabled.get((group, str(owner.get("kind"))))
        if found is not None and found.job is not None:
            return found
    return None


def render_management(d: Mapping[str, Any]) -> str:
    settings = d["settings"]
    lines = [
        f"{'Name:':<17} {d['name']}",
        f"{'Namespace:':<17} {d['namespace']}",
        f"{'Kind:':<17} {d['kind']} (integration {d['integration']})",
        f"{'Managed:':<17} {'yes' if d['managed'] else 'no'}",
        f"{'Why:':<17} {d['reason']}",
    ]
    if d["managed"]:
        lines.append(f"{'Queue:':<17} {d['queue'] or '<none>: it waits until it is given one'}")
        for index, name in enumerate(d["workloads"]):
            lines.append(
                f"{'Workload:' if index == 0 else '':<17} {name} (kubectl quotagate describe "
                f"workload {name} -n {d['namespace']})"
            )
        if not d["workloads"] and d["expectedWorkload"]:
            lines.append(f"{'Workload:':<17} <not created yet: {d['expectedWorkload']}>")
        if d["note"]:
            lines.append(f"{'Workload:':<17} {d['note']}")
    lines += [
        f"{'Settings:':<17} manageJobsWithoutQueueName={str(settings['manageJobsWithoutQueueName']).lower()}, "
        f"managedJobsNamespaceSelector={settings['managedJobsNamespaceSelector']}",
        f"{'':<17} ({settings['source']})",
    ]
    return "\n".join(lines)
