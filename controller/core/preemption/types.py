"""The shared types of the preemption package: a `Contender` (an admitted Workload as the
victim search sees it), a `Victim` (what the search decided to take from it) and a
`Release` (what taking out a victim that already leaves for another preemptor gives back
of that preemptor's hold)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from api.constants import DisruptionMode, Preemptibility, PreemptionReason
from api.quantities import Quantity
from controller.core.model.clusterqueues import FlavorResource
from controller.core.model.workloads import WorkloadKey
from controller.core.preemption.ordering import Candidate, CandidateSortKey, candidate_sort_key
from controller.core.preemption.preemptibility import protected_pods

__all__ = ["Contender", "Release", "Victim"]


@dataclass(frozen=True, slots=True)
class Release:
    """What taking a leaving victim out of the quota also gives back: the part of a
    nominated preemptor's hold its usage covers (`PreemptionHolds._cover`), on the
    preemptor's queue (`pool` False) or as a credit on the lowest cohort above both
    queues (`pool` True, `name` that cohort)."""

    name: str
    amounts: Mapping[FlavorResource, int]
    pool: bool


@dataclass(slots=True, eq=False)
class Contender:
    """An admitted Workload as the victim search sees it. Treated as immutable; not frozen
    only because frozen dataclasses are several times slower to build, and the state
    builds one per admitted Workload (then caches it)."""

    key: WorkloadKey
    uid: str
    cluster_queue: str
    priority: int
    usage: Mapping[FlavorResource, int]
    pod_count: int
    preemption_cost: int = 0
    quota_reserved_at: float | None = None
    queue_order_timestamp: float = 0.0  # Kueue's GetQueueOrderTimestamp
    evicted: bool = False
    preemptibility: Preemptibility = Preemptibility.PREEMPTIBLE
    disruption_mode: DisruptionMode = DisruptionMode.POD_GROUP
    min_count: int | None = None
    single_pod_set: bool = True
    local_queue: str = ""  # namespace/name of its LocalQueue (admission fair sharing)
    # Already being evicted (for a preemptor or not): it goes whole, is waited for and is
    # not evicted again. `releases` is what its leaving gives back of the holds of the
    # preemptors already waiting for it.
    leaving: bool = False
    releases: tuple[Release, ...] = ()
    _candidate: Candidate | None = None
    _sort_keys: tuple[CandidateSortKey, CandidateSortKey] | None = None

    def sort_key(self, same_queue: bool) -> CandidateSortKey:
        """`candidate_sort_key` for a preemptor in another queue or in its own (built once:
        the victim search orders the same contenders again and again)."""
        keys = self._sort_keys
        if keys is None:
            other = candidate_sort_key(self.candidate, "")
            keys = self._sort_keys = (other, (other[0], True, *other[2:]))
        return keys[1] if same_queue else keys[0]

    @property
    def candidate(self) -> Candidate:
        """The contender as the ordering and policy modules see it (built once)."""
        if self._candidate is None:
            self._candidate = self._make_candidate()
        return self._candidate

    def _make_candidate(self) -> Candidate:
        return Candidate(
            key=self.key,
            uid=self.uid,
            cluster_queue=self.cluster_queue,
            priority=self.priority,
            preemption_cost=Quantity(self.preemption_cost),
            pod_count=self.pod_count,
            quota_reserved_at=self.quota_reserved_at,
            evicted=self.evicted,
            preemptibility=self.preemptibility,
            queue_order_timestamp=self.queue_order_timestamp,
            local_queue=self.local_queue,
        )

    def removable_pods(self) -> int:
        """Pods that may be taken one by one; 0 means only the whole Workload may go."""
        if self.pod_count <= 1 or not self.single_pod_set or self.leaving:
            return 0
        if self.preemptibility is Preemptibility.SEMI_PREEMPTIBLE:
            return self.pod_count - protected_pods(
                self.preemptibility, self.pod_count, self.min_count
            )
        if self.disruption_mode is DisruptionMode.POD:
            return self.pod_count - (self.min_count or 0)
        return 0


@dataclass(frozen=True, slots=True)
class Victim:
    """A Workload to evict for a preemptor: all its pods, or (`pods` < total) some of them.
    A `leaving` one is already being evicted (for another preemptor, or for no preemptor):
    the preemptor waits for it, but it is not evicted again nor counted as preempted
    again (Kueue's "preemption ongoing")."""

    workload_key: WorkloadKey
    cluster_queue: str
    reason: PreemptionReason
    pods: int
    total_pods: int
    leaving: bool = False

    @property
    def whole(self) -> bool:
        return self.pods >= self.total_pods
