"""Serving workloads behind quota on the full local control plane: Deployments and
StatefulSets run by the real kube-controller-manager, LeaderWorkerSets by the real
LeaderWorkerSet controller (sigs.k8s.io/lws v0.9.0, built from its Go module with its own
CRDs and webhooks: tests/cluster/operators.py). quotagate's webhook marks their pod
templates; their pods are created gated, admitted with each pod set's flavor (the pods'
node selectors), never finished; a scale-up waits for quota, a scale-down returns it, and
an eviction deletes the pods, which their owner recreates gated. The quota is sampled
every 0.1 s for over-commitment throughout, and waitForPodsReady is on, so the admitted
Workloads carry `PodsReady`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from api.constants import POD_SUSPENDING_PARENT_ANNOTATION, ROLE_HASH_ANNOTATION
from controller.integrations.framework.workload_names import workload_name
from tests.cluster.controlplane import ControlPlane
from tests.cluster.fixtures import wait_for
from tests.cluster.operators import LeaderWorkerSetController
from tests.e2e.conftest import webhook_controller_running
from tests.e2e.quota_watch import quota_watch
from tests.e2e.test_jobsets import set_quota, set_stop_policy
from tests.integration.kueue import (
    ControllerProcess,
    Kueue,
    cluster_queue,
    condition,
    flavor,
    local_queue,
)
from tests.integration.serving import LWS, deployment, leaderworkerset, statefulset

GATE = "kueue.x-k8s.io/admission"
ZONE = "topology.kubernetes.io/zone"
FRAMEWORKS = [
    "batch/job",
    "deployment",
    "statefulset",
    "leaderworkerset.x-k8s.io/leaderworkerset",
]


@pytest.fixture(scope="module")
def serving_quotagate(
    full_cluster: ControlPlane,
    lws_controller: LeaderWorkerSetController,
    kubeconfig_path: str,
    crds_installed: list[str],
    api_client: client.ApiClient,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ControllerProcess]:
    """quotagate queueing the serving kinds, with its webhook and waitForPodsReady."""
    with webhook_controller_running(
        kubeconfig_path,
        api_client,
        tmp_path_factory.mktemp("serving"),
        "serving",
        {"integrations": {"frameworks": FRAMEWORKS}, "waitForPodsReady": {"timeout": "10m"}},
    ) as process:
        yield process


class Cluster:
    """The test's view: its Workloads and pods."""

    def __init__(self, api_client: client.ApiClient, namespace: str) -> None:
        self.kueue = Kueue(api_client)
        self.core = client.CoreV1Api(api_client)
        self.apps = client.AppsV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.namespace = namespace

    def pods(self, app: str) -> list[Any]:
        """The app's pods not being deleted."""
        return [
            p
            for p in self.core.list_namespaced_pod(
                self.namespace, label_selector=f"app={app}"
            ).items
            if p.metadata.deletion_timestamp is None
        ]

    def running(self, app: str) -> list[Any]:
        return [p for p in self.pods(app) if p.status.phase == "Running"]

    def gated(self, app: str) -> list[Any]:
        return [
            p for p in self.pods(app) if GATE in [g.name for g in p.spec.scheduling_gates or []]
        ]

    def wait_pods(self, app: str, running: int, gated: int, timeout: float = 90) -> list[Any]:
        """Wait until exactly `running` of the app's pods run and `gated` wait gated."""

        def settled() -> tuple[list[Any]] | None:
            pods = self.pods(app)
            up = [p for p in pods if p.status.phase == "Running"]
            held = [p for p in pods if GATE in [g.name for g in p.spec.scheduling_gates or []]]
            counts = (len(up), len(held), len(pods))
            return (up,) if counts == (running, gated, running + gated) else None

        found: tuple[list[Any]] = wait_for(
            settled, timeout=timeout, what=f"{app}: {running} pods running, {gated} gated"
        )
        return found[0]

    def workloads(self) -> dict[str, dict[str, Any]]:
        return {w["metadata"]["name"]: w for w in self.kueue.workloads(self.namespace)}

    def holding(self) -> list[str]:
        """The Workloads holding quota."""
        return sorted(
            name
            for name, w in self.workloads().items()
            if (c := condition(w, "QuotaReserved")) and c["status"] == "True"
        )

    def workload(self, name: str) -> dict[str, Any] | None:
        return self.workloads().get(name)

    def wait_workload(
        self, name: str, check: Callable[[dict[str, Any]], bool], what: str, timeout: float = 60
    ) -> dict[str, Any]:
        found: dict[str, Any] = wait_for(
            lambda: (w := self.workload(name)) is not None and check(w) and w,
            timeout=timeout,
            what=f"{name}: {what}",
        )
        return found


def is_true(workload: dict[str, Any], type_: str) -> bool:
    found = condition(workload, type_)
    return bool(found and found["status"] == "True")


def assignments(workload: dict[str, Any]) -> dict[str, tuple[int, str]]:
    return {
        a["name"]: (a["count"], a["flavors"]["cpu"])
        for a in workload["status"]["admission"]["podSetAssignments"]
    }


def test_a_deployments_pods_are_queued_one_by_one_scaled_and_evicted(
    serving_quotagate: ControllerProcess, api_client: client.ApiClient, namespace: str
) -> None:
    c = Cluster(api_client, namespace)
    cq, rf = f"{namespace}-cq", f"{namespace}-rf"
    c.kueue.apply(
        flavor(rf, {ZONE: "node-a"}),
        cluster_queue(cq, {rf: {"cpu": 2}}),
        local_queue(namespace, "lq", cq),
    )
    with quota_watch(api_client, namespace) as watch:
        created = c.apps.create_namespaced_deployment(namespace, deployment("api", 3))
        template = created.spec.template.metadata
        assert template.annotations[POD_SUSPENDING_PARENT_ANNOTATION] == "deployment"
        # Each pod is a Workload of its own: two fit, the third waits gated.
        running = c.wait_pods("api", running=2, gated=1)
        assert {p.spec.node_name for p in running} == {"node-a"}
        assert all(p.spec.node_selector == {ZONE: "node-a"} for p in running)
        names = {workload_name("Pod", "", p.metadata.name, p.metadata.uid) for p in running}
        assert c.holding() == sorted(names)
        for name in names:
            workload = c.wait_workload(name, lambda w: is_true(w, "PodsReady"), "PodsReady")
            [owner] = workload["metadata"]["ownerReferences"]
            assert (owner["kind"], owner["controller"]) == ("Pod", True)

        # Scale down to 1: the quota of the pods removed returns with their Workloads.
        c.apps.patch_namespaced_deployment("api", namespace, {"spec": {"replicas": 1}})
        c.wait_pods("api", running=1, gated=0)
        wait_for(lambda: len(c.workloads()) == 1, what="the scaled-away pods' Workloads gone")
        # Scale up to 4: one more fits, two wait for quota.
        c.apps.patch_namespaced_deployment("api", namespace, {"spec": {"replicas": 4}})
        c.wait_pods("api", running=2, gated=2)
        wait_for(lambda: len(c.holding()) == 2, what="two Workloads holding quota")

        # Drain the ClusterQueue: the running pods are deleted and recreated gated; none
        # holds quota.
        before = {p.metadata.uid for p in c.running("api")}
        set_stop_policy(c.kueue, cq, "HoldAndDrain")
        c.wait_pods("api", running=0, gated=4)
        assert not {p.metadata.uid for p in c.pods("api")} & before
        wait_for(lambda: not c.holding(), what="no Workload holding quota")
        set_stop_policy(c.kueue, cq, "None")
        c.wait_pods("api", running=2, gated=2)
    assert not any(is_true(w, "Finished") for w in c.workloads().values())
    assert watch.observed(), "the quota sampler never saw quota held"
    assert watch.reserved.get(rf, 0) <= 2000 and watch.running.get("node-a", 0) <= 2000


def test_a_statefulset_is_one_serving_workload_scaled_to_zero_and_back(
    serving_quotagate: ControllerProcess, api_client: client.ApiClient, namespace: str
) -> None:
    c = Cluster(api_client, namespace)
    cq, rf = f"{namespace}-cq", f"{namespace}-rf"
    c.kueue.apply(
        flavor(rf, {ZONE: "node-b"}),
        cluster_queue(cq, {rf: {"cpu": 2}}),
        local_queue(namespace, "lq", cq),
    )
    with quota_watch(api_client, namespace) as watch:
        c.apps.create_namespaced_stateful_set(namespace, statefulset("db", 3))
        db = c.kueue.workload_name(namespace, "StatefulSet", "db")
        # One Workload of 3 pods: it does not fit 2 cpus, and every pod waits gated.
        workload = c.wait_workload(
            db, lambda w: condition(w, "QuotaReserved") is not None, "pending"
        )
        assert [(ps["name"], ps["count"]) for ps in workload["spec"]["podSets"]] == [("main", 3)]
        assert workload["metadata"]["ownerReferences"][0]["kind"] == "StatefulSet"
        c.wait_pods("db", running=0, gated=3)

        set_quota(c.kueue, cq, {rf: {"cpu": 3}})
        running = c.wait_pods("db", running=3, gated=0)
        assert {p.spec.node_name for p in running} == {"node-b"}
        assert all(p.spec.node_selector == {ZONE: "node-b"} for p in running)
        c.wait_workload(db, lambda w: is_true(w, "PodsReady"), "PodsReady")

        # Only to zero and back, as in Kueue.
        with pytest.raises(ApiException) as refused:
            c.apps.patch_namespaced_stateful_set("db", namespace, {"spec": {"replicas": 2}})
        assert "spec.replicas: Invalid value: 2: field is immutable" in str(refused.value.body)
        c.apps.patch_namespaced_stateful_set("db", namespace, {"spec": {"replicas": 0}})
        wait_for(lambda: c.workload(db) is None, what="the Workload deleted at zero")
        c.wait_pods("db", running=0, gated=0)
        wait_for(
            lambda: not c.apps.read_namespaced_stateful_set("db", namespace).status.replicas,
            what="the scale-down done",
        )
        # Back to 3 while only 2 cpus are there: the new Workload waits for quota.
        set_quota(c.kueue, cq, {rf: {"cpu": 2}})
        c.apps.patch_namespaced_stateful_set("db", namespace, {"spec": {"replicas": 3}})
        c.wait_workload(db, lambda w: condition(w, "QuotaReserved") is not None, "pending again")
        c.wait_pods("db", running=0, gated=3)
        set_quota(c.kueue, cq, {rf: {"cpu": 3}})
        c.wait_pods("db", running=3, gated=0)

        # Drain: the pods are deleted, recreated gated, and the quota is released.
        before = {p.metadata.uid for p in c.pods("db")}
        set_stop_policy(c.kueue, cq, "HoldAndDrain")
        c.wait_pods("db", running=0, gated=3)
        assert not {p.metadata.uid for p in c.pods("db")} & before
        evicted = c.wait_workload(
            db,
            lambda w: condition(w, "QuotaReserved")["status"] == "False",
            "the eviction acknowledged",
        )
        assert condition(evicted, "Evicted")["reason"] == "ClusterQueueStopped"
        set_stop_policy(c.kueue, cq, "None")
        c.wait_pods("db", running=3, gated=0)
    assert not is_true(c.workload(db) or {}, "Finished")
    assert watch.observed(), "the quota sampler never saw quota held"
    assert watch.reserved.get(rf, 0) <= 3000 and watch.running.get("node-b", 0) <= 3000


def test_a_leaderworkerset_is_a_workload_per_group_with_leader_and_workers_flavors(
    serving_quotagate: ControllerProcess, api_client: client.ApiClient, namespace: str
) -> None:
    c = Cluster(api_client, namespace)
    cq, rf_a, rf_b = f"{namespace}-cq", f"{namespace}-a", f"{namespace}-b"
    c.kueue.apply(
        flavor(rf_a, {ZONE: "node-a"}),
        flavor(rf_b, {ZONE: "node-b"}),
        cluster_queue(cq, {rf_a: {"cpu": 1}, rf_b: {"cpu": 2}}),
        local_queue(namespace, "lq", cq),
    )
    with quota_watch(api_client, namespace) as watch:
        created = c.custom.create_namespaced_custom_object(
            *LWS[:2], namespace, LWS[2], leaderworkerset("srv", replicas=2, size=3)
        )
        lwt = created["spec"]["leaderWorkerTemplate"]
        assert lwt["leaderTemplate"]["metadata"]["annotations"][ROLE_HASH_ANNOTATION] == "leader"
        assert lwt["workerTemplate"]["metadata"]["annotations"][ROLE_HASH_ANNOTATION] == "worker"
        # One group fits: its leader gets flavor a, its 2 workers flavor b; the other waits
        # (which one goes first is the queue's choice: they were made at once).
        groups = ["leaderworkerset-srv-0", "leaderworkerset-srv-1"]
        for name in groups:
            c.wait_workload(name, lambda w: condition(w, "QuotaReserved") is not None, "queued")
        wait_for(lambda: len(c.holding()) == 1, what="one group admitted")
        [first] = c.holding()
        [second] = [name for name in groups if name != first]
        workload = c.wait_workload(first, lambda w: is_true(w, "Admitted"), "admitted")
        assert assignments(workload) == {"leader": (1, rf_a), "worker": (2, rf_b)}
        pending = c.workload(second) or {}
        assert [(ps["name"], ps["count"]) for ps in pending["spec"]["podSets"]] == [
            ("leader", 1),
            ("worker", 2),
        ]
        running = c.wait_pods("srv", running=3, gated=3)
        placed = {
            (p.metadata.labels["leaderworkerset.sigs.k8s.io/worker-index"] == "0", p.spec.node_name)
            for p in running
        }
        assert placed == {(True, "node-a"), (False, "node-b")}  # the leader, the workers
        index = {p.metadata.labels["leaderworkerset.sigs.k8s.io/group-index"] for p in running}
        assert index == {first.rsplit("-", 1)[1]}
        c.wait_workload(first, lambda w: is_true(w, "PodsReady"), "PodsReady")

        # Scale to 1: group 1's Workload goes, and with it its quota if it held it, which
        # group 0 then gets.
        c.custom.patch_namespaced_custom_object(
            *LWS[:2], namespace, LWS[2], "srv", {"spec": {"replicas": 1}}
        )
        wait_for(lambda: c.workload(groups[1]) is None, what="group 1's Workload gone")
        running = c.wait_pods("srv", running=3, gated=0)
        index = {p.metadata.labels["leaderworkerset.sigs.k8s.io/group-index"] for p in running}
        assert index == {"0"} and c.holding() == [groups[0]]

        # Drain: group 0's pods are deleted and the LeaderWorkerSet recreates them gated.
        before = {p.metadata.uid for p in c.pods("srv")}
        set_stop_policy(c.kueue, cq, "HoldAndDrain")
        wait_for(lambda: not c.holding(), timeout=90, what="the eviction acknowledged")
        c.wait_pods("srv", running=0, gated=3)
        assert not {p.metadata.uid for p in c.pods("srv")} & before
        set_stop_policy(c.kueue, cq, "None")
        running = c.wait_pods("srv", running=3, gated=0)
        assert {p.spec.node_name for p in running} == {"node-a", "node-b"}
        evictions = c.workload("leaderworkerset-srv-0")["status"]["schedulingStats"]["evictions"]
        assert {"reason": "ClusterQueueStopped", "underlyingCause": "", "count": 1} in evictions
    assert not any(is_true(w, "Finished") for w in c.workloads().values())
    assert watch.observed(), "the quota sampler never saw quota held"
    assert watch.reserved.get(rf_a, 0) <= 1000 and watch.reserved.get(rf_b, 0) <= 2000
    assert watch.running.get("node-a", 0) <= 1000 and watch.running.get("node-b", 0) <= 2000


def test_a_statefulset_past_its_max_exec_time_is_deactivated_and_deleted_with_its_workload(
    serving_quotagate: ControllerProcess, api_client: client.ApiClient, namespace: str
) -> None:
    """The `kueue.x-k8s.io/max-exec-time-seconds` label, as for Jobs: the Workload is
    deactivated once it ran that long, its pods are deleted and wait gated (a serving
    Workload is not finished); deleting the StatefulSet deletes its Workload."""
    c = Cluster(api_client, namespace)
    cq, rf = f"{namespace}-cq", f"{namespace}-rf"
    c.kueue.apply(flavor(rf), cluster_queue(cq, {rf: {"cpu": 2}}), local_queue(namespace, "lq", cq))
    body = statefulset("ttl", 2, labels={"kueue.x-k8s.io/max-exec-time-seconds": "4"})
    c.apps.create_namespaced_stateful_set(namespace, body)
    ttl = c.kueue.workload_name(namespace, "StatefulSet", "ttl")
    workload = c.wait_workload(ttl, lambda w: is_true(w, "Admitted"), "admitted")
    assert workload["spec"]["maximumExecutionTimeSeconds"] == 4
    c.wait_pods("ttl", running=2, gated=0)
    deactivated = c.wait_workload(
        ttl,
        lambda w: (
            w["spec"].get("active") is False and condition(w, "QuotaReserved")["status"] == "False"
        ),
        "deactivated and released",
        timeout=90,
    )
    assert (
        condition(deactivated, "Evicted")["reason"]
        == "DeactivatedDueToMaximumExecutionTimeExceeded"
    )
    assert not is_true(deactivated, "Finished")
    c.wait_pods("ttl", running=0, gated=2)
    c.apps.delete_namespaced_stateful_set("ttl", namespace)
    wait_for(lambda: c.workload(ttl) is None, what="the Workload deleted with it")
