"""Topology-aware scheduling in the cycle (Kueue's TAS step of `flavorassigner.go`): once
a Workload's quota fits, the pod sets assigned a TAS flavor must also fit in that flavor's
nodes; their domains go into the admission (`topologyAssignment`). When they do not, the
Workload stays pending, with Kueue's message and the level asked for and its largest free
domain.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from controller.core.model.clusterqueues import ClusterQueue
from controller.core.model.topology import TopologyRequest
from controller.core.model.workloads import PodSet, Toleration, Workload
from controller.core.scheduler.flavor_assignment import tas_only
from controller.core.state import ClusterState
from controller.core.tas.assignment import PodSetRequest, find_assignments
from controller.core.tas.encoding import encode
from controller.core.tas.snapshot import TopologySnapshot

__all__ = ["Chosen", "place_topology", "tas_requests"]

_IMPLIED = TopologyRequest()


def _request(
    pod_set: PodSet, flavor_tolerations: tuple[Toleration, ...], implied: bool
) -> PodSetRequest:
    return PodSetRequest(
        pod_set.name,
        pod_set.count,
        pod_set.requests,
        pod_set.topology or _IMPLIED,
        pod_set.node_selector,
        pod_set.affinity_terms,
        (*pod_set.tolerations, *flavor_tolerations),
        implied,
    )


def _largest_domain(view: TopologySnapshot, request: PodSetRequest) -> str:
    """The requested level and its domain with room for the most pods (the counts the
    failed search left in the view)."""
    topology = request.topology
    label = topology.required or topology.preferred or view.levels[-1]
    level = view.level_index(label)
    if level is None:
        return ""
    domains = sorted(view.domains_per_level[level].values(), key=lambda d: (-d.pod_count, d.id))
    best = domains[0] if domains else None
    if best is None:
        return f"; no domain at level {label}"
    return (
        f"; the largest free domain at level {label} is {'/'.join(best.id)}, "
        f"with room for {best.pod_count} pod(s)"
    )


def _held(view: TopologySnapshot, leaves: int) -> str:
    """Where nominated preemptors hold room (controller/core/tas/holds.py), if anywhere."""
    if not leaves:
        return ""
    where = "node(s)" if view.lowest_is_node else f"domain(s) at level {view.levels[-1]}"
    return f"; room on {leaves} {where} is held for preempting Workloads waiting for their victims"


Chosen = Iterable[tuple[str, int, Mapping[str, str]]]
"""Each pod set's name, pod count and flavors (resource → flavor), as assigned."""


def tas_requests(
    state: ClusterState, cq: ClusterQueue, workload: Workload, chosen: Chosen
) -> dict[str, list[PodSetRequest]]:
    """The pod sets assigned a TAS flavor, as placement requests, by flavor."""
    by_flavor: dict[str, list[PodSetRequest]] = {}
    implied = None
    pod_sets = {ps.name: ps for ps in workload.pod_sets}
    for name, count, flavors in chosen:
        flavor_name = state.tas.tas_flavor_of(flavors.values())
        if flavor_name is None:
            continue
        pod_set = replace(pod_sets[name], count=count)
        explicit = pod_set.topology is not None and pod_set.topology.explicit
        if implied is None:
            implied = tas_only(state.objects.flavors, cq)
        flavor = state.objects.flavors[flavor_name]
        request = _request(pod_set, flavor.tolerations, not explicit and implied)
        by_flavor.setdefault(flavor_name, []).append(request)
    return by_flavor


def place_topology(
    state: ClusterState,
    cq: ClusterQueue,
    workload: Workload,
    chosen: Chosen,
    within: tuple[str, tuple[str, ...]] | None = None,
) -> dict[str, Mapping[str, Any]] | str | None:
    """The `topologyAssignment` of each pod set in a TAS flavor (in the flavor's domain
    `within`, when given: its values from the top level), why they do not fit, or None
    when no pod set uses a TAS flavor (nothing to do)."""
    by_flavor = tas_requests(state, cq, workload, chosen)
    if not by_flavor:
        return None
    out: dict[str, Mapping[str, Any]] = {}
    for flavor_name, requests in by_flavor.items():
        view = state.tas.view(flavor_name)
        if isinstance(view, str):
            return view
        if within is not None and within[0] == flavor_name:
            view = view.restricted(within[1])
        found, reason = find_assignments(view, requests)
        if reason is not None:
            failed = next((r for r in requests if r.name not in found), requests[0])
            return (
                f"pod set {failed.name}: {reason}{_largest_domain(view, failed)}"
                f"{_held(view, len(state.tas.held(flavor_name)))}"
            )
        out.update({name: encode(a) for name, a in found.items()})
    return out
