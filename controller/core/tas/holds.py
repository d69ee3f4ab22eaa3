"""Node holds: the node capacity a nominated topology-aware preemptor holds while its
victims leave (the node side of controller/core/preemption/holds.py).

When a TAS preemptor is nominated, where its pods go once the victims are gone is planned
at once (its `topologyAssignment`s, in the domain the victim search chose). Until it is
admitted, that plan is held on the nodes: later heads see the capacity as used, so a
lower-priority or later Workload cannot take the room the evictions make, and the
preemptor is admitted into its planned domain once the victims are gone
(`settle_nominations`).

The hold never charges a node twice. The victims still take their part of the nodes while
they leave; the plan and the leaving victims cover the same capacity. On each leaf, per
resource, what is counted beyond the victims' own usage is the plans' total less the
leaving victims' total, never below zero — so the leaf counts the larger of the two, as
the quota holds do: the victims' usage while they are there, the plans' once they are gone.
A victim search that takes a leaving victim out (another preemptor waiting for it too)
takes it out of this sum as well (`simulate_gone`): only what it frees beyond the
existing plans is room for the new preemptor.

Kueue re-plans a preemptor in every cycle and counts its TAS usage in the snapshot only
for the rest of the cycle it is processed in (`ClusterQueueSnapshot.AddUsage` in
`scheduler.go`); between cycles the room its victims free is anyone's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from controller.core.model.workloads import WorkloadKey
from controller.core.tas.assignment import PodSetRequest, add_usage
from controller.core.tas.cache import TASCache
from controller.core.tas.counts import admits
from controller.core.tas.encoding import decode
from controller.core.tas.snapshot import DomainID, TopologySnapshot

__all__ = ["NodeHolds", "Plan", "plan_fits"]

Plan = dict[str, dict[DomainID, dict[str, int]]]
"""What a planned admission takes, per TAS flavor and leaf."""


def plan_fits(
    views: Mapping[str, TopologySnapshot | str],
    plan: Plan,
    requests: Mapping[str, Sequence[PodSetRequest]],
    topology: Mapping[str, Mapping[str, Any]],
) -> bool:
    """Whether a planned admission still fits the nodes as they now stand: every leaf it
    uses still in its flavor's view, with room for it, and still one its pod set's pods may
    go on (taints tolerated, labels selected)."""
    for flavor, usage in plan.items():
        view = views.get(flavor)
        if not isinstance(view, TopologySnapshot):
            return False
        for leaf_key, amounts in usage.items():
            leaf = view.leaves.get(leaf_key)
            if leaf is None or any(leaf.free.get(r, 0) < a for r, a in amounts.items()):
                return False
    for flavor, pod_sets in requests.items():
        view = views.get(flavor)
        if not isinstance(view, TopologySnapshot):
            return False
        for request in pod_sets:
            encoded = topology.get(request.name)
            if encoded is None:
                return False
            for values, _ in decode(encoded).domains:
                leaf = view.leaves.get(values)
                if leaf is None or not admits(view, leaf, request):
                    return False
    return True


class NodeHolds:
    """The nominated TAS preemptors' plans, and what they hold on the nodes.
    `leaving(key)`: whether a Workload is being evicted and still takes its nodes."""

    def __init__(self, tas: TASCache, leaving: Callable[[WorkloadKey], bool]) -> None:
        self._tas = tas
        self._leaving = leaving
        self._plans: dict[WorkloadKey, tuple[Plan, tuple[WorkloadKey, ...]]] = {}
        self._victim_of: dict[WorkloadKey, set[WorkloadKey]] = {}
        self._gone: set[WorkloadKey] = set()  # taken out by a victim search's simulation

    def hold(self, key: WorkloadKey, plan: Plan, victims: Iterable[WorkloadKey]) -> None:
        """Hold a nominated preemptor's planned place while `victims` leave."""
        self.release(key)
        if not plan:
            return
        waited = tuple(victims)
        self._plans[key] = (plan, waited)
        for victim in waited:
            self._victim_of.setdefault(victim, set()).add(key)
        self._refresh(plan)

    def release(self, key: WorkloadKey) -> Plan | None:
        """Give back a preemptor's hold (admitted, or its nomination dropped); its plan."""
        found = self._plans.pop(key, None)
        if found is None:
            return None
        plan, victims = found
        for victim in victims:
            waiting = self._victim_of.get(victim)
            if waiting is not None:
                waiting.discard(key)
                if not waiting:
                    del self._victim_of[victim]
        self._refresh(plan)
        return plan

    def planned(self, key: WorkloadKey) -> Plan | None:
        found = self._plans.get(key)
        return found[0] if found is not None else None

    def victim_changed(self, key: WorkloadKey) -> None:
        """A Workload's reservation or eviction changed: if a plan waits for it, what the
        plans hold beyond the leaving victims is counted again."""
        if key in self._victim_of:
            self._refresh()

    def simulate_gone(self, key: WorkloadKey, gone: bool) -> None:
        """A victim search takes a leaving Workload out (`gone`) or puts it back."""
        if gone == (key in self._gone):
            return
        if gone:
            self._gone.add(key)
        else:
            self._gone.discard(key)
        if key in self._victim_of:
            self._refresh()

    def _refresh(self, flavors: Iterable[str] = ()) -> None:
        """Count again, per flavor of a plan (and `flavors`), the plans' total less the
        leaving victims' total, per leaf and resource, never below zero."""
        names = set(flavors)
        for plan, _ in self._plans.values():
            names.update(plan)
        for flavor in sorted(names):
            planned: dict[DomainID, dict[str, int]] = {}
            victims: set[WorkloadKey] = set()
            for plan, waited in self._plans.values():
                if flavor in plan:
                    add_usage(planned, plan[flavor])
                victims.update(waited)
            leaving: dict[DomainID, dict[str, int]] = {}
            for victim in sorted(victims):
                if victim not in self._gone and self._leaving(victim):
                    add_usage(leaving, self._tas.usage_of(victim, flavor))
            held: dict[DomainID, dict[str, int]] = {}
            for leaf, amounts in planned.items():
                covered = leaving.get(leaf, {})
                extra = {r: a - covered.get(r, 0) for r, a in amounts.items()}
                extra = {r: a for r, a in extra.items() if a > 0}
                if extra:
                    held[leaf] = extra
            if held != self._tas.held(flavor):
                self._tas.set_held(flavor, held)
