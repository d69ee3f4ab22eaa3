"""Kueue's scheduler-performance recorder, rewritten (kubernetes-sigs/kueue
`test/performance/scheduler/runner/recorder/recorder.go` and the checker beside it,
`checker/checker_test.go`): the figures `quotagate bench` reports are computed from the same
events in the same way as the ones Kueue's runner reports, so the two can sit side by side.

The recorder is fed events, each a ClusterQueue or a Workload as observed at some moment
(seconds on any clock, the same for every event), and keeps per object what Kueue's keeps:

- a ClusterQueue (`recordCQEvent`): the times of its first and last events and
  `status.flavorsUsage` (its first flavor's first resource: the scenarios have one)
  integrated over time: each event adds the *previous* event's usage × the milliseconds
  since it (whole milliseconds, truncated as Go's `Duration.Milliseconds`);
- a Workload (`recordWLEvent`), on each transition to Admitted=True, its time to
  admission: the Admitted condition's `lastTransitionTime` minus its
  `metadata.creationTimestamp` when both are set and the admission is not before the
  creation (both whole seconds, as the API server stores them), else the observed time of
  this event minus that of the Workload's first event; so a Workload admitted twice counts
  to its last admission. Also its transitions to Evicted=True, and the time from its first
  event to the one that shows it Finished.

Then per class (`WriteSummary`, and the checker's arithmetic):

- ClusterQueue usage of a ClusterQueue class (the queues' `CLASS_LABEL`): the sum of the
  queues' integrals × 100 / (the sum of their nominal quotas × the milliseconds between the
  class's first and last event);
- time to admission of a Workload class: Kueue's mean (the sum of the Workloads' times
  over their count, in integer milliseconds; a Workload never admitted counts as 0), and,
  which Kueue's summary does not have, the p50 and p95 of the same values (nearest rank).

One difference: Kueue's recorder coalesces ClusterQueue events that arrive while it is
busy (it keeps the latest per queue); this one records every event it is given.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from api import workload_status
from api.quantities import Quantity
from controller.core.model.api_fields import parse_time

__all__ = [
    "CLASS_LABEL",
    "ClusterQueueClass",
    "ClusterQueueEvent",
    "ClusterQueueState",
    "Recorder",
    "WorkloadClass",
    "WorkloadEvent",
    "WorkloadState",
    "cluster_queue_classes",
    "cluster_queue_event",
    "milliseconds",
    "percentile",
    "workload_classes",
    "workload_event",
]

CLASS_LABEL: Final = "kueue.x-k8s.io/performance-scheduler-class"
"""The label Kueue's generator puts on ClusterQueues and Workloads: their class."""


def milliseconds(seconds: float) -> int:
    """Whole milliseconds of a duration, truncated toward zero as Go's
    `Duration.Milliseconds` (through whole microseconds, so that 0.3 - 0.1 s is 200 ms
    and not 199 by a float's rounding)."""
    micros = round(seconds * 1_000_000)
    return micros // 1000 if micros >= 0 else -((-micros) // 1000)


def percentile(ordered: list[int], q: float) -> int:
    """Nearest-rank percentile of sorted values (0 for none)."""
    if not ordered:
        return 0
    rank = max(1, -(-len(ordered) * q // 1))
    return ordered[min(len(ordered), int(rank)) - 1]


# -- events ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClusterQueueEvent:
    """What `RecordCQState` reads of a ClusterQueue (quantities in milli-units)."""

    time: float
    name: str
    class_name: str
    nominal_quota: int
    usage: int  # status.flavorsUsage
    reservation: int = 0  # status.flavorsReservation: recorded, not used by any figure
    cohort: str = ""
    pending: int = 0
    reserving: int = 0
    admitted: int = 0
    active: bool = True


@dataclass(frozen=True, slots=True)
class WorkloadEvent:
    """What `RecordWorkloadState` reads of a Workload. `created` and `admission_time`
    are the object's own timestamps (seconds since the epoch), when it has them."""

    time: float
    uid: str
    class_name: str
    namespace: str = ""
    name: str = ""
    created: float | None = None
    admission_time: float | None = None  # Admitted's lastTransitionTime, when Admitted
    admitted: bool = False
    evicted: bool = False
    finished: bool = False


def _first_total(flavors: Any) -> int:
    """`status.flavors{Usage,Reservation}[0].resources[0].total` in milli-units (0 if none)."""
    if flavors and (resources := flavors[0].get("resources")):
        return Quantity.parse(resources[0].get("total") or "0").milli
    return 0


def _first_nominal(spec: Mapping[str, Any]) -> int:
    groups = spec.get("resourceGroups") or ()
    if (
        groups
        and (flavors := groups[0].get("flavors"))
        and (resources := flavors[0].get("resources"))
    ):
        return Quantity.parse(resources[0].get("nominalQuota") or "0").milli
    return 0


def _true(conditions: Any, type_: str) -> bool:
    return any(c.get("type") == type_ and c.get("status") == "True" for c in conditions or ())


def cluster_queue_event(cq: Mapping[str, Any], time: float) -> ClusterQueueEvent:
    """A ClusterQueue object (as the API serves it) observed at `time`."""
    meta = cq.get("metadata") or {}
    spec = cq.get("spec") or {}
    status = cq.get("status") or {}
    return ClusterQueueEvent(
        time=time,
        name=str(meta.get("name") or ""),
        class_name=str((meta.get("labels") or {}).get(CLASS_LABEL) or ""),
        nominal_quota=_first_nominal(spec),
        usage=_first_total(status.get("flavorsUsage")),
        reservation=_first_total(status.get("flavorsReservation")),
        cohort=str(spec.get("cohortName") or ""),
        pending=int(status.get("pendingWorkloads") or 0),
        reserving=int(status.get("reservingWorkloads") or 0),
        admitted=int(status.get("admittedWorkloads") or 0),
        active=_true(status.get("conditions"), "Active"),
    )


def workload_event(wl: Mapping[str, Any], time: float) -> WorkloadEvent:
    """A Workload object (as the API serves it) observed at `time`."""
    meta = wl.get("metadata") or {}
    admitted = workload_status.is_admitted(wl)
    admission_time = None
    if admitted:
        condition = workload_status.condition(wl, "Admitted") or {}
        if stamp := condition.get("lastTransitionTime"):
            admission_time = parse_time(stamp)
    created = meta.get("creationTimestamp")
    return WorkloadEvent(
        time=time,
        uid=str(meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}"),
        class_name=str((meta.get("labels") or {}).get(CLASS_LABEL) or ""),
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        created=parse_time(created) if created else None,
        admission_time=admission_time,
        admitted=admitted,
        evicted=workload_status.is_evicted(wl),
        finished=workload_status.is_finished(wl),
    )


# -- per object --------------------------------------------------------------------------


@dataclass(slots=True)
class ClusterQueueState:
    """`CQState`: one ClusterQueue's record. `used` is in milli-units × milliseconds."""

    first_event: float
    last: ClusterQueueEvent
    used: int = 0
    max_usage: int = 0
    first_active: float | None = None


@dataclass(slots=True)
class WorkloadState:
    """`WLState`: one Workload's record."""

    class_name: str
    first_event: float
    namespace: str = ""
    name: str = ""
    time_to_admit_ms: int = 0
    time_to_finish_ms: int = 0
    evictions: int = 0
    admissions: int = 0
    last: WorkloadEvent | None = None


class Recorder:
    """The per-object records of a run, fed one event at a time."""

    def __init__(self) -> None:
        self.cluster_queues: dict[str, ClusterQueueState] = {}
        self.workloads: dict[str, WorkloadState] = {}

    def record_cluster_queue(self, event: ClusterQueueEvent) -> None:
        state = self.cluster_queues.get(event.name)
        if state is None:
            state = self.cluster_queues[event.name] = ClusterQueueState(event.time, event)
        else:
            if state.last.usage > 0:
                state.used += state.last.usage * milliseconds(event.time - state.last.time)
            state.last = event
        if event.active and state.first_active is None:
            state.first_active = event.time
        state.max_usage = max(state.max_usage, event.usage)

    def record_workload(self, event: WorkloadEvent) -> None:
        state = self.workloads.get(event.uid)
        if state is None:
            state = WorkloadState(event.class_name, event.time, event.namespace, event.name)
            self.workloads[event.uid] = state
        last = state.last
        if event.admitted and not (last and last.admitted):
            start, end = state.first_event, event.time
            created, admitted = event.created, event.admission_time
            if created is not None and admitted is not None and admitted >= created:
                start, end = created, admitted
            state.time_to_admit_ms = milliseconds(end - start)
            state.admissions += 1
        if event.evicted and not (last and last.evicted):
            state.evictions += 1
        if event.finished and not (last and last.finished):
            state.time_to_finish_ms = milliseconds(event.time - state.first_event)
        state.last = event

    def expect_more_events(self) -> bool:
        """`expectMoreEvents`: some active ClusterQueue still reports pending or reserving
        Workloads (Kueue's runner records until none does)."""
        return any(_busy(s) for s in self.cluster_queues.values())

    def busy_cluster_queues(self) -> list[str]:
        """The names of the ClusterQueues that make `expect_more_events` true, sorted."""
        return sorted(name for name, s in self.cluster_queues.items() if _busy(s))

    def cluster_queue_classes(self) -> dict[str, ClusterQueueClass]:
        return cluster_queue_classes(self.cluster_queues.values())

    def workload_classes(self) -> dict[str, WorkloadClass]:
        return workload_classes(self.workloads.values())


def _busy(state: ClusterQueueState) -> bool:
    """An active ClusterQueue whose last status reports pending or reserving Workloads."""
    last = state.last
    return (last.pending > 0 or last.reserving > 0) and last.active


# -- per class ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClusterQueueClass:
    """`CQGroupSummary`: a ClusterQueue class's usage (milli-units × ms), nominal quota
    (milli-units) and the times of its first and last events."""

    used: int
    nominal_quota: int
    first_event: float
    last_event: float
    queues: int

    @property
    def elapsed_ms(self) -> int:
        return milliseconds(self.last_event - self.first_event)

    @property
    def average_usage(self) -> int:
        """`cpuAverageUsage` (milli-units)."""
        return self.used // self.elapsed_ms if self.elapsed_ms > 0 else 0

    @property
    def usage_pct(self) -> float | None:
        """The checker's ClusterQueue usage, % of nominal quota (None where the checker
        reports invalid data: no nominal quota, or no time between the first and last
        event)."""
        if self.nominal_quota == 0 or self.elapsed_ms == 0:
            return None
        return self.used * 100 / (self.nominal_quota * self.elapsed_ms)


def cluster_queue_classes(states: Iterable[ClusterQueueState]) -> dict[str, ClusterQueueClass]:
    """Per ClusterQueue class (the class of each queue's last event), as `WriteSummary`."""
    groups: dict[str, ClusterQueueClass] = {}
    for state in states:
        name = state.last.class_name
        group = groups.get(name)
        if group is None:
            groups[name] = ClusterQueueClass(
                state.used, state.last.nominal_quota, state.first_event, state.last.time, 1
            )
        else:
            groups[name] = ClusterQueueClass(
                group.used + state.used,
                group.nominal_quota + state.last.nominal_quota,
                min(group.first_event, state.first_event),
                max(group.last_event, state.last.time),
                group.queues + 1,
            )
    return groups


@dataclass(frozen=True, slots=True)
class WorkloadClass:
    """`WorkloadsClassSummary`, with the admitted count and p50/p95 beside Kueue's means
    (all times in milliseconds)."""

    count: int
    admitted: int
    evictions: int
    mean_admission_ms: int
    p50_admission_ms: int
    p95_admission_ms: int
    mean_finish_ms: int


def workload_classes(states: Iterable[WorkloadState]) -> dict[str, WorkloadClass]:
    """Per Workload class, as `WriteSummary` (means by integer division, as Kueue's)."""
    members: dict[str, list[WorkloadState]] = {}
    for state in states:
        members.setdefault(state.class_name, []).append(state)
    classes = {}
    for name, group in members.items():
        waits = sorted(s.time_to_admit_ms for s in group)
        count = len(group)
        classes[name] = WorkloadClass(
            count=count,
            admitted=sum(1 for s in group if s.admissions),
            evictions=sum(s.evictions for s in group),
            mean_admission_ms=sum(waits) // count,
            p50_admission_ms=percentile(waits, 0.5),
            p95_admission_ms=percentile(waits, 0.95),
            mean_finish_ms=sum(s.time_to_finish_ms for s in group) // count,
        )
    return classes
