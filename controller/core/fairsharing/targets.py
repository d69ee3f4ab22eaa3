"""Kueue's `TargetClusterQueueOrdering` for fair-sharing preemption
(controller/core/fairsharing/preemption.py): which ClusterQueue the next victim is taken
from, and the shares the strategies compare."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

from controller.core.fairsharing.shares import NEGATIVE, Share, Shares, compare
from controller.core.preemption.simulation import Choice
from controller.core.preemption.types import Contender

__all__ = ["Targets"]


class Targets:
    """Kueue's `TargetClusterQueueOrdering`: the next ClusterQueue to take a candidate
    from, found from the root down by the largest share; a queue (other than the
    preemptor's) or a cohort (off the preemptor's path) that no longer borrows is pruned,
    and so is a queue without candidates left or a cohort whose children are all pruned.
    The same queue may come again while it stays the largest."""

    def __init__(self, shares: Shares, preemptor_cq: str, groups: dict[str, deque[Choice]]):
        self.shares = shares
        self.tree = shares.tree
        self.preemptor_cq = preemptor_cq
        self.groups = groups
        self.path = self.tree.path(preemptor_cq)
        self.ancestors = set(self.path)
        self.pruned_queues: set[str] = set()
        self.pruned_cohorts: set[str] = set()

    def __iter__(self) -> Iterator[str]:
        if not self.path:  # no cohort: only the preemptor's own queue
            while self.preemptor_cq not in self.pruned_queues and self.groups.get(
                self.preemptor_cq
            ):
                yield self.preemptor_cq
            return
        root = self.path[-1]
        while root not in self.pruned_cohorts:
            target = self._next(root)
            if target is not None:
                yield target

    def drop(self, queue: str) -> None:
        self.pruned_queues.add(queue)

    def _next(self, cohort: str) -> str | None:
        tree, shares = self.tree, self.shares
        best_queue: str | None = None
        best_queue_share = NEGATIVE
        for queue in tree.child_queues(cohort):
            if queue in self.pruned_queues:
                continue
            share = shares.queue(queue)
            if (not share.borrowing and queue != self.preemptor_cq) or not self.groups.get(queue):
                self.pruned_queues.add(queue)
                continue
            order = compare(share, best_queue_share)
            if order == 0 and best_queue is not None:
                # Equal shares: the queue whose first candidate goes first (Kueue's
                # CandidatesOrdering, here with quotagate's cost key).
                if self._first_key(queue) < self._first_key(best_queue):
                    best_queue = queue
            elif order > 0:
                best_queue, best_queue_share = queue, share
        best_cohort: str | None = None
        best_cohort_share = NEGATIVE
        for child in tree.child_cohorts(cohort):
            if child in self.pruned_cohorts:
                continue
            share = shares.cohort(child)
            if not share.borrowing and child not in self.ancestors:
                self.pruned_cohorts.add(child)
            elif compare(share, best_cohort_share) >= 0:
                best_cohort, best_cohort_share = child, share
        if best_cohort is None and best_queue is None:
            self.pruned_cohorts.add(cohort)
            return None
        # On a tie the cohort: the most unfair node within it can then be chosen.
        if best_cohort is not None and compare(best_cohort_share, best_queue_share) >= 0:
            return self._next(best_cohort)
        return best_queue

    def _first_key(self, queue: str) -> tuple[object, ...]:
        contender = self.groups[queue][0].contender
        return contender.sort_key(queue == self.preemptor_cq)

    def _almost_lca(self, queue: str, lca: str) -> Share:
        """The share of the node just below `lca` on `queue`'s side (Kueue's almostLCA)."""
        path = self.tree.path(queue)
        if path[0] == lca:
            return self.shares.queue(queue)
        child = path[0]
        for node in path[1:]:
            if node == lca:
                break
            child = node
        return self.shares.cohort(child)

    def _lca(self, queue: str) -> str:
        for node in self.tree.path(queue):
            if node in self.ancestors:
                return node
        raise AssertionError(f"{queue} is not in the tree of {self.preemptor_cq}")

    def shares_at_lca(self, target: str) -> tuple[Share, Share]:
        """(the preemptor's share, the target's share), each at the child of their lowest
        common cohort on its side (Kueue's `ComputeShares`)."""
        lca = self._lca(target)
        return self._almost_lca(self.preemptor_cq, lca), self._almost_lca(target, lca)

    def share_without(self, target: str, contender: Contender) -> Share:
        """The target's share at the lowest common cohort once `contender` is gone."""
        tree = self.tree
        tree.add_usage(target, contender.usage, sign=-1)
        try:
            return self.shares_at_lca(target)[1]
        finally:
            tree.add_usage(target, contender.usage)
