"""Job objects that belong to another queued job object (Kueue's
`FindAncestorJobManagedByKueue`): a RayCluster that a queue-labelled RayJob created (KubeRay
copies the RayJob's labels, the queue label among them) is the RayJob's, queued as part of
the RayJob's Workload, not a Workload of its own.

An object is a child when, walking up its controller owner references through objects of
enabled integrations, one of them carries the queue label: the top-most such one is its
ancestor. The webhook does not suspend a child (it cannot read the owner: it leaves alone
a queue-labelled object whose controller owner is of an enabled kind, and the reconciler
suspends it if its owner turns out not to be queued); the reconciler makes no Workload for
it and suspends it while it runs without its ancestor's Workload admitted (Kueue's
`shouldSuspendChildJob`).

Kueue also walks through owners of kinds whose integration is off; quotagate stops at
them (it reads only the kinds it is given RBAC for).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubernetes.aio import client as aio_client
from kubernetes.aio.client.exceptions import ApiException

from api.constants import QUEUE_NAME_LABEL
from controller.integrations.framework.registry import Framework
from controller.integrations.framework.workload_names import api_group

__all__ = [
    "CHAIN_LIMIT",
    "AncestorUnknown",
    "controller_of",
    "managed_ancestor",
    "owner_framework",
]

CHAIN_LIMIT = 10
"""Kueue's `managedOwnersChainLimit`: the deepest chain of owners walked."""

Enabled = Mapping[tuple[str, str], Framework]


class AncestorUnknown(RuntimeError):
    """Whether the object is a child cannot be told (yet): an owner it names does not
    exist, the owners form a cycle or a chain deeper than `CHAIN_LIMIT` (Kueue's
    `ErrWorkloadOwnerNotFound`, `ErrCyclicOwnership`, `ErrManagedOwnersChainLimitReached`;
    the reconcile is retried)."""


def controller_of(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The object's controller owner reference, if any."""
    for owner in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if owner.get("controller"):
            found: Mapping[str, Any] = owner
            return found
    return None


def owner_framework(obj: Mapping[str, Any], enabled: Enabled) -> Framework | None:
    """The enabled job integration (one whose objects are custom-object reads) of the
    object's controller owner; None when it has none."""
    owner = controller_of(obj)
    if owner is None:
        return None
    group = api_group(str(owner.get("apiVersion", "")))
    framework = enabled.get((group, str(owner.get("kind"))))
    if framework is None or framework.job is None or not group:
        return None
    return framework


async def managed_ancestor(
    custom: aio_client.CustomObjectsApi, obj: Mapping[str, Any], enabled: Enabled
) -> dict[str, Any] | None:
    """The top-most queue-labelled ancestor of `obj` among objects of enabled job
    integrations (None: `obj` is a top-level job). Raises `AncestorUnknown` when an owner
    cannot be read."""
    namespace = str((obj.get("metadata") or {}).get("namespace"))
    seen = {str((obj.get("metadata") or {}).get("uid"))}
    top: dict[str, Any] | None = None
    current: Mapping[str, Any] = obj
    for _ in range(CHAIN_LIMIT):
        framework = owner_framework(current, enabled)
        if framework is None:
            return top
        owner = controller_of(current) or {}
        resource = framework.resource
        try:
            found: Any = await custom.get_namespaced_custom_object(
                resource.group, resource.version, namespace, resource.plural, str(owner.get("name"))
            )
        except ApiException as exc:
            if exc.status != 404:
                raise
            raise AncestorUnknown(
                f"the owner {resource.kind} {namespace}/{owner.get('name')} does not exist"
            ) from exc
        parent = dict(found)
        uid = str((parent.get("metadata") or {}).get("uid"))
        if uid != owner.get("uid"):
            return top  # a stale reference: the walk stops, as Kueue's
        if QUEUE_NAME_LABEL in ((parent.get("metadata") or {}).get("labels") or {}):
            top = parent
        if uid in seen:
            raise AncestorUnknown(f"cyclic ownership through {resource.kind} {uid}")
        seen.add(uid)
        current = parent
    raise AncestorUnknown(f"more than {CHAIN_LIMIT} owners above it")
