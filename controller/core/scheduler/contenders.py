"""The victim search's inputs: the admitted Workloads in reach of a preemptor, as
`Contender`s (controller/core/preemption/types.py), built from the state and kept between
cycles.

Per ClusterQueue the list of its admitted Workloads is kept until they change (the cache's
`admitted_versions` moves); rebuilding it reuses each Workload's contender while its
record still holds the same Workload copy and admission and is still, or still not, being
evicted. Those leaving for nominated preemptors are made afresh whenever a cover changes
(the holds' `claims_stamp` moves): what their leaving gives back changes with every
nomination.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from api.workload_status import Admission
from controller.core.model.clusterqueues import FlavorResource
from controller.core.model.workloads import Workload, WorkloadKey
from controller.core.preemption.types import Contender
from controller.core.state import ClusterState

__all__ = ["ContenderCache"]

_Built = tuple[Workload, Admission, Contender]
"""A contender and the record's Workload copy and admission it was built from."""


@dataclass(slots=True, eq=False)
class _QueueContenders:
    """One ClusterQueue's contenders at one version of its admitted Workloads."""

    version: int
    members: list[Contender]  # those no nominated preemptor waits for
    built: dict[WorkloadKey, _Built]  # every contender built, the waited-for ones too
    leaving_stamp: int = -1
    leaving: dict[WorkloadKey, tuple[Contender, Contender]] = field(default_factory=dict)


class ContenderCache:
    """Per ClusterQueue, its admitted Workloads as contenders."""

    __slots__ = ("_queues",)

    def __init__(self) -> None:
        self._queues: dict[str, _QueueContenders] = {}

    def in_reach(
        self, state: ClusterState, cluster_queue: str, short: frozenset[FlavorResource]
    ) -> dict[str, list[Contender]]:
        """Admitted Workloads in reach of a preemptor in `cluster_queue` lacking `short`,
        per ClusterQueue: its own queue's, and those of the cohort members borrowing one of
        `short` (nothing is reclaimed from a queue within its nominal quota)."""
        cache, holds = state.cache, state.holds
        names = cache.quota.borrowers(cluster_queue, short)
        names.add(cluster_queue)
        by_queue: dict[str, list[Contender]] = {}
        for name in sorted(names):
            version = cache.admitted_versions.get(name, 0)
            view = self._queues.get(name)
            if view is None or view.version != version:
                view = self._queues[name] = self._rebuild(state, name, version, view)
            claimed = holds.claimed_in(name)
            if claimed:
                by_queue[name] = [
                    *view.members,
                    *(self._leaving(state, view, key, name) for key in claimed),
                ]
            elif view.members:
                by_queue[name] = view.members
        return by_queue

    def cached(self, cluster_queue: str) -> list[Contender]:
        """The queue's contenders as last built (for tests: empty if never built)."""
        view = self._queues.get(cluster_queue)
        return view.members if view is not None else []

    def _rebuild(
        self, state: ClusterState, name: str, version: int, old: _QueueContenders | None
    ) -> _QueueContenders:
        before = old.built if old is not None else {}
        built: dict[WorkloadKey, _Built] = {}
        members = []
        claimed = state.holds.claimed
        for key in state.cache.admitted_in(name):
            if claimed(key):
                kept = before.get(key)
                if kept is not None:
                    built[key] = kept  # its leaving contender may be made from it again
                continue
            members.append(_contender(state, before, built, key, name))
        return _QueueContenders(version, members, built)

    def _leaving(
        self, state: ClusterState, view: _QueueContenders, key: WorkloadKey, queue: str
    ) -> Contender:
        """A Workload leaving for nominated preemptors: still a candidate, ordered first, as
        in Kueue — another preemptor may wait for it too rather than evict another, and
        take what it frees beyond what the preemptors already waiting for it hold."""
        holds = state.holds
        if view.leaving_stamp != holds.claims_stamp:
            view.leaving_stamp, view.leaving = holds.claims_stamp, {}
        base = _contender(state, view.built, view.built, key, queue)
        cached = view.leaving.get(key)
        if cached is not None and cached[0] is base:
            return cached[1]  # nothing it releases has changed since it was made
        contender = replace(base, releases=holds.releases(key))
        contender._candidate = contender._sort_keys = None  # not shared with the base
        view.leaving[key] = (base, contender)
        return contender


def _contender(
    state: ClusterState,
    before: dict[WorkloadKey, _Built],
    built: dict[WorkloadKey, _Built],
    key: WorkloadKey,
    queue: str,
) -> Contender:
    """The contender of an admitted Workload: the one in `before` if made from the record
    as it is now, else a new one; kept in `built`."""
    held = state.cache.records[key]  # holds quota: it is in `admitted_in` of its queue
    workload, admission = held.workload, held.admission
    assert admission is not None and held.usage is not None  # it holds quota
    kept = before.get(key)
    # One already leaving (for no preemptor: evicted before, stopped queue, deactivated;
    # or for one) is a candidate ordered first, as Kueue's: a preemptor waits for it
    # rather than evict another.
    if (
        kept is not None
        and kept[0] is workload
        and kept[1] is admission
        and kept[2].leaving == held.evicting
    ):
        built[key] = kept
        return kept[2]
    assignments = admission.pod_set_assignments
    pods = assignments[0].count if len(assignments) == 1 else sum(a.count for a in assignments)
    contender = Contender(
        key=key,
        uid=workload.uid,
        cluster_queue=queue,
        priority=-held.order[0],
        usage=held.usage,
        pod_count=pods,
        preemption_cost=workload.preemption_cost,
        quota_reserved_at=workload.quota_reserved_at,
        queue_order_timestamp=state.queue_order_time(workload),
        evicted=workload.evicted or held.evicting,
        preemptibility=held.resolution.value,
        disruption_mode=workload.disruption_mode,
        min_count=workload.pod_sets[0].min_count if len(workload.pod_sets) == 1 else None,
        single_pod_set=len(assignments) == 1,
        local_queue=held.local_queue,
        leaving=held.evicting,
    )
    built[key] = (workload, admission, contender)
    return contender
