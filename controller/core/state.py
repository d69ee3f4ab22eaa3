"""The cluster as the admission engine knows it, kept incrementally.

Every `set_*`/`remove_*` touches only what the object affects: quota totals of the
(flavor, resource) pairs of one ClusterQueue and its cohort, one pending queue, or the
inadmissible Workloads that a change may unblock. Each Workload has one record
(`controller/core/records.py`): its phase says whether it is queued, nominated, admitted,
being evicted or finished. Reserved usage lives in `quota` (a `QuotaTree`): it is added
once when quota is reserved (`apply_admit`, or a Workload that arrives already admitted)
and removed once when it is released (`release`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from api.constants import PREEMPTIBILITY_LABEL, AdmissionMode
from api.workload_status import Admission
from controller.core.admission_fair_queue import AdmissionFairQueue
from controller.core.admission_fair_sharing import (
    AdmissionFairSharing,
    resource_totals,
    weighted_usage,
)
from controller.core.after_admission import awaits_backoff_finished, may_come_due
from controller.core.clusterqueues import ClusterQueue, LocalQueue, StopPolicy
from controller.core.cohort_nodes import Cohort
from controller.core.cohorts import QuotaTree
from controller.core.decisions import Admit, Evict, Nomination
from controller.core.fair_sharing import FairSharing
from controller.core.flavors import ResourceFlavor
from controller.core.preemption.preemptibility import Resolution, resolve_preemptibility
from controller.core.preemption.types import Release
from controller.core.priorities import PriorityClass, PriorityClasses, WorkloadPriorityClass
from controller.core.queues import BackoffQueue, OrderKey, PendingQueue, WorkloadQueue, order_key
from controller.core.records import (
    AdmittedView,
    NominatedView,
    Phase,
    WorkloadRecord,
    WorkloadsView,
)
from controller.core.resource_rules import NO_RULES, ResourceRules
from controller.core.selectors import EMPTY_LABELS
from controller.core.usage_ledger import UsageLedger
from controller.core.workloads import Usage, Workload, WorkloadKey

__all__ = ["ClusterState", "UnknownWorkload", "namespace_matches"]


@dataclass(frozen=True, slots=True)
class _Cover:
    """What `ClusterState._cover` took off a nominated preemptor's hold: from its queue's
    usage (`own`), and as credits on cohorts (`pool`, per cohort); and per victim, the part
    of that victim's usage it counts and where — None for the preemptor's queue, else the
    cohort credited (`by_victim`: each unit of a victim's usage covers at most one unit of
    one preemptor's hold)."""

    own: dict[tuple[str, str], int]
    pool: dict[str, dict[tuple[str, str], int]]
    by_victim: dict[WorkloadKey, tuple[str | None, dict[tuple[str, str], int]]]


_NAME_LABEL = "kubernetes.io/metadata.name"


class UnknownWorkload(KeyError):
    """A Workload key the state does not hold (or not in the expected phase)."""


class ClusterState:
    """Flavors, queues, priority classes, namespaces, Workloads and reserved usage."""

    def __init__(self) -> None:
        self.quota = QuotaTree()
        self.flavors: dict[str, ResourceFlavor] = {}
        self.cluster_queues: dict[str, ClusterQueue] = {}
        self.cohorts: dict[str, Cohort] = {}  # the explicit ones (Cohort objects)
        self.local_queues: dict[str, LocalQueue] = {}
        self.priority_classes = PriorityClasses()
        self.namespaces: dict[str, Mapping[str, str]] = {}
        self.records: dict[WorkloadKey, WorkloadRecord] = {}
        # Indexes over the records, kept with them: the Workloads holding quota, the
        # nominated preemptors, the Workloads holding quota per ClusterQueue, and the
        # pending ones set aside per LocalQueue (`namespace/name`) while that LocalQueue
        # is missing or stopped or its ClusterQueue is missing.
        self._holding: set[WorkloadKey] = set()
        self._nominated: set[WorkloadKey] = set()
        self._admitted_by_cq: dict[str, set[WorkloadKey]] = {}
        self._aside: dict[str, set[WorkloadKey]] = {}
        self._evictions: set[WorkloadKey] = set()  # records with an eviction to issue
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
        # preemptors to look at again, because something they wait on changed
        # (`take_nominations_to_settle`).
        self._victim_of: dict[WorkloadKey, set[WorkloadKey]] = {}
        self._to_settle: set[WorkloadKey] = set()
        # The Workloads not finished, with their LocalQueue (`namespace/name`) and how many
        # each LocalQueue has, and the finished ones per ClusterQueue of their admission:
        # queue statuses and gauges count them without a pass over every Workload ever
        # seen (at 50,000, with 15,000 pending, such a pass took 40 ms).
        self.live: dict[WorkloadKey, str] = {}
        self.live_in: dict[str, int] = {}
        # Among them, those held back (deactivated, invalid or gated: `Workload.held_back`),
        # in arrival order: the only pending Workloads with a reason of their own while
        # every queue is active.
        self.held_back: dict[WorkloadKey, None] = {}
        # And those the after-admission timers may have something due for (admitted, in a
        # backoff, or Requeued=False: `may_come_due`): the timers read only these, since in
        # a long run most unfinished Workloads are pending with none of that. A superset: a
        # Workload that stops qualifying leaves with its next copy.
        self.timed: dict[WorkloadKey, None] = {}
        self.finished_in: dict[str, int] = {}
        self._finished_cq: dict[WorkloadKey, str] = {}
        self.workloads = WorkloadsView(self.records)
        self.admitted = AdmittedView(self.records, self._holding)
        self.nominated = NominatedView(self.records, self._nominated)
        self.queues: dict[str, WorkloadQueue] = {}
        self.backoff_queue = BackoffQueue()
        # Kueue's requeuingStrategy.timestamp: a Workload evicted for PodsReadyTimeout is
        # ordered by that eviction's time ("Eviction", Kueue's default) or by its creation
        # time ("Creation"); blockAdmission holds admissions while one is not PodsReady.
        self.requeuing_timestamp = "Eviction"
        self.block_admission = False
        # KAI-style threshold: priority < threshold ⇒ preemptible (None = off, Kueue's way).
        self.preemptibility_threshold: int | None = None
        # Kueue's `resources`: exclusions and transformations of pod requests, applied to
        # every Workload as it is added, and the quotaCheckStrategy of flavor assignment.
        self.resource_rules: ResourceRules = NO_RULES
        # Per ClusterQueue, why it admits nothing (None: it is active), as
        # `pending.cluster_queue_inactive` found it; cleared whenever a ClusterQueue, a
        # flavor or a Cohort changes (the cycle asks for every queue with a head).
        self.inactive: dict[str, Any] = {}
        # Kueue's fairSharing and admissionFairSharing configuration (None = off).
        self.fair_sharing: FairSharing | None = None
        self._admission_fair_sharing: AdmissionFairSharing | None = None
        # Admission fair sharing's per-LocalQueue history and entry penalties.
        self.usage_ledger = UsageLedger(self._usage_changed)
        # Per ClusterQueue, moves on whenever its admitted Workloads change (one admitted,
        # released, updated, or claimed by a preemptor); keys the preemption engine's
        # per-queue contender lists.
        self.admitted_versions: dict[str, int] = {}
        self.contender_cache: dict[str, tuple[int, Any]] = {}
        # Moves on whenever a nominated preemptor's cover is taken or given back, or it
        # stops waiting for a victim (what a leaving victim `releases` and the awaited
        # victims change only then; a new nomination is covered at once); with
        # `admitted_versions`, keys `claimed_in` per queue and the preemption engine's
        # leaving contenders.
        self.claims_stamp = 0
        self._claimed_cache: dict[str, tuple[int, int, list[WorkloadKey]]] = {}
        self.leaving_cache: dict[WorkloadKey, tuple[int, Any, Any]] = {}
        # Per ClusterQueue whose head found preemption candidates within their minimum
        # runtime: when the first of them becomes preemptible (its queue is tried again).
        self._protected_until: dict[str, float] = {}
        # Cycle step 9: the ClusterQueues whose heads a cycle's admission limit left
        # untried, each with the number of the limited cycle that first passed it over
        # (tried first, longest passed over first, by the next limited cycles).
        self.passed_over: dict[str, int] = {}
        self.limited_cycles = 0

    # -- admission fair sharing ---------------------------------------------------------------

    @property
    def admission_fair_sharing(self) -> AdmissionFairSharing | None:
        """The configuration's admissionFairSharing (None: off)."""
        return self._admission_fair_sharing

    @admission_fair_sharing.setter
    def admission_fair_sharing(self, settings: AdmissionFairSharing | None) -> None:
        self._admission_fair_sharing = settings
        for name in list(self.queues):
            self._rebuild_queue(name)

    def uses_admission_fair_sharing(self, cluster_queue: str) -> bool:
        """Whether the ClusterQueue orders its Workloads by their LocalQueue's usage: its
        admissionMode says so and the configuration has admissionFairSharing."""
        cq = self.cluster_queues.get(cluster_queue)
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
        lq = self.local_queues.get(local_queue)
        return weighted_usage(
            entry.consumed if entry is not None else {},
            entry.penalty if entry is not None else {},
            lq.fair_weight if lq is not None else Fraction(1),
            settings.resource_weights if settings is not None else {},
        )

    def _usage_changed(self, local_queue: str) -> None:
        """A LocalQueue's usage may have changed: its ClusterQueue's queue ranks it again."""
        lq = self.local_queues.get(local_queue)
        queue = self.queues.get(lq.cluster_queue) if lq is not None else None
        if isinstance(queue, AdmissionFairQueue):
            queue.usage_changed(local_queue)

    def settle_admission(self, key: WorkloadKey, now: float) -> None:
        """The Workload was seen back Admitted at `now`: in a ClusterQueue with admission
        fair sharing, its LocalQueue's consumed usage folds in what is admitted now and its
        entry penalty (Kueue settles on every transition into Admitted)."""
        settings = self._admission_fair_sharing
        record = self.records.get(key)
        if settings is None or record is None or record.admission is None:
            return
        if not record.workload.active or not self.uses_admission_fair_sharing(
            record.admission.cluster_queue
        ):
            return
        self.usage_ledger.settle(
            key, self.local_queue_key(key), now, settings.usage_half_life_seconds
        )

    def _new_queue(self, cq: ClusterQueue) -> WorkloadQueue:
        if self.uses_admission_fair_sharing(cq.name):
            return AdmissionFairQueue(
                cq.queueing_strategy, self.local_queue_key, self.local_queue_usage
            )
        return PendingQueue(cq.queueing_strategy)

    def _rebuild_queue(self, name: str) -> None:
        """Give a ClusterQueue the kind of queue its admission mode calls for, with the same
        Workloads (parked ones stay parked)."""
        old = self.queues[name]
        wanted_fair = self.uses_admission_fair_sharing(name)
        if isinstance(old, AdmissionFairQueue) == wanted_fair:
            return
        new = self._new_queue(self.cluster_queues[name])
        for key in list(old.workload_keys()):
            item = self.records[key].order
            if old.is_inadmissible(key):
                new.park(item)
            else:
                new.push(item)
        self.queues[name] = new

    def record(self, key: WorkloadKey) -> WorkloadRecord:
        """The Workload's record; `UnknownWorkload` if the state does not hold it."""
        record = self.records.get(key)
        if record is None:
            raise UnknownWorkload(key)
        return record

    # -- flavors, queues, namespaces, priority classes ---------------------------------------

    # A setter given the object it already holds returns at once: the controller writes
    # queue status, and the watch echoes each write back; a status-only change must not
    # send every parked Workload of the queue back for another assessment.

    def set_flavor(self, flavor: ResourceFlavor) -> None:
        if self.flavors.get(flavor.name) == flavor:
            return
        self.flavors[flavor.name] = flavor
        self.inactive.clear()
        self._retry_using_flavor(flavor.name)

    def remove_flavor(self, name: str) -> None:
        self.flavors.pop(name, None)
        self.inactive.clear()
        self._retry_using_flavor(name)

    def _retry_using_flavor(self, name: str) -> None:
        for cq in self.cluster_queues.values():
            if name in set(cq.flavor_names()):
                self.retry_inadmissible(cq.name)

    def set_cluster_queue(self, cq: ClusterQueue) -> None:
        old = self.cluster_queues.get(cq.name)
        if old == cq:
            return
        self.cluster_queues[cq.name] = cq
        self.inactive.clear()
        self._to_settle.update(self._nominated)
        with self._covers_suspended():
            self.quota.set_cluster_queue(cq.name, cq.cohort, dict(cq.quotas()))
        queue = self.queues.get(cq.name)
        if queue is None:
            self.queues[cq.name] = self._new_queue(cq)
            for lq in self.local_queues.values():
                if lq.cluster_queue == cq.name:
                    self._place_aside(lq.key)
        else:
            queue.strategy = cq.queueing_strategy
            self._rebuild_queue(cq.name)  # its admission mode may have changed
        if cq.stop_policy is StopPolicy.HOLD_AND_DRAIN:
            for key in self._admitted_by_cq.get(cq.name, ()):
                self._request_eviction(key, "ClusterQueueStopped", "The ClusterQueue is stopped")
        if old is not None and old.cohort and old.cohort != cq.cohort:
            self._retry_cohort(old.cohort)
        self.retry_inadmissible(cq.name)

    def remove_cluster_queue(self, name: str) -> None:
        cq = self.cluster_queues.pop(name, None)
        if cq is None:
            return
        self.inactive.clear()
        self._to_settle.update(self._nominated)
        with self._covers_suspended():
            self.quota.remove_cluster_queue(name)
        queue = self.queues.pop(name, None)
        for key in list(queue.workload_keys()) if queue else ():
            self._unqueue(key)
            self._place(key)
        if cq.cohort:
            self._retry_cohort(cq.cohort)

    def set_cohort(self, cohort: Cohort) -> None:
        if self.cohorts.get(cohort.name) == cohort:
            return
        self.cohorts[cohort.name] = cohort
        self.inactive.clear()
        with self._covers_suspended():
            self.quota.set_cohort(cohort.name, cohort.parent, cohort.quotas())
        self._retry_all_cohorts()

    def remove_cohort(self, name: str) -> None:
        if self.cohorts.pop(name, None) is not None:
            self.inactive.clear()
            with self._covers_suspended():
                self.quota.remove_cohort(name)
            self._retry_all_cohorts()

    def _retry_all_cohorts(self) -> None:
        """A Cohort changed: whether its members and those of its parent and children are
        active may have changed (rare; every ClusterQueue in a cohort is tried again)."""
        for cq in self.cluster_queues.values():
            if cq.cohort:
                self.retry_inadmissible(cq.name)

    def set_local_queue(self, lq: LocalQueue) -> None:
        # Admission fair sharing's history is read from the LocalQueue's status when it is
        # first seen (none: it has none yet); later copies carry our own writes.
        self.usage_ledger.seed(lq.key, lq.consumed_status or {})
        old = self.local_queues.get(lq.key)
        if old == lq:
            return
        self.local_queues[lq.key] = lq
        if old is not None and old.fair_weight != lq.fair_weight:
            self._usage_changed(lq.key)
        if old is not None and (
            old.cluster_queue != lq.cluster_queue
            or old.stop_policy != lq.stop_policy
            or old.invalid != lq.invalid
        ):
            self._requeue_local_queue(old)  # a stopped or invalid LocalQueue's wait aside
        if lq.stop_policy is StopPolicy.HOLD_AND_DRAIN:
            for key in [k for k in self.admitted if self.local_queue_key(k) == lq.key]:
                self._request_eviction(key, "LocalQueueStopped", "The LocalQueue is stopped")
        self._place_aside(lq.key)
        self.retry_inadmissible(lq.cluster_queue)

    def remove_local_queue(self, namespace: str, name: str) -> None:
        lq = self.local_queues.pop(f"{namespace}/{name}", None)
        self.usage_ledger.forget(f"{namespace}/{name}")
        if lq is not None:
            self._requeue_local_queue(lq)

    def _requeue_local_queue(self, lq: LocalQueue) -> None:
        queue = self.queues.get(lq.cluster_queue)
        if queue is None:
            return
        for key in [k for k in queue.workload_keys() if self.local_queue_key(k) == lq.key]:
            self._unqueue(key)
            self._place(key)

    def _place_aside(self, lq_key: str) -> None:
        """Offer the Workloads set aside for a LocalQueue its (possibly new) queue again."""
        for key in self._aside.pop(lq_key, set()):
            self._place(key)

    def set_namespace(self, name: str, labels: Mapping[str, str]) -> None:
        new = {**labels, _NAME_LABEL: name}
        if self.namespaces.get(name) == new:
            return
        self.namespaces[name] = new
        for cq in self.cluster_queues:
            self.retry_inadmissible(cq)

    def remove_namespace(self, name: str) -> None:
        self.namespaces.pop(name, None)

    def namespace_labels(self, name: str) -> Mapping[str, str]:
        """A namespace's labels; an unknown namespace still carries its name label."""
        return self.namespaces.get(name) or {_NAME_LABEL: name}

    def set_priority_class(self, cls: PriorityClass) -> None:
        self.priority_classes.set_priority_class(cls)

    def set_workload_priority_class(self, cls: WorkloadPriorityClass) -> None:
        self.priority_classes.set_workload_priority_class(cls)

    # -- workloads ---------------------------------------------------------------------------

    def upsert_workload(self, workload: Workload) -> None:
        """Add or update a Workload. Its priority is resolved once, when first seen (a class
        whose value changes later does not reorder existing Workloads, as in Kueue). Its pod
        sets' requests are taken as `resource_rules` make them (Kueue's `resources`)."""
        workload = self.resource_rules.apply(workload)
        key = workload.key
        record = self.records.get(key)
        if record is None or workload.priority != record.workload.priority:
            priority = self.priority_classes.resolve(workload).value
        else:
            priority = -record.order[0]
        resolution = resolve_preemptibility(
            workload.preemptibility,
            tuple({PREEMPTIBILITY_LABEL: v} if v else {} for v in workload.owner_preemptibility),
            None
            if workload.pod_preemptibility is None
            else {PREEMPTIBILITY_LABEL: workload.pod_preemptibility},
            priority,
            self.preemptibility_threshold,
        )
        order = order_key(
            priority, workload.preemption_cost, self.queue_order_time(workload), workload.uid, key
        )
        if record is None:
            record = self.records[key] = WorkloadRecord(workload, order, resolution)
        else:
            if record.workload.queue_name != workload.queue_name:
                self.usage_ledger.drop_penalty(key)  # settlement looks in the new LocalQueue
            record.workload, record.order, record.resolution = workload, order, resolution
            record.signature = None
        if record.nomination is not None:  # active or not, in a queue that runs or not
            self._to_settle.add(key)
        self._to_settle.update(self._victim_of.get(key, ()))
        if record.holds_quota and (workload.admission != record.admission or workload.finished):
            self._unreserve(record)
        if record.holds_quota:
            if workload.evicted:
                record.phase = Phase.EVICTING
            record.contender = None
            self._touch(record.cluster_queue)
        self._unqueue(key)
        self._count_finished(key, workload)
        if workload.finished:
            self.usage_ledger.drop_penalty(key)  # finished without being seen admitted
            record.phase = Phase.FINISHED
            return
        if record.phase is Phase.FINISHED:
            record.phase = Phase.QUEUED  # Finished was taken back
        if workload.admission is not None and not record.holds_quota:
            self._reserve(record, workload.admission, evicting=workload.evicted)
        elif workload.admission is None:
            self._place(key)
        if not workload.active and not record.holds_quota:
            self.usage_ledger.drop_penalty(key)
        if record.holds_quota and not workload.active:
            target = workload.deactivation_target
            if target is None:
                self._request_eviction(key, "Deactivated", "The workload is deactivated")
            else:  # Kueue: the cause is the DeactivationTarget condition's reason
                message = f"The workload is deactivated due to {target.message}"
                self._request_eviction(key, "Deactivated", message, target.reason)

    def queue_order_time(self, workload: Workload) -> float:
        """Kueue's `GetQueueOrderTimestamp`: the time of an eviction for PodsReadyTimeout
        under requeuingStrategy.timestamp Eviction, else the creation time."""
        eviction = workload.eviction
        if (
            self.requeuing_timestamp == "Eviction"
            and eviction is not None
            and eviction.reason == "PodsReadyTimeout"
        ):
            return eviction.last_transition
        return workload.creation_timestamp

    def remove_workload(self, key: WorkloadKey) -> None:
        """Forget a Workload: its quota, its nomination's hold and its place in a queue."""
        record = self.records.get(key)
        if record is None:
            return
        if record.holds_quota:
            self._unreserve(record)
        self.drop_nomination(key, requeue=False)
        self._unqueue(key)
        self.usage_ledger.drop_penalty(key)
        self._count_finished(key, None)
        del self.records[key]

    def _count_finished(self, key: WorkloadKey, workload: Workload | None) -> None:
        """Keep `live`, `live_in`, `held_back`, `timed` and `finished_in` current for `key`
        (`workload` None: forgotten)."""
        _decrement(self.finished_in, self._finished_cq.pop(key, None))
        _decrement(self.live_in, self.live.pop(key, None))
        self.held_back.pop(key, None)
        self.timed.pop(key, None)
        if workload is None:
            return
        if not workload.finished:
            local_queue = f"{workload.namespace}/{workload.queue_name}"
            self.live[key] = local_queue
            self.live_in[local_queue] = self.live_in.get(local_queue, 0) + 1
            if workload.held_back:
                self.held_back[key] = None
            if may_come_due(workload):
                self.timed[key] = None
            return
        if workload.admission is not None:  # finished without an admission: counted nowhere
            cluster_queue = workload.admission.cluster_queue
            self._finished_cq[key] = cluster_queue
            self.finished_in[cluster_queue] = self.finished_in.get(cluster_queue, 0) + 1

    def holding(self) -> AbstractSet[WorkloadKey]:
        """The keys of the Workloads that hold quota (admitted or being evicted)."""
        return self._holding

    def signature(self, key: WorkloadKey) -> tuple[object, ...]:
        """Everything about a pending Workload that admission and the victim search read,
        except its creation time and identity: two Workloads with equal signatures, offered
        to the same ClusterQueue in the same state, get the same answer (unless the queue's
        policy compares creation times, LowerOrNewerEqualPriority)."""
        record = self.records[key]
        if record.signature is None:
            workload = record.workload
            record.signature = (
                workload.namespace,
                workload.priority_class,
                -record.order[0],
                record.resolution.value,
                tuple(
                    (
                        ps.name,
                        ps.count,
                        ps.min_count,
                        tuple(sorted(ps.requests.items())),
                        tuple(sorted(ps.node_selector.items())),
                        ps.affinity_terms,
                        ps.tolerations,
                    )
                    for ps in workload.pod_sets
                ),
            )
        return record.signature

    def priority_of(self, key: WorkloadKey) -> int:
        return -self.records[key].order[0]

    def order_of(self, key: WorkloadKey) -> OrderKey:
        return self.records[key].order

    def resolution(self, key: WorkloadKey) -> Resolution:
        return self.records[key].resolution

    def queued_in(self, key: WorkloadKey) -> str | None:
        """The ClusterQueue whose pending queue holds the Workload, if any."""
        record = self.records.get(key)
        return record.queued_in if record is not None else None

    def local_queue_key(self, key: WorkloadKey) -> str:
        """`namespace/name` of the Workload's LocalQueue."""
        workload = self.records[key].workload
        return f"{workload.namespace}/{workload.queue_name}"

    def _place(self, key: WorkloadKey) -> None:
        """Queue a pending Workload: behind its backoff, under its LocalQueue's ClusterQueue,
        or, while its LocalQueue is missing or stopped or its ClusterQueue missing, aside
        with that LocalQueue until it changes (`pending.unqueued_reason` says why)."""
        record = self.records[key]
        if record.phase is Phase.NOMINATED or record.workload.held_back:
            return  # waits for its victims, or for `active: true`, a fix or its gates to go
        if record.workload.on_hold:
            return  # Kueue's IsOnHold: put on hold by its job, never requeued
        workload = record.workload
        if workload.requeue_at is not None and key not in self.backoff_queue:
            self.backoff_queue.add(key, workload.requeue_at)
            return
        if key in self.backoff_queue or awaits_backoff_finished(workload):
            return  # Requeued=True (BackoffFinished) is written first: after_admission.py
        lq_key = self.local_queue_key(key)
        lq = self.local_queues.get(lq_key)
        queue = self.queues.get(lq.cluster_queue) if lq else None
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

    def _unqueue(self, key: WorkloadKey) -> None:
        record = self.records.get(key)
        if record is None:
            return
        cq, record.queued_in = record.queued_in, None
        if cq is not None and cq in self.queues:
            self.queues[cq].remove(key)
        self.backoff_queue.remove(key)
        aside = self._aside.get(self.local_queue_key(key))
        if aside is not None:
            aside.discard(key)

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
                cohort = self.quota.cohort_of(name)
                if cohort:
                    self._retry_cohort(cohort)

    def next_timed_retry(self) -> float | None:
        """When a waiting Workload may next be tried without any event: the earliest
        requeueAt or end of a minimum-runtime protection (None: nothing is timed)."""
        times = [at for at in (self.backoff_queue.next_due(), *self._protected_until.values())]
        known = [at for at in times if at is not None]
        return min(known) if known else None

    def release_backoff(self, now: float) -> None:
        """Queue every Workload whose requeueAt has passed."""
        for key in self.backoff_queue.due(now):
            record = self.records.get(key)
            if record is not None:
                record.workload = replace(record.workload, requeue_at=None)
                self._place(key)

    # -- reserved quota ----------------------------------------------------------------------

    def apply_admit(self, admit: Admit) -> None:
        """Reserve quota for an admission decided by the cycle (Kueue "assume")."""
        record = self.record(admit.workload_key)
        if record.holds_quota:
            raise UnknownWorkload(f"{admit.workload_key} already holds quota")
        self._unqueue(record.key)
        record.reason = None
        # The reservation's time is known once the write is seen back; until then it
        # counts as now (a minimum runtime protects it, the ordering takes it as newest).
        record.workload = replace(
            record.workload, admission=admit.admission, evicted=False, quota_reserved_at=None
        )
        if record.key in self.live:
            self.timed[record.key] = None  # admitted now (nothing is due before it is seen)
        self._reserve(record, admit.admission, evicting=False)
        settings = self._admission_fair_sharing
        if settings is not None and self.uses_admission_fair_sharing(admit.cluster_queue):
            # Kueue's entry penalty: the LocalQueue counts as having used a sample's worth
            # of this admission until it is seen back Admitted (`settle_admission`).
            self.usage_ledger.push_penalty(
                self.local_queue_key(record.key),
                record.key,
                settings.entry_penalty(resource_totals((record.usage or {}).items())),
            )

    def _touch(self, cluster_queue: str) -> None:
        self.admitted_versions[cluster_queue] = self.admitted_versions.get(cluster_queue, 0) + 1

    def _reserve(self, record: WorkloadRecord, admission: Admission, evicting: bool) -> None:
        self._touch(admission.cluster_queue)
        usage = admission.usage()
        record.admission, record.usage, record.contender = admission, usage, None
        record.phase = Phase.EVICTING if evicting else Phase.ADMITTED
        self._admitted_by_cq.setdefault(admission.cluster_queue, set()).add(record.key)
        self._holding.add(record.key)
        self.quota.add_usage(admission.cluster_queue, usage)
        self.usage_ledger.reserve(record.key, self.local_queue_key(record.key), usage.items())
        self._recover_for(record.key)
        if evicting:
            return
        cq = self.cluster_queues.get(admission.cluster_queue)
        lq = self.local_queues.get(self.local_queue_key(record.key))
        if cq is not None and cq.stop_policy is StopPolicy.HOLD_AND_DRAIN:
            self._request_eviction(record.key, "ClusterQueueStopped", "The ClusterQueue is stopped")
        elif lq is not None and lq.stop_policy is StopPolicy.HOLD_AND_DRAIN:
            self._request_eviction(record.key, "LocalQueueStopped", "The LocalQueue is stopped")

    def _unreserve(self, record: WorkloadRecord) -> Usage:
        """Return the record's quota; it is QUEUED afterwards (the caller places it)."""
        cluster_queue = record.cluster_queue
        usage = record.usage or {}
        self._touch(cluster_queue)
        self.quota.remove_usage(cluster_queue, usage)
        members = self._admitted_by_cq[cluster_queue]
        members.discard(record.key)
        if not members:
            del self._admitted_by_cq[cluster_queue]
        self._holding.discard(record.key)
        self.usage_ledger.release(record.key)
        record.admission = record.usage = record.eviction = record.contender = None
        self._evictions.discard(record.key)
        record.phase = Phase.QUEUED
        self._recover_for(record.key)
        self.retry_inadmissible(cluster_queue)
        cohort = self.quota.cohort_of(cluster_queue)
        if cohort:
            self._retry_cohort(cohort)
        return usage

    def release(
        self,
        key: WorkloadKey,
        *,
        requeue: bool = True,
    ) -> Usage:
        """Return a Workload's reserved usage (finished, evicted or deleted). With `requeue`
        it becomes pending again at its original place, after its `requeueState.requeueAt`
        if it has one (a PodsReadyTimeout eviction's backoff, controller/core/after_admission.py)."""
        record = self.records.get(key)
        if record is None or not record.holds_quota:
            raise UnknownWorkload(f"{key} holds no quota")
        self.usage_ledger.drop_penalty(key)  # an admission rolled back never settles
        usage = self._unreserve(record)
        workload = replace(record.workload, admission=None, evicted=requeue)
        if requeue:
            record.workload = workload
            self._place(key)
        else:
            record.workload = replace(workload, finished=True)
            record.phase = Phase.FINISHED
            self._count_finished(key, record.workload)
        return usage

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

    def nominate(self, nomination: Nomination) -> None:
        """Hold a preemptor's capacity while its victims release theirs.

        The hold never charges the same capacity twice: where the victims' own usage
        covers the preemptor's, what is counted until they are gone is the larger of the
        two, not their sum (Kueue counts only the victims, and lets a third Workload take
        the capacity the preemptor was waiting for; summing would make the cohort look
        fuller than it will ever be and push other queues into reclaiming). See `_cover`.
        """
        key = nomination.admit.workload_key
        self._unqueue(key)
        record = self.record(key)
        record.nomination, record.phase = nomination, Phase.NOMINATED
        self._nominated.add(key)
        self.quota.add_usage(nomination.admit.cluster_queue, nomination.usage)
        for victim in nomination.victims:
            self._victim_of.setdefault(victim.workload_key, set()).add(key)
            held = self.records.get(victim.workload_key)
            if held is not None and held.holds_quota and victim.whole:
                held.phase = Phase.EVICTING
                self._touch(held.cluster_queue)
                # Only whole victims cover a hold; several preemptors may wait for one.
                if victim.workload_key not in self._awaited_by:
                    self._awaited_queue[victim.workload_key] = held.cluster_queue
                    self._awaited_in.setdefault(held.cluster_queue, set()).add(victim.workload_key)
                self._awaited_by.setdefault(victim.workload_key, set()).add(key)
        self._to_settle.add(key)
        self._cover(key)

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
        record = self.records[key]
        nomination = record.nomination
        assert nomination is not None
        queue = nomination.admit.cluster_queue
        tree = self.quota
        own_victims: list[tuple[WorkloadKey, Mapping[tuple[str, str], int], str | None]] = []
        other_victims: list[tuple[WorkloadKey, Mapping[tuple[str, str], int], str | None]] = []
        for victim in nomination.victims:
            held = self.records.get(victim.workload_key)
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
                    and tree.credit_reaches(self.records[victim_key].cluster_queue, lca, fr)
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
        record = self.records.get(key)
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
        if cover.own:
            self.quota.add_usage(record.nomination.admit.cluster_queue, cover.own)
        for cohort, credit in cover.pool.items():
            self.quota.credit_pool(cohort, credit, sign=-1)

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
                nomination = self.records[key].nomination
                assert nomination is not None
                out.append(Release(nomination.admit.cluster_queue, dict(parts), pool=False))
            else:
                out.append(Release(cohort, dict(parts), pool=True))
        return tuple(out)

    @contextmanager
    def _covers_suspended(self) -> Iterator[None]:
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

    def _recover_for(self, victim: WorkloadKey) -> None:
        """A victim's quota changed: recompute the covers of the preemptors waiting for it,
        and look at its preemptors again in the next cycle (they may be done or dropped)."""
        self._to_settle.update(self._victim_of.get(victim, ()))
        keys = [key for key in sorted(self._awaited_by.get(victim, ())) if key in self._covers]
        for key in keys:
            self._uncover(key)
        for key in keys:
            self._cover(key)

    def _end_nomination(self, record: WorkloadRecord) -> Nomination:
        """Return a nomination's hold in full and forget it (the record is QUEUED)."""
        key = record.key
        self._uncover(key)
        nomination, record.nomination = record.nomination, None
        assert nomination is not None
        self._nominated.discard(key)
        record.phase = Phase.QUEUED
        self.quota.remove_usage(nomination.admit.cluster_queue, nomination.usage)
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
                    self.leaving_cache.pop(victim.workload_key, None)
                    queue = self._awaited_queue.pop(victim.workload_key)
                    in_queue = self._awaited_in[queue]
                    in_queue.discard(victim.workload_key)
                    if not in_queue:
                        del self._awaited_in[queue]
                held = self.records.get(victim.workload_key)
                if held is not None and held.holds_quota:
                    self._touch(held.cluster_queue)  # its candidate changes
        return nomination

    def nominations_to_settle(self) -> frozenset[WorkloadKey]:
        """The nominated preemptors the next cycle will look at again (not taken)."""
        return frozenset(self._to_settle & self._nominated)

    def take_nominations_to_settle(self) -> list[WorkloadKey]:
        """The nominated preemptors to look at again (in key order), forgotten once taken:
        those something they wait on changed for — a victim's quota or eviction, the
        preemptor itself, a ClusterQueue — since they were last looked at. The others can
        neither be admitted nor dropped (`nominations.settle_nominations`)."""
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
        version = self.admitted_versions.get(cluster_queue, 0)
        cached = self._claimed_cache.get(cluster_queue)
        if cached is not None and cached[0] == self.claims_stamp and cached[1] == version:
            return cached[2]
        out = []
        for key in sorted(keys):
            held = self.records.get(key)
            if held is not None and held.holds_quota and held.cluster_queue == cluster_queue:
                out.append(key)
        self._claimed_cache[cluster_queue] = (self.claims_stamp, version, out)
        return out

    def drop_nomination(self, key: WorkloadKey, requeue: bool = True) -> Nomination | None:
        """Give up a nomination (infeasible, or the preemptor is gone): its hold is returned."""
        record = self.records.get(key)
        if record is None or record.nomination is None:
            return None
        nomination = self._end_nomination(record)
        self.retry_inadmissible(nomination.admit.cluster_queue)
        if requeue:
            self._place(key)
        return nomination

    def admit_nominated(self, key: WorkloadKey) -> Admit:
        """The victims are gone: the held capacity becomes the preemptor's reservation."""
        record = self.record(key)
        if record.nomination is None:
            raise UnknownWorkload(f"{key} is not nominated")
        nomination = self._end_nomination(record)
        self.apply_admit(nomination.admit)
        return nomination.admit

    def admitted_in(self, cluster_queue: str) -> frozenset[WorkloadKey]:
        return frozenset(self._admitted_by_cq.get(cluster_queue, ()))

    # -- evictions and retries ---------------------------------------------------------------

    def _request_eviction(
        self, key: WorkloadKey, reason: str, message: str, cause: str = ""
    ) -> None:
        record = self.records.get(key)
        if record is not None and record.phase is Phase.ADMITTED:
            record.eviction = (reason, message, cause)
            self._evictions.add(key)

    def take_evictions(self) -> list[Evict]:
        """Evictions to issue now; each is issued once (the Workload keeps its quota until
        `release`)."""
        out: list[Evict] = []
        for key in sorted(self._evictions):
            record = self.records[key]
            if record.eviction is None or record.phase is not Phase.ADMITTED:
                continue
            (reason, message, cause), record.eviction = record.eviction, None
            record.phase = Phase.EVICTING
            self._touch(record.cluster_queue)
            record.workload = replace(record.workload, evicted=True)
            out.append(Evict(key, record.cluster_queue, reason, message, cause))
        self._evictions.clear()
        return out

    def cancel_eviction(self, key: WorkloadKey) -> None:
        """An eviction could not be recorded: the Workload keeps running as admitted, and a
        preemptor waiting for it plans again in the next cycle."""
        record = self.records.get(key)
        if record is None or record.phase is not Phase.EVICTING:
            return
        record.phase = Phase.ADMITTED
        record.workload = replace(record.workload, evicted=False)
        record.contender = None
        self._touch(record.cluster_queue)
        self._recover_for(key)  # it no longer covers its preemptor's hold

    def retry_inadmissible(self, cluster_queue: str) -> None:
        queue = self.queues.get(cluster_queue)
        if queue is not None:
            queue.retry_inadmissible()

    def _retry_cohort(self, cohort: str) -> None:
        for member in self.quota.members(cohort):
            self.retry_inadmissible(member)

    def pending(self, among: Iterable[WorkloadKey] | None = None) -> Iterator[WorkloadKey]:
        """Keys of every Workload that neither holds quota nor is finished (among `live`:
        the finished ones, most of a long run's, are not looked at), or of those `among`
        the given unfinished keys."""
        records = self.records
        for key in self.live if among is None else among:
            phase = records[key].phase
            if phase is Phase.QUEUED or phase is Phase.NOMINATED:
                yield key


def namespace_matches(state: ClusterState, cq: ClusterQueue, namespace: str) -> bool:
    """Kueue: a null namespaceSelector admits no namespace; `{}` admits all."""
    if cq.namespace_selector is None:
        return False
    return cq.namespace_selector.matches(state.namespace_labels(namespace) or EMPTY_LABELS)


def _decrement(counts: dict[str, int], name: str | None) -> None:
    """One fewer under `name` (None: nothing); a count that reaches zero goes."""
    if name is None:
        return
    left = counts[name] - 1
    if left:
        counts[name] = left
    else:
        del counts[name]
