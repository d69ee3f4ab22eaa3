"""What the status writers and the timers count, kept as Workloads change instead of found
by a pass over every Workload ever seen (at 50,000 Workloads, 15,000 of them pending,
such a pass took 40 ms): the unfinished Workloads with their LocalQueue, how many each
LocalQueue has, those held back or with a timer, and the finished ones per ClusterQueue
and per LocalQueue.
Derived: `ClusterState` calls `update` for every new copy of a Workload."""

from __future__ import annotations

from controller.core.after_admission import may_come_due
from controller.core.model.workloads import Workload, WorkloadKey

__all__ = ["StatusIndex"]


class StatusIndex:
    """Counts and sets over the Workloads, by what they are now."""

    def __init__(self) -> None:
        # The Workloads not finished, with their LocalQueue (`namespace/name`), and how many
        # each LocalQueue has.
        self.live: dict[WorkloadKey, str] = {}
        self.live_in: dict[str, int] = {}
        # Among them, those held back (deactivated, invalid, gated or with failed checks:
        # `Workload.held_back`), in arrival order: the only pending Workloads with a reason
        # of their own while every queue is active.
        self.held_back: dict[WorkloadKey, None] = {}
        # And those the after-admission timers may have something due for (admitted, in a
        # backoff, or Requeued=False: `may_come_due`): the timers read only these, since in
        # a long run most unfinished Workloads are pending with none of that. A superset: a
        # Workload that stops qualifying leaves with its next copy.
        self.timed: dict[WorkloadKey, None] = {}
        # And those carrying admission-check states (`status.admissionChecks`): without
        # checks on any ClusterQueue these are the only pending Workloads whose states
        # can be out of step (controller/core/admission_checks.py, `pending_check_syncs`).
        self.checked: dict[WorkloadKey, None] = {}
        # The finished ones, counted per ClusterQueue of their admission.
        self.finished_in: dict[str, int] = {}
        self._finished_cq: dict[WorkloadKey, str] = {}
        # The same per LocalQueue (`namespace/name`), for Kueue's LocalQueue gauge.
        self.finished_in_local_queue: dict[str, int] = {}
        self._finished_lq: dict[WorkloadKey, str] = {}

    def update(self, key: WorkloadKey, workload: Workload | None) -> None:
        """Count the Workload as it is now (`workload` None: forgotten)."""
        _decrement(self.finished_in, self._finished_cq.pop(key, None))
        _decrement(self.finished_in_local_queue, self._finished_lq.pop(key, None))
        _decrement(self.live_in, self.live.pop(key, None))
        self.held_back.pop(key, None)
        self.timed.pop(key, None)
        self.checked.pop(key, None)
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
            if workload.admission_checks:
                self.checked[key] = None
            return
        if workload.admission is not None:  # finished without an admission: counted nowhere
            cluster_queue = workload.admission.cluster_queue
            self._finished_cq[key] = cluster_queue
            self.finished_in[cluster_queue] = self.finished_in.get(cluster_queue, 0) + 1
            local_queue = f"{workload.namespace}/{workload.queue_name}"
            self._finished_lq[key] = local_queue
            counts = self.finished_in_local_queue
            counts[local_queue] = counts.get(local_queue, 0) + 1

    def admitted_now(self, key: WorkloadKey) -> None:
        """The cycle admitted an unfinished Workload: a timer may come due for it (nothing
        is due before the admission is seen back)."""
        if key in self.live:
            self.timed[key] = None


def _decrement(counts: dict[str, int], name: str | None) -> None:
    """One fewer under `name` (None: nothing); a count that reaches zero goes."""
    if name is None:
        return
    left = counts[name] - 1
    if left:
        counts[name] = left
    else:
        del counts[name]
