"""The integrations quotagate has, by Kueue's framework name (`integrations.frameworks`).

Each integration registers a `Framework` when its module is imported: the kind it manages,
its adapter (a `GenericJob`, run by the generic reconciler) or its own reconciler (the pod
integration), and the RBAC rules the controller needs for it. Every module of the
`controller.integrations.kinds` package is imported by `frameworks()`, so a new kind is a
new module there and nothing else: the operator, the webhook, `quotagate run`'s
configuration check and the chart's RBAC (`manifests.py`) all read this registry.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from kubernetes.aio import client as aio_client

from controller.integrations.framework.admission import ObjectAdmission
from controller.integrations.framework.generic_job import GenericJob
from controller.integrations.host import ControllerView
from controller.integrations.job_management import JobManagement
from controller.integrations.pod_units import PodWorkload
from controller.kube.client import Resource

__all__ = [
    "Framework",
    "Integration",
    "IntegrationSettings",
    "Rule",
    "by_kind",
    "enabled_with_implied",
    "frameworks",
    "register",
    "unimplemented",
]


@dataclass(frozen=True, slots=True)
class Rule:
    """One RBAC PolicyRule the controller's ClusterRole needs."""

    api_groups: tuple[str, ...]
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    comment: str = ""

    def manifest(self) -> dict[str, Any]:
        return {
            "apiGroups": list(self.api_groups),
            "resources": list(self.resources),
            "verbs": list(self.verbs),
        }


@dataclass(frozen=True, slots=True)
class IntegrationSettings:
    """What the configuration tells every integration: Kueue's
    `integrations.labelKeysToCopy`, which objects are managed, and the enabled integrations
    (with those they imply),
    by Kueue's name: a job whose owner is a queued object of one of them is that object's
    (`framework/ancestors.py`)."""

    label_keys_to_copy: tuple[str, ...] = ()
    enabled: tuple[str, ...] = ()
    management: JobManagement = field(default_factory=JobManagement)
    """Which objects are managed (`manageJobsWithoutQueueName`, `managedJobsNamespaceSelector`)."""


class Integration(Protocol):
    """What the operator drives: the objects of one kind (from an informer selecting the
    queue label), the Workloads, a resync when this replica starts leading and a stop when
    its term ends."""

    def on_object_event(self, event_type: str | None, obj: dict[str, Any]) -> None: ...

    def on_workload_event(self, workload: dict[str, Any]) -> None: ...

    def resync(self) -> None: ...

    def stop_leading(self) -> None:
        """The term ended: cancel the reconciles in progress, so that no write of the old
        term reaches the API server (`SerialReconciler.cancel_all`)."""

    def known_keys(self) -> set[str]: ...


IntegrationFactory = Callable[
    [aio_client.ApiClient, ControllerView, "Framework", IntegrationSettings], Integration
]


@dataclass(frozen=True, slots=True)
class Framework:
    """One integration: Kueue's framework name, the kind it manages, and how."""

    name: str
    resource: Resource
    job: type[GenericJob] | None = None
    """The adapter; the generic reconciler runs it (None: `integration` is the reconciler)."""
    integration: IntegrationFactory | None = None
    rules: tuple[Rule, ...] = ()
    """RBAC beyond the managed kind's own rule (`rbac`)."""
    implies: tuple[str, ...] = ()
    """Kueue's `ImplicitlyEnabledFrameworkNames`: enabled along with this one."""
    related: tuple[Resource, ...] = ()
    """Other kinds the adapter reads to describe an object (a TrainJob's TrainingRuntime):
    watched whole into a cache the adapter looks them up in (RBAC: get, list, watch)."""
    verbs: tuple[str, ...] = ("get", "list", "watch", "update", "patch")
    """What the controller does with objects of its kind (RBAC)."""
    admission: ObjectAdmission | None = None
    """The webhook's defaulting and validation for a kind without an adapter that runs
    through its pods (Deployment, StatefulSet, LeaderWorkerSet)."""
    pod_workload: PodWorkload | None = None
    """For a kind whose integration makes the Workloads of its pods: which one a pod
    marked with this framework's name (`kueue.x-k8s.io/pod-suspending-parent`) is of."""

    @property
    def webhook_path(self) -> str:
        return f"/mutate-{self.resource.plural}"

    @property
    def operations(self) -> tuple[str, ...]:
        """The operations the webhook is called for on this kind: creations and updates
        (Kueue's validating webhooks of every integration take both; a job kind and a pod
        are changed on creation only)."""
        return self.admission.operations if self.admission is not None else ("CREATE", "UPDATE")

    @property
    def rbac(self) -> tuple[Rule, ...]:
        """The controller's rules for this integration: its kind (read, watch, suspend,
        patch its templates), the `related` kinds (read) and the extra `rules`."""
        resource = self.resource
        own = Rule(
            (resource.group,),
            (resource.plural,),
            self.verbs,
            f"{resource.kind}s labelled with a queue: suspended, admitted, restored",
        )
        related = tuple(
            Rule(
                (other.group,),
                (other.plural,),
                ("get", "list", "watch"),
                f"{other.kind}s: read to describe {resource.kind}s",
            )
            for other in self.related
        )
        return (own, *related, *self.rules)

    def make(
        self,
        api_client: aio_client.ApiClient,
        view: ControllerView,
        settings: IntegrationSettings,
    ) -> Integration:
        if self.integration is not None:
            return self.integration(api_client, view, self, settings)
        from controller.integrations.framework.reconciler import GenericReconciler

        return GenericReconciler(api_client, view, self, settings)


_REGISTERED: dict[str, Framework] = {}
_LOADED = False


def register(framework: Framework) -> Framework:
    """Add an integration (at import of its module); a name registered twice is a bug."""
    existing = _REGISTERED.get(framework.name)
    if existing is not None and existing != framework:
        raise ValueError(f"integration {framework.name} registered twice")
    _REGISTERED[framework.name] = framework
    return framework


def frameworks() -> Mapping[str, Framework]:
    """Every integration quotagate has, by name (importing `controller.integrations.kinds`
    once)."""
    global _LOADED
    if not _LOADED:
        package = importlib.import_module("controller.integrations.kinds")
        for module in pkgutil.iter_modules(package.__path__):
            importlib.import_module(f"{package.__name__}.{module.name}")
        _LOADED = True
    return dict(sorted(_REGISTERED.items()))


def enabled_with_implied(names: list[str] | tuple[str, ...]) -> list[str]:
    """The enabled names plus those they imply (Kueue's implicitly enabled integrations),
    in the configuration's order, each once."""
    known = frameworks()
    out: list[str] = []
    pending = list(names)
    while pending:
        name = pending.pop(0)
        if name in out:
            continue
        out.append(name)
        if name in known:
            pending.extend(known[name].implies)
    return out


def unimplemented(names: list[str] | tuple[str, ...]) -> list[tuple[int, str]]:
    """The (index, name) of each configured framework quotagate has no integration for."""
    known = frameworks()
    return [(index, name) for index, name in enumerate(names) if name not in known]


def by_kind(names: list[str] | tuple[str, ...]) -> dict[tuple[str, str], Framework]:
    """The enabled integrations by (API group, kind) of the object they manage."""
    known = frameworks()
    return {
        (known[name].resource.group, known[name].resource.kind): known[name]
        for name in names
        if name in known
    }
