"""`kubectl quotagate describe job|jobset|rayjob|raycluster|pod NAME`: whether quotagate
manages a job object, and why — the rules of `controller/integrations/job_management.py`
(Kueue's `manageJobsWithoutQueueName`, `managedJobsNamespaceSelector`, the default
LocalQueue), the enabled integrations and the object's owners, as the controller applies
them with the configuration given (`--config`, else the controller's defaults)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from api.constants import QUEUE_NAME_LABEL
from controller.config import ControllerConfig
from controller.config_report import job_management
from controller.integrations.framework.ancestors import owner_framework
from controller.integrations.framework.registry import Framework, by_kind, enabled_with_implied
from controller.integrations.framework.workloads import workload_name
from controller.integrations.job_management import describe_selector

__all__ = ["describe_management", "render_management"]


def describe_management(
    obj: Mapping[str, Any],
    framework: Framework,
    config: ControllerConfig,
    config_source: str,
    namespace_labels: Mapping[str, str] | None,
    workload: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The answer as plain data (what `-o json|yaml` prints)."""
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
    expected = workload_name(kind, str(meta.get("name") or "")) if framework.job else None
    return {
        "name": meta.get("name"),
        "namespace": namespace,
        "kind": kind,
        "integration": framework.name,
        "managed": managed,
        "reason": why,
        "queue": labels.get(QUEUE_NAME_LABEL) or None,
        "workload": (workload.get("metadata") or {}).get("name") if workload else None,
        "expectedWorkload": expected,
        "settings": {
            "source": config_source,
            "manageJobsWithoutQueueName": config.manage_jobs_without_queue_name,
            "managedJobsNamespaceSelector": describe_selector(config.namespace_selector_spec),
        },
    }


def _owner(
    obj: Mapping[str, Any], framework: Framework, enabled: Mapping[tuple[str, str], Framework]
) -> Framework | None:
    """The queued kind that runs the object, if any: for a job kind its controller owner
    of an enabled kind; for a pod, any owner of an enabled job kind (a Job, a RayCluster)."""
    if framework.job is not None:
        return owner_framework(obj, enabled)
    for owner in (obj.get("metadata") or {}).get("ownerReferences") or ():
        group = str(owner.get("apiVersion", "")).rpartition("/")[0]
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
        if d["workload"]:
            lines.append(
                f"{'Workload:':<17} {d['workload']} (kubectl quotagate describe workload "
                f"{d['workload']} -n {d['namespace']})"
            )
        elif d["expectedWorkload"]:
            lines.append(f"{'Workload:':<17} <not created yet: {d['expectedWorkload']}>")
    lines += [
        f"{'Settings:':<17} manageJobsWithoutQueueName={str(settings['manageJobsWithoutQueueName']).lower()}, "
        f"managedJobsNamespaceSelector={settings['managedJobsNamespaceSelector']}",
        f"{'':<17} ({settings['source']})",
    ]
    return "\n".join(lines)
