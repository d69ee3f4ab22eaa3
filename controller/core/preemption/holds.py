"""Preemption holds: the capacity a nominated preemptor holds while its victims release
theirs (KEP-5710 §Delayed preemption; Kueue keeps "preemption expectations" for the same
wait, `pkg/scheduler/preemption/expectations`).

A nominated preemptor holds its usage in the quota tree while the victims still hold
theirs, so nothing else — later heads in the same cycle or later cycles — can take what
the victims free. The hold never charges the same capacity twice: where the victims' own
usage covers the preemptor's, what is counted until they are gone is the larger of the
two, not their sum (`_cover`). Kueue counts only the victims, and lets a third Workload
take the capacity the preemptor was waiting for; summing would make the cohort look fuller
than it will ever be and push other queues into reclaiming.

The holds also remember which victims each preemptor waits for, and which preemptors to
look at again because something they wait on changed (`take_nominations_to_settle`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

from controller.core.cache.records import NominatedView, Phase, WorkloadRecord
from controller.core.cache.reservations import ReservationCache
from controller.core.decisions import Nomination
from controller.core.model.workloads import WorkloadKey
from controller.core.preemption.types import Release

__all__ = ["PreemptionHolds"]


@dataclass(frozen=True, slots=True)
class _Cover:
    """What `PreemptionHolds._cover` took off a nominated preemptor's hold: from its
    queue's usage (`own`), and as credits on cohorts (`pool`, per cohort); and per victim,
    the part of that victim's usage it counts and where — None for the preemptor's queue,
    else the cohort credited (`by_victim`: each unit of a victim's usage covers at most one
    unit of one preemptor's hold)."""

    own: dict[tuple[str, str], int]
    pool: dict[str, dict[tuple[str, str], int]]
    by_victim: dict[WorkloadKey, tuple[str | None, dict[tuple[str, str], int]]]


class PreemptionHolds:
    """The nominated preemptors, their holds and the victims they wait for."""

    def __init__(self, cache: ReservationCache) -> None:
        self._cache = cache
        self._nominated: set[WorkloadKey] = set()
        self.nominated = NominatedView(cache.records, self._nominated)
        # Per nominated preemptor, the part of its held capacity its victims still hold
        # (`_Cover`); per whole victim, the preemptors waiting for it to leave, and how much
        # of its usage their covers count.
        self._covers: dict[WorkloadKey, _Cover] = {}
        self._awaited_by: dict[WorkloadKey, set[WorkloadKey]] = {}
        # The same victims per ClusterQueue whose quota they held when first awaited (a
        # victim search reads one queue's, not all of them: `claimed_in`).
        self._awaited_in: dict[str, set[WorkloadKey]] = {}
        self._awaited_queue: dict[WorkloadKey, str] = {}
        self._covered: dict[WorkloadKey, dict[tuple[str, str], int]] = {}
        # Per victim (whole or not), the nominated preemptors waiting for it; and the
        # preemptors to look at again, because something they wait on changed.
        self._victim_of: dict[WorkloadKey, set[WorkloadKey]] = {}
        self._to_settle: set[WorkloadKey] = set()
        # Per nominated preemptor, its victims that have released their quota since it was
        # nominated, and of those the ones the cycle has admitted again since: done with,
        # no longer its victims (`left`).
        self._released: dict[WorkloadKey, set[WorkloadKey]] = {}
        self._left: dict[WorkloadKey, set[WorkloadKey]] = {}
        # Moves on whenever a nominated preemptor's cover is taken or given back, or it
        # stops waiting for a victim (what a leaving victim `releases` and the awaited
        # victims change only then; a new nomination is covered at once); with the cache's
        # `admitted_versions`, keys `claimed_in` per queue and the victim search's view of
        # the leaving Workloads.
        self.claims_stamp = 0
        self._claimed_cache: dict[str, tuple[int, int, list[WorkloadKey]]] = {}

    # -- nominating, and ending a nomination -------------------------------------------------

    def nominate(self, nomination: Nomination) -> None:
        """Hold a preemptor's capacity while its victims release theirs; the whole victims
        are being evicted from now on. The preemptor is in no queue (the caller took it
        out)."""
        cache = self._cache
        key = nomination.admit.workload_key
        record = cache.record(key)
        record.nomination, record.phase = nomination, Phase.NOMINATED
        self._nominated.add(key)
        cache.quota.add_usage(nomination.admit.cluster_queue, nomination.usage)
        for victim in nomination.victims:
            self._victim_of.setdefault(victim.workload_key, set()).add(key)
            held = cache.records.get(victim.workload_key)
            if held is not None and held.holds_quota and victim.whole:
                cache.mark_evicting(held)
                # Only whole victims cover a hold; several preemptors may wait for one.
                if victim.workload_key not in self._awaited_by:
                    self._awaited_queue[victim.workload_key] = held.cluster_queue
                    self._awaited_in.setdefault(held.cluster_queue, set()).add(victim.workload_key)
                self._awaited_by.setdefault(victim.workload_key, set()).add(key)
        self._to_settle.add(key)
        self._cover(key)

    def end(self, record: WorkloadRecord) -> Nomination:
        """Return a nomination's hold in full and forget it (the record is QUEUED)."""
        cache = self._cache
        key = record.key
        self._uncover(key)
        nomination, record.nomination = record.nomination, None
        assert nomination is not None
        self._nominated.discard(key)
        self._released.pop(key, None)
        self._left.pop(key, None)
        record.phase = Phase.QUEUED
        cache.quota.remove_usage(nomination.admit.cluster_queue, nomination.usage)
        for victim in nomination.victims:
            waiting = self._victim_of.get(victim.workload_key)
            if waiting is not None:
                waiting.discard(key)
                if not waiting:
                    del self._victim_of[victim.workload_key]
            awaiting = self._awaited_by.get(victim.workload_key)
            if awaiting is not None and key in awaiting:
                awaiting.discard(key)
                self.claims_stamp += 1
                if not awaiting:
                    del self._awaited_by[victim.workload_key]
                    queue = self._awaited_queue.pop(victim.workload_key)
                    in_queue = self._awaited_in[queue]
                    in_queue.discard(victim.workload_key)
                    if not in_queue:
                        del self._awaited_in[queue]
                held = cache.records.get(victim.workload_key)
                if held is not None and held.holds_quota:
                    cache.touch(held.cluster_queue)  # its candidate changes
        return nomination

    # -- covers ------------------------------------------------------------------------------

    def _cover(self, key: WorkloadKey) -> None:
        """Count only once what the nominated preemptor `key` and its victims both hold.

        Per (flavor, resource) of the preemptor's usage U: its whole victims still holding
        quota cover it, each with the part of its usage no other preemptor's cover counts
        yet — first those in its own ClusterQueue (the queue's hold shrinks by what they
        cover, S_own: its usage reads ``max(U, S_own)`` on top of the rest), then those in
        other queues of its tree (the lowest cohort above both queues gets a credit of what
        they cover, carried up to the root; only where neither queue nor any cohort above
        them keeps local (non-lendable) quota of it, so the usage both add there is exactly
        theirs: `QuotaTree.credit_reaches`; elsewhere the hold counts in full,
        conservatively). Counted usage is then never less than now (victims, no
        preemptors) nor than afterwards (preemptors, no victims), at every queue and
        cohort, so every preemptor still fits once its victims leave, however many wait for
        the same victim.
        """
        records = self._cache.records
        record = records[key]
        nomination = record.nomination
        assert nomination is not None
        queue = nomination.admit.cluster_queue
        tree = self._cache.quota
        own_victims: list[tuple[WorkloadKey, Mapping[tuple[str, str], int], str | None]] = []
        other_victims: list[tuple[WorkloadKey, Mapping[tuple[str, str], int], str | None]] = []
        for victim in nomination.victims:
            held = records.get(victim.workload_key)
            if not victim.whole or held is None or held.phase is not Phase.EVICTING:
                continue
            victim_queue = held.cluster_queue
            if victim_queue == queue:
                own_victims.append((victim.workload_key, held.usage or {}, None))
            elif (lca := tree.lowest_common_cohort(queue, victim_queue)) is not None:
                other_victims.append((victim.workload_key, held.usage or {}, lca))
        own: dict[tuple[str, str], int] = {}
        pool: dict[str, dict[tuple[str, str], int]] = {}
        by_victim: dict[WorkloadKey, tuple[str | None, dict[tuple[str, str], int]]] = {}

        def take(
            victims: list[tuple[WorkloadKey, Mapping[tuple[str, str], int], str | None]],
            fr: tuple[str, str],
            wanted: int,
        ) -> int:
            taken = 0
            for victim_key, usage, lca in victims:
                if taken == wanted:
                    break
                if lca is not None and not (
                    tree.credit_reaches(queue, lca, fr)
                    and tree.credit_reaches(records[victim_key].cluster_queue, lca, fr)
                ):
                    continue  # not counted in full at their lowest common cohort
                already = self._covered.get(victim_key, {}).get(fr, 0)
                part = min(wanted - taken, usage.get(fr, 0) - already)
                if part > 0:
                    self._covered.setdefault(victim_key, {})[fr] = already + part
                    by_victim.setdefault(victim_key, (lca, {}))[1][fr] = part
                    if lca is not None:
                        credit = pool.setdefault(lca, {})
                        credit[fr] = credit.get(fr, 0) + part
                    taken += part
            return taken

        for fr, wanted in nomination.usage.items():
            own[fr] = take(own_victims, fr, wanted)
            take(other_victims, fr, wanted - own[fr])
        cover = _Cover({fr: v for fr, v in own.items() if v}, pool, by_victim)
        if cover.own:
            tree.remove_usage(queue, cover.own)
        for cohort, credit in cover.pool.items():
            tree.credit_pool(cohort, credit)
        self._covers[key] = cover
        self.claims_stamp += 1

    def _uncover(self, key: WorkloadKey) -> None:
        """Take back `_cover`'s adjustment (the hold is the preemptor's whole usage again)."""
        cover = self._covers.pop(key, None)
        record = self._cache.records.get(key)
        if cover is None or record is None or record.nomination is None:
            return
        self.claims_stamp += 1
        for victim_key, (_, parts) in cover.by_victim.items():
            covered = self._covered.get(victim_key)
            if covered is None:
                continue
            for fr, part in parts.items():
                left = covered.get(fr, 0) - part
                if left > 0:
                    covered[fr] = left
                else:
                    covered.pop(fr, None)
            if not covered:
                del self._covered[victim_key]
        quota = self._cache.quota
        if cover.own:
            quota.add_usage(record.nomination.admit.cluster_queue, cover.own)
        for cohort, credit in cover.pool.items():
            quota.credit_pool(cohort, credit, sign=-1)

    def releases(self, victim: WorkloadKey) -> tuple[Release, ...]:
        """What taking the leaving `victim` out of the quota gives back besides its own
        usage: the covers it gives nominated preemptors' holds (their holds count in full
        without it). Empty for a Workload no preemptor waits for."""
        out: list[Release] = []
        for key in sorted(self._awaited_by.get(victim, ())):
            cover = self._covers.get(key)
            entry = cover.by_victim.get(victim) if cover is not None else None
            if entry is None:
                continue
            cohort, parts = entry
            if cohort is None:
                nomination = self._cache.records[key].nomination
                assert nomination is not None
                out.append(Release(nomination.admit.cluster_queue, dict(parts), pool=False))
            else:
                out.append(Release(cohort, dict(parts), pool=True))
        return tuple(out)

    @contextmanager
    def suspended(self) -> Iterator[None]:
        """Around a change of quota or cohorts: every cover is taken back first and
        recomputed after, against the new structure."""
        keys = list(self._covers)
        for key in keys:
            self._uncover(key)
        try:
            yield
        finally:
            for key in keys:
                self._cover(key)

    def recover_for(self, victim: WorkloadKey) -> None:
        """A victim's quota changed: recompute the covers of the preemptors waiting for it,
        and look at its preemptors again in the next cycle (they may be done or dropped)."""
        waiting = self._victim_of.get(victim, ())
        self._to_settle.update(waiting)
        held = self._cache.records.get(victim)
        if held is None or not held.holds_quota:
            for key in waiting:
                self._released.setdefault(key, set()).add(victim)
        keys = [key for key in sorted(self._awaited_by.get(victim, ())) if key in self._covers]
        for key in keys:
            self._uncover(key)
        for key in keys:
            self._cover(key)

    # -- what the cycle looks at -------------------------------------------------------------

    def readmitted(self, victim: WorkloadKey) -> None:
        """The cycle admitted a Workload again: if it was a victim that had released its
        quota, its preemptors are done with it (re-read from the API server instead, with
        its old admission, it is an eviction that never happened: `settle_action`)."""
        for key in self._victim_of.get(victim, ()):
            if victim in self._released.get(key, ()):
                self._left.setdefault(key, set()).add(victim)

    def left(self, key: WorkloadKey) -> frozenset[WorkloadKey]:
        """The victims of a nominated preemptor that released their quota and were then
        admitted again by the cycle: no longer its victims."""
        return frozenset(self._left.get(key, ()))

    def settle_all(self) -> None:
        """Something every preemptor may wait on changed (a ClusterQueue's quota)."""
        self._to_settle.update(self._nominated)

    def workload_changed(self, record: WorkloadRecord) -> None:
        """A new copy of the Workload: look again at it if it is a nominated preemptor, and
        at the preemptors waiting for it."""
        if record.nomination is not None:  # active or not, in a queue that runs or not
            self._to_settle.add(record.key)
        self._to_settle.update(self._victim_of.get(record.key, ()))

    def nominations_to_settle(self) -> frozenset[WorkloadKey]:
        """The nominated preemptors the next cycle will look at again (not taken)."""
        return frozenset(self._to_settle & self._nominated)

    def take_nominations_to_settle(self) -> list[WorkloadKey]:
        """The nominated preemptors to look at again (in key order), forgotten once taken:
        those something they wait on changed for — a victim's quota or eviction, the
        preemptor itself, a ClusterQueue — since they were last looked at. The others can
        neither be admitted nor dropped (`scheduler.preemption.settle_nominations`)."""
        keys = sorted(self._to_settle & self._nominated)
        self._to_settle.clear()
        return keys

    def claimed(self, key: WorkloadKey) -> bool:
        """Whether a nominated preemptor waits for this Workload to leave."""
        return key in self._awaited_by

    def claimed_in(self, cluster_queue: str) -> list[WorkloadKey]:
        """The Workloads leaving for nominated preemptors that hold quota of the
        ClusterQueue, by key (only that queue's are looked at)."""
        keys = self._awaited_in.get(cluster_queue)
        if not keys:
            return []
        version = self._cache.admitted_versions.get(cluster_queue, 0)
        cached = self._claimed_cache.get(cluster_queue)
        if cached is not None and cached[0] == self.claims_stamp and cached[1] == version:
            return cached[2]
        records = self._cache.records
        out = []
        for key in sorted(keys):
            held = records.get(key)
            if held is not None and held.holds_quota and held.cluster_queue == cluster_queue:
                out.append(key)
        self._claimed_cache[cluster_queue] = (self.claims_stamp, version, out)
        return out
