"""Failed nodes under admitted TAS Workloads, at the start of each cycle (Kueue's TAS node
controller and its scheduler's replacement, controller/core/tas/node_failure.py): every
node to look at is judged for each admitted Workload with pods assigned there; a failed one
is replaced in its domain when the pods fit there (the admission rewritten in place), or
the Workload is evicted (`NodeFailures`) and requeued, as Kueue's gates say."""

from __future__ import annotations

from dataclasses import replace

from api.constants import EvictionReason
from api.workload_status import Admission
from controller.core.cache.records import Phase
from controller.core.decisions import ReplaceNode, UnhealthyNodes
from controller.core.model.topology import Node
from controller.core.model.workloads import Toleration, WorkloadKey
from controller.core.scheduler.topology import tas_requests
from controller.core.state import ClusterState
from controller.core.tas.assignment import Assignment, usage_of
from controller.core.tas.encoding import decode, encode
from controller.core.tas.node_failure import (
    FAILED,
    HEALTHY,
    WAIT,
    admission_nodes,
    assigned_nodes,
    find_replacement,
    verdict,
)
from controller.core.tas.pod_termination import termination_cause

__all__ = ["handle_node_failures", "pinned_pods_termination"]

_MULTIPLE = "Workload eviction triggered due to multiple TAS assigned node failures, including: "
_NO_REPLACEMENT = "Workload was evicted as there was no replacement for unhealthy node(s): "


def handle_node_failures(
    state: ClusterState, now: float
) -> tuple[list[ReplaceNode], list[UnhealthyNodes]]:
    """Judge the nodes due for a look, then try the replacements owed; the replacements
    made (applied to the state) and the `status.unhealthyNodes` to write. Evictions are
    requested from the state (the cycle issues them)."""
    failed = state.failed_nodes
    if not failed.suspects and not failed.unhealthy and not failed.written:
        return [], []
    gates = failed.gates
    for name in failed.due(now):
        node = state.tas.nodes.get(name)
        again = WAIT
        for key in state.tas.workloads_on(name):
            record = state.cache.records.get(key)
            if record is None or not record.admitted or not gates.replacement:
                continue  # Kueue's node controller: only Admitted Workloads (IsAdmittedByTAS)
            judged = _judge(state, key, name, node, now)
            waiting = failed.unhealthy.get(key)
            if judged == FAILED and waiting is None:
                failed.wait_for_replacement(key, name)
            elif judged == FAILED and waiting != name:
                failed.forget(key)
                state.request_eviction(
                    key, EvictionReason.NODE_FAILURES, _MULTIPLE + f"{waiting}, {name}"
                )
            elif judged == HEALTHY and waiting == name:
                failed.healthy_again(key)  # Kueue's handleHealthyNode
            elif isinstance(judged, float):
                again = min(again, judged)
        if node is None:
            failed.suspects.discard(name)  # deleted: judged once
        else:
            failed.look_at[name] = again
    replaced: list[ReplaceNode] = []
    for key, name in sorted(failed.unhealthy.items()):
        record = state.cache.records.get(key)
        if record is None or record.phase is not Phase.ADMITTED or record.admission is None:
            failed.forget(key)
            continue
        if not record.admitted:
            continue  # Kueue's HasTopologyAssignmentWithUnhealthyNode: once Admitted again
        node = state.tas.nodes.get(name)
        if node is not None and _judge(state, key, name, node, now) == HEALTHY:
            failed.healthy_again(key)  # back (or read back from a status it no longer fits)
            continue
        found = _replacement(state, key, record.admission, name)
        if isinstance(found, Admission):
            failed.forget(key)
            state.apply_replacement(key, found)
            replaced.append(ReplaceNode(key, found.cluster_queue, found, name))
        elif gates.fail_fast:
            failed.forget(key)
            state.request_eviction(key, EvictionReason.NODE_FAILURES, _NO_REPLACEMENT + name)
    marks = [UnhealthyNodes(key, nodes) for key, nodes in sorted(failed.written.items())]
    failed.written.clear()
    return replaced, marks


def _judge(
    state: ClusterState, key: WorkloadKey, name: str, node: Node | None, now: float
) -> str | float:
    """The verdict on node `name` for an admitted Workload."""
    failed = state.failed_nodes
    tolerations: list[tuple[Toleration, ...]] = []
    if node is not None and node.ready and failed.gates.judges_taints(node):
        tolerations = _tolerations_on(state, key, name)
    return verdict(node, now, failed.progressing(name, key), failed.gates, tolerations)


def pinned_pods_termination(state: ClusterState, key: WorkloadKey, name: str) -> str | None:
    """Why the released, unbound Pending pods of Workload `key` pinned to node `name` are
    to be marked Failed now (controller/core/tas/pod_termination.py), or None. Only for an
    Admitted Workload whose assignment names the node (Kueue's `HasTASAssignmentOnNode`),
    with failed-node handling on."""
    record = state.cache.records.get(key)
    gates = state.failed_nodes.gates
    if record is None or not record.admitted or record.admission is None:
        return None
    if not gates.replacement or name not in admission_nodes(record.admission):
        return None
    node = state.tas.nodes.get(name)
    tolerations: list[tuple[Toleration, ...]] = []
    if node is not None and node.ready and gates.judges_taints(node):
        tolerations = _tolerations_on(state, key, name)
    return termination_cause(node, gates, tolerations)


def _tolerations_on(
    state: ClusterState, key: WorkloadKey, name: str
) -> list[tuple[Toleration, ...]]:
    """The tolerations of each pod set of the Workload with pods assigned to node `name`:
    its template's, its flavors' and those its admission checks add (Kueue's effective
    tolerations, `podSetsWithEffectiveTolerationsOnNode`)."""
    record = state.cache.records[key]
    if record.admission is None:
        return []
    pod_sets = {ps.name: ps for ps in record.workload.pod_sets}
    out = []
    for psa in record.admission.pod_set_assignments:
        pod_set = pod_sets.get(psa.name)
        if pod_set is None or psa.topology_assignment is None:
            continue
        if name not in assigned_nodes(decode(psa.topology_assignment)):
            continue
        tolerations = list(pod_set.tolerations)
        for flavor_name in sorted(set(psa.flavors.values())):
            flavor = state.objects.flavors.get(flavor_name)
            if flavor is not None:
                tolerations += flavor.tolerations
        for check in record.workload.admission_checks:
            for pod_set_name, added in check.pod_set_tolerations:
                if pod_set_name == psa.name:
                    tolerations += added
        out.append(tuple(tolerations))
    return out


def _replacement(
    state: ClusterState, key: WorkloadKey, admission: Admission, failed: str
) -> Admission | str:
    """The admission with `failed`'s pods placed again in every pod set, or why not."""
    record = state.cache.records[key]
    cq = state.objects.cluster_queues.get(admission.cluster_queue)
    if cq is None:
        return f"ClusterQueue {admission.cluster_queue} is gone"
    chosen = [(psa.name, psa.count, psa.flavors) for psa in admission.pod_set_assignments]
    by_name = {psa.name: psa for psa in admission.pod_set_assignments}
    new: dict[str, Assignment] = {}
    for flavor, requests in tas_requests(state, cq, record.workload, chosen).items():
        view = state.tas.view(flavor)
        if isinstance(view, str):
            return view
        taken: list[tuple[Assignment, dict[str, int]]] = []  # what this search added
        try:
            for request in requests:
                encoded = by_name[request.name].topology_assignment
                if encoded is None:
                    continue
                current = decode(encoded)
                found = find_replacement(view, request, current, failed)
                if isinstance(found, str):
                    return f"pod set {request.name}: {found}"
                if found != current:
                    new[request.name] = found
                    # The next pod set of this flavor sees these pods (the view counts
                    # the current ones already).
                    before = dict(current.domains)
                    added = Assignment(
                        found.levels,
                        tuple(
                            (leaf, count - before.get(leaf, 0))
                            for leaf, count in found.domains
                            if count > before.get(leaf, 0)
                        ),
                    )
                    for leaf, usage in usage_of(added, request.requests).items():
                        view.add_usage(leaf, usage)
                    taken.append((added, dict(request.requests)))
        finally:
            for added, pod in taken:  # the view returns to what the cache holds
                for leaf, usage in usage_of(added, pod).items():
                    view.add_usage(leaf, usage, -1)
    if not new:
        return f"no pod assigned to node {failed}"
    return Admission(
        admission.cluster_queue,
        tuple(
            replace(psa, topology_assignment=encode(new[psa.name])) if psa.name in new else psa
            for psa in admission.pod_set_assignments
        ),
    )
