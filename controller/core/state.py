"""The cluster as the admission engine knows it, kept incrementally.

Every `set_*`/`remove_*` touches only what the object affects: quota totals of the
(flavor, resource) pairs of one ClusterQueue and its cohort, one pending queue, or the
inadmissible Workloads that a change may unblock. Reserved usage lives in `quota`
(a `QuotaTree`): it is added once when quota is reserved (`apply_admit`, or a Workload
that arrives already admitted) and removed once when it is released (`release`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from api.constants import PREEMPTIBILITY_LABEL
from api.workload_status import Admission
from controller.core.clusterqueues import ClusterQueue, LocalQueue, StopPolicy
from controller.core.cohorts import QuotaTree
from controller.core.decisions import Admit, Evict, Nomination
from controller.core.flavors import ResourceFlavor
from controller.core.preemptibility import Resolution, resolve_preemptibility
from controller.core.priorities import PriorityClass, PriorityClasses, WorkloadPriorityClass
from controller.core.queues import BackoffPolicy, BackoffQueue, OrderKey, PendingQueue, order_key
from controller.core.selectors import EMPTY_LABELS
from controller.core.workloads import Usage, Workload

__all__ = ["AdmittedWorkload", "ClusterState", "Inactive", "UnknownWorkload", "Unqueued"]

_NAME_LABEL = "kubernetes.io/metadata.name"


@dataclass(frozen=True, slots=True)
class Inactive:
    """Why a ClusterQueue or LocalQueue admits nothing now: its `Active=False` reason, as
    Kueue names it (Stopped, FlavorNotFound, ClusterQueueDoesNotExist,
    ClusterQueueIsInactive), and a message."""

    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Unqueued:
    """Why a pending Workload is in no active queue: Kueue's `QuotaReserved=False` reason
    (Deactivated, Misconfigured, Suspended) and message (Kueue's text, with detail)."""

    reason: str
    message: str


class UnknownWorkload(KeyError):
    """A Workload key the state does not hold (or not in the expected phase)."""


@dataclass(slots=True)
class AdmittedWorkload:
    """A Workload holding quota: its admission and the usage charged for it."""

    workload: Workload
    admission: Admission
    usage: Usage
    evicting: bool = False
    contender: Any = None  # the preemption engine's cached view; cleared on every change

    @property
    def cluster_queue(self) -> str:
        return self.admission.cluster_queue


class ClusterState:
    """Flavors, queues, priority classes, namespaces, Workloads and reserved usage."""

    def __init__(self, backoff: BackoffPolicy | None = None) -> None:
        self.backoff = backoff or BackoffPolicy()
        self.quota = QuotaTree()
        self.flavors: dict[str, ResourceFlavor] = {}
        self.cluster_queues: dict[str, ClusterQueue] = {}
        self.local_queues: dict[str, LocalQueue] = {}
        self.priority_classes = PriorityClasses()
        self.namespaces: dict[str, Mapping[str, str]] = {}
        self.workloads: dict[str, Workload] = {}
        self.admitted: dict[str, AdmittedWorkload] = {}
        self.queues: dict[str, PendingQueue] = {}
        self.backoff_queue = BackoffQueue()
        self.reasons: dict[str, str] = {}  # last QuotaReserved=False message per Workload
        self._order: dict[str, OrderKey] = {}
        self._queued_in: dict[str, str] = {}  # pending Workload → ClusterQueue
        self._admitted_by_cq: dict[str, set[str]] = {}
        self._orphans: dict[str, set[str]] = {}  # LocalQueue key → pending Workloads
        self._to_evict: dict[str, tuple[str, str]] = {}
        # Preemptors whose capacity is held while their victims release quota (§ delayed
        # preemption): key → the nomination (see controller/core/preempting.py).
        self.nominated: dict[str, Nomination] = {}
        # KAI-style threshold: priority < threshold ⇒ preemptible (None = off, Kueue's way).
        self.preemptibility_threshold: int | None = None
        self.resolutions: dict[str, Resolution] = {}
        self._signatures: dict[str, tuple[object, ...]] = {}
        # Per ClusterQueue, moves on whenever its admitted Workloads change (one admitted,
        # released, updated, or claimed by a preemptor); keys the preemption engine's
        # per-queue contender lists.
        self.admitted_versions: dict[str, int] = {}
        self.contender_cache: dict[str, tuple[int, Any]] = {}

    # -- flavors, queues, namespaces, priority classes ---------------------------------------

    # A setter given the object it already holds returns at once: the controller writes
    # queue status, and the watch echoes each write back; a status-only change must not
    # send every parked Workload of the queue back for another assessment.

    def set_flavor(self, flavor: ResourceFlavor) -> None:
        if self.flavors.get(flavor.name) == flavor:
            return
        self.flavors[flavor.name] = flavor
        self._retry_using_flavor(flavor.name)

    def remove_flavor(self, name: str) -> None:
        self.flavors.pop(name, None)
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
        self.quota.set_cluster_queue(cq.name, cq.cohort, dict(cq.quotas()))
        queue = self.queues.get(cq.name)
        if queue is None:
            self.queues[cq.name] = PendingQueue(cq.queueing_strategy)
            for lq in self.local_queues.values():
                if lq.cluster_queue == cq.name:
                    self._adopt_orphans(lq.key)
        else:
            queue.strategy = cq.queueing_strategy
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
        self.quota.remove_cluster_queue(name)
        queue = self.queues.pop(name, None)
        for key in list(queue.workload_keys()) if queue else ():
            self._unqueue(key)
            self._place(key)
        if cq.cohort:
            self._retry_cohort(cq.cohort)

    def set_local_queue(self, lq: LocalQueue) -> None:
        old = self.local_queues.get(lq.key)
        if old == lq:
            return
        self.local_queues[lq.key] = lq
        if old is not None and (
            old.cluster_queue != lq.cluster_queue or old.stop_policy != lq.stop_policy
        ):
            self._requeue_local_queue(old)  # a stopped LocalQueue's Workloads wait outside
        if lq.stop_policy is StopPolicy.HOLD_AND_DRAIN:
            for key in [k for k in self.admitted if self._local_queue_key(k) == lq.key]:
                self._request_eviction(key, "LocalQueueStopped", "The LocalQueue is stopped")
        self._adopt_orphans(lq.key)
        self.retry_inadmissible(lq.cluster_queue)

    def remove_local_queue(self, namespace: str, name: str) -> None:
        lq = self.local_queues.pop(f"{namespace}/{name}", None)
        if lq is not None:
            self._requeue_local_queue(lq)

    def _requeue_local_queue(self, lq: LocalQueue) -> None:
        queue = self.queues.get(lq.cluster_queue)
        if queue is None:
            return
        for key in [k for k in queue.workload_keys() if self._local_queue_key(k) == lq.key]:
            self._unqueue(key)
            self._place(key)

    def _adopt_orphans(self, lq_key: str) -> None:
        for key in self._orphans.pop(lq_key, set()):
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
        whose value changes later does not reorder existing Workloads, as in Kueue)."""
        key = workload.key
        previous = self.workloads.get(key)
        self._signatures.pop(key, None)
        if previous is None or workload.priority != previous.priority:
            priority = self.priority_classes.resolve(workload).value
        else:
            priority = -self._order[key][0]
        self.workloads[key] = workload
        self.resolutions[key] = resolve_preemptibility(
            workload.preemptibility,
            tuple({PREEMPTIBILITY_LABEL: v} if v else {} for v in workload.owner_preemptibility),
            None
            if workload.pod_preemptibility is None
            else {PREEMPTIBILITY_LABEL: workload.pod_preemptibility},
            priority,
            self.preemptibility_threshold,
        )
        self._order[key] = order_key(
            priority, workload.preemption_cost, workload.creation_timestamp, workload.uid, key
        )
        held = self.admitted.get(key)
        if held is not None and (workload.admission != held.admission or workload.finished):
            self._unreserve(key)
            held = None
        if held is not None:
            held.workload = workload
            held.evicting = held.evicting or workload.evicted
            held.contender = None
            self._touch(held.cluster_queue)
        self._unqueue(key)
        if workload.finished:
            return
        if workload.admission is not None and held is None:
            self._reserve(key, workload.admission, evicting=workload.evicted)
        elif workload.admission is None:
            self._place(key)
        if key in self.admitted and not workload.active:
            self._request_eviction(key, "Deactivated", "The workload is deactivated")

    def remove_workload(self, key: str) -> None:
        if key not in self.workloads:
            return
        if key in self.admitted:
            self._unreserve(key)
        self.drop_nomination(key, requeue=False)
        self._unqueue(key)
        del self.workloads[key], self._order[key]
        self.reasons.pop(key, None)
        self.resolutions.pop(key, None)
        self._signatures.pop(key, None)

    def signature(self, key: str) -> tuple[object, ...]:
        """Everything about a pending Workload that admission and the victim search read,
        except its creation time and identity: two Workloads with equal signatures, offered
        to the same ClusterQueue in the same state, get the same answer (unless the queue's
        policy compares creation times, LowerOrNewerEqualPriority)."""
        signature = self._signatures.get(key)
        if signature is None:
            workload = self.workloads[key]
            signature = self._signatures[key] = (
                workload.namespace,
                workload.priority_class,
                self.priority_of(key),
                self.resolutions[key].value,
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
        return signature

    def priority_of(self, key: str) -> int:
        return -self._order[key][0]

    def order_of(self, key: str) -> OrderKey:
        return self._order[key]

    def queued_in(self, key: str) -> str | None:
        """The ClusterQueue whose pending queue holds the Workload, if any."""
        return self._queued_in.get(key)

    def _local_queue_key(self, key: str) -> str:
        workload = self.workloads[key]
        return f"{workload.namespace}/{workload.queue_name}"

    def _place(self, key: str) -> None:
        """Queue a pending Workload: behind its backoff, under its LocalQueue's ClusterQueue,
        or, while its LocalQueue is missing or stopped or its ClusterQueue missing, aside
        with that LocalQueue until it changes (`unqueued_reason` says why)."""
        workload = self.workloads[key]
        if key in self.nominated:
            return  # waits for its victims, outside the queue
        if not workload.active:
            return
        if workload.requeue_at is not None and key not in self.backoff_queue:
            self.backoff_queue.add(key, workload.requeue_at)
            return
        if key in self.backoff_queue:
            return
        lq_key = self._local_queue_key(key)
        lq = self.local_queues.get(lq_key)
        queue = self.queues.get(lq.cluster_queue) if lq else None
        if lq is None or queue is None or lq.stop_policy is not StopPolicy.NONE:
            self._orphans.setdefault(lq_key, set()).add(key)
            return
        self._queued_in[key] = lq.cluster_queue
        queue.push(self._order[key])

    def _unqueue(self, key: str) -> None:
        cq = self._queued_in.pop(key, None)
        if cq is not None and cq in self.queues:
            self.queues[cq].remove(key)
        self.backoff_queue.remove(key)
        if key in self.workloads:
            orphans = self._orphans.get(self._local_queue_key(key))
            if orphans is not None:
                orphans.discard(key)

    def release_backoff(self, now: float) -> None:
        """Queue every Workload whose requeueAt has passed."""
        for key in self.backoff_queue.due(now):
            if key in self.workloads:
                self.workloads[key] = replace(self.workloads[key], requeue_at=None)
                self._place(key)

    # -- reserved quota ----------------------------------------------------------------------

    def apply_admit(self, admit: Admit) -> None:
        """Reserve quota for an admission decided by the cycle (Kueue "assume")."""
        key = admit.workload_key
        if key not in self.workloads:
            raise UnknownWorkload(key)
        if key in self.admitted:
            raise UnknownWorkload(f"{key} already holds quota")
        self._unqueue(key)
        self.reasons.pop(key, None)
        self.workloads[key] = replace(self.workloads[key], admission=admit.admission, evicted=False)
        self._reserve(key, admit.admission, evicting=False)

    def _touch(self, cluster_queue: str) -> None:
        self.admitted_versions[cluster_queue] = self.admitted_versions.get(cluster_queue, 0) + 1

    def _reserve(self, key: str, admission: Admission, evicting: bool) -> None:
        self._touch(admission.cluster_queue)
        usage = admission.usage()
        self.admitted[key] = AdmittedWorkload(self.workloads[key], admission, usage, evicting)
        self._admitted_by_cq.setdefault(admission.cluster_queue, set()).add(key)
        self.quota.add_usage(admission.cluster_queue, usage)
        if evicting:
            return
        cq = self.cluster_queues.get(admission.cluster_queue)
        lq = self.local_queues.get(self._local_queue_key(key))
        if cq is not None and cq.stop_policy is StopPolicy.HOLD_AND_DRAIN:
            self._request_eviction(key, "ClusterQueueStopped", "The ClusterQueue is stopped")
        elif lq is not None and lq.stop_policy is StopPolicy.HOLD_AND_DRAIN:
            self._request_eviction(key, "LocalQueueStopped", "The LocalQueue is stopped")

    def _unreserve(self, key: str) -> AdmittedWorkload:
        held = self.admitted.pop(key)
        self._touch(held.cluster_queue)
        self.quota.remove_usage(held.cluster_queue, held.usage)
        members = self._admitted_by_cq[held.cluster_queue]
        members.discard(key)
        if not members:
            del self._admitted_by_cq[held.cluster_queue]
        self._to_evict.pop(key, None)
        self.retry_inadmissible(held.cluster_queue)
        cohort = self.quota.cohort_of(held.cluster_queue)
        if cohort:
            self._retry_cohort(cohort)
        return held

    def release(
        self, key: str, *, requeue: bool = True, now: float | None = None, backoff: bool = False
    ) -> Usage:
        """Return a Workload's reserved usage (finished, evicted or deleted). With `requeue`
        it becomes pending again at its original place; with `backoff` (needs `now`) it
        waits until ``now + base·2^(count−1)`` (capped) first."""
        if key not in self.admitted:
            raise UnknownWorkload(f"{key} holds no quota")
        held = self._unreserve(key)
        workload = replace(held.workload, admission=None, evicted=requeue)
        if backoff:
            if now is None:
                raise ValueError("release with backoff needs the current time")
            count = workload.requeue_count + 1
            workload = replace(
                workload, requeue_count=count, requeue_at=self.backoff.requeue_at(count, now)
            )
        self.workloads[key] = workload
        if requeue:
            self._place(key)
        else:
            self.workloads[key] = replace(workload, finished=True)
        return held.usage

    @contextmanager
    def simulate_removal(self, keys: Iterator[str] | list[str] | set[str]) -> Iterator[None]:
        """Within the block, the listed admitted Workloads' usage is removed from the quota
        (cohort totals included); it is restored exactly on exit. For preemption: use
        `quota.fits(cq, usage)` / `assign_flavors` inside the block."""
        per_cq: dict[str, dict[tuple[str, str], int]] = {}
        for key in keys:
            held = self.admitted[key]
            bucket = per_cq.setdefault(held.cluster_queue, {})
            for fr, value in held.usage.items():
                bucket[fr] = bucket.get(fr, 0) + value
        with self.quota.simulate(per_cq, sign=-1):
            yield

    def nominate(self, nomination: Nomination) -> None:
        """Hold a preemptor's capacity while its victims release theirs."""
        key = nomination.admit.workload_key
        self._unqueue(key)
        self.nominated[key] = nomination
        self.quota.add_usage(nomination.admit.cluster_queue, nomination.usage)
        for victim in nomination.victims:
            held = self.admitted.get(victim.workload_key)
            if held is not None and victim.whole:
                held.evicting = True
                self._touch(held.cluster_queue)

    def drop_nomination(self, key: str, requeue: bool = True) -> Nomination | None:
        """Give up a nomination (infeasible, or the preemptor is gone): its hold is returned."""
        nomination = self.nominated.pop(key, None)
        if nomination is None:
            return None
        self.quota.remove_usage(nomination.admit.cluster_queue, nomination.usage)
        self.retry_inadmissible(nomination.admit.cluster_queue)
        if requeue and key in self.workloads:
            self._place(key)
        return nomination

    def admit_nominated(self, key: str) -> Admit:
        """The victims are gone: the held capacity becomes the preemptor's reservation."""
        nomination = self.nominated.pop(key)
        self.quota.remove_usage(nomination.admit.cluster_queue, nomination.usage)
        self.apply_admit(nomination.admit)
        return nomination.admit

    def resolution(self, key: str) -> Resolution:
        return self.resolutions[key]

    def admitted_in(self, cluster_queue: str) -> frozenset[str]:
        return frozenset(self._admitted_by_cq.get(cluster_queue, ()))

    # -- evictions and retries ---------------------------------------------------------------

    def _request_eviction(self, key: str, reason: str, message: str) -> None:
        held = self.admitted.get(key)
        if held is not None and not held.evicting:
            self._to_evict[key] = (reason, message)

    def take_evictions(self) -> list[Evict]:
        """Evictions to issue now; each is issued once (the Workload keeps its quota until
        `release`)."""
        out: list[Evict] = []
        for key, (reason, message) in sorted(self._to_evict.items()):
            held = self.admitted[key]
            held.evicting = True
            self._touch(held.cluster_queue)
            self.workloads[key] = replace(self.workloads[key], evicted=True)
            out.append(Evict(key, held.cluster_queue, reason, message))
        self._to_evict.clear()
        return out

    def cancel_eviction(self, key: str) -> None:
        """An eviction could not be recorded: the Workload keeps running as admitted, and a
        preemptor waiting for it plans again in the next cycle."""
        held = self.admitted.get(key)
        if held is None or not held.evicting:
            return
        held.evicting = False
        self.workloads[key] = replace(self.workloads[key], evicted=False)
        held.workload = self.workloads[key]
        held.contender = None
        self._touch(held.cluster_queue)

    def retry_inadmissible(self, cluster_queue: str) -> None:
        queue = self.queues.get(cluster_queue)
        if queue is not None:
            queue.retry_inadmissible()

    def _retry_cohort(self, cohort: str) -> None:
        for member in self.quota.members(cohort):
            self.retry_inadmissible(member)

    # -- status --------------------------------------------------------------------------------

    def inactive_reason(self, cluster_queue: str) -> Inactive | None:
        """Why a ClusterQueue admits nothing now (stopped, or a flavor is missing)."""
        cq = self.cluster_queues.get(cluster_queue)
        if cq is None:
            message = f"ClusterQueue {cluster_queue} doesn't exist"
            return Inactive("ClusterQueueDoesNotExist", message)
        if cq.stopped:
            message = f"ClusterQueue {cq.name} is inactive: stopped ({cq.stop_policy.value})"
            return Inactive("Stopped", message)
        missing = sorted({name for name in cq.flavor_names() if name not in self.flavors})
        if missing:
            message = f"ClusterQueue {cq.name} is inactive: flavor {', '.join(missing)} not found"
            return Inactive("FlavorNotFound", message)
        if cq.admission_checks:
            message = (
                f"ClusterQueue {cq.name} is inactive: admission check "
                f"{', '.join(cq.admission_checks)} not found (quotagate runs no admission "
                "checks and admits nothing without them)"
            )
            return Inactive("AdmissionCheckNotFound", message)
        return None

    def local_queue_inactive(self, lq_key: str) -> Inactive | None:
        """Why a LocalQueue admits nothing now: stopped, or its ClusterQueue is missing or
        inactive (Kueue's LocalQueue `Active` condition)."""
        lq = self.local_queues.get(lq_key)
        if lq is None:
            return Inactive("NotFound", f"LocalQueue {lq_key} doesn't exist")
        if lq.stop_policy is not StopPolicy.NONE:
            message = f"LocalQueue {lq.name} is inactive: stopped ({lq.stop_policy.value})"
            return Inactive("Stopped", message)
        inactive = self.inactive_reason(lq.cluster_queue)
        if inactive is None:
            return None
        if lq.cluster_queue not in self.cluster_queues:
            return Inactive("ClusterQueueDoesNotExist", inactive.message)
        return Inactive("ClusterQueueIsInactive", inactive.message)

    def unqueued_reason(self, key: str) -> Unqueued | None:
        """Why a pending Workload is in no active queue, as Kueue's workload controller says
        it (`getQueueBlocker`): deactivated, its LocalQueue or ClusterQueue missing, or one
        of them stopped or inactive. None when it waits in an active queue, in eviction
        backoff or for its victims (the cycle, the backoff or the preemption explain it)."""
        workload = self.workloads[key]
        if not workload.active:
            return Unqueued("Deactivated", "The workload is deactivated")
        if key in self.nominated or key in self.backoff_queue:
            return None
        lq = self.local_queues.get(self._local_queue_key(key))
        queue = workload.queue_name
        if lq is None:
            return Unqueued("Misconfigured", f"LocalQueue {queue} doesn't exist")
        if lq.stop_policy is not StopPolicy.NONE:
            detail = f"stopped ({lq.stop_policy.value})"
            return Unqueued("Suspended", f"LocalQueue {queue} is inactive: {detail}")
        if lq.cluster_queue not in self.cluster_queues:
            return Unqueued("Misconfigured", f"ClusterQueue {lq.cluster_queue} doesn't exist")
        inactive = self.inactive_reason(lq.cluster_queue)
        if inactive is not None:
            return Unqueued("Suspended", inactive.message)
        return None

    def why_pending(self, key: str) -> str:
        """The best available explanation of why a pending Workload is not admitted."""
        unqueued = self.unqueued_reason(key) if key in self.workloads else None
        if unqueued is not None:
            return unqueued.message
        cq = self._queued_in.get(key)
        if cq is not None:
            tag = self.queues[cq].tag_of(key)  # parked with a refused head like it
            if tag is not None:
                return str(tag)
        if key in self.reasons:
            return self.reasons[key]
        at = self.backoff_queue.requeue_at(key)
        if at is not None:
            until = datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z")
            return f"waiting for eviction backoff until {until}"
        return "waiting in queue behind higher-ordered Workloads"

    def pending(self) -> Iterator[str]:
        """Keys of every Workload that is neither admitted nor finished."""
        for key, workload in self.workloads.items():
            if key not in self.admitted and not workload.finished:
                yield key


def namespace_matches(state: ClusterState, cq: ClusterQueue, namespace: str) -> bool:
    """Kueue: a null namespaceSelector admits no namespace; `{}` admits all."""
    if cq.namespace_selector is None:
        return False
    return cq.namespace_selector.matches(state.namespace_labels(namespace) or EMPTY_LABELS)
