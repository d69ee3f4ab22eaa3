"""A failed node under an admitted TAS Workload, as Kueue handles it
(`pkg/controller/tas/node_controller.go`, `findReplacementAssignment` in
`pkg/cache/scheduler/tas_flavor_snapshot.go`, and the scheduler's fail-fast eviction), with
Kueue's feature gates:

- `TASFailedNodeReplacement` (on): without it a failed node is left alone.
- When a node counts as failed (`verdict`): deleted, or without a Ready condition, at
  once. Not ready: with `TASReplaceNodeOnPodTermination` (on) once the Workload has no
  pod left running there (none bound to it that is neither finished nor being deleted),
  or, with `TASReplaceNodeDueToNotReadyOverFixedTime` (off since Kueue 0.19), once it has
  been not ready for `NODE_FAILURE_DELAY`; without `TASReplaceNodeOnPodTermination`, once it
  has been not ready for `NODE_FAILURE_DELAY`.
- A Ready node with NoSchedule/NoExecute taints, with `TASReplaceNodeOnNodeTaints` (on
  since Kueue 0.17), by the tolerations of the Workload's pod sets there
  (controller/core/tas/node_taints.py): a taint one of them does not tolerate fails the
  node once the Workload has no pod left running there (at once without
  `TASReplaceNodeOnPodTermination`); one tolerated only for `tolerationSeconds`, once no
  pod is left running there; taints tolerated for ever, never.
- The replacement (`find_replacement`): the failed node's pods placed again, in the domain
  the request binds them to — the domain at the `required` level that holds the pod set's
  other pods; for slices, the slice-level domain whose slice the failed node broke — or
  anywhere in the flavor's nodes for a `preferred` or unconstrained request; the other
  pods stay where they are. The new domains are merged into the assignment.
- No replacement: with `TASFailedNodeReplacementFailFast` (on) the Workload is evicted
  (reason `NodeFailures`) and requeued; without it, it keeps its quota and the failed node
  (`status.unhealthyNodes`, written by the engine: `FailedNodes.written`) and the
  replacement is tried again. A second failed node under a Workload still waiting for one
  evicts it. A node healthy again for the Workload (Kueue's `handleHealthyNode`) takes it
  off `status.unhealthyNodes`. After a restart the waiting state is read back from
  `status.unhealthyNodes` (`FailedNodes.recover`).
- Only Workloads Admitted (the Admitted condition, Kueue's `IsAdmitted`: quota reserved and
  every admission check Ready) are judged, replaced or evicted: Kueue's node controller
  finds the Workloads on a node by `TASAssignedNodeNames` (`IsAdmittedByTAS`), its
  scheduler replaces by `HasTopologyAssignmentWithUnhealthyNode` (`IsAdmitted` too). One
  that becomes Admitted has its assigned nodes looked at again (`look_again`): Kueue's
  node controller sees its ungated pods pinned to such a node (`nodeFailurePodHandler`).
- A node deleted while no controller watched has no delete event: once the node view has
  been fully listed (`nodes_listed`), a node an admitted Workload's assignment names that
  is not in it counts as deleted (Kueue reaches it by the pods pinned to or bound there,
  whose events queue the node, and finds it NotFound).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from api.constants import HOSTNAME_LABEL
from api.workload_status import Admission
from controller.core.model.topology import Node, TopologyRequest
from controller.core.model.workloads import Toleration, WorkloadKey
from controller.core.tas.assignment import Assignment, PodSetRequest, find_assignment
from controller.core.tas.encoding import decode
from controller.core.tas.node_taints import TaintHold, has_scheduling_taints, taint_hold
from controller.core.tas.snapshot import DomainID, TopologySnapshot

__all__ = [
    "FAILED",
    "HEALTHY",
    "NODE_FAILURE_DELAY",
    "WAIT",
    "FailedNodes",
    "NodeFailureGates",
    "admission_nodes",
    "assigned_nodes",
    "find_replacement",
    "merge",
    "verdict",
]

NODE_FAILURE_DELAY = 30.0
"""Kueue's `NodeFailureDelay`: how long a node stays not ready before it counts as failed
(where a gate says so)."""

FAILED = "failed"
HEALTHY = "healthy"
WAIT = float("inf")
"""`FailedNodes.look_at` of a node to look at again only on an event (its node or pods)."""


@dataclass(frozen=True, slots=True)
class NodeFailureGates:
    """Kueue's feature gates for failed nodes, with Kueue's defaults."""

    replacement: bool = True  # TASFailedNodeReplacement
    fail_fast: bool = True  # TASFailedNodeReplacementFailFast
    on_pod_termination: bool = True  # TASReplaceNodeOnPodTermination
    not_ready_fixed_time: bool = False  # TASReplaceNodeDueToNotReadyOverFixedTime
    node_taints: bool = True  # TASReplaceNodeOnNodeTaints

    GATES = (
        ("TASFailedNodeReplacement", "replacement"),
        ("TASFailedNodeReplacementFailFast", "fail_fast"),
        ("TASReplaceNodeOnPodTermination", "on_pod_termination"),
        ("TASReplaceNodeDueToNotReadyOverFixedTime", "not_ready_fixed_time"),
        ("TASReplaceNodeOnNodeTaints", "node_taints"),
    )

    @classmethod
    def from_gates(cls, gates: Mapping[str, bool]) -> NodeFailureGates:
        """The gates as configured (Kueue's `featureGates`), Kueue's defaults otherwise. A
        gate needs TASFailedNodeReplacement (Kueue's dependencies; TASReplaceNodeOnNodeTaints
        does not name it, but without it Kueue's node controller ignores node events)."""
        defaults = cls()
        values = {attr: gates.get(name, getattr(defaults, attr)) for name, attr in cls.GATES}
        if not values["replacement"]:
            values = dict.fromkeys(values, False)
        return cls(**values)

    def judges_taints(self, node: Node) -> bool:
        """Whether a Ready `node` is judged by its taints (TASReplaceNodeOnNodeTaints)."""
        return self.node_taints and has_scheduling_taints(node.taints)


def verdict(
    node: Node | None,
    now: float,
    progressing: bool,
    gates: NodeFailureGates,
    tolerations: Sequence[Sequence[Toleration]] = (),
) -> str | float:
    """Whether `node` (None: deleted) counts as failed for a Workload now: FAILED, HEALTHY
    (nothing to do until the node or the Workload's pods on it change), or the time to
    look again. `progressing`: the Workload still has a pod running there; `tolerations`:
    those of each of its pod sets with pods assigned there (the flavor's included)."""
    if node is None:
        return FAILED
    if node.ready:
        if not gates.judges_taints(node):
            return HEALTHY
        hold = taint_hold(node.taints, tolerations)
        if hold is TaintHold.NONE:
            return HEALTHY
        if hold is TaintHold.UNTOLERATED and not gates.on_pod_termination:
            return FAILED
        return HEALTHY if progressing else FAILED
    if node.not_ready_since is None:
        return FAILED  # no Ready condition (or no time to wait from)
    expires = node.not_ready_since + NODE_FAILURE_DELAY
    if not gates.on_pod_termination:
        return FAILED if now >= expires else expires
    if gates.not_ready_fixed_time and now >= expires:
        return FAILED
    if not progressing:
        return FAILED
    return expires if gates.not_ready_fixed_time else HEALTHY


class FailedNodes:
    """What the engine follows of failed nodes: the nodes to look at (not ready, deleted,
    or tainted, under an admitted TAS Workload), when to look again, the running TAS pods
    (to tell whether a Workload still has a pod on a node), and each Workload's failed
    node while its replacement is tried again (Kueue's `status.unhealthyNodes`, one node:
    a second one evicts), with what `status.unhealthyNodes` is to say where that changed
    (`written`: the engine's writes to make)."""

    def __init__(self) -> None:
        self.gates = NodeFailureGates()
        # The node view has been fully listed: a node not in it is deleted (before, a node
        # missing from the view may merely not be listed yet).
        self.nodes_listed = False
        self.suspects: set[str] = set()
        self.look_at: dict[str, float] = {}  # node → when to look again
        self.unhealthy: dict[WorkloadKey, str] = {}  # Workload → its failed node
        # Workloads whose `status.unhealthyNodes` is to be written: → the nodes it lists
        self.written: dict[WorkloadKey, tuple[str, ...]] = {}
        self._pods: dict[str, tuple[str, WorkloadKey]] = {}  # pod key → (node, Workload)
        self._running: dict[tuple[str, WorkloadKey], int] = {}  # (node, Workload) → pods

    def node_changed(self, node: Node | None, name: str) -> None:
        """A node's new state (None: deleted)."""
        self.look_at.pop(name, None)
        if node is not None and node.ready and not self.gates.judges_taints(node):
            self.suspects.discard(name)
            # Kueue's handleHealthyNode: back in time, it is no longer to be replaced.
            for key in [k for k, failed in self.unhealthy.items() if failed == name]:
                self.healthy_again(key)
        else:
            self.suspects.add(name)

    def look_again(self, name: str) -> None:
        """Judge node `name` again in the next cycle (a Workload on it became Admitted)."""
        self.suspects.add(name)
        self.look_at.pop(name, None)

    def wait_for_replacement(self, key: WorkloadKey, node: str) -> None:
        """The Workload keeps its quota and waits for a replacement of `node`."""
        self.unhealthy[key] = node
        self.written[key] = (node,)

    def healthy_again(self, key: WorkloadKey) -> None:
        """Its failed node is healthy again for the Workload: off `status.unhealthyNodes`."""
        del self.unhealthy[key]
        self.written[key] = ()

    def forget(self, key: WorkloadKey) -> None:
        """No longer waiting: replaced, evicted (either write clears the field) or gone."""
        self.unhealthy.pop(key, None)
        self.written.pop(key, None)

    def recover(self, key: WorkloadKey, listed: tuple[str, ...], assigned: set[str]) -> None:
        """After a restart (or a write the engine did not make): the Workload's
        `status.unhealthyNodes` (`listed`) as its waiting state, when its topology
        assignment still names that node (Kueue's `HasTopologyAssignmentWithUnhealthyNode`)
        and it is not already waiting for another."""
        if key in self.unhealthy or key in self.written:
            return
        node = next((name for name in listed if name in assigned), None)
        if node is not None:
            self.unhealthy[key] = node

    def set_pod(self, key: str, node: str, workload: WorkloadKey) -> None:
        """A TAS pod of `workload` bound to `node`, neither finished nor being deleted."""
        if self._pods.get(key) == (node, workload):
            return
        self.remove_pod(key)
        self._pods[key] = (node, workload)
        self._running[node, workload] = self._running.get((node, workload), 0) + 1

    def remove_pod(self, key: str) -> None:
        where = self._pods.pop(key, None)
        if where is None:
            return
        left = self._running[where] - 1
        if left:
            self._running[where] = left
        else:
            del self._running[where]
        if where[0] in self.suspects:
            self.look_at.pop(where[0], None)  # its last pod may have gone: look now

    def progressing(self, node: str, workload: WorkloadKey) -> bool:
        return (node, workload) in self._running

    def due(self, now: float) -> list[str]:
        """The suspect nodes to look at now."""
        return sorted(n for n in self.suspects if self.look_at.get(n, now) <= now)

    def next_time(self) -> float | None:
        """When a timer (Kueue's NodeFailureDelay) next needs a look, if any."""
        return min((t for t in self.look_at.values() if t != WAIT), default=None)


def assigned_nodes(assignment: Assignment) -> set[str]:
    """The nodes an assignment names: the values of its lowest level when that level is
    the hostname, none otherwise (a rack or block value names no node), as Kueue's
    `TASAssignedNodeNames` (`IsLowestLevelHostname`)."""
    if not assignment.levels or assignment.levels[-1] != HOSTNAME_LABEL:
        return set()
    return {key[-1] for key, count in assignment.domains if key and count > 0}


def admission_nodes(admission: Admission) -> set[str]:
    """The nodes an admission's topology assignments name."""
    out: set[str] = set()
    for psa in admission.pod_set_assignments:
        if psa.topology_assignment is not None:
            out |= assigned_nodes(decode(psa.topology_assignment))
    return out


def _slice_size(topology: TopologyRequest) -> int:
    return (topology.slice_size or 1) if topology.slice_level is not None else 1


def _incomplete_slice_domain(
    snapshot: TopologySnapshot, kept: tuple[tuple[DomainID, int], ...], topology: TopologyRequest
) -> DomainID | None:
    """The slice-level domain whose pods no longer make whole slices (Kueue's
    `findIncompleteSliceDomain`)."""
    level = snapshot.level_index(topology.slice_level or snapshot.levels[-1])
    if level is None:
        return None
    pods: dict[DomainID, int] = {}
    for key, count in kept:
        leaf = snapshot.leaves[key]
        pods[leaf.id[: level + 1]] = pods.get(leaf.id[: level + 1], 0) + count
    size = _slice_size(topology)
    return next((domain for domain in sorted(pods) if pods[domain] % size), None)


def _replacement_domain(
    snapshot: TopologySnapshot,
    topology: TopologyRequest,
    kept: tuple[tuple[DomainID, int], ...],
    affected: int,
) -> DomainID | None:
    """The domain the replacement must stay in (Kueue's `requiredReplacementDomain`), or
    None: anywhere."""
    if not kept:
        return None  # the failed node held every pod: nothing to stay with
    if topology.slice_level is not None and affected % _slice_size(topology):
        return _incomplete_slice_domain(snapshot, kept, topology)
    if topology.required is None:
        return None
    level = snapshot.level_index(topology.required)
    if level is None:
        return None
    return snapshot.leaves[kept[0][0]].id[: level + 1]


def merge(
    snapshot: TopologySnapshot,
    levels: tuple[str, ...],
    domains: tuple[tuple[DomainID, int], ...],
) -> Assignment:
    """One assignment of `domains`, in the order of the leaves' values, a leaf named twice
    counted once with both counts (Kueue's `mergeTopologyAssignments`)."""
    counts: dict[DomainID, int] = {}
    for key, count in domains:
        counts[key] = counts.get(key, 0) + count

    def order(key: DomainID) -> DomainID:
        leaf = snapshot.leaves.get(key)
        return leaf.id if leaf is not None else key

    return Assignment(levels, tuple((key, counts[key]) for key in sorted(counts, key=order)))


_FULL = {"pods": 1 << 62}
"""Assumed usage that leaves no room in a leaf: it keeps the search out of it."""


def find_replacement(
    snapshot: TopologySnapshot, request: PodSetRequest, current: Assignment, failed: str
) -> Assignment | str:
    """The pod set's assignment with the pods of node `failed` placed again (the rest
    kept), or why they fit nowhere they may go. `snapshot` is the flavor's view, which
    counts the Workload's own pods on the other nodes and no longer holds the failed
    node; `request` is the pod set's full request."""
    affected = sum(count for key, count in current.domains if key[-1] == failed)
    if affected == 0:
        return current
    kept = tuple((key, count) for key, count in current.domains if key[-1] != failed)
    for key, _ in kept:
        if key not in snapshot.leaves:
            return (
                "Cannot replace the node, because the existing topologyAssignment is invalid, "
                f"as it contains the stale domain {key[0]}"
            )
    topology = request.topology
    within = _replacement_domain(snapshot, topology, kept, affected)
    wanted = replace(request, count=affected)
    if within is not None and topology.slice_level is not None and affected % _slice_size(topology):
        # Whole slices cannot be kept: single pods, inside the broken slice's domain.
        plain = replace(topology, slice_level=None, slice_size=None)
        explicit = plain.required is not None or plain.preferred is not None
        wanted = replace(wanted, topology=plain, implied=not explicit or request.implied)
    assumed = (
        {}
        if within is None
        else {
            key: _FULL for key, leaf in snapshot.leaves.items() if leaf.id[: len(within)] != within
        }
    )
    found = find_assignment(snapshot, wanted, None, assumed)
    if isinstance(found, str):
        return found
    placed = found[request.name]
    if not placed.domains:
        return f"cannot find replacement assignment for unhealthy node: {failed}"
    return merge(snapshot, current.levels, kept + placed.domains)
