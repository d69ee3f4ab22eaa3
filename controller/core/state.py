"""The cluster as the admission engine knows it, kept incrementally, in six parts:

- `objects` (controller/core/cache/objects.py): the flavors, queues, Cohorts, namespaces
  and priority classes, and whether each queue is active;
- `cache` (controller/core/cache/reservations.py): one record per Workload (its phase says
  whether it is queued, nominated, admitted, being evicted or finished) and the quota the
  admitted ones reserve through the tree of Cohorts;
- `queues` (controller/core/queue/manager.py): where each pending Workload waits, its
  backoff, the retries of parked ones, admission fair sharing's usage;
- `holds` (controller/core/preemption/holds.py): what nominated preemptors hold while
  their victims leave;
- `index` (controller/core/cache/status_index.py): the counts the status writers read;
- `tas` (controller/core/tas/cache.py): topology-aware scheduling's Topologies, nodes,
  the usage of the pods it does not place and of the TAS Workloads holding quota.

`ClusterState` is what the watches and the cycle change: each `set_*`, `remove_*`,
`upsert_workload`, admission or release says, in one place, what it means for each part —
quota totals of one ClusterQueue and its cohort, one pending queue, the parked Workloads a
change may unblock. Reading goes to the parts directly. Time is passed in.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from typing import Any

from api.constants import PREEMPTIBILITY_LABEL, StopPolicy
from api.workload_status import Admission
from controller.core.afs.usage import AdmissionFairSharing
from controller.core.cache.objects import ObjectStore
from controller.core.cache.records import Phase, WorkloadRecord
from controller.core.cache.reservations import ReservationCache, UnknownWorkload
from controller.core.cache.status_index import StatusIndex
from controller.core.decisions import Admit, Evict, Nomination
from controller.core.fairsharing.settings import FairSharing
from controller.core.model.admission_checks import AdmissionCheck
from controller.core.model.clusterqueues import ClusterQueue, LocalQueue
from controller.core.model.cohorts import Cohort
from controller.core.model.flavors import ResourceFlavor
from controller.core.model.from_api import CoreObject, Namespace
from controller.core.model.priorities import (
    PriorityClass,
    WorkloadPriorityClass,
    parse_priority_boost,
)
from controller.core.model.resource_rules import NO_RULES, ResourceRules
from controller.core.model.topology import Node, Topology
from controller.core.model.workloads import Usage, Workload, WorkloadKey, order_key
from controller.core.preemption.holds import PreemptionHolds
from controller.core.preemption.preemptibility import resolve_preemptibility
from controller.core.queue.manager import QueueManager
from controller.core.tas.cache import TASCache
from controller.core.tas.holds import NodeHolds
from controller.core.tas.node_failure import FailedNodes, admission_nodes

__all__ = ["ClusterState", "UnknownWorkload"]


class ClusterState:
    """The engine's parts, and what each change of the cluster does to them."""

    def __init__(self) -> None:
        self.objects = ObjectStore()
        self.cache = ReservationCache()
        self.queues = QueueManager(self.cache.records, self.objects, self.cache.quota)
        self.holds = PreemptionHolds(self.cache)
        self.index = StatusIndex()
        self.tas = TASCache(self.objects.flavors)
        # Failed nodes under admitted TAS Workloads (controller/core/tas/node_failure.py;
        # the cycle replaces or evicts: controller/core/scheduler/node_failures.py).
        self.failed_nodes = FailedNodes()
        self.node_holds = NodeHolds(self.tas, self._leaving)
        self._evictions: set[WorkloadKey] = set()  # records with an eviction to issue
        # Kueue's requeuingStrategy.timestamp: a Workload evicted for PodsReadyTimeout is
        # ordered by that eviction's time ("Eviction", Kueue's default) or by its creation
        # time ("Creation"); blockAdmission holds admissions while one is not PodsReady.
        self.requeuing_timestamp = "Eviction"
        self.block_admission = False
        # KAI-style threshold: priority < threshold ⇒ preemptible (None = off, Kueue's way).
        self.preemptibility_threshold: int | None = None
        # Kueue's PriorityBoost gate: the `kueue.x-k8s.io/priority-boost` annotation adds to
        # the priority the engine orders and preempts by (docs/priority-boost.md).
        self.priority_boost = False
        # Kueue's `resources`: exclusions and transformations of pod requests, applied to
        # every Workload as it is added, and the quotaCheckStrategy of flavor assignment.
        self.resource_rules: ResourceRules = NO_RULES
        # Kueue's fairSharing configuration (None = off).
        self.fair_sharing: FairSharing | None = None

    @property
    def admission_fair_sharing(self) -> AdmissionFairSharing | None:
        """Kueue's admissionFairSharing configuration (None: off); the queues hold it."""
        return self.queues.admission_fair_sharing

    @admission_fair_sharing.setter
    def admission_fair_sharing(self, settings: AdmissionFairSharing | None) -> None:
        self.queues.admission_fair_sharing = settings

    def apply(self, obj: CoreObject) -> None:
        """Add or update an object converted from the API (controller/core/model/from_api.py)."""
        if isinstance(obj, ResourceFlavor):
            self.set_flavor(obj)
        elif isinstance(obj, ClusterQueue):
            self.set_cluster_queue(obj)
        elif isinstance(obj, Cohort):
            self.set_cohort(obj)
        elif isinstance(obj, AdmissionCheck):
            self.set_admission_check(obj)
        elif isinstance(obj, LocalQueue):
            self.set_local_queue(obj)
        elif isinstance(obj, WorkloadPriorityClass):
            self.set_workload_priority_class(obj)
        elif isinstance(obj, PriorityClass):
            self.set_priority_class(obj)
        elif isinstance(obj, Namespace):
            self.set_namespace(obj.name, obj.labels)
        elif isinstance(obj, Topology):
            self.set_topology(obj)
        elif isinstance(obj, Node):
            self.set_node(obj)
        else:
            self.upsert_workload(obj)

    # -- flavors, queues, namespaces, priority classes ---------------------------------------

    # A setter given the object it already holds returns at once: the controller writes
    # queue status, and the watch echoes each write back; a status-only change must not
    # send every parked Workload of the queue back for another assessment.

    def set_flavor(self, flavor: ResourceFlavor) -> None:
        old = self.objects.flavors.get(flavor.name)
        if old == flavor:
            return
        self.objects.set_flavor(flavor)
        self.tas.flavor_changed()
        if (old.topology_name if old else None) != flavor.topology_name:
            self._recount_topology_usage(flavor.name)
        self.queues.retry_using_flavor(flavor.name)

    def remove_flavor(self, name: str) -> None:
        old = self.objects.flavors.get(name)
        self.objects.remove_flavor(name)
        self.tas.flavor_changed()
        if old is not None and old.topology_name is not None:
            self._recount_topology_usage(name)
        self.queues.retry_using_flavor(name)

    def _recount_topology_usage(self, flavor: str) -> None:
        """What the admitted Workloads using `flavor` take on its nodes, counted again: a
        Workload seen before its flavor (a watch event while a new leader lists the flavors)
        or a flavor that gained or lost its Topology would otherwise be counted wrongly."""
        for key, record in self.cache.records.items():
            admission = record.admission
            if not record.holds_quota or admission is None:
                continue
            if any(flavor in psa.flavors.values() for psa in admission.pod_set_assignments):
                self.tas.unreserve(key)
                self.tas.reserve(key, admission, record.workload.pod_sets)

    # -- topology-aware scheduling: Topologies, nodes, the pods it does not place ----------

    # Each change may let a parked TAS Workload fit: the queues using a TAS flavor retry.

    def set_topology(self, topology: Topology) -> None:
        if self.tas.topologies.get(topology.name) == topology:
            return
        self.tas.set_topology(topology)
        self._retry_tas()

    def remove_topology(self, name: str) -> None:
        self.tas.remove_topology(name)
        self._retry_tas()

    def set_node(self, node: Node) -> None:
        if self.tas.nodes.get(node.name) == node:
            return
        self.tas.set_node(node)
        self.failed_nodes.node_changed(node, node.name)
        self._retry_tas()

    def remove_node(self, name: str) -> None:
        self.tas.remove_node(name)
        self.failed_nodes.node_changed(None, name)
        self._retry_tas()

    def mark_nodes_listed(self) -> None:
        """The node view has been fully listed: a node an admitted Workload's assignment
        names that is not in it was deleted unseen (while no controller watched)."""
        if self.failed_nodes.nodes_listed:
            return
        self.failed_nodes.nodes_listed = True
        for key in self.cache.admitted:
            self._look_at_nodes_of(self.cache.records[key])

    def _look_at_nodes_of(self, record: WorkloadRecord) -> None:
        """An Admitted Workload's assigned nodes that are failing or missing, to be judged
        (again) for it: before it was Admitted it was left out."""
        if not record.admitted or record.admission is None:
            return
        failed = self.failed_nodes
        for name in admission_nodes(record.admission):
            if name in failed.suspects or (failed.nodes_listed and not self.tas.has_node(name)):
                failed.look_again(name)

    def set_tas_pod(self, key: str, node: str, workload: WorkloadKey) -> None:
        """A TAS pod of `workload` running on `node` (bound, not finished, not deleted)."""
        self.failed_nodes.set_pod(key, node, workload)

    def remove_tas_pod(self, key: str) -> None:
        self.failed_nodes.remove_pod(key)

    def request_eviction(self, key: WorkloadKey, reason: str, message: str) -> None:
        """Evict an admitted Workload in this cycle (a failed node's, without replacement)."""
        self._request_eviction(key, reason, message)

    def apply_replacement(self, key: WorkloadKey, admission: Admission) -> None:
        """An admitted TAS Workload's new topology assignments (a failed node replaced):
        the same quota, its pods counted on the new nodes."""
        record = self.cache.record(key)
        record.admission = admission
        record.workload = replace(record.workload, admission=admission)
        self.tas.reserve(key, admission, record.workload.pod_sets)

    def set_pod(self, key: str, node: str, requests: Mapping[str, int]) -> None:
        """A running pod that is not a TAS pod, on `node` (its usage counts in the view)."""
        self.tas.set_pod(key, node, requests)
        self._retry_tas()

    def remove_pod(self, key: str) -> None:
        self.tas.remove_pod(key)
        self._retry_tas()

    def _leaving(self, key: WorkloadKey) -> bool:
        record = self.cache.records.get(key)
        return record is not None and record.evicting and record.holds_quota

    def _retry_tas(self) -> None:
        for name, flavor in self.objects.flavors.items():
            if flavor.topology_name is not None:
                self.queues.retry_using_flavor(name)

    def set_cluster_queue(self, cq: ClusterQueue) -> None:
        old = self.objects.cluster_queues.get(cq.name)
        if old == cq:
            return
        self.objects.set_cluster_queue(cq)
        self.holds.settle_all()
        with self.holds.suspended():
            self.cache.quota.set_cluster_queue(cq.name, cq.cohort, dict(cq.quotas()))
        self.queues.add_cluster_queue(cq)
        if cq.stop_policy is StopPolicy.HOLD_AND_DRAIN:
            for key in self.cache.admitted_in(cq.name):
                self._request_eviction(key, "ClusterQueueStopped", "The ClusterQueue is stopped")
        if old is not None and old.cohort and old.cohort != cq.cohort:
            self.queues.retry_cohort(old.cohort)
        self.queues.retry_inadmissible(cq.name)

    def remove_cluster_queue(self, name: str) -> None:
        cq = self.objects.remove_cluster_queue(name)
        if cq is None:
            return
        self.holds.settle_all()
        with self.holds.suspended():
            self.cache.quota.remove_cluster_queue(name)
        self.queues.remove_cluster_queue(name)
        if cq.cohort:
            self.queues.retry_cohort(cq.cohort)

    def set_admission_check(self, check: AdmissionCheck) -> None:
        if self.objects.admission_checks.get(check.name) == check:
            return
        self.objects.set_admission_check(check)
        self._retry_naming_check(check.name)

    def remove_admission_check(self, name: str) -> None:
        if self.objects.remove_admission_check(name):
            self._retry_naming_check(name)

    def _retry_naming_check(self, name: str) -> None:
        """A ClusterQueue naming the check may have turned active or inactive."""
        for cq in self.objects.cluster_queues.values():
            if any(rule.name == name for rule in cq.admission_checks):
                self.queues.retry_inadmissible(cq.name)

    def set_cohort(self, cohort: Cohort) -> None:
        if self.objects.cohorts.get(cohort.name) == cohort:
            return
        self.objects.set_cohort(cohort)
        with self.holds.suspended():
            self.cache.quota.set_cohort(cohort.name, cohort.parent, cohort.quotas())
        self.queues.retry_in_cohorts()

    def remove_cohort(self, name: str) -> None:
        if self.objects.remove_cohort(name):
            with self.holds.suspended():
                self.cache.quota.remove_cohort(name)
            self.queues.retry_in_cohorts()

    def set_local_queue(self, lq: LocalQueue) -> None:
        # Admission fair sharing's history is read from the LocalQueue's status when it is
        # first seen (none: it has none yet); later copies carry our own writes.
        self.queues.usage_ledger.seed(lq.key, lq.consumed_status or {})
        old = self.objects.local_queues.get(lq.key)
        if old == lq:
            return
        self.objects.set_local_queue(lq)
        if old is not None and old.fair_weight != lq.fair_weight:
            self.queues.local_queue_weight_changed(lq.key)
        if old is not None and (
            old.cluster_queue != lq.cluster_queue
            or old.stop_policy != lq.stop_policy
            or old.invalid != lq.invalid
        ):
            self.queues.requeue_local_queue(old)  # a stopped or invalid LocalQueue's wait aside
        if lq.stop_policy is StopPolicy.HOLD_AND_DRAIN:
            records = self.cache.records
            for key in [k for k in self.cache.admitted if records[k].local_queue == lq.key]:
                self._request_eviction(key, "LocalQueueStopped", "The LocalQueue is stopped")
        self.queues.place_aside(lq.key)
        self.queues.retry_inadmissible(lq.cluster_queue)

    def remove_local_queue(self, namespace: str, name: str) -> None:
        lq = self.objects.remove_local_queue(f"{namespace}/{name}")
        self.queues.usage_ledger.forget(f"{namespace}/{name}")
        if lq is not None:
            self.queues.requeue_local_queue(lq)

    def set_namespace(self, name: str, labels: Mapping[str, str]) -> None:
        if self.objects.set_namespace(name, labels):
            self.queues.retry_all()

    def remove_namespace(self, name: str) -> None:
        self.objects.remove_namespace(name)

    def set_priority_class(self, cls: PriorityClass) -> None:
        self.objects.priority_classes.set_priority_class(cls)

    def set_workload_priority_class(self, cls: WorkloadPriorityClass) -> None:
        self.objects.priority_classes.set_workload_priority_class(cls)

    # -- workloads ---------------------------------------------------------------------------

    def boost_of(self, workload: Workload) -> int:
        """What the priority boost adds to the Workload's priority: 0 with the gate off, a
        missing or unreadable annotation (Kueue's `EffectivePriority`)."""
        if not self.priority_boost or workload.priority_boost is None:
            return 0
        try:
            return parse_priority_boost(workload.priority_boost)
        except ValueError:
            return 0

    def upsert_workload(self, workload: Workload) -> None:
        """Add or update a Workload. Its priority is resolved once, when first seen (a class
        whose value changes later does not reorder existing Workloads, as in Kueue). Its pod
        sets' requests are taken as `resource_rules` make them (Kueue's `resources`)."""
        workload = self.resource_rules.apply(workload)
        cache, queues, ledger = self.cache, self.queues, self.queues.usage_ledger
        key = workload.key
        record = cache.records.get(key)
        was_admitted = record is not None and record.workload.admitted
        if (
            record is None
            or workload.priority != record.workload.priority
            or workload.priority_boost != record.workload.priority_boost
        ):
            base = self.objects.priority_classes.resolve(workload).value
            priority = base + self.boost_of(workload)
        else:
            priority = -record.order[0]
            base = priority - self.boost_of(workload)
        resolution = resolve_preemptibility(
            workload.preemptibility,
            tuple({PREEMPTIBILITY_LABEL: v} if v else {} for v in workload.owner_preemptibility),
            None
            if workload.pod_preemptibility is None
            else {PREEMPTIBILITY_LABEL: workload.pod_preemptibility},
            base,  # the threshold reads the class's priority, not a boost (docs/priority-boost.md)
            self.preemptibility_threshold,
        )
        order = order_key(
            priority, workload.preemption_cost, self.queue_order_time(workload), workload.uid, key
        )
        if record is None:
            record = cache.records[key] = WorkloadRecord(workload, order, resolution)
        else:
            if record.workload.queue_name != workload.queue_name:
                ledger.drop_penalty(key)  # settlement looks in the new LocalQueue
            record.update(workload, order, resolution)
        self.holds.workload_changed(record)
        if record.holds_quota and (workload.admission != record.admission or workload.finished):
            self._unreserve(record)
        if record.holds_quota:
            if workload.evicted:
                record.phase = Phase.EVICTING
            cache.touch(record.cluster_queue)
        queues.unqueue(key)
        self.index.update(key, workload)
        if workload.finished:
            ledger.drop_penalty(key)  # finished without being seen admitted
            record.phase = Phase.FINISHED
            return
        if record.phase is Phase.FINISHED:
            record.phase = Phase.QUEUED  # Finished was taken back
        if workload.admission is not None and not record.holds_quota:
            self._reserve(record, workload.admission, evicting=workload.evicted)
        elif workload.admission is None:
            queues.place(key)
        if not workload.active and not record.holds_quota:
            ledger.drop_penalty(key)
        if record.holds_quota and not workload.active:
            target = workload.deactivation_target
            if target is None:
                self._request_eviction(key, "Deactivated", "The workload is deactivated")
            else:  # Kueue: the cause is the DeactivationTarget condition's reason
                message = f"The workload is deactivated due to {target.message}"
                self._request_eviction(key, "Deactivated", message, target.reason)
        if record.admitted and record.admission:
            if workload.unhealthy_nodes:
                # Waiting for a failed node's replacement, as written before a restart.
                nodes = admission_nodes(record.admission)
                self.failed_nodes.recover(key, workload.unhealthy_nodes, nodes)
            if not was_admitted:
                self._look_at_nodes_of(record)

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
        record = self.cache.records.get(key)
        if record is None:
            return
        if record.holds_quota:
            self._unreserve(record)
        self.drop_nomination(key, requeue=False)
        self.queues.unqueue(key)
        self.queues.usage_ledger.drop_penalty(key)
        self.index.update(key, None)
        del self.cache.records[key]

    def settle_admission(self, key: WorkloadKey, now: float) -> None:
        """The Workload was seen back Admitted at `now` (admission fair sharing settles its
        entry penalty: `QueueManager.settle_admission`)."""
        self.queues.settle_admission(key, now)

    def pending(self, among: Iterable[WorkloadKey] | None = None) -> Iterator[WorkloadKey]:
        """Keys of every Workload that neither holds quota nor is finished (among the
        unfinished ones the index keeps: the finished ones, most of a long run's, are not
        looked at), or of those `among` the given unfinished keys."""
        records = self.cache.records
        for key in self.index.live if among is None else among:
            phase = records[key].phase
            if phase is Phase.QUEUED or phase is Phase.NOMINATED:
                yield key

    def release_backoff(self, now: float) -> None:
        """Queue every Workload whose requeueAt has passed."""
        for key in self.queues.backoff.due(now):
            record = self.cache.records.get(key)
            if record is not None:
                record.workload = replace(record.workload, requeue_at=None)
                self.queues.place(key)

    # -- reserved quota ----------------------------------------------------------------------

    def apply_admit(self, admit: Admit) -> None:
        """Reserve quota for an admission decided by the cycle (Kueue "assume")."""
        record = self.cache.record(admit.workload_key)
        if record.holds_quota:
            raise UnknownWorkload(f"{admit.workload_key} already holds quota")
        self.queues.unqueue(record.key)
        record.reason = None
        # The reservation's time is known once the write is seen back; until then it
        # counts as now (a minimum runtime protects it, the ordering takes it as newest).
        record.workload = replace(
            record.workload, admission=admit.admission, evicted=False, quota_reserved_at=None
        )
        self.index.admitted_now(record.key)
        self.holds.readmitted(record.key)
        self._reserve(record, admit.admission, evicting=False)
        self.queues.push_entry_penalty(record, admit.cluster_queue)

    def release(self, key: WorkloadKey, *, requeue: bool = True) -> Usage:
        """Return a Workload's reserved usage (finished, evicted or deleted). With `requeue`
        it becomes pending again at its original place, after its `requeueState.requeueAt`
        if it has one (a PodsReadyTimeout eviction's backoff, controller/core/after_admission.py)."""
        record = self.cache.records.get(key)
        if record is None or not record.holds_quota:
            raise UnknownWorkload(f"{key} holds no quota")
        self.queues.usage_ledger.drop_penalty(key)  # an admission rolled back never settles
        usage = self._unreserve(record)
        workload = replace(record.workload, admission=None, evicted=requeue)
        if requeue:
            record.workload = workload
            self.queues.place(key)
        else:
            record.workload = replace(workload, finished=True)
            record.phase = Phase.FINISHED
            self.index.update(key, record.workload)
        return usage

    def _reserve(self, record: WorkloadRecord, admission: Admission, evicting: bool) -> None:
        usage = self.cache.reserve(record, admission, evicting)
        self.tas.reserve(record.key, admission, record.workload.pod_sets)
        self.node_holds.victim_changed(record.key)
        self.queues.usage_ledger.reserve(record.key, record.local_queue, usage.items())
        self.holds.recover_for(record.key)
        if evicting:
            return
        cq = self.objects.cluster_queues.get(admission.cluster_queue)
        lq = self.objects.local_queues.get(record.local_queue)
        if cq is not None and cq.stop_policy is StopPolicy.HOLD_AND_DRAIN:
            self._request_eviction(record.key, "ClusterQueueStopped", "The ClusterQueue is stopped")
        elif lq is not None and lq.stop_policy is StopPolicy.HOLD_AND_DRAIN:
            self._request_eviction(record.key, "LocalQueueStopped", "The LocalQueue is stopped")

    def _unreserve(self, record: WorkloadRecord) -> Usage:
        """Return the record's quota; it is QUEUED afterwards (the caller places it)."""
        cluster_queue = record.cluster_queue
        usage = self.cache.unreserve(record)
        self.tas.unreserve(record.key)
        self.node_holds.victim_changed(record.key)
        self.queues.usage_ledger.release(record.key)
        self._evictions.discard(record.key)
        self.holds.recover_for(record.key)
        self.queues.retry_inadmissible(cluster_queue)
        cohort = self.cache.quota.cohort_of(cluster_queue)
        if cohort:
            self.queues.retry_cohort(cohort)
        return usage

    # -- nominations -------------------------------------------------------------------------

    def nominate(self, nomination: Nomination) -> None:
        """Hold a preemptor's capacity while its victims release theirs (controller/core/
        preemption/holds.py)."""
        key = nomination.admit.workload_key
        self.queues.unqueue(key)
        self.holds.nominate(nomination)
        if nomination.topology is not None:  # its place on the nodes, held too
            admission = nomination.admit.with_topology(nomination.topology).admission
            plan = self.tas.admission_usage(admission, self.cache.records[key].workload.pod_sets)
            self.node_holds.hold(key, plan, (v.workload_key for v in nomination.victims))

    def drop_nomination(self, key: WorkloadKey, requeue: bool = True) -> Nomination | None:
        """Give up a nomination (infeasible, or the preemptor is gone): its hold is returned."""
        record = self.cache.records.get(key)
        if record is None or record.nomination is None:
            return None
        nomination = self.holds.end(record)
        self.node_holds.release(key)
        if nomination.topology is not None:  # the room it held on the nodes is free
            self._retry_tas()
        self.queues.retry_inadmissible(nomination.admit.cluster_queue)
        if requeue:
            self.queues.place(key)
        return nomination

    def admit_nominated(
        self, key: WorkloadKey, topology: Mapping[str, Mapping[str, Any]] | None = None
    ) -> Admit:
        """The victims are gone: the held capacity becomes the preemptor's reservation
        (with its pod sets' `topology` assignments, when it has TAS pod sets)."""
        record = self.cache.record(key)
        if record.nomination is None:
            raise UnknownWorkload(f"{key} is not nominated")
        nomination = self.holds.end(record)
        self.node_holds.release(key)
        admit = nomination.admit if topology is None else nomination.admit.with_topology(topology)
        self.apply_admit(admit)
        return admit

    # -- evictions ---------------------------------------------------------------------------

    def _request_eviction(
        self, key: WorkloadKey, reason: str, message: str, cause: str = ""
    ) -> None:
        record = self.cache.records.get(key)
        if record is not None and record.phase is Phase.ADMITTED:
            record.eviction = (reason, message, cause)
            self._evictions.add(key)

    def take_evictions(self) -> list[Evict]:
        """Evictions to issue now (a stopped queue draining, a Workload deactivated); each
        is issued once (the Workload keeps its quota until `release`)."""
        out: list[Evict] = []
        records = self.cache.records
        for key in sorted(self._evictions):
            record = records[key]
            if record.eviction is None or record.phase is not Phase.ADMITTED:
                continue
            (reason, message, cause), record.eviction = record.eviction, None
            self.cache.mark_evicting(record)
            record.workload = replace(record.workload, evicted=True)
            out.append(Evict(key, record.cluster_queue, reason, message, cause))
        self._evictions.clear()
        return out

    def cancel_eviction(self, key: WorkloadKey) -> None:
        """An eviction could not be recorded: the Workload keeps running as admitted, and a
        preemptor waiting for it plans again in the next cycle."""
        record = self.cache.records.get(key)
        if record is None or record.phase is not Phase.EVICTING:
            return
        self.cache.cancel_eviction(record)
        self.holds.recover_for(key)  # it no longer covers its preemptor's hold
        self.node_holds.victim_changed(key)
