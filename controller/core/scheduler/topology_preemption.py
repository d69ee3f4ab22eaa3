"""Topology-aware preemption, split by domain (KEP-5710's next step): when a Workload's
quota fits and its TAS pod sets fit no domain, the victims are searched per domain of the
level asked for — for each domain, the cheapest admitted Workloads of the same ClusterQueue
whose pods there make room, then only those the fit still needs (the minimal set) — and
the domain whose victim set is cheapest is chosen: lowest highest priority, then lowest
total `preemptionCost`, then fewest victims. Victims follow the queue's
`withinClusterQueue` policy and preemptibility. Freeing quota elsewhere and hoping the pods
fit is what this replaces.

Only preemption within the ClusterQueue is searched, for a Workload whose TAS pod sets are
in one flavor; otherwise none is planned (the Workload waits, as before).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from api.constants import Preemptibility, PreemptionReason, WithinClusterQueuePolicy
from controller.core.cache.records import Phase
from controller.core.decisions import Admit, Nomination, Preempt
from controller.core.model.clusterqueues import ClusterQueue
from controller.core.model.workloads import Workload, WorkloadKey
from controller.core.preemption.types import Victim
from controller.core.scheduler.flavor_assignment import FlavorAssignment
from controller.core.scheduler.topology import tas_requests
from controller.core.state import ClusterState
from controller.core.tas.assignment import PodSetRequest, find_assignments
from controller.core.tas.snapshot import DomainID, TopologySnapshot

__all__ = ["plan_topology_preemption"]

_Usage = Mapping[DomainID, Mapping[str, int]]


def _eligible(
    state: ClusterState, cq: ClusterQueue, workload: Workload, flavor: str
) -> list[WorkloadKey]:
    """The admitted TAS Workloads of the queue the preemptor may preempt, cheapest first."""
    policy = cq.preemption.within_cluster_queue
    if policy is WithinClusterQueuePolicy.NEVER:
        return []
    records = state.cache.records
    mine = records[workload.key]
    priority = -mine.order[0]
    out = []
    for key in state.tas.workloads_in(flavor):
        record = records.get(key)
        if record is None or record.phase is not Phase.ADMITTED or record.cluster_queue != cq.name:
            continue
        if state.cache.resolution(key).value is Preemptibility.NON_PREEMPTIBLE:
            continue
        theirs = -record.order[0]
        if theirs < priority or (
            policy is WithinClusterQueuePolicy.LOWER_OR_NEWER_EQUAL_PRIORITY
            and theirs == priority
            and record.workload.creation_timestamp > workload.creation_timestamp
        ):
            out.append(key)
    # our ordering: lowest priority, then lowest preemptionCost, then the newest
    return sorted(
        out,
        key=lambda k: (
            -records[k].order[0],
            records[k].workload.preemption_cost,
            -records[k].workload.creation_timestamp,
            k,
        ),
    )


def _fits(view: TopologySnapshot, requests: Sequence[PodSetRequest]) -> bool:
    return find_assignments(view, requests)[1] is None


def _move(view: TopologySnapshot, usage: _Usage, sign: int) -> None:
    for leaf, amounts in usage.items():
        view.add_usage(leaf, amounts, sign)


def _victims_in(
    view: TopologySnapshot,
    requests: Sequence[PodSetRequest],
    candidates: Sequence[WorkloadKey],
    usage: Mapping[WorkloadKey, _Usage],
) -> list[WorkloadKey] | None:
    """The minimal victim set among `candidates` (cheapest first) that lets the pod sets
    fit, or None; the view is left as it was."""
    chosen: list[WorkloadKey] = []
    for key in candidates:
        _move(view, usage[key], -1)
        chosen.append(key)
        if _fits(view, requests):
            break
    else:
        for key in chosen:
            _move(view, usage[key], 1)
        return None
    for key in reversed(chosen[:-1]):  # drop those the fit does not need, dearest first
        _move(view, usage[key], 1)
        if _fits(view, requests):
            chosen.remove(key)
        else:
            _move(view, usage[key], -1)
    for key in chosen:
        _move(view, usage[key], 1)
    return chosen


def plan_topology_preemption(
    state: ClusterState, cq: ClusterQueue, workload: Workload, assignment: FlavorAssignment
) -> Preempt | None:
    """Victims per domain for a Workload whose quota fits and whose TAS pod sets fit no
    domain, the cheapest domain's nominated at once; None when no domain can be freed."""
    by_flavor = tas_requests(
        state, cq, workload, ((ps.name, ps.count, ps.flavors) for ps in assignment.pod_sets)
    )
    if len(by_flavor) != 1:
        return None
    [(flavor, requests)] = by_flavor.items()
    view = state.tas.view(flavor)
    if isinstance(view, str):
        return None
    topology = requests[0].topology
    level = view.level_index(topology.required or topology.preferred or view.levels[-1])
    if level is None:
        return None
    eligible = _eligible(state, cq, workload, flavor)
    usage = {key: state.tas.usage_of(key, flavor) for key in eligible}
    records = state.cache.records
    best: tuple[tuple[int, int, int, DomainID], list[WorkloadKey]] | None = None
    for domain in sorted(view.domains_per_level[level]):
        inside = [
            key
            for key in eligible
            if any(
                (leaf := view.leaves.get(k)) is not None and leaf.id[: level + 1] == domain
                for k in usage[key]
            )
        ]
        victims = _victims_in(view, requests, inside, usage) if inside else None
        if not victims:
            continue
        cost = (
            max(-records[k].order[0] for k in victims),
            sum(records[k].workload.preemption_cost for k in victims),
            len(victims),
            domain,
        )
        if best is None or cost < best[0]:
            best = (cost, victims)
    if best is None:
        return None
    chosen = []
    for key in best[1]:
        admission = records[key].admission
        pods = sum(ps.count for ps in admission.pod_set_assignments) if admission else 0
        chosen.append(Victim(key, cq.name, PreemptionReason.IN_CLUSTER_QUEUE, pods, pods))
    admit = Admit.from_assignment(workload.key, cq.name, assignment, borrowing=False)
    state.nominate(Nomination(admit, tuple(chosen), dict(assignment.usage)))
    return Preempt(workload.key, cq.name, tuple(chosen), admit)
