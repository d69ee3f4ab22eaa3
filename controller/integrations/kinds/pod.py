"""`pod`: plain pods, pod groups (`kueue.x-k8s.io/pod-group-name`) and core
scheduling.k8s.io PodGroups, each unit one Workload, and the pods of the kinds that run
through them (a StatefulSet's, a LeaderWorkerSet replica's: the Workload their
integration makes). Not an adapter of the generic reconciler: a unit is many objects
(Kueue's `ComposableJob`), reconciled by `controller.integrations.pods.PodIntegration`."""

from __future__ import annotations

from kubernetes.aio import client as aio_client

from controller.integrations.framework.registry import (
    Framework,
    Integration,
    IntegrationSettings,
    Rule,
    by_kind,
    frameworks,
    register,
)
from controller.integrations.host import ControllerView
from controller.integrations.pods import PodIntegration
from controller.kube.client import PODS

__all__ = ["FRAMEWORK"]


def _integration(
    api_client: aio_client.ApiClient,
    view: ControllerView,
    framework: Framework,
    settings: IntegrationSettings,
) -> Integration:
    parents = {
        name: known.pod_workload
        for name, known in frameworks().items()
        if known.pod_workload is not None
    }
    job_kinds = {kind for kind, known in by_kind(settings.enabled).items() if known.job is not None}
    return PodIntegration(
        api_client,
        view,
        label_keys_to_copy=settings.label_keys_to_copy,
        management=settings.management,
        job_kinds=job_kinds,
        parents=parents,
    )


FRAMEWORK = register(
    Framework(
        "pod",
        PODS,
        integration=_integration,
        verbs=("get", "list", "watch", "update", "patch", "delete"),
        rules=(
            Rule(
                ("apps",),
                ("replicasets", "deployments", "statefulsets"),
                ("get",),
                "the owners of queued pods, read for their kai.scheduler/preemptibility label",
            ),
        ),
    )
)
