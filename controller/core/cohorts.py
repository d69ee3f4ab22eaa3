"""Quota arithmetic for ClusterQueues in (flat) cohorts, kept incrementally.

Kueue's resource-node model (digest §3), for a cohort whose children are ClusterQueues:

- ``local(cq) = max(0, nominal − lendingLimit)`` when lendingLimit is set, else 0:
  capacity the queue never lends.
- ``subtree(cohort) = Σ (nominal(cq) − local(cq))``: the lendable pool.
- ``usage(cohort) = Σ max(0, usage(cq) − local(cq))``: what members take from the pool.
- ``available(cq) = max(0, local − usage) + min(subtree − usage(cohort),
  nominal − local − max(0, usage − local) + borrowingLimit)``; a queue without a cohort
  has ``nominal − usage``.

Every change (queue spec, usage) adjusts only the cohort totals of the (flavor, resource)
pairs it touches. All values are integers in milli-units.

A cohort may also hold a *credit* (`credit_pool`): pool usage charged twice for a while
and not counted as taken. The state uses it while a preemptor's capacity is held and its
victims in other queues still hold theirs (see `ClusterState.nominate`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from controller.core.clusterqueues import FlavorResource, ResourceQuota

__all__ = ["QuotaTree"]

_NO_QUOTA = ResourceQuota(nominal=0)


def _local(quota: ResourceQuota) -> int:
    if quota.lending_limit is None:
        return 0
    return max(0, quota.nominal - quota.lending_limit)


class QuotaTree:
    """Nominal quota, limits and reserved usage per (ClusterQueue, flavor, resource)."""

    def __init__(self) -> None:
        self._cohort_of: dict[str, str | None] = {}
        self._quota: dict[str, Mapping[FlavorResource, ResourceQuota]] = {}
        self._usage: dict[str, dict[FlavorResource, int]] = {}
        self._pool: dict[str, dict[FlavorResource, int]] = {}
        self._pool_usage: dict[str, dict[FlavorResource, int]] = {}
        self._pool_credit: dict[str, dict[FlavorResource, int]] = {}
        self._members: dict[str, set[str]] = {}
        # A counter per cohort (or cohort-less queue) that moves on every change of quota or
        # usage in it: equal versions mean every quota query about it answers the same.
        self._versions: dict[tuple[bool, str], int] = {}
        # Per cohort (or cohort-less queue) and (flavor, resource): the member queues using
        # more than their nominal quota of it, kept as usage moves.
        self._borrowers: dict[tuple[tuple[bool, str], FlavorResource], set[str]] = {}

    # -- structure -------------------------------------------------------------------------

    def set_cluster_queue(
        self, name: str, cohort: str | None, quotas: Mapping[FlavorResource, ResourceQuota]
    ) -> None:
        """Add or replace a queue's quota and cohort; its usage is kept."""
        self._bump(name)
        self._reindex(name, present=False)
        self._detach(name)
        self._quota[name] = dict(quotas)
        self._cohort_of[name] = cohort or None
        self._usage.setdefault(name, {})
        self._attach(name)
        self._reindex(name, present=True)
        self._bump(name)

    def remove_cluster_queue(self, name: str) -> None:
        """Forget a queue's quota. Usage still held is kept so releases stay balanced."""
        self._bump(name)
        self._reindex(name, present=False)
        self._detach(name)
        self._quota.pop(name, None)
        self._cohort_of.pop(name, None)
        if not self._usage.get(name):
            self._usage.pop(name, None)

    def _attach(self, name: str) -> None:
        cohort = self._cohort_of.get(name)
        if cohort is None:
            return
        self._members.setdefault(cohort, set()).add(name)
        pool = self._pool.setdefault(cohort, {})
        pool_usage = self._pool_usage.setdefault(cohort, {})
        quotas = self._quota[name]
        for fr, quota in quotas.items():
            pool[fr] = pool.get(fr, 0) + quota.nominal - _local(quota)
        for fr, used in self._usage.get(name, {}).items():
            over = used - _local(quotas.get(fr, _NO_QUOTA))
            if over > 0:
                pool_usage[fr] = pool_usage.get(fr, 0) + over

    def _detach(self, name: str) -> None:
        cohort = self._cohort_of.get(name)
        if cohort is None or name not in self._quota:
            return
        pool = self._pool[cohort]
        pool_usage = self._pool_usage[cohort]
        quotas = self._quota[name]
        for fr, quota in quotas.items():
            pool[fr] -= quota.nominal - _local(quota)
        for fr, used in self._usage.get(name, {}).items():
            over = used - _local(quotas.get(fr, _NO_QUOTA))
            if over > 0:
                pool_usage[fr] -= over
        members = self._members[cohort]
        members.discard(name)
        if not members:
            del self._members[cohort], self._pool[cohort], self._pool_usage[cohort]

    # -- usage -----------------------------------------------------------------------------

    def add_usage(self, name: str, usage: Mapping[FlavorResource, int], sign: int = 1) -> None:
        """Charge (sign=1) or refund (sign=-1) `usage` to a queue, bubbling to its cohort
        only the part beyond the queue's local (non-lendable) quota."""
        self._bump(name)
        own = self._usage.setdefault(name, {})
        cohort = self._cohort_of.get(name) if name in self._quota else None
        quotas = self._quota.get(name, {})
        pool_usage = self._pool_usage[cohort] if cohort is not None else None
        known = name in self._quota
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
            if pool_usage is not None:
                local = _local(quotas.get(fr, _NO_QUOTA))
                delta = max(0, new - local) - max(0, old - local)
                if delta:
                    pool_usage[fr] = pool_usage.get(fr, 0) + delta

    def remove_usage(self, name: str, usage: Mapping[FlavorResource, int]) -> None:
        self.add_usage(name, usage, sign=-1)

    def credit_pool(
        self, cohort: str, amounts: Mapping[FlavorResource, int], sign: int = 1
    ) -> None:
        """Give (sign=1) or take back (sign=-1) a credit on the cohort's pool usage."""
        self._bump_root((True, cohort))
        credit = self._pool_credit.setdefault(cohort, {})
        for fr, value in amounts.items():
            new = credit.get(fr, 0) + sign * value
            if new:
                credit[fr] = new
            else:
                credit.pop(fr, None)
        if not credit:
            del self._pool_credit[cohort]

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

    def _root(self, name: str) -> tuple[bool, str]:
        cohort = self._cohort_of.get(name)
        return (True, cohort) if cohort else (False, name)

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
        return frozenset(self._members.get(cohort, ()))

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
        less the cohort's credit."""
        used = self._pool_usage.get(cohort, {}).get(fr, 0)
        return used - self._pool_credit.get(cohort, {}).get(fr, 0)

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
        from_pool = self._pool[cohort].get(fr, 0) - self.cohort_usage(cohort, fr)
        if quota.borrowing_limit is not None:
            from_pool = min(
                from_pool, quota.nominal - local - max(0, used - local) + quota.borrowing_limit
            )
        return max(0, max(0, local - used) + from_pool)

    def potential_available(self, name: str, fr: FlavorResource) -> int:
        """The most the queue could ever hold of `fr` (ignoring everyone's usage)."""
        quota = self.quota(name, fr)
        cohort = self._cohort_of.get(name)
        if cohort is None:
            return quota.nominal
        most = _local(quota) + self._pool[cohort].get(fr, 0)
        if quota.borrowing_limit is not None:
            most = min(most, quota.nominal + quota.borrowing_limit)
        return most

    def borrowing(self, name: str, fr: FlavorResource, extra: int = 0) -> bool:
        """Kueue's `borrowing(cq, fr, extra)`: usage + extra beyond the queue's nominal."""
        return self.usage(name, fr) + extra > self.quota(name, fr).nominal

    def fits(self, name: str, usage: Mapping[FlavorResource, int]) -> bool:
        """Whether every (flavor, resource) of `usage` is within `available` right now."""
        return all(value <= self.available(name, fr) for fr, value in usage.items() if value)
