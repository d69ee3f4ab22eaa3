"""Nodes and pods into the TAS view: a Node's readiness, cordon, taints and allocatable;
which pods take node capacity (bound, not finished, not TAS pods); a new state gets what
the feed saw."""

from __future__ import annotations

from typing import Any

from controller.core.model.nodes import node_from_api, pod_usage, running_tas_pod
from controller.core.model.workloads import WorkloadKey
from controller.core.state import ClusterState
from controller.runtime.topology_feed import TopologyFeed


def node(name: str, ready: str = "True", **spec: Any) -> dict[str, Any]:
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": spec,
        "status": {
            "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": ready}],
        },
    }


def pod(
    name: str, node_name: str | None = "n1", phase: str = "Running", **annotations: str
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"resources": {"requests": {"cpu": "500m"}}}]}
    if node_name:
        spec["nodeName"] = node_name
    return {
        "metadata": {"name": name, "namespace": "ns", "annotations": annotations},
        "spec": spec,
        "status": {"phase": phase},
    }


def test_a_node_as_the_view_reads_it() -> None:
    converted = node_from_api(
        node("n1", unschedulable=True, taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}])
    )
    assert converted.allocatable == {"cpu": 4000, "memory": 8 * 2**30 * 1000, "pods": 110_000}
    assert converted.ready and converted.unschedulable
    assert [(t.key, t.value, t.effect) for t in converted.taints] == [("k", "v", "NoSchedule")]
    assert not node_from_api(node("n2", ready="False")).ready


def test_which_pods_take_node_capacity() -> None:
    assert pod_usage(pod("a")) == ("n1", {"cpu": 500})
    assert pod_usage(pod("unbound", node_name=None)) is None
    assert pod_usage(pod("done", phase="Succeeded")) is None
    assert pod_usage(pod("tas", **{"kueue.x-k8s.io/podset-required-topology": "rack"})) is None


def test_the_feed_fills_the_state_and_a_new_state_gets_it_again() -> None:
    state = ClusterState()
    woken: list[bool] = []
    feed = TopologyFeed(lambda: state, lambda: woken.append(True))
    feed.on_node("ADDED", node("n1"))
    feed.on_pod("ADDED", pod("a"))
    assert set(state.tas.nodes) == {"n1"}
    assert state.tas.node_usage == {"n1": {"cpu": 500, "pods": 1000}}
    feed.on_pod("MODIFIED", pod("a", phase="Succeeded"))
    assert state.tas.node_usage == {}
    feed.on_pod("ADDED", pod("b"))
    state = ClusterState()
    feed.replay(state)
    assert set(state.tas.nodes) == {"n1"} and state.tas.node_usage == {
        "n1": {"cpu": 500, "pods": 1000}
    }
    feed.on_node("DELETED", {"metadata": {"name": "n1"}})
    assert state.tas.nodes == {}
    assert woken


def test_a_not_ready_node_says_since_when_and_running_tas_pods_are_followed() -> None:
    """For failed nodes (docs/tas.md): the Ready condition's lastTransitionTime, and the
    TAS pods running per node and Workload (bound, not finished, not being deleted)."""
    down = node("n1", ready="False")
    down["status"]["conditions"][0]["lastTransitionTime"] = "2026-11-27T10:00:00Z"
    assert node_from_api(down).not_ready_since == 1795773600.0
    assert node_from_api(node("n1")).not_ready_since is None
    tas = {"kueue.x-k8s.io/podset-required-topology": "rack", "kueue.x-k8s.io/workload": "wl"}
    assert running_tas_pod(pod("t", **tas)) == ("n1", "ns/wl")
    assert running_tas_pod(pod("t", phase="Failed", **tas)) is None
    assert running_tas_pod(pod("t", node_name=None, **tas)) is None
    assert running_tas_pod(pod("plain", **{"kueue.x-k8s.io/workload": "wl"})) is None
    leaving = pod("t", **tas)
    leaving["metadata"]["deletionTimestamp"] = "2026-11-27T10:00:00Z"
    assert running_tas_pod(leaving) is None
    state = ClusterState()
    feed = TopologyFeed(lambda: state, lambda: None)
    feed.on_pod("ADDED", pod("t", **tas))
    assert state.failed_nodes.progressing("n1", WorkloadKey("ns/wl"))
    assert state.tas.node_usage == {}  # a TAS pod's usage is its admission's
    fresh = ClusterState()
    feed.replay(fresh)
    assert fresh.failed_nodes.progressing("n1", WorkloadKey("ns/wl"))
    feed.on_pod("DELETED", pod("t", **tas))
    assert not state.failed_nodes.progressing("n1", WorkloadKey("ns/wl"))


def test_the_state_is_told_once_the_nodes_are_fully_listed() -> None:
    """Only then is a node missing from the view taken as deleted (docs/tas.md); a new
    state gets it with the nodes."""
    state = ClusterState()
    woken: list[bool] = []
    feed = TopologyFeed(lambda: state, lambda: woken.append(True))
    [(_, nodes, _), _] = feed.sinks()
    nodes.apply_event(None, node("n1"))
    assert not state.failed_nodes.nodes_listed and not feed.nodes_listed
    assert nodes.on_listed is not None
    nodes.on_listed()
    assert state.failed_nodes.nodes_listed and woken
    fresh = ClusterState()
    feed.replay(fresh)
    assert fresh.failed_nodes.nodes_listed and set(fresh.tas.nodes) == {"n1"}


def test_a_node_that_changed_is_told_to_the_listeners_once_the_state_has_it() -> None:
    """The topology ungater looks at the pods waiting for a node that turned NotReady or
    tainted; an event that changes nothing of the node, or a deletion, is not told."""
    state = ClusterState()
    feed = TopologyFeed(lambda: state, lambda: None)
    told: list[tuple[str, bool]] = []
    feed.node_listeners.append(lambda name: told.append((name, state.tas.nodes[name].ready)))
    feed.on_node("ADDED", node("n1"))
    feed.on_node("MODIFIED", node("n1"))
    feed.on_node("MODIFIED", node("n1", ready="False"))
    feed.on_node("DELETED", {"metadata": {"name": "n1"}})
    assert told == [("n1", True), ("n1", False)]
