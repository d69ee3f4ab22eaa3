"""The node view of one TAS flavor (Kueue's `TASFlavorSnapshot`): its domains per level of
the Topology, each leaf's free capacity (allocatable, minus the pods quotagate does not
manage, minus the TAS Workloads already admitted), and the per-request counts the
assignment works on.

Which nodes count: ready, schedulable, carrying every label of the flavor's `nodeLabels`
and every level's label. When the lowest level is `kubernetes.io/hostname` each leaf is one
node (nodes sharing a hostname are one leaf, as in Kueue); otherwise a leaf sums the nodes
that share its level values.

Values are milli-units (`pods` too: one pod is 1000), so the arithmetic stays exact.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from api.constants import HOSTNAME_LABEL
from controller.core.model.flavors import Taint
from controller.core.model.topology import Node

__all__ = ["ONE_POD", "Domain", "DomainID", "TopologySnapshot", "count_in"]

DomainID = tuple[str, ...]
"""A domain's values, from the highest level down to its own. A leaf is also known by its
values as an assignment writes them (`Domain.key`): the hostname alone when the lowest
level is the node (node names are unique), else the whole path."""

ONE_POD = 1000
"""What one pod takes of a node's `pods` allocatable, in milli-units."""


@dataclass(slots=True, eq=False)
class Domain:
    """One topology domain, and the counts of the request being placed (reset per
    request: pods and slices that fit, with and without the group's leader)."""

    id: DomainID
    key: DomainID = ()  # leaves only: the values an assignment writes for it
    parent: Domain | None = None
    children: list[Domain] = field(default_factory=list)
    free: dict[str, int] = field(default_factory=dict)  # leaves only
    taints: tuple[Taint, ...] = ()  # leaves only: the taints of its nodes
    labels: Mapping[str, str] = field(default_factory=dict)  # a node leaf's labels
    pod_count: int = 0
    pod_count_with_leader: int = 0
    slice_count: int = 0
    slice_count_with_leader: int = 0
    leader_count: int = 0

    def reset(self) -> None:
        self.pod_count = self.pod_count_with_leader = 0
        self.slice_count = self.slice_count_with_leader = self.leader_count = 0

    def copy_counts(self) -> Domain:
        """The same domain with its own counts (a leader's share of it)."""
        out = Domain(self.id, self.key, self.parent)
        out.pod_count = self.pod_count
        out.leader_count = self.leader_count
        return out


def count_in(requests: Mapping[str, int], free: Mapping[str, int]) -> int:
    """How many pods of `requests` fit in `free` (a resource it lacks: none)."""
    fits: int | None = None
    for name, amount in requests.items():
        if amount <= 0:
            continue
        n = max(free.get(name, 0), 0) // amount
        fits = n if fits is None else min(fits, n)
    return 0 if fits is None else fits


class TopologySnapshot:
    """The domains of one flavor's nodes under a Topology's levels."""

    def __init__(
        self,
        topology: str,
        levels: Iterable[str],
        nodes: Iterable[Node],
        *,
        flavor_labels: Mapping[str, str] | None = None,
        non_tas_usage: Mapping[str, Mapping[str, int]] | None = None,
        tas_usage: Mapping[DomainID, Mapping[str, int]] | None = None,
    ) -> None:
        self.topology = topology
        # Kueue's feature gates the placement reads (TASCache sets them)
        self.balanced_placement = False  # TASBalancedPlacement (alpha, off)
        self.multi_layer = True  # TASMultiLayerTopology (beta, on)
        self.levels: tuple[str, ...] = tuple(levels)
        self.lowest_is_node = self.levels[-1] == HOSTNAME_LABEL
        self.domains_per_level: list[dict[DomainID, Domain]] = [{} for _ in self.levels]
        self.leaves: dict[DomainID, Domain] = {}  # by key
        self.node_count = 0
        wanted = flavor_labels or {}
        non_tas = non_tas_usage or {}
        for node in nodes:
            if not node.ready or node.unschedulable:
                continue
            if any(node.labels.get(k) != v for k, v in wanted.items()):
                continue
            if any(level not in node.labels for level in self.levels):
                continue
            self.node_count += 1
            values = tuple(node.labels[level] for level in self.levels)
            # As Kueue's topology tree: at the node level a leaf is a hostname, so nodes
            # sharing one (never in a real cluster; Kueue's perf runner makes them) are
            # one leaf with their capacities summed, where the first of them is.
            leaf = (self.leaves.get(values[-1:]) if self.lowest_is_node else None) or self._leaf(
                values
            )
            for name, amount in node.allocatable.items():
                leaf.free[name] = leaf.free.get(name, 0) + amount
            for name, amount in (non_tas.get(node.name) or {}).items():
                leaf.free[name] = leaf.free.get(name, 0) - amount
            leaf.taints = (*leaf.taints, *node.taints)
            if self.lowest_is_node and not leaf.labels:
                leaf.labels = node.labels
        for domain_id, usage in (tas_usage or {}).items():
            self.add_usage(domain_id, usage)

    def _leaf(self, values: DomainID) -> Domain:
        parent: Domain | None = None
        for depth in range(len(values)):
            key = values[: depth + 1]
            domain = self.domains_per_level[depth].get(key)
            if domain is None:
                domain = Domain(key, parent=parent)
                self.domains_per_level[depth][key] = domain
                if parent is not None:
                    parent.children.append(domain)
            parent = domain
        assert parent is not None
        if not parent.key:
            parent.key = values[-1:] if self.lowest_is_node else values
            self.leaves[parent.key] = parent
        return parent

    def restricted(self, prefix: DomainID) -> TopologySnapshot:
        """The same view limited to the domain `prefix` (its values from the top level) and
        what is under it: its leaves share their free capacity with this view's, so usage
        moved here shows there. Counts are its own."""
        out = TopologySnapshot.__new__(TopologySnapshot)
        out.topology = self.topology
        out.balanced_placement = self.balanced_placement
        out.multi_layer = self.multi_layer
        out.levels = self.levels
        out.lowest_is_node = self.lowest_is_node
        out.domains_per_level = [{} for _ in self.levels]
        out.leaves = {}
        out.node_count = 0
        depth = len(prefix)
        for key, leaf in self.leaves.items():
            if leaf.id[:depth] != prefix:
                continue
            copy = out._leaf(leaf.id)
            copy.free = leaf.free  # shared: moves on either view show on both
            copy.taints = leaf.taints
            copy.labels = leaf.labels
            out.node_count += 1
            assert copy.key == key
        return out

    @property
    def roots(self) -> Iterable[Domain]:
        return self.domains_per_level[0].values()

    def add_usage(self, leaf_key: DomainID, usage: Mapping[str, int], sign: int = 1) -> None:
        """Take `usage` from a leaf's free capacity (`sign` -1: give it back); a leaf the
        view does not hold (a node gone) is ignored."""
        leaf = self.leaves.get(leaf_key)
        if leaf is None:
            return
        for name, amount in usage.items():
            leaf.free[name] = leaf.free.get(name, 0) - sign * amount

    def level_index(self, label: str) -> int | None:
        try:
            return self.levels.index(label)
        except ValueError:
            return None

    def free_by_domain(self, level: int) -> dict[DomainID, dict[str, int]]:
        """Each domain's free capacity at `level` (the sum of its leaves')."""
        out: dict[DomainID, dict[str, int]] = {}
        for leaf in self.leaves.values():
            total = out.setdefault(leaf.id[: level + 1], {})
            for name, amount in leaf.free.items():
                total[name] = total.get(name, 0) + amount
        return out
