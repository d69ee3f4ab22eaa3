"""pytest fixtures for the real local control plane (loaded from tests/conftest.py).

One control plane per test session: etcd + kube-apiserver start on first use; e2e tests
that ask for `full_cluster` add kube-scheduler, kube-controller-manager, two fake nodes
and the pod-lifecycle helper to the same control plane; those that ask for `real_node`
add a real kubelet with containerd beside the fake nodes.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from image.build import Built
from image.build import build as build_image
from tests.cluster.controlplane import ControlPlane
from tests.cluster.kubelet import RealNode
from tests.cluster.nodes import PodLifecycle, create_node

REPO = Path(__file__).resolve().parents[2]
CRD_DIR = REPO / "config" / "crd" / "bases"


def install_crds(
    api_client: client.ApiClient, path: Path = CRD_DIR, timeout: float = 60
) -> list[str]:
    """Create or update every CRD in `path` and wait until all are Established."""
    extensions = client.ApiextensionsV1Api(api_client)
    names = []
    for file in sorted(path.glob("*.yaml")):
        # libyaml's loader where there is one: KubeRay's CRDs are 4 MB of YAML.
        for doc in yaml.load_all(
            file.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        ):
            if not doc:
                continue
            name = doc["metadata"]["name"]
            names.append(name)
            try:
                existing = extensions.read_custom_resource_definition(name)
                doc["metadata"]["resourceVersion"] = existing.metadata.resource_version
                extensions.replace_custom_resource_definition(name, doc)
            except ApiException as exc:
                if exc.status != 404:
                    raise
                extensions.create_custom_resource_definition(doc)
    deadline = time.monotonic() + timeout
    pending = set(names)
    while pending and time.monotonic() < deadline:
        for name in list(pending):
            crd = extensions.read_custom_resource_definition(name)
            conditions = {c.type: c.status for c in (crd.status.conditions or [])}
            if conditions.get("Established") == "True":
                pending.discard(name)
        if pending:
            time.sleep(0.2)
    if pending:
        raise TimeoutError(f"CRDs not Established after {timeout}s: {sorted(pending)}")
    # The storage for a new CRD answers 429 "storage is (re)initializing" for a moment.
    custom = client.CustomObjectsApi(api_client)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            custom.list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "workloads", limit=1)
            break
        except ApiException as exc:
            if exc.status not in (404, 429, 503):
                raise
            time.sleep(0.2)
    return names


def wait_for(predicate, timeout: float = 30.0, interval: float = 0.1, what: str = "condition"):  # type: ignore[no-untyped-def]
    """Poll `predicate()` until it returns a truthy value (returned) or time runs out."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what} (last value: {last!r})")


@pytest.fixture(scope="session")
def cluster() -> Iterator[ControlPlane]:
    plane = ControlPlane()
    started = time.monotonic()
    plane.start()
    plane.start_seconds = time.monotonic() - started  # type: ignore[attr-defined]
    try:
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="session")
def kubeconfig_path(cluster: ControlPlane) -> str:
    return str(cluster.kubeconfig)


@pytest.fixture(scope="session")
def api_client(cluster: ControlPlane) -> Iterator[client.ApiClient]:
    api = config.new_client_from_config(str(cluster.kubeconfig))
    try:
        yield api
    finally:
        api.close()


@pytest.fixture(scope="session")
def crds_installed(api_client: client.ApiClient) -> list[str]:
    return install_crds(api_client)


@pytest.fixture
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


@pytest.fixture
def custom(api_client: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api_client)


@pytest.fixture
def namespace(api_client: client.ApiClient) -> Iterator[str]:
    """A fresh namespace for one test, deleted afterwards."""
    core = client.CoreV1Api(api_client)
    name = f"t-{uuid.uuid4().hex[:8]}"
    core.create_namespace(
        {"metadata": {"name": name, "labels": {"quotagate.test/namespace": "true"}}}
    )
    # The ServiceAccount admission plugin admits a pod only with its ServiceAccount; the
    # controller-manager makes `default`, but integration tests run without one.
    try:
        core.create_namespaced_service_account(name, {"metadata": {"name": "default"}})
    except ApiException as exc:
        if exc.status != 409:
            raise
    try:
        yield name
    finally:
        try:
            core.delete_namespace(name)
        except ApiException as exc:
            if exc.status != 404:
                raise


@pytest.fixture(scope="session")
def full_cluster(cluster: ControlPlane, api_client: client.ApiClient) -> Iterator[ControlPlane]:
    """The same control plane plus scheduler, controller-manager, 2 fake nodes and the
    pod-lifecycle helper (reachable as `full_cluster.lifecycle`)."""
    cluster.start_scheduler()
    cluster.start_controller_manager()
    core = client.CoreV1Api(api_client)
    for name in ("node-a", "node-b"):
        create_node(core, name, labels={"topology.kubernetes.io/zone": name})
    lifecycle = PodLifecycle(api_client).start()
    cluster.lifecycle = lifecycle  # type: ignore[attr-defined]
    try:
        yield cluster
    finally:
        lifecycle.stop()


@pytest.fixture(scope="session")
def real_node(full_cluster: ControlPlane) -> Iterator[RealNode]:
    """A real node beside the fake ones: containerd and a kubelet (tests/cluster/kubelet.py),
    tainted so that only pods tolerating it run there, with busybox in its image store
    (`real_node.busybox`)."""
    node = RealNode(full_cluster).start()
    try:
        yield node
    finally:
        node.stop()


@pytest.fixture(scope="session")
def quotagate_image(real_node: RealNode) -> Built:
    """quotagate's image built from this checkout (or reused from the image cache: image/),
    imported into the real node's image store."""
    built = build_image(say=lambda line: print(line, flush=True))
    real_node.import_image(built.path)
    return built
