"""The queue manager (Kueue's `pkg/cache/queue`): where every pending Workload waits.

A pending Workload is in exactly one of: its ClusterQueue's queue (offered, or parked
after a refusal until something relevant changes), the eviction backoff (until its
requeueAt), or aside with its LocalQueue while that LocalQueue is missing, stopped or
invalid or its ClusterQueue is missing (`controller/core/pending.py` says why). A
nominated preemptor, and a Workload held back (deactivated, invalid, gated), is in none.

Retries send parked Workloads back to be offered: of one ClusterQueue, of a cohort's whole
tree, of the queues using a flavor, or when the minimum runtime protecting preemption
candidates ends. With admission fair sharing a ClusterQueue's queue orders its Workloads
by their LocalQueue's recent usage (controller/core/afs/): the manager keeps that usage
(the ledger) and gives a ClusterQueue the kind of queue its admission mode calls for.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, ValuesView
from fractions import Fraction

from api.constants import AdmissionMode, StopPolicy
from controller.core.afs.ledger import UsageLedger
from controller.core.afs.queue import AdmissionFairQueue
from controller.core.afs.usage import AdmissionFairSharing, resource_totals, weighted_usage
from controller.core.after_admission import awaits_backoff_finished
from controller.core.cache.objects import ObjectStore
from controller.core.cache.quota_tree import QuotaTree
from controller.core.cache.records import Phase, WorkloadRecord
from controller.core.model.clusterqueues import ClusterQueue, LocalQueue
from controller.core.model.workloads import WorkloadKey
from controller.core.queue.backoff import BackoffQueue
from controller.core.queue.pending_queue import PendingQueue, WorkloadQueue

__all__ = ["QueueManager"]


class QueueManager:
    """Per ClusterQueue its queue (`manager[name]`), the backoff, the Workloads set aside,
    and admission fair sharing's usage. Reads the records, the objects and the cohort
    tree it is given; writes only where a Workload waits (`WorkloadRecord.queued_in`)."""

    def __init__(
        self,
        records: dict[WorkloadKey, WorkloadRecord],
        objects: ObjectStore,
        quota: QuotaTree,
    ) -> None:
        self._records = records
        self._objects = objects
        self._quota = quota
        self._queues: dict[str, WorkloadQueue] = {}
        self.backoff = BackoffQueue()
        # The pending Workloads set aside per LocalQueue (`namespace/name`) while that
        # LocalQueue is missing or stopped or its ClusterQueue is missing.
        self._aside: dict[str, set[WorkloadKey]] = {}
        # Per ClusterQueue whose head found preemption candidates within their minimum
        # runtime: when the first of them becomes preemptible (its queue is tried again).
        self._protected_until: dict[str, float] = {}
        # Kueue's admissionFairSharing configuration (None = off), and per LocalQueue its
        # history and entry penalties.
        self._admission_fair_sharing: AdmissionFairSharing | None = None
        self.usage_ledger = UsageLedger(self._usage_changed)

    # -- the queues --------------------------------------------------------------------------

    def __getitem__(self, cluster_queue: str) -> WorkloadQueue:
        return self._queues[cluster_queue]

    def __contains__(self, cluster_queue: str) -> bool:
        return cluster_queue in self._queues

    def __iter__(self) -> Iterator[str]:
        return iter(self._queues)

    def __len__(self) -> int:
        return len(self._queues)

    def get(self, cluster_queue: str) -> WorkloadQueue | None:
        return self._queues.get(cluster_queue)

    def items(self) -> ItemsView[str, WorkloadQueue]:
        return self._queues.items()

    def values(self) -> ValuesView[WorkloadQueue]:
        return self._queues.values()

    def add_cluster_queue(self, cq: ClusterQueue) -> None:
        """A ClusterQueue was added or changed: a new one gets a queue, and the Workloads
        set aside for its LocalQueues are offered to it; a changed one keeps its Workloads
        (in the queue its admission mode calls for now)."""
        queue = self._queues.get(cq.name)
        if queue is None:
            self._queues[cq.name] = self._new_queue(cq)
            for lq in self._objects.local_queues.values():
                if lq.cluster_queue == cq.name:
                    self.place_aside(lq.key)
        else:
            queue.strategy = cq.queueing_strategy
            self._rebuild_queue(cq.name)

    def remove_cluster_queue(self, name: str) -> None:
        """A ClusterQueue was removed: its Workloads wait aside with their LocalQueues."""
        queue = self._queues.pop(name, None)
        for key in list(queue.workload_keys()) if queue else ():
            self.unqueue(key)
            self.place(key)

    # -- where a Workload waits --------------------------------------------------------------

    def place(self, key: WorkloadKey) -> None:
        """Queue a pending Workload: behind its backoff, under its LocalQueue's ClusterQueue,
        or, while its LocalQueue is missing or stopped or its ClusterQueue missing, aside
        with that LocalQueue until it changes (`pending.unqueued_reason` says why)."""
        record = self._records[key]
        if record.phase is Phase.NOMINATED or record.workload.held_back:
            return  # waits for its victims, or for `active: true`, a fix or its gates to go
        if record.workload.on_hold:
            return  # Kueue's IsOnHold: put on hold by its job, never requeued
        workload = record.workload
        if workload.requeue_at is not None and key not in self.backoff:
            self.backoff.add(key, workload.requeue_at)
            return
        if key in self.backoff or awaits_backoff_finished(workload):
            return  # Requeued=True (BackoffFinished) is written first: after_admission.py
        lq_key = record.local_queue
        lq = self._objects.local_queues.get(lq_key)
        queue = self._queues.get(lq.cluster_queue) if lq else None
        if (
            lq is None
            or queue is None
            or lq.stop_policy is not StopPolicy.NONE
            or lq.invalid is not None
        ):
            self._aside.setdefault(lq_key, set()).add(key)
            return
        record.queued_in = lq.cluster_queue
        queue.push(record.order)

    def unqueue(self, key: WorkloadKey) -> None:
        """Take a Workload out of wherever it waits."""
        record = self._records.get(key)
        if record is None:
            return
        cq, record.queued_in = record.queued_in, None
        if cq is not None and cq in self._queues:
            self._queues[cq].remove(key)
        self.backoff.remove(key)
        aside = self._aside.get(record.local_queue)
        if aside is not None:
            aside.discard(key)

    def place_aside(self, lq_key: str) -> None:
        """Offer the Workloads set aside for a LocalQueue its (possibly new) queue again."""
        for key in self._aside.pop(lq_key, set()):
            self.place(key)

    def requeue_local_queue(self, lq: LocalQueue) -> None:
        """Place again the queued Workloads of a LocalQueue that changed its ClusterQueue,
        its stop policy or its validity (or went)."""
        queue = self._queues.get(lq.cluster_queue)
        if queue is None:
            return
        records = self._records
        for key in [k for k in queue.workload_keys() if records[k].local_queue == lq.key]:
            self.unqueue(key)
            self.place(key)

    def queued_in(self, key: WorkloadKey) -> str | None:
        """The ClusterQueue whose pending queue holds the Workload, if any."""
        record = self._records.get(key)
        return record.queued_in if record is not None else None

    # -- retries -----------------------------------------------------------------------------

    def retry_inadmissible(self, cluster_queue: str) -> None:
        """Offer a ClusterQueue's parked Workloads again."""
        queue = self._queues.get(cluster_queue)
        if queue is not None:
            queue.retry_inadmissible()

    def retry_cohort(self, cohort: str) -> None:
        """Offer again the parked Workloads of every ClusterQueue of the cohort's tree."""
        for member in self._quota.members(cohort):
            self.retry_inadmissible(member)

    def retry_in_cohorts(self) -> None:
        """A Cohort changed: whether its members and those of its parent and children are
        active may have changed (rare; every ClusterQueue in a cohort is tried again)."""
        for cq in self._objects.cluster_queues.values():
            if cq.cohort:
                self.retry_inadmissible(cq.name)

    def retry_using_flavor(self, name: str) -> None:
        for cq in self._objects.cluster_queues.values():
            if name in set(cq.flavor_names()):
                self.retry_inadmissible(cq.name)

    def retry_all(self) -> None:
        for name in self._objects.cluster_queues:
            self.retry_inadmissible(name)

    def retry_protected_at(self, cluster_queue: str, at: float) -> None:
        """Try the queue's parked Workloads again at `at` (a preemption candidate's minimum
        runtime ends then)."""
        known = self._protected_until.get(cluster_queue)
        self._protected_until[cluster_queue] = at if known is None else min(known, at)

    def retry_protected(self, now: float) -> None:
        """Send back to their queues the Workloads parked while candidates were protected by
        a minimum runtime that has now ended."""
        for name, at in list(self._protected_until.items()):
            if at <= now:
                del self._protected_until[name]
                self.retry_inadmissible(name)
                cohort = self._quota.cohort_of(name)
                if cohort:
                    self.retry_cohort(cohort)

    def next_timed_retry(self) -> float | None:
        """When a waiting Workload may next be tried without any event: the earliest
        requeueAt or end of a minimum-runtime protection (None: nothing is timed)."""
        times = [at for at in (self.backoff.next_due(), *self._protected_until.values())]
        known = [at for at in times if at is not None]
        return min(known) if known else None

    # -- admission fair sharing --------------------------------------------------------------

    @property
    def admission_fair_sharing(self) -> AdmissionFairSharing | None:
        """The configuration's admissionFairSharing (None: off)."""
        return self._admission_fair_sharing

    @admission_fair_sharing.setter
    def admission_fair_sharing(self, settings: AdmissionFairSharing | None) -> None:
        self._admission_fair_sharing = settings
        for name in list(self._queues):
            self._rebuild_queue(name)

    def uses_admission_fair_sharing(self, cluster_queue: str) -> bool:
        """Whether the ClusterQueue orders its Workloads by their LocalQueue's usage: its
        admissionMode says so and the configuration has admissionFairSharing."""
        cq = self._objects.cluster_queues.get(cluster_queue)
        return (
            self._admission_fair_sharing is not None
            and cq is not None
            and cq.admission_mode is AdmissionMode.USAGE_BASED_ADMISSION_FAIR_SHARING
        )

    def local_queue_usage(self, local_queue: str) -> float:
        """A LocalQueue's admission fair sharing usage now: its consumed usage plus pending
        entry penalties, resources weighted, divided by its weight (1 for a LocalQueue the
        state does not hold, as Kueue falls back to)."""
        settings = self._admission_fair_sharing
        entry = self.usage_ledger.entry(local_queue)
        lq = self._objects.local_queues.get(local_queue)
        return weighted_usage(
            entry.consumed if entry is not None else {},
            entry.penalty if entry is not None else {},
            lq.fair_weight if lq is not None else Fraction(1),
            settings.resource_weights if settings is not None else {},
        )

    def local_queue_weight_changed(self, local_queue: str) -> None:
        self._usage_changed(local_queue)

    def push_entry_penalty(self, record: WorkloadRecord, cluster_queue: str) -> None:
        """The cycle admitted the Workload: in a ClusterQueue with admission fair sharing,
        its LocalQueue counts as having used a sample's worth of the admission until it is
        seen back Admitted (Kueue's entry penalty, `settle_admission`)."""
        settings = self._admission_fair_sharing
        if settings is not None and self.uses_admission_fair_sharing(cluster_queue):
            self.usage_ledger.push_penalty(
                record.local_queue,
                record.key,
                settings.entry_penalty(resource_totals((record.usage or {}).items())),
            )

    def settle_admission(self, key: WorkloadKey, now: float) -> None:
        """The Workload was seen back Admitted at `now`: in a ClusterQueue with admission
        fair sharing, its LocalQueue's consumed usage folds in what is admitted now and its
        entry penalty (Kueue settles on every transition into Admitted)."""
        settings = self._admission_fair_sharing
        record = self._records.get(key)
        if settings is None or record is None or record.admission is None:
            return
        if not record.workload.active or not self.uses_admission_fair_sharing(
            record.admission.cluster_queue
        ):
            return
        self.usage_ledger.settle(key, record.local_queue, now, settings.usage_half_life_seconds)

    def _usage_changed(self, local_queue: str) -> None:
        """A LocalQueue's usage may have changed: its ClusterQueue's queue ranks it again."""
        lq = self._objects.local_queues.get(local_queue)
        queue = self._queues.get(lq.cluster_queue) if lq is not None else None
        if isinstance(queue, AdmissionFairQueue):
            queue.usage_changed(local_queue)

    def _new_queue(self, cq: ClusterQueue) -> WorkloadQueue:
        if self.uses_admission_fair_sharing(cq.name):
            return AdmissionFairQueue(
                cq.queueing_strategy, self._local_queue_of, self.local_queue_usage
            )
        return PendingQueue(cq.queueing_strategy)

    def _local_queue_of(self, key: WorkloadKey) -> str:
        return self._records[key].local_queue

    def _rebuild_queue(self, name: str) -> None:
        """Give a ClusterQueue the kind of queue its admission mode calls for, with the same
        Workloads (parked ones stay parked)."""
        old = self._queues[name]
        wanted_fair = self.uses_admission_fair_sharing(name)
        if isinstance(old, AdmissionFairQueue) == wanted_fair:
            return
        new = self._new_queue(self._objects.cluster_queues[name])
        for key in list(old.workload_keys()):
            item = self._records[key].order
            if old.is_inadmissible(key):
                new.park(item)
            else:
                new.push(item)
        self._queues[name] = new
