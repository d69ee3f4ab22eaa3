"""Dominant resource shares of the nodes of a cohort tree (Kueue's DRS, KEP-1714).

A node — a ClusterQueue or a cohort — with a parent *borrows* a (flavor, resource) when
its usage (plus a request being considered) exceeds its subtree quota (a queue's nominal
quota, a cohort's subtree quota). Per resource name, what it borrows over all flavors is
divided by what its parent could lend of that resource (the sum, over every (flavor,
resource) of the tree, of the parent's potential available quota), ×1000. The largest of
those ratios is the node's *unweighted share*; divided by its fair-sharing weight it is
its *weighted share* (`status.fairSharing.weightedShare`, rounded up). A root, or a node
that borrows nothing, has a share of 0. A weight of 0 makes any positive share infinite.

Kueue computes these in float64; here they are exact fractions, so two shares compare
equal only when they are equal (Kueue's ties are the same except where float rounding
splits them). Comparison follows Kueue's `CompareDRS`: among nodes with weight 0 that
borrow, by unweighted share; such a node is above every other; otherwise by weighted share.

Pure: reads the quota tree, changes nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Final

from controller.core.cache.objects import ObjectStore
from controller.core.cache.quota_tree import QuotaTree
from controller.core.model.clusterqueues import DEFAULT_WEIGHT, FlavorResource

__all__ = ["MAX_WEIGHTED_SHARE", "NEGATIVE", "Share", "Shares", "shares_of"]

MAX_WEIGHTED_SHARE: Final = 2**63 - 1
"""`weightedShare` of a node with weight 0 that borrows (Kueue: the largest int64)."""


@dataclass(frozen=True, slots=True)
class Share:
    """A node's dominant resource share."""

    weight: Fraction
    ratio: Fraction
    """Unweighted: the largest borrowed/lendable ratio over resources, ×1000 (0: none)."""
    resource: str = ""
    """The dominant resource ("" when the ratio is 0)."""
    borrowed: frozenset[FlavorResource] = frozenset()
    """The (flavor, resource) pairs on which the node uses more than its subtree quota."""

    @property
    def borrowing(self) -> bool:
        return bool(self.borrowed)

    def borrowing_on(self, frs: Iterable[FlavorResource]) -> bool:
        """Whether the node borrows on one of `frs` (Kueue's `IsBorrowingOn`)."""
        return any(fr in self.borrowed for fr in frs)

    @property
    def infinite(self) -> bool:
        """Weight 0 while borrowing: an infinite share."""
        return self.weight == 0 and self.ratio != 0

    def key(self) -> tuple[int, Fraction]:
        """Sort key in Kueue's `CompareDRS` order (lower: admitted first, preempted last)."""
        if self.infinite:
            return (1, self.ratio)
        return (0, self.ratio / self.weight if self.ratio else Fraction(0))

    def weighted(self) -> Fraction | None:
        """The weighted share (None: infinite)."""
        return None if self.infinite else self.key()[1]

    def weighted_share(self) -> int:
        """`status.fairSharing.weightedShare`: the weighted share rounded up."""
        value = self.weighted()
        return MAX_WEIGHTED_SHARE if value is None else math.ceil(value)

    def metric(self) -> float:
        """The `kueue_*_weighted_share` gauge: the weighted share, NaN when infinite (for a
        ClusterQueue; Kueue reports +Inf for a Cohort, `metric_cohort`)."""
        value = self.weighted()
        return math.nan if value is None else float(value)

    def metric_cohort(self) -> float:
        value = self.weighted()
        return math.inf if value is None else float(value)


NEGATIVE: Final = Share(DEFAULT_WEIGHT, Fraction(-1))
"""Below every share: the starting point of a search for the largest (Kueue's NegativeDRS)."""


def compare(a: Share, b: Share) -> int:
    """-1, 0 or 1 as `a` is below, equal to or above `b` (Kueue's `CompareDRS`)."""
    ka, kb = a.key(), b.key()
    return (ka > kb) - (ka < kb)


class Shares:
    """Shares of the nodes of the quota tree as it stands when asked. What a parent could
    lend depends on quota only, so it is computed once per parent for this object's life:
    make a new one after a change of quota or structure."""

    def __init__(
        self,
        tree: QuotaTree,
        queue_weight: Callable[[str], Fraction],
        cohort_weight: Callable[[str], Fraction],
    ) -> None:
        self.tree = tree
        self._queue_weight = queue_weight
        self._cohort_weight = cohort_weight
        self._lendable: dict[str, dict[str, int]] = {}

    def queue(self, name: str, request: Mapping[FlavorResource, int] | None = None) -> Share:
        """A ClusterQueue's share, with `request` added to its usage if given."""
        tree = self.tree
        weight = self._queue_weight(name)
        parent = tree.cohort_of(name)
        if parent is None:
            return Share(weight, Fraction(0))
        quotas = tree.queue_quotas(name)
        return self._share(
            weight,
            parent,
            ((fr, q.nominal, tree.usage(name, fr)) for fr, q in quotas.items()),
            request,
        )

    def cohort(self, name: str) -> Share:
        """A cohort's share."""
        tree = self.tree
        weight = self._cohort_weight(name)
        parent = tree.parent_of(name)
        if parent is None:
            return Share(weight, Fraction(0))
        return self._share(
            weight,
            parent,
            ((fr, q, tree.cohort_usage(name, fr)) for fr, q in tree.subtree_quota(name).items()),
            None,
        )

    def _share(
        self,
        weight: Fraction,
        parent: str,
        nodes: Iterable[tuple[FlavorResource, int, int]],
        request: Mapping[FlavorResource, int] | None,
    ) -> Share:
        borrowed_by_resource: dict[str, int] = {}
        borrowed: list[FlavorResource] = []
        for fr, quota, used in nodes:
            extra = request.get(fr, 0) if request else 0
            over = extra + used - quota
            if over > 0:
                borrowed_by_resource[fr[1]] = borrowed_by_resource.get(fr[1], 0) + over
                borrowed.append(fr)
        if not borrowed:
            return Share(weight, Fraction(0))
        lendable = self.lendable(parent)
        ratio, dominant = Fraction(0), ""
        for resource, amount in borrowed_by_resource.items():
            capacity = lendable.get(resource, 0)
            if capacity > 0:
                value = Fraction(amount * 1000, capacity)
                # The alphabetical order breaks ties, as Kueue's does.
                if value > ratio or (value == ratio and resource < dominant):
                    ratio, dominant = value, resource
        return Share(weight, ratio, dominant, frozenset(borrowed))

    def lendable(self, cohort: str) -> dict[str, int]:
        """Per resource name, what the cohort could lend: the sum of its potential
        available quota over every (flavor, resource) of its tree (Kueue's
        `calculateLendable`)."""
        cached = self._lendable.get(cohort)
        if cached is not None:
            return cached
        tree = self.tree
        out: dict[str, int] = {}
        for fr in tree.subtree_quota(tree.root_of(cohort)):
            out[fr[1]] = out.get(fr[1], 0) + tree.cohort_potential_available(cohort, fr)
        self._lendable[cohort] = out
        return out


def shares_of(objects: ObjectStore, tree: QuotaTree) -> Shares:
    """Shares over the quota tree, with the ClusterQueues' and Cohorts' weights (an
    implicit cohort weighs 1)."""

    def queue_weight(name: str) -> Fraction:
        cq = objects.cluster_queues.get(name)
        return cq.fair_weight if cq is not None else DEFAULT_WEIGHT

    def cohort_weight(name: str) -> Fraction:
        cohort = objects.cohorts.get(name)
        return cohort.fair_weight if cohort is not None else DEFAULT_WEIGHT

    return Shares(tree, queue_weight, cohort_weight)
