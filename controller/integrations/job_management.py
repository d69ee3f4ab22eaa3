"""Which job objects quotagate manages, and why (pure): Kueue's `manageJobsWithoutQueueName`
and `managedJobsNamespaceSelector`, and the default LocalQueue.

Kueue's rules (pkg/controller/jobframework: `ApplyDefaultLocalQueue`, `WorkloadShouldBeSuspended`,
and the reconciler's namespace check, which `ManagedJobsNamespaceSelectorAlwaysRespected`
makes unconditional):

1. an object in a namespace the selector does not match is never managed, labelled or not;
2. an object with the `kueue.x-k8s.io/queue-name` label is managed, in that queue;
3. an object without it, in a namespace that has a LocalQueue named `default`, gets
   `kueue.x-k8s.io/queue-name: default` when it is created (the webhook), and is managed;
4. otherwise it is managed only with `manageJobsWithoutQueueName: true`: suspended, with a
   Workload that has no queue, until it is given one.

An object run by a queued owner (a RayJob's RayCluster) is its owner's; that check needs the
API and is the webhook's and the reconciler's (`framework/ancestors.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from api.constants import QUEUE_NAME_LABEL
from controller.core.model.selectors import LabelSelector

__all__ = ["DEFAULT_LOCAL_QUEUE", "Decision", "JobManagement", "describe_selector"]

DEFAULT_LOCAL_QUEUE = "default"
"""Kueue's `DefaultLocalQueueName`."""

NAME_LABEL = "kubernetes.io/metadata.name"


def describe_selector(spec: Mapping[str, Any] | None) -> str:
    """A label selector as kubectl prints one (`k in (a,b)`, `k!=v`), or `<everything>`."""
    if not spec:
        return "<everything>"
    parts = [f"{k}={v}" for k, v in (spec.get("matchLabels") or {}).items()]
    for expression in spec.get("matchExpressions") or ():
        key, operator = expression.get("key"), expression.get("operator")
        values = ",".join(expression.get("values") or ())
        parts.append(
            {
                "In": f"{key} in ({values})",
                "NotIn": f"{key} notin ({values})",
                "Exists": f"{key}",
                "DoesNotExist": f"!{key}",
            }.get(str(operator), f"{key} {operator} ({values})")
        )
    return ",".join(parts)


@dataclass(frozen=True, slots=True)
class Decision:
    """Whether an object is managed, in which queue, and why (for `kubectl quotagate
    describe` and the logs). `default_queue`: the webhook labels it with the default
    LocalQueue."""

    managed: bool
    queue_name: str
    reason: str
    default_queue: bool = False


@dataclass(frozen=True, slots=True)
class JobManagement:
    """The configuration's rules. `namespace_selector` None: every namespace (quotagate's
    behaviour before the setting existed, kept for callers that do not pass one)."""

    manage_jobs_without_queue_name: bool = False
    namespace_selector: LabelSelector | None = None
    selector_text: str = "<everything>"

    def namespace_matches(self, namespace: str, labels: Mapping[str, str] | None) -> bool:
        """Whether the namespace is managed. Its labels unknown (not seen yet), the label
        the API server sets on every namespace, its name, stands in."""
        if self.namespace_selector is None:
            return True
        found = dict(labels) if labels is not None else {}
        found.setdefault(NAME_LABEL, namespace)
        return self.namespace_selector.matches(found)

    def decide(
        self,
        labels: Mapping[str, str],
        namespace: str,
        namespace_labels: Mapping[str, str] | None,
        default_queue_exists: bool = False,
    ) -> Decision:
        """The decision for an object with these labels, created in `namespace`
        (`default_queue_exists`: a LocalQueue `default` is there; only the webhook, which
        sees objects being created, applies it)."""
        if not self.namespace_matches(namespace, namespace_labels):
            return Decision(
                False,
                "",
                f"namespace {namespace} does not match managedJobsNamespaceSelector "
                f"({self.selector_text})",
            )
        queue = labels.get(QUEUE_NAME_LABEL)
        if queue:
            return Decision(True, queue, f"it has the label {QUEUE_NAME_LABEL}={queue}")
        if default_queue_exists:
            return Decision(
                True,
                DEFAULT_LOCAL_QUEUE,
                f"it had no {QUEUE_NAME_LABEL} label and namespace {namespace} has a LocalQueue "
                f"named {DEFAULT_LOCAL_QUEUE}",
                default_queue=True,
            )
        if self.manage_jobs_without_queue_name:
            return Decision(
                True,
                "",
                f"it has no {QUEUE_NAME_LABEL} label, manageJobsWithoutQueueName is true and "
                f"namespace {namespace} matches managedJobsNamespaceSelector "
                f"({self.selector_text}): it stays suspended until it is given a queue",
            )
        return Decision(
            False,
            "",
            f"it has no {QUEUE_NAME_LABEL} label and manageJobsWithoutQueueName is false",
        )

    def manages(
        self,
        obj: Mapping[str, Any],
        namespace_labels: Callable[[str], Mapping[str, str] | None],
    ) -> bool:
        """Whether the reconcilers manage `obj` as they see it (`decide` without the
        default LocalQueue, which the webhook gives on creation)."""
        meta = obj.get("metadata") or {}
        namespace = str(meta.get("namespace") or "")
        labels = meta.get("labels") or {}
        return self.decide(labels, namespace, namespace_labels(namespace)).managed
