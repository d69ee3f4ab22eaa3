"""Admission fair sharing's ledger: per LocalQueue, its consumed usage (decayed over time)
and the entry penalties of Workloads admitted but not yet seen back as admitted (Kueue's
`pkg/cache/queue/afs` usage ledger and entry penalties).

- **Consumed usage** is the LocalQueue's admitted usage folded in over time with an
  exponential decay: at each sample, consumed ← consumed × (1 − α) + admitted now × α with
  α = 1 − 0.5^(elapsed / half-life) (`admission_fair_sharing.decayed`).
- **An entry penalty** is pushed when the cycle admits a Workload in a ClusterQueue with
  admission fair sharing (`AdmissionFairSharing.entry_penalty`). It is *settled* — folded
  into consumed usage — when the admission is seen back (the Workload's `Admitted=True`),
  and *dropped* when it will never settle (the admission is rolled back, the Workload is
  deleted, finishes unadmitted, or moves to another LocalQueue). One record per Workload:
  pushing again replaces it, settling or dropping twice does nothing.
- **Admitted usage now**, per LocalQueue, is kept here as Workloads reserve and release
  quota: it is what a sample or a settlement folds in.
- **Seeding**: a LocalQueue's `status.fairSharing.admissionFairSharingStatus` (what an
  earlier controller wrote) is merged into its entry once per ledger, so a restart loses
  no history.

Time is passed in. An entry's `last_update` is None until a sample or a settlement first
stamps it (that first fold then covers no elapsed time, as Kueue's entry created "now").
Amounts are floats in whole units per resource name (a ranking heuristic, as in Kueue).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from controller.core.afs.usage import ResourceAmounts, decayed
from controller.core.model.workloads import WorkloadKey

__all__ = ["LedgerEntry", "UsageLedger"]


@dataclass(slots=True)
class LedgerEntry:
    """One LocalQueue's consumed usage and pending entry penalties."""

    consumed: dict[str, float] = field(default_factory=dict)
    last_update: float | None = None  # when consumed was last folded (None: not yet)
    status_accounted: bool = False  # the LocalQueue's written status has been merged
    penalties: dict[WorkloadKey, dict[str, float]] = field(default_factory=dict)
    _penalty: dict[str, float] | None = None  # their sum, recomputed after a change

    @property
    def penalty(self) -> Mapping[str, float]:
        """The sum of the pending penalties, recomputed from the records (never by
        subtraction), so it is exactly empty once every penalty is settled or dropped."""
        if self._penalty is None:
            total: dict[str, float] = {}
            for amounts in self.penalties.values():
                for name, value in amounts.items():
                    total[name] = total.get(name, 0.0) + value
            self._penalty = total
        return self._penalty

    def fold(self, admitted: ResourceAmounts, now: float, half_life: float) -> None:
        """Fold in `admitted` for the time since `last_update` (never negative) and stamp
        `now` (kept monotonic: a stamp never moves back)."""
        last = now if self.last_update is None else self.last_update
        self.consumed = decayed(self.consumed, admitted, max(0.0, now - last), half_life)
        self.last_update = max(last, now)


class UsageLedger:
    """Per LocalQueue (`namespace/name`): consumed usage, entry penalties, admitted usage.
    `on_change(local_queue)` is called whenever a LocalQueue's consumed usage or pending
    penalty changes (its queue ranks it again)."""

    __slots__ = ("_admitted", "_charged", "_penalized", "entries", "on_change")

    def __init__(self, on_change: Callable[[str], None] | None = None) -> None:
        self.entries: dict[str, LedgerEntry] = {}
        self._penalized: dict[WorkloadKey, str] = {}  # Workload → LocalQueue of its penalty
        self._admitted: dict[str, dict[str, int]] = {}  # LocalQueue → milli per resource
        self._charged: dict[WorkloadKey, tuple[str, dict[str, int]]] = {}
        self.on_change = on_change

    def _changed(self, local_queue: str) -> None:
        if self.on_change is not None:
            self.on_change(local_queue)

    def entry(self, local_queue: str) -> LedgerEntry | None:
        return self.entries.get(local_queue)

    def _entry(self, local_queue: str) -> LedgerEntry:
        found = self.entries.get(local_queue)
        if found is None:
            found = self.entries[local_queue] = LedgerEntry()
        return found

    # -- history ----------------------------------------------------------------------------

    def seed(self, local_queue: str, consumed: ResourceAmounts) -> bool:
        """Merge the consumed usage a LocalQueue's status records, once per ledger (later
        copies of the status are our own writes coming back); returns whether it merged."""
        entry = self._entry(local_queue)
        if entry.status_accounted:
            return False
        entry.status_accounted = True
        for name, value in consumed.items():
            entry.consumed[name] = entry.consumed.get(name, 0.0) + value
        self._changed(local_queue)
        return True

    def sample(self, local_queue: str, now: float, half_life: float) -> LedgerEntry:
        """Fold the LocalQueue's admitted usage in at `now` (Kueue's sampling tick). With a
        half-life of 0 consumed usage is reset instead, as Kueue does; resources already
        listed stay, at 0."""
        entry = self._entry(local_queue)
        if half_life == 0:
            entry.consumed = dict.fromkeys(entry.consumed, 0.0)
            entry.last_update = now if entry.last_update is None else max(entry.last_update, now)
        else:
            entry.fold(self.admitted(local_queue), now, half_life)
        self._changed(local_queue)
        return entry

    def forget(self, local_queue: str) -> None:
        """The LocalQueue was deleted: its history and pending penalties go with it."""
        entry = self.entries.pop(local_queue, None)
        if entry is not None:
            for key in entry.penalties:
                self._penalized.pop(key, None)
            self._changed(local_queue)

    # -- entry penalties --------------------------------------------------------------------

    def push_penalty(self, local_queue: str, key: WorkloadKey, penalty: ResourceAmounts) -> None:
        """Record the penalty of `key`'s admission, replacing any earlier one."""
        self.drop_penalty(key)
        entry = self._entry(local_queue)
        entry.penalties[key] = dict(penalty)
        entry._penalty = None
        self._penalized[key] = local_queue
        self._changed(local_queue)

    def drop_penalty(self, key: WorkloadKey) -> dict[str, float] | None:
        """Forget `key`'s pending penalty (it will never settle); returns it, if any."""
        local_queue = self._penalized.pop(key, None)
        if local_queue is None:
            return None
        entry = self.entries[local_queue]
        removed = entry.penalties.pop(key)
        entry._penalty = None
        self._changed(local_queue)
        return removed

    def penalized_local_queue(self, key: WorkloadKey) -> str | None:
        """The LocalQueue `key` has a pending penalty in, if any."""
        return self._penalized.get(key)

    def settle(self, key: WorkloadKey, local_queue: str, now: float, half_life: float) -> None:
        """`key` was seen admitted in `local_queue`: fold the LocalQueue's admitted usage in
        (its own included) and move its penalty into consumed usage (Kueue's
        `updateAfsConsumedUsage`). Without a penalty (pushed by an earlier controller) only
        the fold happens."""
        if self._penalized.get(key) not in (None, local_queue):
            self.drop_penalty(key)  # pushed for another LocalQueue: it never settles there
        penalty = self.drop_penalty(key) or {}
        entry = self._entry(local_queue)
        entry.fold(self.admitted(local_queue), now, half_life)
        for name, value in penalty.items():
            entry.consumed[name] = entry.consumed.get(name, 0.0) + value
        self._changed(local_queue)

    # -- admitted usage now -----------------------------------------------------------------

    def reserve(
        self, key: WorkloadKey, local_queue: str, usage: Iterable[tuple[tuple[str, str], int]]
    ) -> None:
        """`key` holds quota in `local_queue` (usage per (flavor, resource), milli-units)."""
        self.release(key)
        per_resource: dict[str, int] = {}
        for (_, resource), value in usage:
            per_resource[resource] = per_resource.get(resource, 0) + value
        self._charged[key] = (local_queue, per_resource)
        totals = self._admitted.setdefault(local_queue, {})
        for name, value in per_resource.items():
            totals[name] = totals.get(name, 0) + value

    def release(self, key: WorkloadKey) -> None:
        """`key` no longer holds quota."""
        charged = self._charged.pop(key, None)
        if charged is None:
            return
        local_queue, per_resource = charged
        totals = self._admitted[local_queue]
        for name, value in per_resource.items():
            totals[name] -= value
            if not totals[name]:
                del totals[name]
        if not totals:
            del self._admitted[local_queue]

    def admitted(self, local_queue: str) -> dict[str, float]:
        """The LocalQueue's admitted usage now, in whole units per resource name."""
        return {name: value / 1000 for name, value in self._admitted.get(local_queue, {}).items()}
