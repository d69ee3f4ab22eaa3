"""A topology-aware scenario's live objects, as Kueue's scheduler-perf runner creates them
(`runner/generator/topology_generator.go`): one fake Node per leaf of the topology (no
kubelet: nothing but the API object), labelled with each level's value (`<level>-<i>`)
and the flavor's node label, with the leaf's allocatable capacity and 110 pods, and Ready
(created, then its status written, then the `node.kubernetes.io/not-ready` taint that
kube-apiserver's TaintNodesByCondition admission put on it removed, as the runner's
`CreateNodesWithStatus` does); the Topology; a ResourceFlavor with the topology's name and
the node label. No pods are created, by the runner or here: a Workload's admission (its
`topologyAssignment`) is all a run sees of its placement.

Two differences from the runner, both so that runs and nodes stay apart: every name
carries the run id (nodes `node-b0-r2-n15-<run>`, as the runner's names plus the id), and
the hostname label is the node's name (the runner sets `node-<i>`, the same value in every
rack, which a real cluster never has). The flavor's `nodeLabels` also hold the run's label,
so a run's flavor selects only its own nodes.

`NodeLedger` checks the run's placements: each admission's pods charged to the nodes its
`topologyAssignment` names, in the watch's order, and an admission that puts more on a
node than its allocatable capacity counted as node over-use."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any

from kubernetes.aio.client.exceptions import ApiException

from api.constants import HOSTNAME_LABEL
from api.quantities import Quantity
from controller.core.tas.encoding import decode
from controller.kube.client import MERGE_PATCH, NODES, TOPOLOGIES, Api, retrying
from tools.bench.tas_scenario import PODS_PER_NODE, TASSetup

__all__ = ["NodeLedger", "TASObjects", "topology_request"]

log = logging.getLogger(__name__)

PODS = "pods"
_NOT_READY_TAINT = "node.kubernetes.io/not-ready"


def topology_request(request: Any) -> dict[str, Any]:
    """A scenario pod set's `topologyRequest` (controller/core/model/topology.py's
    TopologyRequest) in v1beta2's form, as Kueue's generator writes it."""
    out: dict[str, Any] = {}
    if request.required is not None:
        out["required"] = request.required
    if request.preferred is not None:
        out["preferred"] = request.preferred
    if request.slice_level is not None:
        out["podSetSliceRequiredTopology"] = request.slice_level
        if request.slice_size:
            out["podSetSliceSize"] = request.slice_size
    return out


def _leaf_values(setup: TASSetup) -> list[list[str]]:
    """Each leaf's value at every level (`<level name>-<i>`), in the runner's order."""
    leaves: list[list[str]] = [[]]
    for name, count, _ in setup.levels:
        leaves = [[*values, f"{name}-{i}"] for values in leaves for i in range(count)]
    return leaves


def _node_name(values: list[str], run_id: str) -> str:
    """The runner's `buildNodeName` (`node-b0-r2-n15`: each value's first letter and
    number), with the run id."""
    parts = "".join(f"-{value[0]}{value.rsplit('-', 1)[1]}" for value in values)
    return f"node{parts}-{run_id}"


@dataclass
class TASObjects:
    """The run's nodes, Topology and the flavor's TAS fields."""

    setup: TASSetup
    run_id: str
    labels: dict[str, str]  # the run's label

    @property
    def topology(self) -> str:
        return f"{self.setup.topology}-{self.run_id}"

    def flavor_spec(self) -> dict[str, Any]:
        return {
            "nodeLabels": {self.setup.flavor_label: "tas", **self.labels},
            "topologyName": self.topology,
        }

    def topology_body(self) -> dict[str, Any]:
        return {
            "apiVersion": TOPOLOGIES.api_version,
            "kind": "Topology",
            "metadata": {"name": self.topology, "labels": self.labels},
            "spec": {"levels": [{"nodeLabel": label} for _, _, label in self.setup.levels]},
        }

    def allocatable(self) -> dict[str, str]:
        out = {resource: str(Quantity(milli)) for resource, milli in self.setup.capacity.items()}
        out.setdefault(PODS, str(PODS_PER_NODE))
        return out

    def node_bodies(self) -> list[dict[str, Any]]:
        bodies = []
        for values in _leaf_values(self.setup):
            name = _node_name(values, self.run_id)
            labels = {**self.labels, self.setup.flavor_label: "tas"}
            labels.update(
                {
                    label: value
                    for (_, _, label), value in zip(self.setup.levels, values, strict=True)
                }
            )
            labels[HOSTNAME_LABEL] = name
            bodies.append(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": name, "labels": labels},
                    "spec": {},
                }
            )
        return bodies

    def node_status(self) -> dict[str, Any]:
        allocatable = self.allocatable()
        return {
            "capacity": allocatable,
            "allocatable": allocatable,
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "fake"}
            ],
        }

    async def create(self, api: Api, gate: asyncio.Semaphore) -> int:
        """The Topology and every node, Ready and untainted; how many nodes."""
        await api.request("POST", Api.path(TOPOLOGIES, None), self.topology_body())
        status = {"status": self.node_status()}

        async def one(body: dict[str, Any]) -> None:
            name = body["metadata"]["name"]
            path = Api.path(NODES, name)
            async with gate:
                created: Any = await retrying(
                    lambda: api.request("POST", Api.path(NODES, None), body)
                )
                await retrying(
                    lambda: api.request("PATCH", path + "/status", status, content_type=MERGE_PATCH)
                )
                taints = (created.get("spec") or {}).get("taints") or []
                if taints:
                    kept = [t for t in taints if t.get("key") != _NOT_READY_TAINT]
                    await retrying(
                        lambda: api.request(
                            "PATCH",
                            path,
                            {"spec": {"taints": kept or None}},
                            content_type=MERGE_PATCH,
                        )
                    )

        bodies = self.node_bodies()
        await asyncio.gather(*(one(body) for body in bodies))
        return len(bodies)

    async def cleanup(self, api: Api, selector: str) -> None:
        for resource in (TOPOLOGIES, NODES):
            with contextlib.suppress(ApiException):
                await api.request(
                    "DELETE", Api.path(resource, None), params={"labelSelector": selector}
                )


@dataclass
class NodeLedger:
    """What the run's admissions put on each node (by hostname), replayed in watch order;
    `overuse` counts the admissions that took a node past its allocatable capacity."""

    allocatable: dict[str, int]  # every node's, milli-units (pods included, 1000 a pod)
    used: dict[str, dict[str, int]] = field(default_factory=dict)
    held: dict[str, list[tuple[str, dict[str, int]]]] = field(default_factory=dict)
    overuse: int = 0
    placed: int = 0  # pods placed by the admissions seen (again after a re-admission)

    def admit(self, key: str, body: dict[str, Any], per_pod: dict[str, int]) -> None:
        """Workload `key` admitted (`body`, its pods each taking `per_pod`)."""
        taken: list[tuple[str, dict[str, int]]] = []
        over = False
        admission = (body.get("status") or {}).get("admission") or {}
        for assignment in admission.get("podSetAssignments") or ():
            encoded = assignment.get("topologyAssignment")
            if not encoded:
                continue
            placed = decode(encoded)
            for values, count in placed.domains:
                node = values[-1]
                usage = {r: v * count for r, v in per_pod.items()}
                usage[PODS] = 1000 * count
                taken.append((node, usage))
                self.placed += count
                now = self.used.setdefault(node, {})
                for resource, amount in usage.items():
                    now[resource] = now.get(resource, 0) + amount
                    if now[resource] > self.allocatable.get(resource, 0):
                        over = True
                        log.error(
                            "node over-use: %s admitted with %s on %s (%s: %dm of %dm)",
                            key,
                            count,
                            node,
                            resource,
                            now[resource],
                            self.allocatable.get(resource, 0),
                        )
        self.held[key] = taken
        self.overuse += over

    def release(self, key: str) -> None:
        for node, usage in self.held.pop(key, ()):
            now = self.used[node]
            for resource, amount in usage.items():
                now[resource] -= amount
