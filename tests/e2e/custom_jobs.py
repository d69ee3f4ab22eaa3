"""What the e2e tests of the job kinds run by real operators share: the objects of one kind
in a test's namespace and their pods (`CustomJobs`), an operator run for a fixture
(`operator_running`), and the scenario every kind goes through — a second object held
suspended while the first holds the quota (`second_waits_while_the_first_holds_the_quota`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, ClassVar

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from controller.integrations.framework.workload_names import workload_name
from tests.cluster.fixtures import wait_for
from tests.cluster.operators import OperatorProcess
from tests.e2e.quota_watch import QuotaWatch, quota_watch
from tests.integration.kueue import Kueue, cluster_queue, condition, flavor, local_queue

__all__ = [
    "TOLERATION",
    "ZONE",
    "CustomJobs",
    "check_never_over_committed",
    "operator_running",
    "second_waits_while_the_first_holds_the_quota",
    "set_quota",
    "set_stop_policy",
    "two_flavor_queue",
    "wait_finished_and_returned",
    "wait_released",
    "workload_condition",
]

ZONE = "topology.kubernetes.io/zone"
TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}


def workload_condition(kueue: Kueue, namespace: str, name: str, type_: str) -> Any:
    """The Workload's condition, None while it or the Workload does not exist."""
    try:
        return condition(kueue.get_workload(namespace, name), type_)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def set_quota(kueue: Kueue, cq: str, flavors: dict[str, dict[str, Any]]) -> None:
    kueue.custom.patch_cluster_custom_object(
        "kueue.x-k8s.io",
        "v1beta2",
        "clusterqueues",
        cq,
        {"spec": {"resourceGroups": cluster_queue(cq, flavors)["spec"]["resourceGroups"]}},
    )


def set_stop_policy(kueue: Kueue, cq: str, policy: str) -> None:
    kueue.custom.patch_cluster_custom_object(
        "kueue.x-k8s.io", "v1beta2", "clusterqueues", cq, {"spec": {"stopPolicy": policy}}
    )


def two_flavor_queue(kueue: Kueue, namespace: str, cpu_a: int, cpu_b: int) -> tuple[str, str, str]:
    """A ClusterQueue of two flavors — `a` on the node of zone node-a, `b` on node-b with a
    toleration — with `cpu_a` and `cpu_b` cpus, and the LocalQueue `lq`: (the ClusterQueue,
    flavor a, flavor b)."""
    cq, rf_a, rf_b = f"{namespace}-cq", f"{namespace}-a", f"{namespace}-b"
    kueue.apply(
        flavor(rf_a, {ZONE: "node-a"}),
        flavor(rf_b, {ZONE: "node-b"}, [TOLERATION]),
        cluster_queue(cq, {rf_a: {"cpu": cpu_a}, rf_b: {"cpu": cpu_b}}),
        local_queue(namespace, "lq", cq),
    )
    return cq, rf_a, rf_b


def wait_finished_and_returned(kueue: Kueue, namespace: str, workload: str, cq: str) -> None:
    """Until the Workload is Finished and its ClusterQueue reserves nothing."""
    wait_for(
        lambda: condition(kueue.get_workload(namespace, workload), "Finished"),
        timeout=120,
        what="the Workload Finished",
    )
    wait_for(
        lambda: kueue.get_cluster_queue(cq).get("status", {}).get("reservingWorkloads") == 0,
        what="the quota returned",
    )


def check_never_over_committed(watch: QuotaWatch, flavor_a: str, flavor_b: str, cpu_b: int) -> None:
    """The samples of a `two_flavor_queue` test of 1 cpu in flavor a and `cpu_b` in b: never
    more reserved nor running per flavor and node."""
    assert watch.observed(), "the quota sampler never saw quota held"
    assert (
        watch.reserved.get(flavor_a, 0) <= 1000 and watch.reserved.get(flavor_b, 0) <= cpu_b * 1000
    )
    assert watch.running.get("node-a", 0) <= 1000 and watch.running.get("node-b", 0) <= cpu_b * 1000


def wait_released(kueue: Kueue, namespace: str, workload: str, timeout: float = 90) -> None:
    """Until the evicted Workload's quota reservation is released (the eviction
    acknowledged by its job's integration)."""
    wait_for(
        lambda: (
            (c := workload_condition(kueue, namespace, workload, "QuotaReserved"))
            and c["status"] == "False"
        ),
        timeout=timeout,
        what="the eviction acknowledged",
    )


class CustomJobs:
    """The objects of one custom kind in a namespace, and their live pods (those not
    finished nor being deleted), found by the label `name_label` with the object's name."""

    group: ClassVar[str]
    version: ClassVar[str]
    plural: ClassVar[str]
    kind: ClassVar[str]
    name_label: ClassVar[str]

    def __init__(self, api_client: client.ApiClient, namespace: str) -> None:
        self.custom = client.CustomObjectsApi(api_client)
        self.core = client.CoreV1Api(api_client)
        self.namespace = namespace

    def workload(self, name: str) -> str:
        """The name of the object's Workload (Kueue's, from the object's uid)."""
        obj = self.custom.get_namespaced_custom_object(
            self.group, self.version, self.namespace, self.plural, name
        )
        return workload_name(self.kind, self.group, name, str(obj["metadata"]["uid"]))

    def is_suspended(self, obj: dict[str, Any]) -> bool:
        return obj["spec"].get("suspend") is True

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        created: dict[str, Any] = self.custom.create_namespaced_custom_object(
            self.group, self.version, self.namespace, self.plural, body
        )
        return created

    def get(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] = self.custom.get_namespaced_custom_object(
            self.group, self.version, self.namespace, self.plural, name
        )
        return found

    def pods(self, name: str) -> list[Any]:
        return [
            pod
            for pod in self.core.list_namespaced_pod(
                self.namespace, label_selector=f"{self.name_label}={name}"
            ).items
            if pod.metadata.deletion_timestamp is None
            and pod.status.phase not in ("Succeeded", "Failed")
        ]

    def running(self, name: str, count: int) -> list[Any]:
        """Wait until `count` of the object's pods are Running, and return them."""
        found: list[Any] = wait_for(
            lambda: (
                len(pods := [p for p in self.pods(name) if p.status.phase == "Running"]) == count
                and pods
            ),
            timeout=90,
            what=f"{count} pods of {self.kind} {name} running",
        )
        return found

    def delete_with_its_workload(self, kueue: Kueue, name: str) -> None:
        """Delete the object, and wait until garbage collection has deleted its Workload."""
        workload = self.workload(name)
        self.custom.delete_namespaced_custom_object(
            self.group, self.version, self.namespace, self.plural, name
        )

        def workload_gone() -> bool:
            try:
                kueue.get_workload(self.namespace, workload)
            except ApiException as exc:
                if exc.status == 404:
                    return True
                raise
            return False

        wait_for(workload_gone, timeout=60, what=f"the Workload of {self.kind} {name} deleted")

    def complete(self, lifecycle: Any, name: str, count: int) -> None:
        """Succeed the object's `count` pods once they run (the fake nodes' kubelet)."""
        for pod in self.running(name, count):
            lifecycle.complete(self.namespace, pod.metadata.name)


@contextlib.contextmanager
def operator_running(
    operator: OperatorProcess, api_client: client.ApiClient
) -> Iterator[OperatorProcess]:
    """The operator started (`start(api_client)`), then stopped, its webhook configurations
    removed and its log's tail printed."""
    try:
        yield operator.start(api_client)
    finally:
        operator.stop()
        with contextlib.suppress(ApiException):
            operator.unregister(api_client)
        print(f"\n--- {operator.title} log tail ---\n" + operator.log()[-3000:])


def second_waits_while_the_first_holds_the_quota(
    api_client: client.ApiClient,
    jobs: CustomJobs,
    lifecycle: Any,
    first: dict[str, Any],
    second: dict[str, Any],
    pods: int,
) -> None:
    """With quota for `pods` pods of 1 cpu: `first` runs its `pods` pods (until the test
    completes them); `second` waits suspended, without pods, and is admitted (and finishes:
    its pods succeed by themselves) only after the first finished; the quota reserved and
    the cpus running never exceed it."""
    kueue = Kueue(api_client)
    namespace = jobs.namespace
    cq, rf = f"{namespace}-cq", f"{namespace}-rf"
    kueue.apply(
        flavor(rf), cluster_queue(cq, {rf: {"cpu": pods}}), local_queue(namespace, "lq", cq)
    )
    first_name, second_name = first["metadata"]["name"], second["metadata"]["name"]

    def status(name: str, type_: str) -> Any:
        return workload_condition(kueue, namespace, jobs.workload(name), type_)

    with quota_watch(api_client, namespace) as watch:
        jobs.create(first)
        jobs.running(first_name, pods)
        jobs.create(second)
        wait_for(
            lambda: status(second_name, "QuotaReserved"),
            what="the second's pending reason",
        )
        assert jobs.is_suspended(jobs.get(second_name))
        assert not jobs.pods(second_name)
        jobs.complete(lifecycle, first_name, pods)
        wait_for(
            lambda: status(second_name, "Finished"),
            timeout=120,
            what="the second finished after the first",
        )
    first_done = status(first_name, "Finished")
    second_admitted = status(second_name, "Admitted")
    assert first_done is not None and second_admitted is not None
    assert first_done["lastTransitionTime"] <= second_admitted["lastTransitionTime"]
    assert watch.reserved.get(rf, 0) <= pods * 1000
    assert watch.running_total <= pods * 1000
