"""The node side of a topology-aware preemptor's fit (KEP-5710's domain split): a victim
search for a pod set in a TAS flavor must free quota AND leave it a place on the nodes.

A `NodeRoom` is what one search sees of the nodes: the flavors' views with the pod sets to
place there, what each admitted Workload takes from their leaves, and the domain the search
is for (at the level asked for). Taking a victim out of the simulation takes its pods off
the nodes too; `fits` says whether every pod set then finds a place — in the domain, for a
domain's search (KEP-5710: the victims that let the preemptor fit *there*), anywhere
otherwise. A victim with pods on
the nodes goes whole: which of its pods would leave is not known, so none is counted gone
until all are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from controller.core.model.workloads import WorkloadKey
from controller.core.preemption.types import Contender
from controller.core.tas.assignment import Assignment, PodSetRequest, find_assignments
from controller.core.tas.snapshot import DomainID, TopologySnapshot

__all__ = ["NodeRoom", "Placement", "UsageOf"]

UsageOf = Callable[[WorkloadKey, str], Mapping[DomainID, Mapping[str, int]]]
"""What an admitted Workload takes from each leaf of a flavor's view (`TASCache.usage_of`)."""
Gone = Callable[[WorkloadKey, bool], None]
"""Takes a leaving Workload out of the nominated preemptors' node holds, or puts it back
(`NodeHolds.simulate_gone`): what it frees beyond their plans is all a search may use."""


@dataclass(frozen=True, slots=True)
class Placement:
    """The pod sets a preemptor places in one TAS flavor, and that flavor's view."""

    flavor: str
    view: TopologySnapshot
    requests: Sequence[PodSetRequest]


class NodeRoom:
    """The nodes as one victim search sees them. `domain` (a level index and a domain's
    values there, in the first and only placement's view) is where the pods must fit and
    which victims count as making room: those with pods in it (`inside`, when the caller
    knows them); None: anywhere, and any Workload with pods in the flavors. The views are
    changed while victims are taken out and given back exactly by `restore`."""

    __slots__ = (
        "_fit",
        "_out",
        "_usage",
        "_version",
        "_views",
        "domain",
        "gone",
        "inside",
        "placements",
        "usage_of",
    )

    def __init__(
        self,
        placements: Sequence[Placement],
        usage_of: UsageOf,
        domain: tuple[int, DomainID] | None = None,
        inside: AbstractSet[WorkloadKey] | None = None,
        gone: Gone | None = None,
    ) -> None:
        self.placements = tuple(placements)
        self.usage_of = usage_of
        self.gone = gone
        self.domain = domain
        self.inside = inside  # the Workloads with pods in the domain, when known
        # `fits` is asked again after every move; only moves where the search looks (the
        # domain) can change its answer, so it is kept until one of those.
        self._version = 0
        self._fit: tuple[int, bool] | None = None
        self._usage: dict[WorkloadKey, tuple[Mapping[DomainID, Mapping[str, int]], ...]] = {}
        self._out: dict[WorkloadKey, Contender] = {}
        # The views the pods must fit in: the domain alone (one placement), else the flavors'.
        self._views = [p.view for p in self.placements]
        if domain is not None:
            self._views[0] = self.placements[0].view.restricted(domain[1])

    def _taken(self, key: WorkloadKey) -> tuple[Mapping[DomainID, Mapping[str, int]], ...]:
        found = self._usage.get(key)
        if found is None:
            found = self._usage[key] = tuple(
                self.usage_of(key, placement.flavor) for placement in self.placements
            )
        return found

    def holds(self, contender: Contender) -> bool:
        """Whether the Workload has pods on these flavors' nodes."""
        return any(self._taken(contender.key))

    def helps(self, contender: Contender) -> bool:
        """Whether taking the Workload out frees room where this search looks."""
        if self.inside is not None:
            return contender.key in self.inside
        taken = self._taken(contender.key)
        if self.domain is None:
            return any(taken)
        level, values = self.domain
        leaves = self.placements[0].view.leaves
        for leaf_key in taken[0]:
            leaf = leaves.get(leaf_key)
            if leaf is not None and leaf.id[: level + 1] == values:
                return True
        return False

    def move(self, contender: Contender, out: bool) -> None:
        """Take the Workload's pods off the nodes (`out`) or put them back."""
        if out == (contender.key in self._out):
            return
        if out:
            self._out[contender.key] = contender
        else:
            del self._out[contender.key]
        if self.domain is None or self.helps(contender):
            self._version += 1
        sign = -1 if out else 1
        for placement, usage in zip(self.placements, self._taken(contender.key), strict=True):
            for leaf, amounts in usage.items():
                placement.view.add_usage(leaf, amounts, sign)
        if contender.leaving and self.gone is not None:
            self.gone(contender.key, out)

    def restore(self) -> None:
        """Put back every Workload still taken out."""
        for contender in list(self._out.values()):
            self.move(contender, out=False)

    def fits(self) -> bool:
        """Whether every pod set finds a place on the nodes as they now stand (with a
        domain: in that domain)."""
        if self._fit is not None and self._fit[0] == self._version:
            return self._fit[1]
        fit = all(
            find_assignments(view, placement.requests)[1] is None
            for view, placement in zip(self._views, self.placements, strict=True)
        )
        self._fit = (self._version, fit)
        return fit

    def placed(self) -> list[dict[str, Assignment]] | None:
        """Each placement's assignments (per pod set) on the nodes as they now stand (with
        a domain: in that domain), or None when one does not fit."""
        out = []
        for view, placement in zip(self._views, self.placements, strict=True):
            found, reason = find_assignments(view, placement.requests)
            if reason is not None:
                return None
            out.append(found)
        return out

    def could_fit(self, contenders: Iterable[Contender]) -> bool:
        """Whether the pod sets would fit were every one of `contenders` gone (a bound:
        no victim set among them does better); the views are left as they were."""
        for contender in contenders:
            self.move(contender, out=True)
        try:
            return self.fits()
        finally:
            self.restore()
