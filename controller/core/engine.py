"""The one driver of the admission cycle: what runs `run_cycle` for the controller
(`quotagate run`), `quotagate plan`, the admission forecast and the bench's simulator.

- `Engine` runs cycles over one `ClusterState` and keeps the scheduler's memory between
  them (controller/core/scheduler/memory.py): one cycle at a time for the controller,
  which writes each one's decisions and waits for events (`cycle`); or cycles at one
  instant until one changes nothing, the caller acting on each result before the next
  (`until_quiet`: evictions completed, finishes scheduled).
- `Timeline` is simulated time for the forecast and the simulator: arrivals, the end of
  an admitted Workload's run and a victim's release, in time order (ties in the order
  they were scheduled); the end of a run is dropped when the Workload was released or
  admitted again in between.
- `release_victim` is what a job integration does once a preempted Workload's pods are
  gone: it waits again, or keeps fewer pods.

Pure: time is passed in.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterator
from dataclasses import replace
from enum import IntEnum

from api.workload_status import Admission, PodSetAssignment
from controller.core.decisions import CycleResult
from controller.core.model.workloads import WorkloadKey
from controller.core.scheduler.cycle import run_cycle
from controller.core.scheduler.memory import SchedulerMemory
from controller.core.state import ClusterState

__all__ = ["Engine", "Event", "Timeline", "release_victim"]


class Engine:
    """Admission cycles over `state`. `park_alike=False` turns off the cycle's setting
    aside of heads alike (Kueue's one head per queue per cycle, exactly: comparisons)."""

    def __init__(self, state: ClusterState, *, park_alike: bool = True) -> None:
        self.state = state
        self.memory = SchedulerMemory(state)
        self.park_alike = park_alike
        self.cycles = 0  # cycles run

    def cycle(self, now: float, *, admission_limit: int | None = None) -> CycleResult:
        """One cycle at `now`; `admission_limit`: at most that many admissions (the
        controller's, by the writes it can send soon: cycle step 9)."""
        self.cycles += 1
        return run_cycle(
            self.state,
            now,
            memory=self.memory,
            park_alike=self.park_alike,
            admission_limit=admission_limit,
        )

    def until_quiet(self, now: float, *, max_cycles: int | None = None) -> Iterator[CycleResult]:
        """Cycles at `now`, each result yielded before the next cycle runs, until one
        changes nothing (it is yielded too) or `max_cycles` have run (then the last one
        yielded changed something)."""
        ran = 0
        while max_cycles is None or ran < max_cycles:
            result = self.cycle(now)
            ran += 1
            yield result
            if not result.changed:
                return


class Event(IntEnum):
    """What happens at a simulated time."""

    ARRIVE = 0  # a Workload is created
    FINISH = 1  # an admitted Workload's run ends: it finishes and releases its quota
    RELEASE = 2  # a victim's pods are gone: it releases its quota (detail: its pods)


class Timeline:
    """Simulated events in time order; the end of a run is scheduled per admission
    (`run`) and dropped when the Workload was released or admitted again since."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Event, WorkloadKey, int]] = []
        self._sequence = itertools.count()
        self._runs: dict[WorkloadKey, int] = {}  # per Workload, its latest admission

    def schedule(self, at: float, event: Event, key: WorkloadKey, detail: int = 0) -> None:
        heapq.heappush(self._heap, (at, next(self._sequence), event, key, detail))

    def run(self, key: WorkloadKey, ends_at: float | None) -> None:
        """The Workload holds quota from now on (a new admission); its run ends at
        `ends_at` (None: not known, it does not end)."""
        run = self._runs[key] = self._runs.get(key, 0) + 1
        if ends_at is not None:
            self.schedule(ends_at, Event.FINISH, key, run)

    def released(self, key: WorkloadKey) -> None:
        """The Workload released its quota: the end of its run no longer holds."""
        self._runs[key] = self._runs.get(key, 0) + 1

    def next_time(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    def due(self, now: float) -> Iterator[tuple[Event, WorkloadKey, int]]:
        """The events at or before `now`, in order, each taken once: (event, key,
        detail). The end of a run dropped since it was scheduled is left out."""
        heap = self._heap
        while heap and heap[0][0] <= now:
            _, _, event, key, detail = heapq.heappop(heap)
            if event is Event.FINISH and detail != self._runs.get(key, 0):
                continue
            yield event, key, detail


def release_victim(state: ClusterState, key: WorkloadKey, pods: int) -> None:
    """The victim's owner acknowledges its eviction: all of it waits again, or (`pods`
    fewer than it runs, one pod set) it keeps the rest."""
    workload = state.cache.records[key].workload
    admission = workload.admission
    total = sum(a.count for a in admission.pod_set_assignments) if admission else 0
    if admission is None or pods >= total or len(admission.pod_set_assignments) != 1:
        state.upsert_workload(replace(workload, admission=None, evicted=False))
        return
    (assignment,) = admission.pod_set_assignments
    left = assignment.count - pods
    shrunk = PodSetAssignment(
        assignment.name,
        left,
        assignment.flavors,
        {r: v // assignment.count * left for r, v in assignment.resource_usage.items()},
    )
    state.upsert_workload(
        replace(workload, admission=Admission(admission.cluster_queue, (shrunk,)), evicted=False)
    )
