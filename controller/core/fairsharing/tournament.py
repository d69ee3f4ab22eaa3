"""The order of a cycle's heads under fair sharing (Kueue's `fairSharingIterator`).

Without fair sharing the cycle sorts its heads once (non-borrowing first, then priority,
then age). With it, heads are taken one at a time, and each time the next is chosen by a
*tournament* over the tree of the heads' cohorts, computed on the usage as it stands (the
heads admitted before it included):

- at each cohort, every child (a ClusterQueue with a head, or a child cohort with the
  winner of its own tournament) is judged by the share that child would have once its
  head's request is added (`shares.Shares`);
- the winner is the child that does not borrow, at that level, on what its head asks for
  (Kueue's `FairSharingPrioritizeNonBorrowing`, on by default), then the lowest share,
  then the highest priority, then the earliest queue-order time; on a full tie the child
  met first (child cohorts, then ClusterQueues, each by name) wins;
- the root's winner is the next head.

Trees are taken one after the other (Kueue's order across trees is arbitrary; they share
no quota); ClusterQueues without a cohort come first, in the classical order.

Pure: reads the state, changes nothing (usage is added only inside simulations).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from itertools import pairwise
from typing import Any, Generic, Protocol, TypeVar

from controller.core.cache.quota_tree import QuotaTree
from controller.core.fairsharing.shares import Share, Shares, compare
from controller.core.model.clusterqueues import FlavorResource
from controller.core.model.workloads import WorkloadKey

__all__ = ["Head", "fair_order"]


class Head(Protocol):
    """A head of the cycle as the tournament sees it."""

    @property
    def key(self) -> WorkloadKey: ...

    @property
    def cluster_queue(self) -> str: ...

    @property
    def request(self) -> Mapping[FlavorResource, int]:
        """The usage it would add (its flavor assignment's)."""
        ...

    @property
    def priority(self) -> int: ...

    @property
    def queue_order_time(self) -> float: ...


H = TypeVar("H", bound=Head)


def fair_order(
    tree: QuotaTree,
    shares: Shares,
    heads: Sequence[H],
    classical: Callable[[H], Any],
) -> Iterator[H]:
    """Yield `heads` in fair-sharing order. The caller may change usage between two steps
    (admitting the head it was given): each step judges the tree as it then stands.
    `classical` is the sort key for heads whose ClusterQueue has no cohort."""
    by_root: dict[str, list[H]] = {}
    alone: list[H] = []
    for head in heads:
        cohort = tree.cohort_of(head.cluster_queue)
        if cohort is None:
            alone.append(head)
        else:
            by_root.setdefault(tree.root_of(cohort), []).append(head)
    yield from sorted(alone, key=classical)
    for root in sorted(by_root):
        live = {head.cluster_queue: head for head in by_root[root]}
        while live:
            winner = _Tournament(tree, shares, live).run(root)
            assert winner is not None  # every live head is in the root's tree
            del live[winner.cluster_queue]
            yield winner


class _Tournament(Generic[H]):
    """One round: the shares of every live head's path, then the winner at each level."""

    def __init__(self, tree: QuotaTree, shares: Shares, live: Mapping[str, H]) -> None:
        self.tree = tree
        self.live = live
        # (cohort, workload) → the share of the cohort's child on the head's path, with the
        # head's request added.
        self.at_level: dict[tuple[str, WorkloadKey], Share] = {}
        for queue, head in live.items():
            self._measure(shares, queue, head)

    def _measure(self, shares: Shares, queue: str, head: H) -> None:
        tree = self.tree
        request = {fr: v for fr, v in head.request.items() if v}
        path = tree.path(queue)
        parent = path[0]
        self.at_level[(parent, head.key)] = shares.queue(queue, request)
        if len(path) == 1:
            return  # a flat cohort: the queue's share with the request is all it takes
        with tree.simulate({queue: request}, sign=1):
            for child, level in pairwise(path):
                self.at_level[(level, head.key)] = shares.cohort(child)

    def run(self, cohort: str) -> H | None:
        tree = self.tree
        candidates: list[H] = []
        for child in tree.child_cohorts(cohort):
            winner = self.run(child)
            if winner is not None:
                candidates.append(winner)
        for queue in tree.child_queues(cohort):
            head = self.live.get(queue)
            if head is not None:
                candidates.append(head)
        if not candidates:
            return None
        best = candidates[0]
        for current in candidates[1:]:
            if self._before(current, best, cohort):
                best = current
        return best

    def _before(self, a: H, b: H, cohort: str) -> bool:
        """Kueue's `entryComparer.less` at `cohort`."""
        share_a = self.at_level[(cohort, a.key)]
        share_b = self.at_level[(cohort, b.key)]
        borrows_a = share_a.borrowing_on(fr for fr, v in a.request.items() if v)
        borrows_b = share_b.borrowing_on(fr for fr, v in b.request.items() if v)
        if borrows_a != borrows_b:
            return not borrows_a
        order = compare(share_a, share_b)
        if order:
            return order < 0
        if a.priority != b.priority:
            return a.priority > b.priority
        return a.queue_order_time < b.queue_order_time
