"""Quota arithmetic for ClusterQueues in cohorts — flat or trees of Cohorts — kept
incrementally.

Kueue's resource-node model (digest §3; Kueue's `pkg/cache/scheduler/resource_node.go`).
Every node — a ClusterQueue or a cohort — has a *subtree quota* and a *usage*:

- a ClusterQueue's subtree quota is its nominal quota; its usage what it reserves;
- ``local(node) = max(0, subtree − lendingLimit)`` when the node has a lendingLimit,
  else 0: capacity its parent never sees;
- ``subtree(cohort) = own nominal + Σ children (subtree(child) − local(child))``;
- ``usage(cohort) = Σ children max(0, usage(child) − local(child))``: what the children
  take from it;
- ``available(root) = subtree − usage``; for a node with a parent,
  ``available = max(0, local − usage) + min(available(parent), subtree − local −
  max(0, usage − local) + borrowingLimit)`` (the min only with a borrowingLimit).

A cohort is implicit (named by ClusterQueues) or explicit (`set_cohort`: a parent and
quota of its own). A flat cohort is a root whose children are ClusterQueues. A cycle of
parents is broken: every cohort on it counts as a root (its ClusterQueues are inactive,
controller/core/pending.py). Usage changes bubble up the chain of parents; a change of
structure (a queue's quota or cohort, a Cohort's parent or quota) recomputes the trees it
touches. All values are integers in milli-units.

A cohort may also be given a *credit* (`credit_pool`): usage charged twice for a while and
not counted as taken, there and above (`credit_reaches` says where that is exact). The
state uses it while a preemptor's capacity is held and its victims in other queues of its
tree still hold theirs (controller/core/preemption/holds.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from controller.core.model.clusterqueues import FlavorResource, ResourceQuota

__all__ = ["QuotaTree"]

_NO_QUOTA = ResourceQuota(nominal=0)

Root = tuple[bool, str]  # (True, root cohort) or (False, a ClusterQueue without cohort)


def _local(quota: ResourceQuota) -> int:
    if quota.lending_limit is None:
        return 0
    return max(0, quota.nominal - quota.lending_limit)


class QuotaTree:
    """Nominal quota, limits and reserved usage per (ClusterQueue, flavor, resource), and
    the cohorts above them."""

    def __init__(self) -> None:
        self._cohort_of: dict[str, str | None] = {}
        self._quota: dict[str, Mapping[FlavorResource, ResourceQuota]] = {}
        self._usage: dict[str, dict[FlavorResource, int]] = {}
        # Explicit cohorts: the parent they name and their own quota.
        self._declared_parent: dict[str, str | None] = {}
        self._cohort_quota: dict[str, Mapping[FlavorResource, ResourceQuota]] = {}
        # The parent each cohort really has (cycles broken) and the reverse links.
        self._parent: dict[str, str] = {}
        self._children: dict[str, set[str]] = {}
        self._members: dict[str, set[str]] = {}  # a cohort's ClusterQueues (direct)
        self._pool: dict[str, dict[FlavorResource, int]] = {}  # subtree quota of a cohort
        self._pool_usage: dict[str, dict[FlavorResource, int]] = {}  # usage of a cohort
        # A counter per tree (root cohort, or cohort-less queue) that moves on every change
        # of quota or usage in it: equal versions mean every quota query about it answers
        # the same.
        self._versions: dict[Root, int] = {}
        # Per tree and (flavor, resource): the queues using more than their nominal quota
        # of it, kept as usage moves.
        self._borrowers: dict[tuple[Root, FlavorResource], set[str]] = {}

    # -- structure -------------------------------------------------------------------------

    def set_cluster_queue(
        self, name: str, cohort: str | None, quotas: Mapping[FlavorResource, ResourceQuota]
    ) -> None:
        """Add or replace a queue's quota and cohort; its usage is kept."""
        with self._restructure(name):
            old = self._cohort_of.get(name)
            if old is not None and name in self._quota:
                self._members[old].discard(name)
            self._quota[name] = dict(quotas)
            self._cohort_of[name] = cohort or None
            self._usage.setdefault(name, {})
            if cohort:
                self._members.setdefault(cohort, set()).add(name)

    def remove_cluster_queue(self, name: str) -> None:
        """Forget a queue's quota. Usage still held is kept so releases stay balanced."""
        with self._restructure(name):
            cohort = self._cohort_of.get(name)
            if cohort is not None and name in self._quota:
                self._members[cohort].discard(name)
            self._quota.pop(name, None)
            self._cohort_of.pop(name, None)
            if not self._usage.get(name):
                self._usage.pop(name, None)

    def set_cohort(
        self, name: str, parent: str | None, quotas: Mapping[FlavorResource, ResourceQuota]
    ) -> None:
        """Add or replace an explicit cohort: its parent and its own quota (a root's
        borrowing and lending limits are ignored, as the API refuses them)."""
        with self._relinking():
            self._declared_parent[name] = parent or None
            self._cohort_quota[name] = dict(quotas)

    def remove_cohort(self, name: str) -> None:
        """Forget an explicit cohort; it stays an implicit one while queues name it."""
        with self._relinking():
            self._declared_parent.pop(name, None)
            self._cohort_quota.pop(name, None)

    @contextmanager
    def _relinking(self) -> Iterator[None]:
        """Around a change of a Cohort (rare): every tree may change shape — a subtree
        moves, a cycle appears or goes — so all of them are recomputed and reindexed."""
        before = self._all_roots()
        for root in before:
            self._index_tree(root, present=False)
        yield
        self._relink()
        after = self._all_roots()
        for root in after:
            self._rebuild(root)
        for root in before - after:  # no longer a root: forget what only it had
            self._rebuild(root)
        for root in before | after:
            self._bump_root(root)
        for root in after:
            self._index_tree(root, present=True)

    def _all_roots(self) -> set[Root]:
        cohorts = {*self._members, *self._declared_parent, *self._parent.values()}
        return {(True, self._cohort_root(c)) for c in cohorts}

    @contextmanager
    def _restructure(self, name: str) -> Iterator[None]:
        """Around a change of a queue's quota or cohort: unindex the tree it is in, then
        recompute and reindex that tree and the one it is in afterwards."""
        before = self._root(name)
        self._index_tree(before, present=False)
        self._bump_root(before)
        yield
        roots = {before, self._root(name)}
        for root in roots:
            self._rebuild(root)
        for root in roots:
            self._index_tree(root, present=True)
            self._bump_root(root)

    def _relink(self) -> None:
        """The effective parents from the declared ones: a cohort on a cycle is a root."""
        parent: dict[str, str] = {}
        for name, declared in self._declared_parent.items():
            if declared is None:
                continue
            seen = {name}
            current: str | None = declared
            while current is not None and current not in seen:
                seen.add(current)
                current = self._declared_parent.get(current)
            if current != name:  # not on a cycle (a cycle further up is broken there)
                parent[name] = declared
        # A cohort whose chain runs into a cycle keeps its parent: the cycle's members
        # are roots, so the chain ends.
        self._parent = parent
        self._children = {}
        for child, up in parent.items():
            self._children.setdefault(up, set()).add(child)

    def _cohort_root(self, cohort: str) -> str:
        seen = {cohort}
        while (up := self._parent.get(cohort)) is not None and up not in seen:
            seen.add(up)
            cohort = up
        return cohort

    def _subtree_cohorts(self, cohort: str) -> list[str]:
        """The cohort and every cohort below it, parents before children."""
        out = [cohort]
        index = 0
        while index < len(out):
            out.extend(sorted(self._children.get(out[index], ())))
            index += 1
        return out

    def _exists(self, cohort: str) -> bool:
        return bool(
            self._members.get(cohort)
            or self._children.get(cohort)
            or cohort in self._declared_parent
        )

    def _rebuild(self, root: Root) -> None:
        """Recompute the subtree quota and usage of every cohort of the tree at `root`."""
        is_cohort, name = root
        if not is_cohort:
            return
        cohorts = self._subtree_cohorts(name)
        for cohort in reversed(cohorts):  # children first
            if not self._exists(cohort):
                self._pool.pop(cohort, None)
                self._pool_usage.pop(cohort, None)
                self._members.pop(cohort, None)
                continue
            pool: dict[FlavorResource, int] = {}
            used: dict[FlavorResource, int] = {}
            for fr, quota in self._cohort_quota.get(cohort, {}).items():
                pool[fr] = pool.get(fr, 0) + quota.nominal
            for member in self._members.get(cohort, ()):
                quotas = self._quota[member]
                for fr, quota in quotas.items():
                    pool[fr] = pool.get(fr, 0) + quota.nominal - _local(quota)
                for fr, value in self._usage.get(member, {}).items():
                    over = value - _local(quotas.get(fr, _NO_QUOTA))
                    if over > 0:
                        used[fr] = used.get(fr, 0) + over
            for child in self._children.get(cohort, ()):
                if child not in self._pool:
                    continue
                for fr, value in self._pool[child].items():
                    pool[fr] = pool.get(fr, 0) + value - self._cohort_local(child, fr)
                for fr, value in self._pool_usage[child].items():
                    over = value - self._cohort_local(child, fr)
                    if over > 0:
                        used[fr] = used.get(fr, 0) + over
            self._pool[cohort] = pool
            self._pool_usage[cohort] = used

    def _cohort_local(self, cohort: str, fr: FlavorResource) -> int:
        """Kueue's localQuota of a cohort with a parent: its subtree beyond its lendingLimit."""
        if cohort not in self._parent:
            return 0
        limit = self._cohort_quota.get(cohort, {}).get(fr, _NO_QUOTA).lending_limit
        if limit is None:
            return 0
        return max(0, self._pool.get(cohort, {}).get(fr, 0) - limit)

    def _index_tree(self, root: Root, present: bool) -> None:
        is_cohort, name = root
        if not is_cohort:
            self._reindex(name, present)
            return
        for cohort in self._subtree_cohorts(name):
            for member in self._members.get(cohort, ()):
                self._reindex(member, present)

    # -- usage -----------------------------------------------------------------------------

    def add_usage(self, name: str, usage: Mapping[FlavorResource, int], sign: int = 1) -> None:
        """Charge (sign=1) or refund (sign=-1) `usage` to a queue, bubbling to its cohort
        only the part beyond the queue's local (non-lendable) quota, and on up the tree
        the part beyond each cohort's local quota."""
        self._bump(name)
        own = self._usage.setdefault(name, {})
        known = name in self._quota
        cohort = self._cohort_of.get(name) if known else None
        quotas = self._quota.get(name, {})
        for fr, value in usage.items():
            old = own.get(fr, 0)
            new = old + sign * value
            if new:
                own[fr] = new
            else:
                own.pop(fr, None)
            if known:
                nominal = quotas.get(fr, _NO_QUOTA).nominal
                if (old > nominal) != (new > nominal):
                    self._index(name, fr, new > nominal)
            if cohort is not None:
                local = _local(quotas.get(fr, _NO_QUOTA))
                delta = max(0, new - local) - max(0, old - local)
                if delta:
                    self._bubble(cohort, fr, delta)

    def _bubble(self, cohort: str, fr: FlavorResource, delta: int) -> None:
        """Add `delta` to a cohort's usage of `fr`, and what changes beyond its local quota
        to its parent's, and so on up."""
        current: str | None = cohort
        while current is not None and delta:
            used = self._pool_usage[current]
            old = used.get(fr, 0)
            new = old + delta
            if new:
                used[fr] = new
            else:
                used.pop(fr, None)
            parent = self._parent.get(current)
            if parent is None:
                return
            local = self._cohort_local(current, fr)
            delta = max(0, new - local) - max(0, old - local)
            current = parent

    def remove_usage(self, name: str, usage: Mapping[FlavorResource, int]) -> None:
        self.add_usage(name, usage, sign=-1)

    def is_root(self, cohort: str) -> bool:
        """Whether the cohort has no parent (a flat cohort is a root)."""
        return cohort not in self._parent

    def credit_pool(
        self, cohort: str, amounts: Mapping[FlavorResource, int], sign: int = 1
    ) -> None:
        """Give (sign=1) or take back (sign=-1) a credit on a cohort's usage, carried up to
        its root like any change of usage. Exact only where `credit_reaches`."""
        self._bump_root((True, self._cohort_root(cohort)))
        for fr, value in amounts.items():
            if value:
                self._bubble(cohort, fr, -sign * value)

    def credit_reaches(self, name: str, cohort: str, fr: FlavorResource) -> bool:
        """Whether every unit of `fr` the queue uses counts in full in `cohort`'s usage and
        in every cohort above it, whatever the rest uses: no node from the queue to the
        root keeps local (non-lendable) quota of it. Then a credit given to `cohort`
        takes back exactly what the queue's usage adds there and above."""
        if self.local_quota(name, fr):
            return False
        path = self.path(name)
        return cohort in path and not any(self._cohort_local(node, fr) for node in path)

    @contextmanager
    def simulate(
        self, changes: Mapping[str, Mapping[FlavorResource, int]], sign: int = -1
    ) -> Iterator[None]:
        """Temporarily refund (sign=-1) or charge (sign=1) usage per queue, then undo it.
        Versions are restored too: afterwards nothing has changed."""
        versions = {root: self._versions.get(root, 0) for root in map(self._root, changes)}
        for name, usage in changes.items():
            self.add_usage(name, usage, sign)
        try:
            yield
        finally:
            for name, usage in changes.items():
                self.add_usage(name, usage, -sign)
            self._versions.update(versions)

    # -- versions --------------------------------------------------------------------------

    def _root(self, name: str) -> Root:
        cohort = self._cohort_of.get(name)
        return (True, self._cohort_root(cohort)) if cohort else (False, name)

    def _index(self, name: str, fr: FlavorResource, borrowing: bool) -> None:
        key = (self._root(name), fr)
        if borrowing:
            self._borrowers.setdefault(key, set()).add(name)
        elif key in self._borrowers:
            self._borrowers[key].discard(name)

    def _reindex(self, name: str, present: bool) -> None:
        """Index (present) or unindex a queue's borrowing under its current root."""
        if name not in self._quota:
            return
        for fr in {*self._usage.get(name, ()), *self._quota[name]}:
            self._index(name, fr, present and self.borrowing(name, fr))

    def borrowers(self, name: str, frs: frozenset[FlavorResource]) -> set[str]:
        """The queues of `name`'s cohort (itself included) above their nominal quota of
        any of `frs`."""
        root = self._root(name)
        out: set[str] = set()
        for fr in frs:
            out |= self._borrowers.get((root, fr), set())
        return out

    def _bump(self, name: str) -> None:
        self._bump_root(self._root(name))

    def _bump_root(self, root: tuple[bool, str]) -> None:
        self._versions[root] = self._versions.get(root, 0) + 1

    def mark(self, name: str) -> tuple[tuple[bool, str], int]:
        """The version of the queue's cohort, to `restore` once a simulated change of its
        usage has been undone exactly."""
        root = self._root(name)
        return root, self._versions.get(root, 0)

    def restore(self, marks: Mapping[tuple[bool, str], int]) -> None:
        self._versions.update(marks)

    def version(self, name: str) -> int:
        """The version of the queue's cohort (or of the queue, without a cohort): unchanged
        version, unchanged answers to every query about the queue and its cohort."""
        return self._versions.get(self._root(name), 0)

    # -- queries ---------------------------------------------------------------------------

    def cohort_of(self, name: str) -> str | None:
        return self._cohort_of.get(name)

    def members(self, cohort: str) -> frozenset[str]:
        """Every ClusterQueue of the cohort's whole tree (from its root down): those whose
        usage can change what the cohort's queues may use."""
        root = self._cohort_root(cohort)
        return frozenset(
            member for node in self._subtree_cohorts(root) for member in self._members.get(node, ())
        )

    def reach(self, name: str) -> frozenset[str]:
        """The queues whose usage can change what `name` may use: its whole tree, or the
        queue alone outside a cohort."""
        cohort = self._cohort_of.get(name)
        return self.members(cohort) if cohort else frozenset({name})

    def parent_of(self, cohort: str) -> str | None:
        return self._parent.get(cohort)

    def root_of(self, cohort: str) -> str:
        """The root of the cohort's tree (itself for a root)."""
        return self._cohort_root(cohort)

    def child_cohorts(self, cohort: str) -> list[str]:
        """The cohorts whose parent is `cohort`, by name."""
        return sorted(self._children.get(cohort, ()))

    def child_queues(self, cohort: str) -> list[str]:
        """The ClusterQueues whose cohort is `cohort` (its direct members), by name."""
        return sorted(self._members.get(cohort, ()))

    def queue_quotas(self, name: str) -> Mapping[FlavorResource, ResourceQuota]:
        """A queue's quota per (flavor, resource), zeros included."""
        return self._quota.get(name, {})

    def subtree_quota(self, cohort: str) -> Mapping[FlavorResource, int]:
        """Kueue's SubtreeQuota of a cohort per (flavor, resource), zeros included."""
        return self._pool.get(cohort, {})

    def cohort_potential_available(self, cohort: str, fr: FlavorResource) -> int:
        """The most the cohort could ever hold of `fr` (Kueue's potentialAvailable)."""
        return self._cohort_potential(cohort, fr)

    def cohort_quota(self, cohort: str, fr: FlavorResource) -> ResourceQuota:
        """An explicit cohort's own quota of `fr` (zero when it has none)."""
        return self._cohort_quota.get(cohort, {}).get(fr, _NO_QUOTA)

    def quota(self, name: str, fr: FlavorResource) -> ResourceQuota:
        return self._quota.get(name, {}).get(fr, _NO_QUOTA)

    def usage(self, name: str, fr: FlavorResource) -> int:
        return self._usage.get(name, {}).get(fr, 0)

    def usage_of(self, name: str) -> Mapping[FlavorResource, int]:
        """A queue's reserved usage; entries that reach zero are removed."""
        return self._usage.get(name, {})

    def cohort_pool(self, cohort: str, fr: FlavorResource) -> int:
        """Σ lendable quota of the cohort's members (their nominal minus local quota)."""
        return self._pool.get(cohort, {}).get(fr, 0)

    def cohort_usage(self, cohort: str, fr: FlavorResource) -> int:
        """How much of the pool the members use (usage beyond each one's local quota),
        less the credits given to it and below it."""
        return self._pool_usage.get(cohort, {}).get(fr, 0)

    def local_quota(self, name: str, fr: FlavorResource) -> int:
        """The part of the queue's nominal quota of `fr` it never lends."""
        return _local(self.quota(name, fr))

    def available(self, name: str, fr: FlavorResource) -> int:
        """How much more of `fr` the queue can reserve now, borrowing included (≥ 0)."""
        quota = self.quota(name, fr)
        used = self.usage(name, fr)
        cohort = self._cohort_of.get(name)
        if cohort is None:
            return max(0, quota.nominal - used)
        local = _local(quota)
        from_pool = self._cohort_available(cohort, fr)
        if quota.borrowing_limit is not None:
            from_pool = min(
                from_pool, quota.nominal - local - max(0, used - local) + quota.borrowing_limit
            )
        return max(0, max(0, local - used) + from_pool)

    def _cohort_available(self, cohort: str, fr: FlavorResource) -> int:
        """Kueue's `available` of a cohort (may be negative when over-admitted)."""
        subtree = self.cohort_pool(cohort, fr)
        used = self.cohort_usage(cohort, fr)
        parent = self._parent.get(cohort)
        if parent is None:
            return subtree - used
        local = self._cohort_local(cohort, fr)
        from_parent = self._cohort_available(parent, fr)
        limit = self.cohort_quota(cohort, fr).borrowing_limit
        if limit is not None:
            from_parent = min(from_parent, subtree - local - max(0, used - local) + limit)
        return max(0, local - used) + from_parent

    def potential_available(self, name: str, fr: FlavorResource) -> int:
        """The most the queue could ever hold of `fr` (ignoring everyone's usage)."""
        quota = self.quota(name, fr)
        cohort = self._cohort_of.get(name)
        if cohort is None:
            return quota.nominal
        most = _local(quota) + self._cohort_potential(cohort, fr)
        if quota.borrowing_limit is not None:
            most = min(most, quota.nominal + quota.borrowing_limit)
        return most

    def _cohort_potential(self, cohort: str, fr: FlavorResource) -> int:
        subtree = self.cohort_pool(cohort, fr)
        parent = self._parent.get(cohort)
        if parent is None:
            return subtree
        most = self._cohort_local(cohort, fr) + self._cohort_potential(parent, fr)
        limit = self.cohort_quota(cohort, fr).borrowing_limit
        if limit is not None:
            most = min(most, subtree + limit)
        return most

    def path(self, name: str) -> list[str]:
        """The cohorts above a queue, from its own up to the root."""
        out: list[str] = []
        node = self._cohort_of.get(name)
        while node is not None and node not in out:
            out.append(node)
            node = self._parent.get(node)
        return out

    def lowest_common_cohort(self, a: str, b: str) -> str | None:
        """The lowest cohort above both queues (None: not in one tree)."""
        above = set(self.path(b))
        return next((node for node in self.path(a) if node in above), None)

    def exceeds_up_to(self, name: str, lca: str | None, frs: frozenset[FlavorResource]) -> bool:
        """Kueue's test of a reclaim candidate's queue: the queue is above its nominal quota
        of one of `frs`, and so is every cohort between it and `lca` (above its subtree
        quota): quota used within a subtree that keeps to its own is not reclaimed."""
        if not any(self.borrowing(name, fr) for fr in frs):
            return False
        for node in self.path(name):
            if node == lca:
                return True
            if not any(self.cohort_usage(node, fr) > self.cohort_pool(node, fr) for fr in frs):
                return False
        return True

    def advantage_by_level(
        self, name: str, request: Mapping[FlavorResource, int]
    ) -> dict[str, bool]:
        """Per cohort above the queue: whether a preemptor asking `request` has Kueue's
        hierarchical advantage over candidates whose lowest common cohort with it is that
        one — the request fits within the quota of its side of the tree below it (its
        queue's nominal quota, or a cohort's subtree quota on the way up)."""
        fits = all(
            self.usage(name, fr) + v <= self.quota(name, fr).nominal for fr, v in request.items()
        )
        remaining = {
            fr: max(0, v - max(0, _local(self.quota(name, fr)) - self.usage(name, fr)))
            for fr, v in request.items()
        }
        out: dict[str, bool] = {}
        for node in self.path(name):
            out[node] = fits
            fits = fits or all(
                self.cohort_usage(node, fr) + v <= self.cohort_pool(node, fr)
                for fr, v in remaining.items()
            )
            remaining = {
                fr: max(0, v - max(0, self._cohort_local(node, fr) - self.cohort_usage(node, fr)))
                for fr, v in remaining.items()
            }
        return out

    def may_reclaim_in_tree(self, name: str, fr: FlavorResource, value: int) -> bool:
        """Whether `value` more of `fr` fits within the quota of a subtree below the root —
        the queue's own nominal quota, or a non-root cohort on its way up — so that
        reclaiming from the rest of the tree may make room. Always False in a flat cohort
        where the queue borrows."""
        return self.lowest_fitting_subtree(name, fr, value)[1]

    def lowest_fitting_subtree(self, name: str, fr: FlavorResource, value: int) -> tuple[int, bool]:
        """Kueue's `FindHeightOfLowestSubtreeThatFits`: the height of the lowest subtree
        holding the queue within whose quota `value` more of `fr` fits (0: the queue's own
        nominal quota; the whole tree's height when none does), and whether that subtree
        is below the root. The height is how far the quota is borrowed from (flavor
        assignment prefers the nearer)."""
        cohort = self._cohort_of.get(name)
        if cohort is None:
            return 0, False
        used = self.usage(name, fr)
        if used + value <= self.quota(name, fr).nominal:
            return 0, True
        remaining = value - max(0, _local(self.quota(name, fr)) - used)
        node = cohort
        while True:
            node_used = self.cohort_usage(node, fr)
            if node_used + remaining <= self.cohort_pool(node, fr):
                return self.height(node), node in self._parent
            remaining -= max(0, self._cohort_local(node, fr) - node_used)
            parent = self._parent.get(node)
            if parent is None:
                return self.height(node), False
            node = parent

    def height(self, cohort: str) -> int:
        """Kueue's node height: 1 for a cohort with only ClusterQueues under it (0 with
        none), one more than its highest child cohort otherwise."""
        children = self._children.get(cohort, ())
        height = min(len(children) + len(self._members.get(cohort, ())), 1)
        for child in children:
            height = max(height, self.height(child) + 1)
        return height

    def hierarchical(self, name: str) -> bool:
        """Whether the queue's cohort is part of a tree (a parent, child cohorts or quota of
        its own somewhere): then a refusal names the level that limits it."""
        cohort = self._cohort_of.get(name)
        if cohort is None:
            return False
        root = self._cohort_root(cohort)
        return any(
            c != root or self._cohort_quota.get(c) or self._children.get(c)
            for c in self._subtree_cohorts(root)
        )

    def limiting_level(self, name: str, fr: FlavorResource) -> tuple[str, str, int, int]:
        """The level of the tree that bounds what the queue may take of `fr` now:
        (kind, name, limit, in use) — kind `ClusterQueue` or `Cohort` for a borrowingLimit
        (limit = the limit, in use = what it borrows), `root` for the quota of the root
        cohort (its subtree quota, its usage), `nominal` without a cohort."""
        quota = self.quota(name, fr)
        used = self.usage(name, fr)
        cohort = self._cohort_of.get(name)
        if cohort is None:
            return "nominal", name, quota.nominal, used
        local = _local(quota)
        if quota.borrowing_limit is not None:
            cap = quota.nominal - local - max(0, used - local) + quota.borrowing_limit
            if cap < self._cohort_available(cohort, fr):
                return "ClusterQueue", name, quota.borrowing_limit, max(0, used - quota.nominal)
        node = cohort
        while (parent := self._parent.get(node)) is not None:
            limit = self.cohort_quota(node, fr).borrowing_limit
            if limit is not None:
                subtree, node_used = self.cohort_pool(node, fr), self.cohort_usage(node, fr)
                node_local = self._cohort_local(node, fr)
                cap = subtree - node_local - max(0, node_used - node_local) + limit
                if cap < self._cohort_available(parent, fr):
                    return "Cohort", node, limit, max(0, node_used - subtree)
            node = parent
        return "root", node, self.cohort_pool(node, fr), self.cohort_usage(node, fr)

    def borrowing(self, name: str, fr: FlavorResource, extra: int = 0) -> bool:
        """Kueue's `borrowing(cq, fr, extra)`: usage + extra beyond the queue's nominal."""
        return self.usage(name, fr) + extra > self.quota(name, fr).nominal

    def fits(self, name: str, usage: Mapping[FlavorResource, int]) -> bool:
        """Whether every (flavor, resource) of `usage` is within `available` right now."""
        return all(value <= self.available(name, fr) for fr, value in usage.items() if value)
