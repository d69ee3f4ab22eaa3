"""The nodes and the pods that take their capacity, into the engine's TAS view
(controller/core/tas/cache.py): every Node, and every pod bound to a node and not
finished (a server-side field selector: `spec.nodeName!=`, phase neither Succeeded nor
Failed), all namespaces: a node's capacity is taken by pods of any namespace. TAS pods are
left out of the capacity (their admission counts them); those running (bound, not being
deleted) are followed per node and Workload, for the failed-node check (Kueue's
TASReplaceNodeOnPodTermination: a not-ready node fails a Workload once none of its pods
runs there). Once the nodes have been fully listed, the state is told
(`ClusterState.mark_nodes_listed`): a node missing from them was deleted unseen.

The feed keeps what it last saw, so that a new state (a new leader's) gets it at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from controller.core.model import from_api
from controller.core.model.nodes import node_from_api, pod_usage, running_tas_pod
from controller.core.model.topology import Node
from controller.core.model.workloads import WorkloadKey
from controller.core.state import ClusterState
from controller.kube.client import NODES, PODS, SCHEDULED_PODS, Resource

__all__ = ["TopologyFeed"]

log = logging.getLogger(__name__)


class _Sink:
    def __init__(
        self,
        apply: Callable[[str | None, dict[str, Any]], None],
        keys: Callable[[], set[str]],
        on_listed: Callable[[], None] | None = None,
    ) -> None:
        self.apply_event, self.known_keys, self.on_listed = apply, keys, on_listed


class TopologyFeed:
    """Node and pod events → `state()` (the controller's current state); `wake()` after a
    change, so a parked TAS Workload is tried again."""

    def __init__(self, state: Callable[[], ClusterState], wake: Callable[[], None]) -> None:
        self.state, self.wake = state, wake
        self.nodes: dict[str, Node] = {}
        self.pods: dict[str, tuple[str, dict[str, int]]] = {}
        self.tas_pods: dict[str, tuple[str, WorkloadKey]] = {}  # running TAS pods
        # The nodes have been fully listed once: a node missing from them is deleted.
        self.nodes_listed = False
        # Told the name of a node that changed (not deleted), once the state has it: the
        # topology ungater's look at the pods waiting for it.
        self.node_listeners: list[Callable[[str], None]] = []

    def sinks(self) -> list[tuple[Resource, _Sink, str | None]]:
        """(resource, sink, field selector) of the two informers the operator runs."""
        return [
            (
                NODES,
                _Sink(self.on_node, lambda: {f"/{n}" for n in self.nodes}, self.on_nodes_listed),
                None,
            ),
            (PODS, _Sink(self.on_pod, lambda: set(self.pods) | set(self.tas_pods)), SCHEDULED_PODS),
        ]

    def on_node(self, event_type: str | None, body: dict[str, Any]) -> None:
        name = str((body.get("metadata") or {}).get("name") or "")
        if event_type == "DELETED":
            if self.nodes.pop(name, None) is not None:
                self.state().remove_node(name)
                self.wake()
            return
        try:
            node = node_from_api(body)
        except from_api.InvalidObject as exc:
            log.warning("node %s left out of the topology view: %s", name, exc)
            return
        if self.nodes.get(name) == node:
            return
        self.nodes[name] = node
        self.state().set_node(node)
        self.wake()
        for listener in self.node_listeners:
            listener(name)

    def on_nodes_listed(self) -> None:
        """The node informer's list is complete (judging a node absent from a partial one
        as deleted would fail nodes that exist)."""
        if self.nodes_listed:
            return
        self.nodes_listed = True
        self.state().mark_nodes_listed()
        self.wake()

    def on_pod(self, event_type: str | None, body: dict[str, Any]) -> None:
        meta = body.get("metadata") or {}
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        self._follow_tas_pod(key, None if event_type == "DELETED" else running_tas_pod(body))
        usage = None
        if event_type != "DELETED":
            try:
                usage = pod_usage(body)
            except from_api.InvalidObject as exc:
                log.warning("pod %s left out of the topology view: %s", key, exc)
        if usage is None:
            if self.pods.pop(key, None) is not None:
                self.state().remove_pod(key)
                self.wake()
            return
        if self.pods.get(key) == usage:
            return
        self.pods[key] = usage
        self.state().set_pod(key, *usage)
        self.wake()

    def _follow_tas_pod(self, key: str, where: tuple[str, WorkloadKey] | None) -> None:
        if where is None:
            if self.tas_pods.pop(key, None) is not None:
                self.state().remove_tas_pod(key)
                self.wake()
        elif self.tas_pods.get(key) != where:
            self.tas_pods[key] = where
            self.state().set_tas_pod(key, *where)

    def replay(self, state: ClusterState) -> None:
        """Give a new state everything seen so far."""
        for node in self.nodes.values():
            state.set_node(node)
        if self.nodes_listed:
            state.mark_nodes_listed()
        for key, (node_name, requests) in self.pods.items():
            state.set_pod(key, node_name, requests)
        for key, (node_name, workload) in self.tas_pods.items():
            state.set_tas_pod(key, node_name, workload)
