"""Two-phase admission (Kueue's admission checks): what a Workload holding quota in a
ClusterQueue with admission checks needs next.

Kueue's rules (pkg/workload/admissionchecks.go, the workload controller's
`reconcileSyncAdmissionChecks`, `reconcileCheckBasedEviction` and `NeedsRequeueAtUpdate`):

- the checks a reservation needs are those of its ClusterQueue whose `onFlavors` meet the
  flavors it was assigned (all flavors when `onFlavors` is empty); `status.admissionChecks`
  holds exactly those, a new one `Pending` (`SyncChecks`);
- once every one is `Ready`, the Workload is admitted (Admitted=True) and its job starts
  (`SyncChecks` as well: the same write sets Admitted);
- a `Rejected` check deactivates the Workload (DeactivationTarget with reason
  AdmissionCheck, then `spec.active: false`, then the eviction) (`RejectChecks`);
- a `Retry` check evicts it with reason AdmissionCheck: its quota is released, every
  check is reset to Pending (a Retry counted in `retryCount`) and it waits until the
  latest `lastTransitionTime + requeueAfterSeconds` of the Retry checks before it
  competes again (`RetryChecks`).

Before any reservation Kueue's workload controller already lists the checks that apply
whatever flavor the Workload gets: those whose `onFlavors` cover every flavor of the
ClusterQueue its LocalQueue points to (`AdmissionChecksForWorkload` without an admission),
each `Pending`; a check state no longer wanted goes (`pending_check_syncs`).

Without admission checks nothing here applies: `Admit` writes Admitted=True with
QuotaReserved, as before. Pure: Workloads, ClusterQueues and the time in, actions out.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass

from api.constants import CheckState
from api.workload_status import Admission
from controller.core.model.admission_checks import CheckRule, CheckStatus
from controller.core.model.clusterqueues import ClusterQueue
from controller.core.model.workloads import Workload, WorkloadKey
from controller.core.state import ClusterState

__all__ = [
    "CheckAction",
    "RejectChecks",
    "RetryChecks",
    "SyncChecks",
    "check_actions",
    "checks_before_reservation",
    "checks_by_local_queue",
    "checks_message",
    "pending_check_syncs",
    "required_checks",
    "retry_time",
]


@dataclass(frozen=True, slots=True)
class SyncChecks:
    """Keep `status.admissionChecks` to `checks` and set Admitted once all are Ready."""

    workload_key: WorkloadKey
    cluster_queue: str
    checks: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RetryChecks:
    """Evict with reason AdmissionCheck (checks reset to Pending); `requeue_at`: when it
    competes again (None: at once)."""

    workload_key: WorkloadKey
    cluster_queue: str
    message: str
    requeue_at: float | None


@dataclass(frozen=True, slots=True)
class RejectChecks:
    """Deactivate: DeactivationTarget=True with reason AdmissionCheck and `message`."""

    workload_key: WorkloadKey
    cluster_queue: str
    message: str


CheckAction = SyncChecks | RetryChecks | RejectChecks


def required_checks(rules: Iterable[CheckRule], admission: Admission) -> tuple[str, ...]:
    """The checks a reservation needs, by name (Kueue's `admissionChecksForAdmission`)."""
    flavors = frozenset(
        flavor
        for assignment in admission.pod_set_assignments
        for flavor in assignment.flavors.values()
    )
    return tuple(sorted(rule.name for rule in rules if rule.applies_to(flavors)))


def checks_before_reservation(cq: ClusterQueue) -> tuple[str, ...]:
    """The checks a Workload without a reservation gets, by name: those that apply to
    every flavor of the queue (Kueue's `AdmissionChecksForWorkload` when there is no
    admission; an empty onFlavors means all of them)."""
    flavors = frozenset(flavor.name for group in cq.resource_groups for flavor in group.flavors)
    return tuple(
        sorted(
            rule.name
            for rule in cq.admission_checks
            if not rule.on_flavors or rule.on_flavors >= flavors
        )
    )


def checks_message(checks: Iterable[CheckStatus], state: CheckState) -> str:
    """Kueue's `buildAdmissionChecksMessage`: the checks in `state`, by name, with their
    messages."""
    found = sorted(checks, key=lambda c: c.name)
    parts = [f'"{c.name}" ({c.message})' if c.message else f'"{c.name}"' for c in found]
    noun = "AdmissionChecks" if len(found) > 1 else "AdmissionCheck"
    return f"{noun} in {state.value} state: {'; '.join(parts)}"


def retry_time(checks: Iterable[CheckStatus]) -> float | None:
    """The latest `lastTransitionTime + requeueAfterSeconds` of the Retry checks (Kueue's
    `GetMaxRetryTime`); None when none says when."""
    times = [
        c.last_transition + c.requeue_after_seconds
        for c in checks
        if c.state is CheckState.RETRY and c.requeue_after_seconds is not None and c.last_transition
    ]
    return max(times) if times else None


def _action(workload: Workload, cq: ClusterQueue | None, now: float) -> CheckAction | None:
    admission = workload.admission
    if admission is None or workload.finished or workload.evicted:
        return None
    states = workload.admission_checks
    required = required_checks(cq.admission_checks, admission) if cq is not None else None
    if required is not None and tuple(sorted(c.name for c in states)) != required:
        return SyncChecks(workload.key, admission.cluster_queue, required)
    rejected = [c for c in states if c.state is CheckState.REJECTED]
    if rejected:
        if workload.deactivation_target is not None or not workload.active:
            return None  # already on its way out
        message = checks_message(rejected, CheckState.REJECTED)
        return RejectChecks(workload.key, admission.cluster_queue, message)
    retry = [c for c in states if c.state is CheckState.RETRY]
    if retry:
        at = retry_time(retry)
        message = f"Evicted due to {checks_message(retry, CheckState.RETRY)}"
        return RetryChecks(
            workload.key,
            admission.cluster_queue,
            message,
            at if at is not None and at > now else None,
        )
    if states and not workload.admitted and all(c.state is CheckState.READY for c in states):
        names = required if required is not None else tuple(sorted(c.name for c in states))
        return SyncChecks(workload.key, admission.cluster_queue, names)
    return None


def check_actions(
    workloads: Iterable[Workload], cluster_queues: Mapping[str, ClusterQueue], now: float
) -> list[CheckAction]:
    """What each Workload holding quota needs next for its admission checks, in the order
    given. A Workload with neither checks on its ClusterQueue nor check states gets
    nothing; one in a ClusterQueue that is gone keeps its states (no sync) but a Rejected
    or Retry state still applies."""
    actions = []
    for workload in workloads:
        if workload.admission is None:
            continue
        cq = cluster_queues.get(workload.admission.cluster_queue)
        if not workload.admission_checks and (cq is None or not cq.admission_checks):
            continue
        action = _action(workload, cq, now)
        if action is not None:
            actions.append(action)
    return actions


def checks_by_local_queue(state: ClusterState) -> dict[str, tuple[str, ...] | None]:
    """For each LocalQueue with unfinished Workloads (`namespace/name`), the checks its
    pending Workloads list (`checks_before_reservation` of its ClusterQueue); None when
    the LocalQueue or its ClusterQueue is missing (Kueue's `ClusterQueueForWorkload` finds
    none: nothing is synced). Equal from one pass to the next, nothing but the Workloads
    that changed can be out of step."""
    objects = state.objects
    by_queue: dict[str, tuple[str, ...]] = {}
    wanted: dict[str, tuple[str, ...] | None] = {}
    for lq_key in state.index.live_in:
        lq = objects.local_queues.get(lq_key)
        cq = objects.cluster_queues.get(lq.cluster_queue) if lq is not None else None
        if lq is None or cq is None:
            wanted[lq_key] = None
            continue
        if cq.name not in by_queue:
            by_queue[cq.name] = checks_before_reservation(cq)
        wanted[lq_key] = by_queue[cq.name]
    return wanted


def pending_check_syncs(
    state: ClusterState,
    skip: Container[WorkloadKey] = (),
    among: Iterable[WorkloadKey] | None = None,
    wanted_in: Mapping[str, tuple[str, ...] | None] | None = None,
) -> list[SyncChecks]:
    """`status.admissionChecks` of the pending Workloads out of step with their
    ClusterQueue (`checks_before_reservation`), as Kueue's workload controller keeps them
    for an active Workload whose LocalQueue and ClusterQueue exist. Looked at: the
    Workloads `among` the given keys (those that changed) when given; else every pending
    one when some ClusterQueue names a check, and otherwise only those still carrying
    check states (`StatusIndex.checked`), whose states go. Workloads in `skip` (being
    written) are left out; `wanted_in`: `checks_by_local_queue`, when known already."""
    objects = state.objects
    index = state.index
    any_checks = any(cq.admission_checks for cq in objects.cluster_queues.values())
    if among is not None:
        keys = [k for k in among if k in (index.live if any_checks else index.checked)]
        candidates = state.pending(among=keys)
    elif any_checks:
        candidates = state.pending()
    else:
        candidates = state.pending(among=list(index.checked))
    wanted_in = checks_by_local_queue(state) if wanted_in is None else wanted_in
    records = state.cache.records
    syncs = []
    for key in candidates:
        if key in skip:
            continue
        workload = records[key].workload
        if not workload.active or workload.admission is not None:
            continue
        lq_key = f"{workload.namespace}/{workload.queue_name}"
        wanted = wanted_in.get(lq_key)
        if wanted is None:
            continue  # Kueue's `ClusterQueueForWorkload` finds no queue: nothing synced
        if frozenset(c.name for c in workload.admission_checks) != frozenset(wanted):
            cluster_queue = objects.local_queues[lq_key].cluster_queue
            syncs.append(SyncChecks(key, cluster_queue, wanted))
    return syncs
