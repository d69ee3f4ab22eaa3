"""What topology-aware scheduling keeps between cycles (Kueue's TAS cache): the Topologies,
the nodes, the usage of the pods quotagate does not place (per node) and of the TAS
Workloads holding quota (per flavor and leaf), and each TAS flavor's node view, built when
first asked for and kept up to date as Workloads are admitted and released.

A change of nodes, pods or Topologies drops the views (they are rebuilt on the next ask);
an admission or a release only moves usage in the views already built.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from api.constants import HOSTNAME_LABEL
from api.workload_status import Admission
from controller.core.model.flavors import ResourceFlavor
from controller.core.model.topology import Node, Topology
from controller.core.model.workloads import PodSet, WorkloadKey
from controller.core.tas.assignment import add_usage, usage_of
from controller.core.tas.encoding import decode
from controller.core.tas.snapshot import DomainID, TopologySnapshot

__all__ = ["TASCache"]

_Usage = dict[DomainID, dict[str, int]]


class TASCache:
    """The TAS part of the engine's state; `flavors` is the object store's (read only)."""

    def __init__(self, flavors: Mapping[str, ResourceFlavor]) -> None:
        self._flavors = flavors
        self.topologies: dict[str, Topology] = {}
        self.nodes: dict[str, Node] = {}
        # How many nodes carry each `kubernetes.io/hostname` value (`has_node`)
        self._hostnames: dict[str, int] = {}
        self._pods: dict[str, tuple[str, dict[str, int]]] = {}
        self.node_usage: dict[str, dict[str, int]] = {}
        self._workloads: dict[WorkloadKey, dict[str, _Usage]] = {}  # flavor → leaf usage
        self.flavor_usage: dict[str, _Usage] = {}
        self._views: dict[str, TopologySnapshot] = {}
        # Per flavor, the node capacity nominated preemptors hold beyond what their leaving
        # victims still take (controller/core/tas/holds.py keeps it)
        self._held: dict[str, _Usage] = {}
        # Kueue's feature gates of the placement (configure_state sets them)
        self.balanced_placement = False  # TASBalancedPlacement
        self.multi_layer = True  # TASMultiLayerTopology

    def set_gates(self, *, balanced_placement: bool, multi_layer: bool) -> None:
        self.balanced_placement = balanced_placement
        self.multi_layer = multi_layer
        self._views.clear()

    # -- what changes the views ---------------------------------------------------------

    def set_topology(self, topology: Topology) -> None:
        self.topologies[topology.name] = topology
        self._views.clear()

    def remove_topology(self, name: str) -> None:
        self.topologies.pop(name, None)
        self._views.clear()

    def set_node(self, node: Node) -> None:
        self._forget_hostname(self.nodes.get(node.name))
        self.nodes[node.name] = node
        hostname = node.labels.get(HOSTNAME_LABEL)
        if hostname is not None:
            self._hostnames[hostname] = self._hostnames.get(hostname, 0) + 1
        self._views.clear()

    def remove_node(self, name: str) -> None:
        self._forget_hostname(self.nodes.pop(name, None))
        self._views.clear()

    def _forget_hostname(self, node: Node | None) -> None:
        hostname = None if node is None else node.labels.get(HOSTNAME_LABEL)
        if hostname is None:
            return
        left = self._hostnames[hostname] - 1
        if left:
            self._hostnames[hostname] = left
        else:
            del self._hostnames[hostname]

    def has_node(self, name: str) -> bool:
        """Whether a node an assignment names is in the view: a node of that name, or one
        whose `kubernetes.io/hostname` label has that value (an assignment writes the
        label's value, which a kubelet's `--hostname-override` can set apart from the
        node's name)."""
        return name in self.nodes or name in self._hostnames

    def set_pod(self, key: str, node: str, requests: Mapping[str, int]) -> None:
        """A running pod quotagate does not place (not a TAS pod) on `node`: what it
        takes there (its requests and the pod itself)."""
        self.remove_pod(key)
        usage = dict(requests)
        usage["pods"] = usage.get("pods", 0) + 1000
        self._pods[key] = (node, usage)
        total = self.node_usage.setdefault(node, {})
        for name, amount in usage.items():
            total[name] = total.get(name, 0) + amount
        self._views.clear()

    def remove_pod(self, key: str) -> None:
        found = self._pods.pop(key, None)
        if found is None:
            return
        node, usage = found
        total = self.node_usage.get(node, {})
        for name, amount in usage.items():
            total[name] = total.get(name, 0) - amount
        if not any(total.values()):
            self.node_usage.pop(node, None)
        self._views.clear()

    def flavor_changed(self) -> None:
        self._views.clear()

    # -- admitted TAS Workloads -----------------------------------------------------------

    def reserve(self, key: WorkloadKey, admission: Admission, pod_sets: Iterable[PodSet]) -> None:
        """Count what an admission's topology assignments take (nothing without one)."""
        taken = self.admission_usage(admission, pod_sets)
        if not taken:
            return
        self.unreserve(key)
        self._workloads[key] = taken
        self._move(taken, 1)

    def admission_usage(
        self, admission: Admission, pod_sets: Iterable[PodSet]
    ) -> dict[str, _Usage]:
        """What an admission's topology assignments take, per flavor and leaf."""
        by_name = {ps.name: ps for ps in pod_sets}
        taken: dict[str, _Usage] = {}
        for psa in admission.pod_set_assignments:
            if psa.topology_assignment is None:
                continue
            flavor = self.tas_flavor_of(psa.flavors.values())
            pod_set = by_name.get(psa.name)
            if flavor is None or pod_set is None:
                continue
            usage = usage_of(decode(psa.topology_assignment), pod_set.requests)
            add_usage(taken.setdefault(flavor, {}), usage)
        return taken

    def unreserve(self, key: WorkloadKey) -> None:
        taken = self._workloads.pop(key, None)
        if taken is not None:
            self._move(taken, -1)

    def _move(self, taken: Mapping[str, _Usage], sign: int) -> None:
        for flavor, usage in taken.items():
            total = self.flavor_usage.setdefault(flavor, {})
            for leaf, amounts in usage.items():
                into = total.setdefault(leaf, {})
                for name, amount in amounts.items():
                    into[name] = into.get(name, 0) + sign * amount
            view = self._views.get(flavor)
            if view is not None:
                for leaf, amounts in usage.items():
                    view.add_usage(leaf, amounts, sign)

    def set_held(self, flavor: str, held: _Usage) -> None:
        """Replace what nominated preemptors hold of a flavor's leaves (tas/holds.py)."""
        view = self._views.get(flavor)
        old = self._held.pop(flavor, {})
        if held:
            self._held[flavor] = held
        if view is not None:
            for leaf, amounts in old.items():
                view.add_usage(leaf, amounts, -1)
            for leaf, amounts in held.items():
                view.add_usage(leaf, amounts)

    def held(self, flavor: str) -> Mapping[DomainID, Mapping[str, int]]:
        return self._held.get(flavor, {})

    # -- reading --------------------------------------------------------------------------

    def tas_flavor_of(self, names: Iterable[str]) -> str | None:
        """The TAS flavor among a pod set's flavors, if any."""
        for name in names:
            flavor = self._flavors.get(name)
            if flavor is not None and flavor.topology_name is not None:
                return name
        return None

    def view(self, flavor_name: str) -> TopologySnapshot | str:
        """The node view of a TAS flavor, or why there is none."""
        view = self._views.get(flavor_name)
        if view is not None:
            return view
        flavor = self._flavors.get(flavor_name)
        if flavor is None or flavor.topology_name is None:
            return f'flavor "{flavor_name}" has no topology'
        topology = self.topologies.get(flavor.topology_name)
        if topology is None or not topology.levels:
            return f'topology "{flavor.topology_name}" of flavor "{flavor_name}" not found'
        view = TopologySnapshot(
            topology.name,
            topology.levels,
            self.nodes.values(),
            flavor_labels=flavor.node_labels,
            non_tas_usage=self.node_usage,
            tas_usage=self.flavor_usage.get(flavor_name),
        )
        for leaf, amounts in self._held.get(flavor_name, {}).items():
            view.add_usage(leaf, amounts)
        view.balanced_placement = self.balanced_placement
        view.multi_layer = self.multi_layer
        self._views[flavor_name] = view
        return view

    def usage_of(self, key: WorkloadKey, flavor: str) -> Mapping[DomainID, Mapping[str, int]]:
        """What an admitted Workload takes from each leaf of a flavor's view."""
        return self._workloads.get(key, {}).get(flavor, {})

    def workloads_in(self, flavor: str) -> list[WorkloadKey]:
        """The admitted TAS Workloads with pods in a flavor's nodes."""
        return sorted(key for key, taken in self._workloads.items() if flavor in taken)

    def workloads_on(self, node: str) -> list[WorkloadKey]:
        """The TAS Workloads holding quota with pods assigned to `node` (assignments at
        the hostname level name nodes)."""
        return sorted(
            key
            for key, taken in self._workloads.items()
            if any((node,) in usage for usage in taken.values())
        )

    def flavors_of(self, topology: str) -> list[str]:
        return [name for name, f in self._flavors.items() if f.topology_name == topology]
