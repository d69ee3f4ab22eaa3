"""Every Workload's record, and the quota those holding it reserve (Kueue's scheduler cache,
`pkg/cache/scheduler`, with its "assume": a cycle's admission is reserved at once).

Reserved usage lives in `quota` (a `QuotaTree`, controller/core/cache/quota_tree.py): it is
added once when quota is reserved (`reserve`: an admission decided by the cycle, or a
Workload that arrives already admitted) and removed once when it is released
(`unreserve`). Indexes kept with the records: the Workloads holding quota, per
ClusterQueue too. `admitted_versions` moves
on whenever a ClusterQueue's admitted Workloads change: what is derived from them (the
preemption engine's contenders) is kept until it moves.

A cycle works on this cache as it stands: what-if questions (a victim search, the
tournament, partial admission) change usage inside `QuotaTree.simulate` blocks, which undo
exactly what they did, versions included. A copy per cycle, as Kueue's snapshot, would
cost more than the cycle itself at a thousand ClusterQueues (docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from dataclasses import replace

from api.workload_status import Admission
from controller.core.cache.quota_tree import QuotaTree
from controller.core.cache.records import AdmittedView, Phase, WorkloadRecord, WorkloadsView
from controller.core.model.workloads import OrderKey, Usage, WorkloadKey
from controller.core.preemption.preemptibility import Resolution

__all__ = ["ReservationCache", "UnknownWorkload"]


class UnknownWorkload(KeyError):
    """A Workload key the state does not hold (or not in the expected phase)."""


class ReservationCache:
    """The records, the quota tree and what holds quota in it."""

    def __init__(self) -> None:
        self.records: dict[WorkloadKey, WorkloadRecord] = {}
        self.quota = QuotaTree()
        self._holding: set[WorkloadKey] = set()
        self._admitted_by_cq: dict[str, set[WorkloadKey]] = {}
        self.workloads = WorkloadsView(self.records)
        self.admitted = AdmittedView(self.records, self._holding)
        # Per ClusterQueue, moves on whenever its admitted Workloads change (one admitted,
        # released, updated, evicted, or claimed by a preemptor).
        self.admitted_versions: dict[str, int] = {}

    def record(self, key: WorkloadKey) -> WorkloadRecord:
        """The Workload's record; `UnknownWorkload` if the cache does not hold it."""
        record = self.records.get(key)
        if record is None:
            raise UnknownWorkload(key)
        return record

    # -- what a record says ------------------------------------------------------------------

    def priority_of(self, key: WorkloadKey) -> int:
        return -self.records[key].order[0]

    def order_of(self, key: WorkloadKey) -> OrderKey:
        return self.records[key].order

    def resolution(self, key: WorkloadKey) -> Resolution:
        return self.records[key].resolution

    def local_queue_key(self, key: WorkloadKey) -> str:
        """`namespace/name` of the Workload's LocalQueue."""
        return self.records[key].local_queue

    def signature(self, key: WorkloadKey) -> tuple[object, ...]:
        """`WorkloadRecord.signature` of a Workload the cache holds."""
        return self.records[key].signature()

    # -- holding quota -----------------------------------------------------------------------

    def holding(self) -> AbstractSet[WorkloadKey]:
        """The keys of the Workloads that hold quota (admitted or being evicted)."""
        return self._holding

    def admitted_in(self, cluster_queue: str) -> frozenset[WorkloadKey]:
        return frozenset(self._admitted_by_cq.get(cluster_queue, ()))

    def touch(self, cluster_queue: str) -> None:
        """The ClusterQueue's admitted Workloads changed."""
        self.admitted_versions[cluster_queue] = self.admitted_versions.get(cluster_queue, 0) + 1

    def reserve(self, record: WorkloadRecord, admission: Admission, evicting: bool) -> Usage:
        """Charge the admission's usage to its ClusterQueue: the record holds quota
        (ADMITTED, or EVICTING when its eviction is already decided)."""
        self.touch(admission.cluster_queue)
        usage = admission.usage()
        record.admission, record.usage = admission, usage
        record.phase = Phase.EVICTING if evicting else Phase.ADMITTED
        self._admitted_by_cq.setdefault(admission.cluster_queue, set()).add(record.key)
        self._holding.add(record.key)
        self.quota.add_usage(admission.cluster_queue, usage)
        return usage

    def unreserve(self, record: WorkloadRecord) -> Usage:
        """Return the record's quota; it is QUEUED afterwards (the caller places it)."""
        cluster_queue = record.cluster_queue
        usage = record.usage or {}
        self.touch(cluster_queue)
        self.quota.remove_usage(cluster_queue, usage)
        members = self._admitted_by_cq[cluster_queue]
        members.discard(record.key)
        if not members:
            del self._admitted_by_cq[cluster_queue]
        self._holding.discard(record.key)
        record.admission = record.usage = record.eviction = None
        record.phase = Phase.QUEUED
        return usage

    def mark_evicting(self, record: WorkloadRecord) -> None:
        """An admitted Workload's eviction is decided: it holds its quota until released."""
        record.phase = Phase.EVICTING
        self.touch(record.cluster_queue)

    @contextmanager
    def simulate_removal(self, keys: Iterable[WorkloadKey]) -> Iterator[None]:
        """Within the block, the listed admitted Workloads' usage is removed from the quota
        (cohort totals included); it is restored exactly on exit. For preemption: use
        `quota.fits(cq, usage)` / `assign_flavors` inside the block."""
        per_cq: dict[str, dict[tuple[str, str], int]] = {}
        for key in keys:
            record = self.admitted[key]
            bucket = per_cq.setdefault(record.cluster_queue, {})
            for fr, value in (record.usage or {}).items():
                bucket[fr] = bucket.get(fr, 0) + value
        with self.quota.simulate(per_cq, sign=-1):
            yield

    def cancel_eviction(self, record: WorkloadRecord) -> None:
        """An eviction could not be recorded: the Workload is admitted again."""
        record.phase = Phase.ADMITTED
        record.workload = replace(record.workload, evicted=False)
        self.touch(record.cluster_queue)
