"""One record per Workload: what the engine knows about it, in one place.

A `WorkloadRecord` holds the Workload as converted from the API, its queue-order key, its
resolved preemptibility, its phase and everything that only exists in some phases (the
admission and usage charged while it holds quota, the nomination while it waits for
victims, the refusal message while it is pending). The reservation cache keeps them in one
dict (controller/core/cache/reservations.py); removing a Workload is removing its record.
Each field has one writer, named beside it. The read views (`WorkloadsView`,
`AdmittedView`, `NominatedView`) give the rest of the engine lookups such as
`cache.workloads[key]` and `key in cache.admitted` over those records, in O(1).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Generic, TypeVar

from api.workload_status import Admission
from controller.core.decisions import Nomination
from controller.core.model.workloads import OrderKey, Usage, Workload, WorkloadKey
from controller.core.preemption.preemptibility import Resolution

__all__ = [
    "AdmittedView",
    "NominatedView",
    "Phase",
    "WorkloadRecord",
    "WorkloadsView",
]


class Phase(StrEnum):
    """Where a Workload is in its life, as the engine sees it."""

    QUEUED = "queued"
    """Pending: in its ClusterQueue's queue, in eviction backoff, or aside while its queue
    is missing or inactive (`pending.unqueued_reason` says why)."""
    NOMINATED = "nominated"
    """A preemptor whose capacity is held while its victims release theirs."""
    ADMITTED = "admitted"
    """Holds quota (QuotaReserved=True)."""
    EVICTING = "evicting"
    """Holds quota, but an eviction is decided or written: waits for its owner's release."""
    FINISHED = "finished"
    """Finished=True: its quota is returned and it is never queued again."""


@dataclass(slots=True, eq=False)
class WorkloadRecord:
    """Everything the engine keeps about one Workload."""

    # The Workload, its order and its preemptibility: `ClusterState.upsert_workload`.
    workload: Workload
    order: OrderKey
    resolution: Resolution
    # Its phase and quota: the reservation cache (and the preemption holds, NOMINATED).
    phase: Phase = Phase.QUEUED
    admission: Admission | None = None  # while ADMITTED or EVICTING
    usage: Usage | None = None  # what the admission charges
    eviction: tuple[str, str, str] | None = None  # (reason, message, cause) decided, not yet issued
    nomination: Nomination | None = None  # while NOMINATED: the preemption holds
    queued_in: str | None = None  # the ClusterQueue whose pending queue holds it: the queues
    reason: str | None = None  # the cycle's last refusal (the QuotaReserved=False message)
    _signature: tuple[object, ...] | None = field(default=None, init=False)

    @property
    def key(self) -> WorkloadKey:
        return self.order[4]

    def update(self, workload: Workload, order: OrderKey, resolution: Resolution) -> None:
        """A new copy of the Workload, with its order and preemptibility."""
        self.workload, self.order, self.resolution = workload, order, resolution
        self._signature = None

    def signature(self) -> tuple[object, ...]:
        """Everything about a pending Workload that admission and the victim search read,
        except its creation time and identity: two Workloads with equal signatures, offered
        to the same ClusterQueue in the same state, get the same answer (unless the queue's
        policy compares creation times, LowerOrNewerEqualPriority)."""
        if self._signature is None:
            workload = self.workload
            self._signature = (
                workload.namespace,
                workload.priority_class,
                -self.order[0],
                self.resolution.value,
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
        return self._signature

    @property
    def local_queue(self) -> str:
        """`namespace/name` of its LocalQueue."""
        workload = self.workload
        return f"{workload.namespace}/{workload.queue_name}"

    @property
    def holds_quota(self) -> bool:
        return self.phase is Phase.ADMITTED or self.phase is Phase.EVICTING

    @property
    def admitted(self) -> bool:
        """Holds quota, not being evicted, and its Admitted condition is True (Kueue's
        `IsAdmitted`: every admission check Ready): what Kueue's TAS node controller and
        failed-node replacement look at."""
        return self.phase is Phase.ADMITTED and self.workload.admitted

    @property
    def evicting(self) -> bool:
        return self.phase is Phase.EVICTING

    @evicting.setter
    def evicting(self, value: bool) -> None:
        if not self.holds_quota:
            raise ValueError(f"{self.key} holds no quota: it cannot be (un)marked evicting")
        self.phase = Phase.EVICTING if value else Phase.ADMITTED

    @property
    def cluster_queue(self) -> str:
        """The ClusterQueue whose quota it holds (only while it holds quota)."""
        if self.admission is None:
            raise ValueError(f"{self.key} holds no quota")
        return self.admission.cluster_queue


V = TypeVar("V")


class _RecordView(Mapping[WorkloadKey, V], Generic[V]):
    """A read-only mapping over the records that pass `keep`, showing `value(record)`.
    Lookups are O(1); iteration walks `index` (the keys that may pass, kept by the state)
    when there is one, else every record."""

    __slots__ = ("_index", "_keep", "_records", "_value")

    def __init__(
        self,
        records: dict[WorkloadKey, WorkloadRecord],
        keep: Callable[[WorkloadRecord], bool],
        value: Callable[[WorkloadRecord], V],
        index: set[WorkloadKey] | None = None,
    ) -> None:
        self._records, self._keep, self._value, self._index = records, keep, value, index

    def __getitem__(self, key: WorkloadKey) -> V:
        record = self._records.get(key)
        if record is None or not self._keep(record):
            raise KeyError(key)
        return self._value(record)

    def __contains__(self, key: object) -> bool:
        record = self._records.get(key)  # type: ignore[call-overload]
        return record is not None and self._keep(record)

    def get(self, key: WorkloadKey, default: Any = None) -> Any:
        """As a dict's `get`, without the KeyError Mapping's default goes through (the
        cycle asks thousands of times)."""
        record = self._records.get(key)
        if record is None or not self._keep(record):
            return default
        return self._value(record)

    def __iter__(self) -> Iterator[WorkloadKey]:
        keys = self._records if self._index is None else sorted(self._index)
        return (key for key in keys if self._keep(self._records[key]))

    def __len__(self) -> int:
        return sum(1 for _ in self)


class WorkloadsView(_RecordView[Workload]):
    """Every Workload the state holds."""

    def __init__(self, records: dict[WorkloadKey, WorkloadRecord]) -> None:
        super().__init__(records, lambda r: True, lambda r: r.workload)

    def __len__(self) -> int:
        return len(self._records)


class AdmittedView(_RecordView[WorkloadRecord]):
    """The records of the Workloads that hold quota (admitted or being evicted)."""

    def __init__(self, records: dict[WorkloadKey, WorkloadRecord], index: set[WorkloadKey]) -> None:
        super().__init__(records, lambda r: r.holds_quota, lambda r: r, index)


class NominatedView(_RecordView[Nomination]):
    """The nominations of the preemptors waiting for their victims."""

    def __init__(self, records: dict[WorkloadKey, WorkloadRecord], index: set[WorkloadKey]) -> None:
        super().__init__(records, lambda r: r.nomination is not None, _nomination, index)


def _nomination(record: WorkloadRecord) -> Nomination:
    assert record.nomination is not None
    return record.nomination
