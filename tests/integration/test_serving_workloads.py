"""The Workloads of the kinds that run through their pods, on a real API server: what is
tested is the integration's side (controller/integrations/parent_workloads.py), which
holds whether or not the StatefulSet and LeaderWorkerSet controllers run (they do when
the e2e tests started them earlier in the session). No webhook of quotagate's runs: the
objects are created unmarked, as while the webhook does not serve, and the controller
marks their templates itself. A StatefulSet is one Workload of `replicas`
pods, deleted at zero and made again on the way back, kept (and reported) when resized
while admitted; a LeaderWorkerSet is one Workload per replica, with leader and worker
pod sets; with only `pod` enabled neither is touched."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from api.constants import POD_SUSPENDING_PARENT_ANNOTATION, QUEUE_NAME_LABEL
from tests.cluster.fixtures import install_crds, wait_for
from tests.cluster.modules import ensure_module
from tests.integration.conftest import StartConfigured
from tests.integration.kueue import (
    Kueue,
    cluster_queue,
    flavor,
    is_admitted,
    local_queue,
    maybe_workload,
    wait_admitted,
)
from tests.integration.serving import LWS, leaderworkerset, pod_template, statefulset

SERVING = {
    "integrations": {"frameworks": ["statefulset", "leaderworkerset.x-k8s.io/leaderworkerset"]}
}


@pytest.fixture(scope="module")
def lws_crd(api_client: client.ApiClient) -> list[str]:
    """The LeaderWorkerSet CRD of sigs.k8s.io/lws (tests/cluster/modules.py)."""
    return install_crds(api_client, ensure_module("lws").crds)


def queue(kueue: Kueue, namespace: str, cpu: int = 8) -> None:
    cq = f"{namespace}-cq"
    kueue.apply(
        flavor(f"{namespace}-rf"),
        cluster_queue(cq, {f"{namespace}-rf": {"cpu": cpu}}),
        local_queue(namespace, "lq", cq),
    )


def admitted(kueue: Kueue, namespace: str, name: str) -> dict[str, Any]:
    """The Workload once it exists and is admitted."""
    wait_for(lambda: maybe_workload(kueue, namespace, name), what=f"the Workload {name}")
    return wait_admitted(kueue, namespace, name)


def shape(workload: dict[str, Any]) -> list[tuple[str, int]]:
    return [(ps["name"], ps["count"]) for ps in workload["spec"]["podSets"]]


def test_a_statefulset_is_one_workload_deleted_at_zero_and_made_again(
    configured_controller: StartConfigured,
    kueue: Kueue,
    api_client: client.ApiClient,
    namespace: str,
) -> None:
    apps = client.AppsV1Api(api_client)
    core = client.CoreV1Api(api_client)
    configured_controller(SERVING, namespace)
    queue(kueue, namespace, cpu=3)
    created = apps.create_namespaced_stateful_set(namespace, statefulset("web", 2))
    uid = created.metadata.uid

    def marked() -> bool:
        template = apps.read_namespaced_stateful_set("web", namespace).spec.template
        return (template.metadata.annotations or {}).get(
            POD_SUSPENDING_PARENT_ANNOTATION
        ) == "statefulset" and template.metadata.labels.get(QUEUE_NAME_LABEL) == "lq"

    wait_for(marked, what="the StatefulSet's template marked by the controller")
    workload = admitted(kueue, namespace, kueue.workload_name(namespace, "StatefulSet", "web"))
    assert shape(workload) == [("main", 2)]
    assert workload["metadata"]["ownerReferences"][0]["uid"] == uid
    assert workload["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == uid

    apps.patch_namespaced_stateful_set("web", namespace, {"spec": {"replicas": 0}})
    wait_for(
        lambda: (
            maybe_workload(kueue, namespace, kueue.workload_name(namespace, "StatefulSet", "web"))
            is None
        ),
        what="the Workload of the StatefulSet scaled to zero deleted",
    )
    apps.patch_namespaced_stateful_set("web", namespace, {"spec": {"replicas": 3}})
    workload = admitted(kueue, namespace, kueue.workload_name(namespace, "StatefulSet", "web"))
    assert shape(workload) == [("main", 3)]

    # Resized while admitted (`kubectl scale` goes around the webhook): kept, and said.
    apps.patch_namespaced_stateful_set("web", namespace, {"spec": {"replicas": 2}})

    def reported() -> Any:
        for event in core.list_namespaced_event(namespace).items:
            if event.reason == "ChangedWhileAdmitted" and event.involved_object.name == "web":
                return event
        return None

    event = wait_for(reported, what="the resize while admitted reported")
    assert event.type == "Warning"
    assert "[('main', 2)], its Workload's [('main', 3)]" in event.message
    assert shape(
        kueue.get_workload(namespace, kueue.workload_name(namespace, "StatefulSet", "web"))
    ) == [("main", 3)]


def test_a_leaderworkerset_is_one_workload_per_replica(
    configured_controller: StartConfigured,
    kueue: Kueue,
    custom: client.CustomObjectsApi,
    lws_crd: list[str],
    namespace: str,
) -> None:
    configured_controller(SERVING, namespace)
    queue(kueue, namespace, cpu=4)
    custom.create_namespaced_custom_object(
        *LWS[:2], namespace, LWS[2], leaderworkerset("srv", replicas=2, size=3, worker_cpu="1")
    )
    groups = ("leaderworkerset-srv-0", "leaderworkerset-srv-1")
    made = [
        wait_for(lambda n=name: maybe_workload(kueue, namespace, n), what=f"the Workload {name}")
        for name in groups
    ]
    for workload in made:
        assert shape(workload) == [("leader", 1), ("worker", 2)]
        assert workload["metadata"]["ownerReferences"][0]["kind"] == "LeaderWorkerSet"
    # 3 of 4 cpus held by one group (the queue's pick: both were made at once); the other
    # waits for quota.
    wait_for(
        lambda: [is_admitted(kueue.get_workload(namespace, n)) for n in groups].count(True) == 1,
        what="one group admitted",
    )
    custom.patch_namespaced_custom_object(
        *LWS[:2], namespace, LWS[2], "srv", {"spec": {"replicas": 1}}
    )
    wait_for(
        lambda: maybe_workload(kueue, namespace, groups[1]) is None,
        what="the Workload of the group scaled away deleted",
    )
    admitted(kueue, namespace, groups[0])  # it held the quota, or has it now


def test_with_only_pod_enabled_a_statefulset_is_left_alone(
    configured_controller: StartConfigured,
    kueue: Kueue,
    api_client: client.ApiClient,
    namespace: str,
) -> None:
    """With only `pod`, a queue-labelled StatefulSet gets no Workload and keeps its
    template, while a pod created after it is queued; with `statefulset` on, it is
    queued."""
    apps = client.AppsV1Api(api_client)
    off = configured_controller({"integrations": {"frameworks": ["pod"]}}, namespace)
    queue(kueue, namespace)
    apps.create_namespaced_stateful_set(namespace, statefulset("ignored", 1))
    probe = pod_template("probe")
    probe["metadata"].update(name="probe", labels={QUEUE_NAME_LABEL: "lq"})
    client.CoreV1Api(api_client).create_namespaced_pod(namespace, probe)
    admitted(kueue, namespace, kueue.workload_name(namespace, "Pod", "probe"))
    assert "integrations enabled: pod" in off.log()
    off.stop()
    assert (
        maybe_workload(kueue, namespace, kueue.workload_name(namespace, "StatefulSet", "ignored"))
        is None
    )
    template = apps.read_namespaced_stateful_set("ignored", namespace).spec.template
    assert POD_SUSPENDING_PARENT_ANNOTATION not in (template.metadata.annotations or {})
    configured_controller({"integrations": {"frameworks": ["pod", "statefulset"]}}, namespace)
    admitted(kueue, namespace, kueue.workload_name(namespace, "StatefulSet", "ignored"))
