"""What one admission cycle decided: small result objects the runtime acts on, and the
nomination a preemptor waits with (the records keep it)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from api.workload_status import Admission, PodSetAssignment
from controller.core.model.clusterqueues import FlavorResource
from controller.core.model.workloads import Usage, WorkloadKey
from controller.core.preemption.types import Victim

if TYPE_CHECKING:  # the scheduler's result, carried as it is: decisions sit below it
    from controller.core.scheduler.flavor_assignment import FlavorAssignment

__all__ = [
    "Admit",
    "CycleResult",
    "Decision",
    "Evict",
    "Inadmissible",
    "Nomination",
    "Preempt",
    "ReplaceNode",
    "UnhealthyNodes",
]


@dataclass(frozen=True, slots=True)
class Admit:
    """Reserve quota for `workload_key` in `cluster_queue` (QuotaReserved=True)."""

    workload_key: WorkloadKey
    cluster_queue: str
    pod_sets: tuple[PodSetAssignment, ...]
    borrowing: bool

    @classmethod
    def from_assignment(
        cls,
        key: WorkloadKey,
        cluster_queue: str,
        assignment: FlavorAssignment,
        borrowing: bool,
    ) -> Admit:
        """The admission a flavor assignment makes: per pod set its flavors and usage."""
        return cls(
            key,
            cluster_queue,
            tuple(
                PodSetAssignment(ps.name, ps.count, dict(ps.flavors), dict(ps.requests))
                for ps in assignment.pod_sets
            ),
            borrowing,
        )

    def with_topology(self, assignments: Mapping[str, Mapping[str, Any]]) -> Admit:
        """The same admission with each pod set's `topologyAssignment` (by name)."""
        return replace(
            self,
            pod_sets=tuple(
                replace(ps, topology_assignment=assignments.get(ps.name)) for ps in self.pod_sets
            ),
        )

    @property
    def admission(self) -> Admission:
        return Admission(self.cluster_queue, self.pod_sets)

    def usage(self) -> Usage:
        return self.admission.usage()


@dataclass(frozen=True, slots=True)
class Inadmissible:
    """The Workload stays pending; `reason` is the QuotaReserved=False message.

    `condition_reason` is Kueue's reason (WaitingForQuota, NoMatchingFlavor, Inactive,
    Misconfigured, …); `assignment` is the flavor assignment tried, if any: the
    per-(flavor, resource) mode and what is missing."""

    workload_key: WorkloadKey
    cluster_queue: str | None
    reason: str
    condition_reason: str = "Pending"
    assignment: FlavorAssignment | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Evict:
    """Evict an admitted Workload (Evicted=True); its quota stays reserved until released."""

    workload_key: WorkloadKey
    cluster_queue: str
    reason: str  # Kueue eviction reason, e.g. ClusterQueueStopped, Deactivated
    message: str
    # Kueue's underlyingCause: why a Deactivated Workload was deactivated
    # (RequeuingLimitExceeded, MaximumExecutionTimeExceeded), or why PodsReadyTimeout
    # fired (WaitForStart, WaitForRecovery); "" when there is none.
    underlying_cause: str = ""


@dataclass(frozen=True, slots=True)
class Preempt:
    """Evict `victims` so that `preemptor_key` can be admitted in `cluster_queue` once they
    have released their quota (delayed preemption: the preemptor's capacity is held)."""

    preemptor_key: WorkloadKey
    cluster_queue: str
    victims: tuple[Victim, ...]
    admit: Admit

    @property
    def to_evict(self) -> tuple[Victim, ...]:
        """The victims this preemption evicts: not those already being evicted (for another
        preemptor or none), which it only waits for."""
        return tuple(v for v in self.victims if not v.leaving)


@dataclass(frozen=True, slots=True)
class Nomination:
    """A preemptor waiting for its victims: the admission it gets and the usage held; a
    topology-aware one also the `topologyAssignment` of each TAS pod set, where it goes
    once they are gone (its node capacity held: controller/core/tas/holds.py)."""

    admit: Admit
    victims: tuple[Victim, ...]
    usage: dict[FlavorResource, int]
    topology: Mapping[str, Mapping[str, Any]] | None = None
    # The TAS flavor and domain (its values from the top level) the victims were chosen
    # in, when their search was split by domain
    domain: tuple[str, tuple[str, ...]] | None = None


@dataclass(frozen=True, slots=True)
class ReplaceNode:
    """An admitted TAS Workload's pods on a failed node placed again: its admission with
    the new `topologyAssignment`s (the same quota), written in place."""

    workload_key: WorkloadKey
    cluster_queue: str
    admission: Admission
    failed_node: str


@dataclass(frozen=True, slots=True)
class UnhealthyNodes:
    """`status.unhealthyNodes` of an admitted TAS Workload to write: the failed node whose
    replacement it waits for, or () once that node is healthy again for it."""

    workload_key: WorkloadKey
    nodes: tuple[str, ...]


Decision = Admit | Inadmissible | Evict | Preempt


@dataclass(frozen=True, slots=True)
class CycleResult:
    admitted: tuple[Admit, ...] = ()
    inadmissible: tuple[Inadmissible, ...] = ()
    evicted: tuple[Evict, ...] = ()
    requeued: tuple[str, ...] = ()  # heads that lost capacity to an earlier head this cycle
    changed: bool = False  # anything admitted, evicted, parked or explained differently
    preempting: tuple[Preempt, ...] = ()
    replaced: tuple[ReplaceNode, ...] = ()  # failed nodes replaced (topology-aware)
    unhealthy_nodes: tuple[UnhealthyNodes, ...] = ()  # waiting for a replacement, or no more

    @property
    def decisions(self) -> tuple[Decision, ...]:
        return (*self.evicted, *self.preempting, *self.admitted, *self.inadmissible)
