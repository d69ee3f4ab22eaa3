"""Simulated removal of victims from the quota tree, shared by the classical victim search
(`search.py`) and the fair-sharing one (`fair.py`).

A `Choice` is a candidate with how many of its pods are removed in the simulation; a
`Simulation` removes and restores usage exactly (versions included, so every cached
answer about the cohort stays valid afterwards). `fewest_pods` and `spare` make a victim
set minimal: a victim that may lose pods one by one (`disruptionMode: Pod`,
semi-preemptible) loses only as many as needed, and a victim the preemptor fits without
is spared (KEP-5710's walk-back; Kueue's `fillBackWorkloads`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from api.constants import PreemptionReason
from controller.core.cache.quota_tree import QuotaTree
from controller.core.model.clusterqueues import ClusterQueue, FlavorResource
from controller.core.preemption.nodes import NodeRoom
from controller.core.preemption.policy import Eligibility
from controller.core.preemption.types import Contender, Victim

__all__ = ["Choice", "Fits", "Simulation", "fewest_pods", "fits", "simulating", "spare", "victims"]

Fits = Callable[[], bool]
"""Whether the preemptor fits in the quota as the simulation now stands."""


@dataclass(slots=True)
class Choice:
    """A candidate in a simulation."""

    contender: Contender
    eligibility: Eligibility
    lca: str | None = None  # the lowest cohort above the candidate's queue and the preemptor's
    pods: int = 0  # pods currently removed in the simulation
    reason: PreemptionReason | None = None  # set when the search decides it (fair sharing)

    def per_pod(self) -> dict[FlavorResource, int]:
        return {fr: v // self.contender.pod_count for fr, v in self.contender.usage.items()}

    def usage_for(self, pods: int) -> dict[FlavorResource, int]:
        if pods >= self.contender.pod_count:
            return dict(self.contender.usage)
        return {fr: v * pods for fr, v in self.per_pod().items()}


class Simulation:
    """Removes usage from the quota tree and puts it back exactly. Taking out a victim that
    already leaves for other preemptors also gives back what it covered of their holds
    (`Contender.releases`): afterwards the tree reads as once it has left. With `nodes` (a
    topology-aware preemptor), a victim's pods leave the nodes with it."""

    def __init__(self, tree: QuotaTree, nodes: NodeRoom | None = None) -> None:
        self.tree = tree
        self.nodes = nodes
        # (queue, usage taken off it) — or (cohort, credit taken back from it, True).
        self.removed: list[tuple[str, dict[FlavorResource, int], bool]] = []
        self.versions: dict[tuple[bool, str], int] = {}

    def set_pods(self, choice: Choice, pods: int) -> None:
        if pods == choice.pods:
            return
        before = choice.usage_for(choice.pods) if choice.pods else {}
        after = choice.usage_for(pods) if pods else {}
        delta = {fr: after.get(fr, 0) - before.get(fr, 0) for fr in {*before, *after}}
        root, version = self.tree.mark(choice.contender.cluster_queue)
        self.versions.setdefault(root, version)
        self.tree.add_usage(choice.contender.cluster_queue, delta, sign=-1)
        self.removed.append((choice.contender.cluster_queue, delta, False))
        releases = choice.contender.releases
        if releases and (choice.pods == 0) != (pods == 0):
            sign = 1 if pods else -1  # taken out: the covered holds count in full again
            for release in releases:
                if release.pool:  # a cohort of the victim's tree (its root marked above)
                    credit = {fr: sign * v for fr, v in release.amounts.items()}
                    self.tree.credit_pool(release.name, credit, sign=-1)
                    self.removed.append((release.name, credit, True))
                else:
                    taken = {fr: -sign * v for fr, v in release.amounts.items()}
                    self.tree.add_usage(release.name, taken, sign=-1)
                    self.removed.append((release.name, taken, False))
        if self.nodes is not None and (choice.pods == 0) != (pods == 0):
            self.nodes.move(choice.contender, out=pods > 0)
        choice.pods = pods

    def removable_pods(self, choice: Choice) -> int:
        """How many of the choice's pods may go one by one (none when it has pods on the
        nodes of a topology-aware search: it goes whole)."""
        if self.nodes is not None and self.nodes.holds(choice.contender):
            return 0
        return choice.contender.removable_pods()

    def charge(self, queue: str, usage: Mapping[FlavorResource, int], sign: int = 1) -> None:
        """Add (sign=1) or take back (sign=-1) usage on a queue, undone with the rest (the
        fair-sharing search judges shares with the preemptor's request charged)."""
        root, version = self.tree.mark(queue)
        self.versions.setdefault(root, version)
        delta = {fr: -sign * v for fr, v in usage.items()}
        self.tree.add_usage(queue, delta, sign=-1)
        self.removed.append((queue, delta, False))

    def remove(self, choice: Choice, fits: Fits) -> None:
        """Take `choice` out: the fewest pods that make the preemptor fit when it may lose
        pods one by one, else all of them."""
        partial = self.removable_pods(choice)
        if partial:
            self.set_pods(choice, fewest_pods(self, choice, 1, partial, fits))
        else:
            self.set_pods(choice, choice.contender.pod_count)

    def undo(self) -> None:
        for name, delta, pool in reversed(self.removed):
            if pool:
                self.tree.credit_pool(name, delta, sign=1)
            else:
                self.tree.add_usage(name, delta, sign=1)
        self.removed.clear()
        # Undone exactly: every answer about these cohorts is what it was.
        self.tree.restore(self.versions)
        self.versions.clear()
        if self.nodes is not None:
            self.nodes.restore()


@contextmanager
def simulating(tree: QuotaTree, nodes: NodeRoom | None = None) -> Iterator[Simulation]:
    simulation = Simulation(tree, nodes)
    try:
        yield simulation
    finally:
        simulation.undo()


def fits(
    tree: QuotaTree, cq: ClusterQueue, usage: Mapping[FlavorResource, int], allow_borrowing: bool
) -> bool:
    """Whether `usage` fits in `cq` now (without borrowing unless `allow_borrowing`)."""
    for fr, value in usage.items():
        if not value:
            continue
        if not allow_borrowing and tree.borrowing(cq.name, fr, value):
            return False
        if value > tree.available(cq.name, fr):
            return False
    return True


def fewest_pods(simulation: Simulation, choice: Choice, low: int, high: int, fits: Fits) -> int:
    """The fewest pods of `choice` (in [low, high]) whose removal makes the preemptor fit,
    or `high` when even that does not (binary search; fitting is monotone in pods)."""
    simulation.set_pods(choice, high)
    if not fits():
        return high
    while low < high:
        middle = (low + high) // 2
        simulation.set_pods(choice, middle)
        if fits():
            high = middle
        else:
            low = middle + 1
    return high


def spare(simulation: Simulation, taken: Sequence[Choice], fits: Fits) -> None:
    """Minimality: from the most to the least important victim (the reverse of the order
    they were taken in), put back every victim, or every pod, the preemptor fits without."""
    for choice in reversed(taken):
        removed = choice.pods
        simulation.set_pods(choice, 0)
        if fits():
            continue  # spared entirely
        partial = simulation.removable_pods(choice)
        if partial:
            pods = fewest_pods(simulation, choice, 1, min(removed, partial), fits)
        else:
            pods = removed
        simulation.set_pods(choice, pods)


def victims(taken: Sequence[Choice]) -> tuple[Victim, ...]:
    """The victims of a search: the choices with pods still removed."""
    return tuple(
        Victim(
            c.contender.key,
            c.contender.cluster_queue,
            c.reason or c.eligibility.reason or PreemptionReason.IN_CLUSTER_QUEUE,
            c.pods,
            c.contender.pod_count,
            c.contender.leaving,
        )
        for c in taken
        if c.pods
    )
