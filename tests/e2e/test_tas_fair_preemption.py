"""Topology-aware preemption under fair sharing on the full local control plane: the
controller runs with `fairSharing: {}`; one block of two racks of two 2-cpu fake nodes,
each node running a 2-pod Workload. A preemptor asking for one rack, in a queue whose
quota has room, gets the victims of the rack whose Workloads' highest priority is lowest,
and is admitted there once they are gone (docs/tas.md#topology-aware-preemption)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from tests.cluster.controlplane import ControlPlane
from tests.cluster.fixtures import wait_for
from tests.e2e.conftest import webhook_controller_running
from tests.e2e.test_tas import (
    BLOCK,
    HOST,
    POOL,
    RACK,
    hosts_of,
    tainted_nodes,
    tas_queue,
    tas_workload,
)
from tests.integration.kueue import (
    ControllerProcess,
    Kueue,
    condition,
    is_admitted,
    wait_admitted,
)

FAIR_POOL = "e2e-fair"
FAIR_NODES = [f"fair-{r}-{h}" for r in ("r1", "r2") for h in ("h1", "h2")]


@pytest.fixture(scope="module")
def fair_controller(
    full_cluster: ControlPlane,
    kubeconfig_path: str,
    crds_installed: list[str],
    api_client: client.ApiClient,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ControllerProcess]:
    """The controller with its webhook and Kueue's fair sharing on."""
    config = {"integrations": {"frameworks": ["batch/job", "pod"]}, "fairSharing": {}}
    directory: Path = tmp_path_factory.mktemp("tas-fair")
    with webhook_controller_running(
        kubeconfig_path, api_client, directory, "tas-fair", config
    ) as process:
        yield process


@pytest.fixture
def fair_nodes(api_client: client.ApiClient) -> Iterator[list[str]]:
    labels = {}
    for name in FAIR_NODES:
        _, rack, _ = name.split("-")
        labels[name] = {BLOCK: "fb", RACK: f"fb-{rack}", POOL: FAIR_POOL}
    with tainted_nodes(api_client, labels) as names:
        yield names


def test_fair_sharing_preempts_the_cheapest_rack_when_the_quota_has_room(
    fair_controller: ControllerProcess,
    fair_nodes: list[str],
    api_client: client.ApiClient,
    namespace: str,
) -> None:
    """The queue's quota has room (64 cpus), the nodes none: rack fb-r1 runs Workloads of
    priority 1 and 3, rack fb-r2 two of priority 2. The 4-pod preemptor (priority 10)
    evicts fb-r2's two — the lowest priority one, in fb-r1, stays — and runs in fb-r2."""
    kueue = Kueue(api_client)
    tas_queue(kueue, namespace, FAIR_POOL, 64, {"withinClusterQueue": "LowerPriority"})
    running = {
        "r1-low": ("fair-r1-h1", 1),
        "r1-high": ("fair-r1-h2", 3),
        "r2-a": ("fair-r2-h1", 2),
        "r2-b": ("fair-r2-h2", 2),
    }
    for name, (host, priority) in running.items():
        kueue.apply(tas_workload(namespace, name, 2, priority, HOST, host))
        assert hosts_of(wait_admitted(kueue, namespace, name)) == {host: 2}

    kueue.apply(tas_workload(namespace, "big", 4, 10, RACK))
    for name in ("r2-a", "r2-b"):
        wait_for(
            lambda name=name: (
                (c := condition(kueue.get_workload(namespace, name), "Evicted"))
                and c["status"] == "True"
            ),
            timeout=60,
            what=f"{name} evicted",
        )
    for name in ("r1-low", "r1-high"):
        assert condition(kueue.get_workload(namespace, name), "Evicted") is None, name
    assert not is_admitted(kueue.get_workload(namespace, "big"))

    for name in ("r2-a", "r2-b"):
        kueue.acknowledge_eviction(namespace, name)
    assert hosts_of(wait_admitted(kueue, namespace, "big", timeout=60)) == {
        "fair-r2-h1": 2,
        "fair-r2-h2": 2,
    }
    for name in ("r1-low", "r1-high"):
        assert is_admitted(kueue.get_workload(namespace, name)), name
