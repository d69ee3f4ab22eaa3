"""The Ray integrations' framework rules on a real API server with KubeRay's CRDs (from its Go
module, tests/cluster/modules.py) and no KubeRay operator: objects are created as the
webhook or KubeRay would leave them, and KubeRay's status is written by the test, as
Kueue's integration tests do. The KubeRay operator itself runs in tests/e2e/test_ray.py."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from api.constants import QUEUE_NAME_LABEL
from tests.cluster.fixtures import install_crds, wait_for
from tests.cluster.modules import ensure_module
from tests.integration.conftest import StartConfigured
from tests.integration.kueue import (
    Kueue,
    cluster_queue,
    condition,
    flavor,
    local_queue,
    maybe_workload,
    wait_admitted,
)

RAY = ("ray.io", "v1")
BOTH = {"integrations": {"frameworks": ["ray.io/rayjob", "ray.io/raycluster"]}}


@pytest.fixture(scope="module")
def ray_crds(api_client: client.ApiClient) -> list[str]:
    """KubeRay's CRDs (github.com/ray-project/kuberay/ray-operator)."""
    return install_crds(api_client, ensure_module("kuberay").crds)


def queue(kueue: Kueue, namespace: str, cpu: int) -> None:
    cq = f"{namespace}-cq"
    kueue.apply(
        flavor(f"{namespace}-rf"),
        cluster_queue(cq, {f"{namespace}-rf": {"cpu": cpu, "memory": "64Gi"}}),
        local_queue(namespace, "lq", cq),
    )


def pod_template(cpu: str) -> dict[str, Any]:
    return {
        "spec": {
            "containers": [
                {"name": "ray", "image": "rayproject/ray", "resources": {"requests": {"cpu": cpu}}}
            ]
        }
    }


def cluster_spec(workers: int = 1) -> dict[str, Any]:
    return {
        "headGroupSpec": {"rayStartParams": {}, "template": pod_template("1")},
        "workerGroupSpecs": [
            {
                "groupName": "workers",
                "replicas": workers,
                "rayStartParams": {},
                "template": pod_template("1"),
            }
        ],
    }


def rayjob(name: str, queued: bool = True, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": name, "labels": {QUEUE_NAME_LABEL: "lq"} if queued else {}},
        "spec": {
            "suspend": True,
            "entrypoint": "python train.py",
            "shutdownAfterJobFinishes": True,
            "submissionMode": "HTTPMode",
            "rayClusterSpec": cluster_spec(),
            **spec,
        },
    }


def raycluster(name: str, owner: dict[str, Any] | None = None, workers: int = 1) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {QUEUE_NAME_LABEL: "lq"}}
    if owner is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": "ray.io/v1",
                "kind": owner["kind"],
                "name": owner["metadata"]["name"],
                "uid": owner["metadata"]["uid"],
                "controller": True,
            }
        ]
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": meta,
        "spec": {"suspend": owner is None, **cluster_spec(workers)},
    }


class RayObjects:
    def __init__(self, api_client: client.ApiClient, namespace: str) -> None:
        self.custom = client.CustomObjectsApi(api_client)
        self.namespace = namespace

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        created: dict[str, Any] = self.custom.create_namespaced_custom_object(
            *RAY, self.namespace, f"{body['kind'].lower()}s", body
        )
        return created

    def get(self, plural: str, name: str) -> dict[str, Any]:
        found: dict[str, Any] = self.custom.get_namespaced_custom_object(
            *RAY, self.namespace, plural, name
        )
        return found


def test_a_rayjobs_cluster_is_the_rayjobs_and_a_rayjob_on_an_existing_cluster_is_not_queued(
    configured_controller: StartConfigured,
    kueue: Kueue,
    ray_crds: list[str],
    api_client: client.ApiClient,
    namespace: str,
) -> None:
    """Kueue's "Should suspend a cluster if the parent's workload does not exist or is not
    admitted": a running RayCluster controlled by a queued RayJob gets no Workload of its
    own and is suspended while the RayJob's Workload is not admitted. Controlled by a RayJob
    that is not queued, or with `ray.io/rayjob` off, a queued RayCluster is queued on its
    own. A RayJob that runs on an existing cluster (`clusterSelector`) gets no Workload and
    is left running."""
    clusters_only = configured_controller(
        {"integrations": {"frameworks": ["ray.io/raycluster"]}}, namespace
    )
    queue(kueue, namespace, cpu=0)  # nothing is admitted
    ray = RayObjects(api_client, namespace)
    parent = ray.create(rayjob("parent"))
    ray.create(raycluster("alone", owner=parent))
    wait_for(
        lambda: maybe_workload(
            kueue, namespace, kueue.workload_name(namespace, "RayCluster", "alone")
        ),
        what="its own Workload",
    )
    assert ray.get("rayclusters", "alone")["spec"]["suspend"] is True
    assert (
        maybe_workload(kueue, namespace, kueue.workload_name(namespace, "RayJob", "parent")) is None
    )  # RayJobs are left alone
    clusters_only.stop()

    configured_controller(BOTH, namespace)
    on_existing = rayjob("on-existing", clusterSelector={"ray.io/cluster": "shared"}, suspend=False)
    del on_existing["spec"]["rayClusterSpec"]
    ray.create(on_existing)
    wait_for(
        lambda: maybe_workload(
            kueue, namespace, kueue.workload_name(namespace, "RayJob", "parent")
        ),
        what="the RayJob's Workload",
    )
    ray.create(raycluster("child", owner=parent))
    wait_for(
        lambda: ray.get("rayclusters", "child")["spec"].get("suspend") is True,
        what="the child cluster suspended",
    )
    plain = ray.create(rayjob("plain", queued=False))
    ray.create(raycluster("own", owner=plain))
    own = wait_for(
        lambda: maybe_workload(
            kueue, namespace, kueue.workload_name(namespace, "RayCluster", "own")
        ),
        what="its Workload",
    )
    assert [(ps["name"], ps["count"]) for ps in own["spec"]["podSets"]] == [
        ("head", 1),
        ("workers", 1),
    ]
    assert ray.get("rayclusters", "own")["spec"]["suspend"] is True
    assert (
        maybe_workload(kueue, namespace, kueue.workload_name(namespace, "RayCluster", "child"))
        is None
    )
    # A RayJob on an existing cluster is not queued (Kueue skips it); created before the
    # RayClusters above, it has been reconciled by now.
    assert (
        maybe_workload(kueue, namespace, kueue.workload_name(namespace, "RayJob", "on-existing"))
        is None
    )
    assert ray.get("rayjobs", "on-existing")["spec"]["suspend"] is False


def test_a_rayjob_kuberay_refused_is_put_on_hold_and_its_quota_goes_to_others(
    configured_controller: StartConfigured,
    kueue: Kueue,
    ray_crds: list[str],
    api_client: client.ApiClient,
    namespace: str,
) -> None:
    """Kueue's "Should put the workload on hold when RayJob validation fails": KubeRay's
    `ValidationFailed` releases the Workload's quota with QuotaReserved=False OnHold; it is
    not queued again, and a RayCluster waiting for the quota is admitted."""
    configured_controller(BOTH, namespace)
    queue(kueue, namespace, cpu=2)
    ray = RayObjects(api_client, namespace)
    ray.create(rayjob("invalid"))
    wait_for(
        lambda: maybe_workload(
            kueue, namespace, kueue.workload_name(namespace, "RayJob", "invalid")
        ),
        what="its Workload",
    )
    wait_admitted(kueue, namespace, kueue.workload_name(namespace, "RayJob", "invalid"))
    wait_for(
        lambda: ray.get("rayjobs", "invalid")["spec"]["suspend"] is False, what="the RayJob resumed"
    )
    ray.create(raycluster("waiting"))  # 2 cpus: waits for the RayJob's
    wait_for(
        lambda: (
            (
                w := maybe_workload(
                    kueue, namespace, kueue.workload_name(namespace, "RayCluster", "waiting")
                )
            )
            and condition(w, "QuotaReserved")
        ),
        what="the RayCluster pending",
    )
    ray.custom.patch_namespaced_custom_object_status(
        *RAY,
        namespace,
        "rayjobs",
        "invalid",
        {"status": {"jobDeploymentStatus": "ValidationFailed", "reason": "ValidationFailed"}},
    )
    held = wait_for(
        lambda: (
            (
                c := condition(
                    kueue.get_workload(
                        namespace, kueue.workload_name(namespace, "RayJob", "invalid")
                    ),
                    "QuotaReserved",
                )
            )
            and c["reason"] == "OnHold"
            and c
        ),
        what="the Workload on hold",
    )
    assert (held["status"], held["message"]) == ("False", "Job is on hold")
    wait_admitted(kueue, namespace, kueue.workload_name(namespace, "RayCluster", "waiting"))
    on_hold = kueue.get_workload(namespace, kueue.workload_name(namespace, "RayJob", "invalid"))
    assert "admission" not in (on_hold.get("status") or {})
    assert condition(on_hold, "QuotaReserved")["reason"] == "OnHold"  # type: ignore[index]
    assert condition(on_hold, "Finished") is None
