"""One admission cycle (digest §5): heads → flavor assignment → ordered admission.

1. Release Workloads whose eviction backoff has passed; issue pending evictions
   (HoldAndDrain, deactivated).
2. Pop one head from every active ClusterQueue.
3. Nominate each head against the usage at the start of the cycle: namespace selector,
   then flavor assignment. A head with `minCount`s that neither fits whole nor can preempt
   for all its pods is assigned at the most pods that fit, or fit after preempting
   (partial admission: controller/core/scheduler/partial_admission.py).
4. Process heads in Kueue's order: those that fit without borrowing first, then higher
   priority, then older. Each is re-checked against the usage as it stands (earlier heads
   have been charged), so two heads never take the same capacity; a head that no longer
   fits goes straight back to its heap (Kueue's FailedAfterNomination) and is retried next
   cycle.
5. A head that needs preemption asks the preemption engine for a minimal victim set
   (controller/core/preemption/search.py); if there is one, the head is nominated — its capacity
   held — and a `Preempt` decision evicts the victims; it is admitted in a later cycle,
   once they have released their quota (controller/core/scheduler/preemption.py); a head
   with pod sets in a TAS flavor gets victims that also leave its pods a domain
   (controller/core/scheduler/topology_preemption.py). A head that needs
   preemption but has no victims reserves, for the rest of the cycle, the part of its
   request its queue is entitled to, so lower-ordered borrowers cannot take it
   (digest §5.6 step 3); the reservation is undone at the end of the cycle.
6. A non-preemptible Workload (KAI) is never admitted by borrowing. Under
   waitForPodsReady.blockAdmission, a head that fits is not admitted while any Workload
   holding quota is not PodsReady (it stays at the head, QuotaReserved=False with reason
   WaitingForPodsReady, as Kueue's scheduler words it).
7. No borrowing what another queue is taking back (not under fair sharing): a head that
   fits only by borrowing waits for the next cycle when a ClusterQueue of its tree that
   admitted a Workload within its nominal quota in this cycle is still below that nominal
   quota and has pending Workloads, allowed by its `reclaimWithinCohort` to reclaim from
   the head, that fill the rest of it — and the head's admission would leave no room for
   them. Kueue admits the borrower and that queue reclaims it in its next cycle (one head
   per queue per cycle): an eviction for nothing. The wait lasts while that queue keeps
   admitting within its nominal quota, one cycle at a time.
8. Under BestEffortFIFO, when a head is set aside and nothing in its cohort has changed
   since it was assessed, the heads right behind it that ask for exactly the same thing
   (`WorkloadRecord.signature`) are set aside with it, with the same reason. Kueue would
   offer them one per cycle and refuse each in that same state; doing it at once turns
   a queue of 1,000 identical Workloads from 1,000 cycles into one. They come back, like
   every set-aside Workload, when quota is freed in the cohort.
9. At most `admission_limit` admissions (when the runtime gives one: the admission writes
   it can send out soon): once the cycle has admitted that many, the heads after them in
   the cycle's order go back to the head of their queues untried, with nothing recorded,
   and are offered again in the next cycle. Decisions are never made far ahead of their
   writes, against quota held by admissions the API server has not seen yet. The queues
   so passed over are tried first in the next limited cycles (longest passed over first,
   after the order's first key, the borrowing level): like Kueue's one head per queue per
   cycle, every queue gets its turn, and a queue of low-priority Workloads is not held
   back by other queues' higher-priority ones it does not compete with for quota.

Admissions are applied to the state (`ClusterState.apply_admit`) as they are decided;
a runtime whose status write fails calls `state.release(key)` to roll one back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from api.constants import (
    Preemptibility,
    QueueingStrategy,
    ReclaimWithinCohortPolicy,
    WithinClusterQueuePolicy,
)
from api.workload_status import rfc3339
from controller.core.decisions import Admit, CycleResult, Inadmissible, Preempt
from controller.core.fairsharing.shares import shares_of
from controller.core.fairsharing.tournament import fair_order
from controller.core.model.clusterqueues import ClusterQueue, FlavorResource
from controller.core.model.workloads import OrderKey, Workload, WorkloadKey
from controller.core.scheduler.flavor_assignment import (
    FlavorAssignment,
    Mode,
    PreemptionOracle,
    assign_flavors,
)
from controller.core.scheduler.memory import SchedulerMemory
from controller.core.scheduler.node_failures import handle_node_failures
from controller.core.scheduler.partial_admission import (
    can_be_partially_admitted,
    search,
    with_counts,
)
from controller.core.scheduler.preemption import (
    VictimSearches,
    plan_preemption,
    preemption_oracle,
    preemption_victims,
    settle_nominations,
)
from controller.core.scheduler.topology import place_topology
from controller.core.scheduler.topology_preemption import (
    plan_topology_preemption,
    uses_topology,
)
from controller.core.state import ClusterState

__all__ = ["WAITING_FOR_PODS_READY", "pods_ready_for_all_admitted", "run_cycle"]

NO_LONGER_FITS = "Workload no longer fits after processing another workload"
RECLAIMED_BY = (
    "it would borrow what ClusterQueue {} is taking back: that queue is below its nominal "
    "quota with pending Workloads that would reclaim it"
)
"""The reason of a head held back by step 7; it is tried again in the next cycle."""
WAITING_FOR_PODS_READY = "waiting for all admitted workloads to be in PodsReady condition"
"""Kueue's QuotaReserved=False message (reason WaitingForPodsReady) under blockAdmission."""


def pods_ready_for_all_admitted(state: ClusterState) -> bool:
    """Kueue's `PodsReadyForAllAdmittedWorkloads`: every Workload holding quota (admitted
    or being evicted) has PodsReady=True."""
    for key in state.cache.admitted:
        ready = state.cache.records[key].workload.pods_ready
        if ready is None or not ready.status:
            return False
    return True


@dataclass(slots=True)
class _Entry:
    cq: ClusterQueue
    item: OrderKey
    assignment: FlavorAssignment
    version: int  # the cohort's quota version the assignment was made against
    # Partial admission: the Workload at the counts its assignment is for (None: whole).
    reduced: Workload | None = None

    @property
    def key(self) -> WorkloadKey:
        return self.item[4]

    @property
    def cluster_queue(self) -> str:
        return self.cq.name

    @property
    def request(self) -> Mapping[FlavorResource, int]:
        return self.assignment.usage

    @property
    def priority(self) -> int:
        return -self.item[0]

    @property
    def queue_order_time(self) -> float:
        return self.item[2]

    def sort_key(self) -> tuple[int, int, float, str]:
        # Non-borrowing first (lower borrowing level: nearer quota), then higher priority,
        # then older, then UID (digest §5.5, Kueue's classical iterator).
        return (self.assignment.borrowing_level, self.item[0], self.item[2], self.item[3])


def run_cycle(
    state: ClusterState,
    now: float,
    *,
    memory: SchedulerMemory | None = None,
    oracle: PreemptionOracle | None = None,
    park_alike: bool = True,
    admission_limit: int | None = None,
) -> CycleResult:
    """Run one cycle at time `now` (seconds since the epoch) and return its decisions.
    `memory` is what the scheduler kept from the previous cycles over this state (None: a
    fresh one; controller/core/engine.py keeps one). `park_alike=False` turns off step 8
    (Kueue's one head per queue per cycle, exactly; for comparisons); `admission_limit` is
    step 9's (None: no limit)."""
    if memory is None:
        memory = SchedulerMemory(state)
    elif memory.state is not state:
        raise ValueError("the scheduler's memory is of another ClusterState")
    state.release_backoff(now)
    replaced, unhealthy_nodes = handle_node_failures(state, now)
    evicted = state.take_evictions()
    inadmissible: list[Inadmissible] = []
    requeued: list[str] = []
    preempting: list[Preempt] = []
    # Preemptors whose victims have released their quota are admitted first (their
    # capacity was held for them).
    settled, dropped = settle_nominations(state)
    changed = bool(evicted or settled or dropped or replaced or unhealthy_nodes)
    state.queues.retry_protected(now)
    searches = VictimSearches(state, now, memory.contenders)
    if oracle is None:
        oracle = preemption_oracle(state, searches)

    entries: list[_Entry] = []
    for name, queue in state.queues.items():
        if not queue.has_heads() or state.objects.cluster_queue_inactive(name) is not None:
            continue
        item = queue.pop()
        if item is None:
            continue
        cq = state.objects.cluster_queues[name]
        workload = state.cache.records[item[4]].workload
        if not state.objects.admits_namespace(cq, workload.namespace):
            reason = (
                f"namespace {workload.namespace} doesn't match the namespaceSelector "
                f"of ClusterQueue {name}"
            )
            changed |= _refuse(state, cq, item, reason, "Misconfigured", None, inadmissible, True)
            continue
        assignment = assign_flavors(
            state.cache.quota,
            state.objects.flavors,
            cq,
            workload,
            oracle,
            preempt_while_borrowing=state.fair_sharing is not None,
            ignore_undeclared=state.resource_rules.ignore_undeclared,
        )
        reduced = None
        if not assignment.fits and can_be_partially_admitted(workload):
            partial = _partial(state, cq, workload, assignment, oracle, searches)
            if partial is not None:
                reduced, assignment = partial
        entries.append(_Entry(cq, item, assignment, state.cache.quota.version(name), reduced))

    ordered: Iterable[_Entry]
    if state.fair_sharing is None:
        ordered = sorted(entries, key=_Entry.sort_key)
        if admission_limit is not None and memory.passed_over:
            ordered = _passed_over_first(memory.passed_over, ordered)
    else:  # a tournament by dominant resource share, judged afresh for every head
        ordered = fair_order(
            state.cache.quota, shares_of(state.objects, state.cache.quota), entries, _Entry.sort_key
        )
    # blockAdmission (waitForPodsReady): while a Workload holding quota is not PodsReady,
    # nothing else is admitted; one admitted in this cycle blocks the rest of it.
    blocked = state.block_admission and not pods_ready_for_all_admitted(state)
    admitted: list[Admit] = list(settled)
    held_back: list[tuple[str, dict[FlavorResource, int]]] = []
    # Queues that admitted a Workload within their nominal quota in this cycle (step 7).
    claimants: set[str] = set()
    untried: list[str] = []
    for entry in ordered:
        assignment, cq = entry.assignment, entry.cq
        if admission_limit is not None and len(admitted) >= admission_limit:
            state.queues[cq.name].push(entry.item)  # step 9: untried, offered next cycle
            untried.append(cq.name)
            changed = True
            continue
        workload = entry.reduced or state.cache.records[entry.key].workload
        if assignment.mode is Mode.PREEMPT:
            if uses_topology(state, assignment):  # victims that leave the pods a domain
                preempt = plan_topology_preemption(state, cq, workload, assignment, searches)
            else:
                preempt = plan_preemption(state, cq, workload, assignment, searches)
            if preempt is not None:
                preempting.append(preempt)
                state.cache.records[entry.key].reason = _waiting(preempt)
                changed = True
                continue
        if (
            assignment.fits
            and assignment.borrowing
            and (state.cache.resolution(entry.key).value is Preemptibility.NON_PREEMPTIBLE)
        ):
            changed |= _refuse_alike(
                state,
                entry,
                park_alike,
                f"non-preemptible Workloads may not borrow: it must fit in the nominal quota "
                f"of ClusterQueue {cq.name}; {assignment.reason or 'it only fits by borrowing'}",
                "WaitingForQuota",
                inadmissible,
            )
            continue
        if assignment.mode is Mode.NO_FIT or assignment.mode is Mode.PREEMPT:
            changed |= _refuse_alike(
                state,
                entry,
                park_alike,
                _with_protection(state, searches, entry, assignment.reason),
                assignment.condition_reason or "WaitingForQuota",
                inadmissible,
            )
            if (
                assignment.mode is Mode.PREEMPT
                and cq.preemption.reclaim_within_cohort is not ReclaimWithinCohortPolicy.ANY
            ):
                held_back.append((cq.name, _entitlement(state, cq.name, assignment)))
                state.cache.quota.add_usage(*held_back[-1])
            continue
        if not state.cache.quota.fits(cq.name, assignment.usage):
            changed |= _push_back(state, entry, NO_LONGER_FITS)
            requeued.append(entry.key)
            continue
        holder = (
            _taking_back(state, entry, claimants)
            if claimants and assignment.borrowing and state.fair_sharing is None
            else None
        )
        if holder is not None:
            changed |= _push_back(state, entry, RECLAIMED_BY.format(holder))
            requeued.append(entry.key)
            continue
        if blocked:
            changed |= _push_back(state, entry, WAITING_FOR_PODS_READY)
            inadmissible.append(
                Inadmissible(entry.key, cq.name, WAITING_FOR_PODS_READY, "WaitingForPodsReady")
            )
            continue
        topology = place_topology(
            state, cq, workload, ((ps.name, ps.count, ps.flavors) for ps in assignment.pod_sets)
        )
        if isinstance(topology, str):  # the quota fits, the nodes do not
            preempt = plan_topology_preemption(state, cq, workload, assignment, searches)
            if preempt is not None:
                preempting.append(preempt)
                state.cache.records[entry.key].reason = _waiting(preempt)
                changed = True
                continue
            # Parked alone: the heads behind it that are alike by quota may ask for
            # another topology (a quota refusal parks them all: quota knows no topology).
            park = cq.queueing_strategy is QueueingStrategy.BEST_EFFORT_FIFO
            changed |= _refuse(
                state, cq, entry.item, topology, "Pending", assignment, inadmissible, park
            )
            continue
        admit = Admit.from_assignment(
            entry.key,
            cq.name,
            assignment,
            any(state.cache.quota.borrowing(cq.name, fr, v) for fr, v in assignment.usage.items()),
        )
        if topology is not None:
            admit = admit.with_topology(topology)
        state.apply_admit(admit)
        admitted.append(admit)
        if not admit.borrowing:
            claimants.add(cq.name)
        changed = True
        blocked = state.block_admission

    for name, usage in reversed(held_back):
        state.cache.quota.remove_usage(name, usage)
    if admission_limit is not None:
        memory.limited_cycles += 1
        memory.passed_over = {
            name: memory.passed_over.get(name, memory.limited_cycles) for name in untried
        }
    return CycleResult(
        tuple(admitted),
        tuple(inadmissible),
        tuple(evicted),
        tuple(requeued),
        changed,
        tuple(preempting),
        tuple(replaced),
        tuple(unhealthy_nodes),
    )


def _partial(
    state: ClusterState,
    cq: ClusterQueue,
    workload: Workload,
    full: FlavorAssignment,
    oracle: PreemptionOracle,
    searches: VictimSearches,
) -> tuple[Workload, FlavorAssignment] | None:
    """Partial admission (controller/core/scheduler/partial_admission.py, Kueue's
    `getInitialAssignments`): when the full counts neither fit nor fit after preempting
    victims that exist, the most pods on the walk to the `minCount`s that fit, or fit after
    preempting; None when even the `minCount`s do not."""
    if full.mode is Mode.PREEMPT and preemption_victims(cq, workload, full, searches):
        return None

    def fits(counts: tuple[int, ...]) -> tuple[Workload, FlavorAssignment] | None:
        candidate = with_counts(workload, counts)
        assignment = assign_flavors(
            state.cache.quota,
            state.objects.flavors,
            cq,
            candidate,
            oracle,
            preempt_while_borrowing=state.fair_sharing is not None,
            ignore_undeclared=state.resource_rules.ignore_undeclared,
        )
        if assignment.fits or (
            assignment.mode is Mode.PREEMPT
            and preemption_victims(cq, candidate, assignment, searches)
        ):
            return candidate, assignment
        return None

    return search(workload.pod_sets, fits)


def _passed_over_first(passed_over: Mapping[str, int], ordered: list[_Entry]) -> list[_Entry]:
    """Step 9's turns: within a borrowing level, the heads of queues an earlier limited
    cycle passed over first, longest passed over first; otherwise the cycle's order."""
    never = 1 << 62
    return sorted(
        ordered,
        key=lambda entry: (
            entry.assignment.borrowing_level,
            passed_over.get(entry.cq.name, never),
        ),
    )


def _push_back(state: ClusterState, entry: _Entry, reason: str) -> bool:
    """Put a head that fits back at the head of its queue, to be tried in the next cycle,
    with `reason`; returns whether its reason changed."""
    state.queues[entry.cq.name].push(entry.item)
    record = state.cache.records[entry.key]
    changed = record.reason != reason
    record.reason = reason
    return changed


def _with_protection(
    state: ClusterState, searches: VictimSearches, entry: _Entry, reason: str
) -> str:
    """The refusal's message: whether a queue below its nominal quota kept the head from
    preempting to borrow, and when candidates within their minimum runtime were passed
    over, how many and until when; the queue is tried again at that time."""
    contested = searches.contested.get(entry.key)
    if contested is not None:
        reason = (
            f"{reason}; it may not preempt to borrow: ClusterQueue {contested} would be below "
            "its nominal quota with pending Workloads and reclaim it"
        )
    protected = searches.protected.get(entry.key)
    if protected is None:
        return reason
    count, until = protected
    state.queues.retry_protected_at(entry.cq.name, until)
    return (
        f"{reason}; {count} preemption candidate{'s' if count != 1 else ''} within "
        f"{'their' if count != 1 else 'its'} ClusterQueue's minimum runtime, the first "
        f"preemptible at {rfc3339(until)}"
    )


def _waiting(preempt: Preempt) -> str:
    count = len(preempt.victims)
    return f"waiting for {count} preempted workload{'s' if count != 1 else ''} to release quota"


def _refuse(
    state: ClusterState,
    cq: ClusterQueue,
    item: OrderKey,
    reason: str,
    condition_reason: str,
    assignment: FlavorAssignment | None,
    out: list[Inadmissible],
    park: bool,
) -> bool:
    """Record an inadmissible head and requeue it; returns whether anything changed."""
    key = item[4]
    queue = state.queues[cq.name]
    queue.requeue(item, inadmissible=park)
    record = state.cache.records[key]
    previous, record.reason = record.reason, reason
    out.append(Inadmissible(key, cq.name, reason, condition_reason, assignment))
    return park or previous != reason


def _refuse_alike(
    state: ClusterState,
    entry: _Entry,
    park_alike: bool,
    reason: str,
    condition_reason: str,
    out: list[Inadmissible],
) -> bool:
    """Refuse a head and, under BestEffortFIFO when its cohort is as it was when the head
    was assessed, every head right behind it with the same signature (step 7)."""
    cq, assignment = entry.cq, entry.assignment
    park = cq.queueing_strategy is QueueingStrategy.BEST_EFFORT_FIFO
    changed = _refuse(state, cq, entry.item, reason, condition_reason, assignment, out, park)
    if not (park and park_alike) or state.cache.quota.version(cq.name) != entry.version:
        return changed
    compare_age = (
        cq.preemption.within_cluster_queue is WithinClusterQueuePolicy.LOWER_OR_NEWER_EQUAL_PRIORITY
    )
    if compare_age:
        return changed
    # The Workloads parked with the head get no decision of their own: the engine did not
    # try them, and (as in Kueue, which writes a message only on a Workload it tried)
    # nothing is written for them. Their reason is the tag of the run they are parked in
    # (`pending.why_pending` reads it), so parking thousands is one step.
    parked = state.queues[cq.name].park_run(
        state.cache.signature, state.cache.signature(entry.key), reason
    )
    return changed or parked > 0


def _taking_back(state: ClusterState, entry: _Entry, claimants: set[str]) -> str | None:
    """The first (by name) of the `claimants` of the head's tree that would reclaim what the
    head borrows (step 7), if any: each one's room below its nominal quota that its
    pending Workloads, allowed to reclaim from the head, would fill is held for it, and the
    head no longer fits beside all of that."""
    tree = state.cache.quota
    priority = entry.priority
    held: dict[str, dict[FlavorResource, int]] = {}
    for name in sorted(claimants & tree.reach(entry.cq.name)):
        if name == entry.cq.name:
            continue
        reclaim = state.objects.cluster_queues[name].preemption.reclaim_within_cohort
        if reclaim is ReclaimWithinCohortPolicy.NEVER:
            continue
        above = None if reclaim is ReclaimWithinCohortPolicy.ANY else priority
        for fr in entry.request:
            room = tree.quota(name, fr).nominal - tree.usage(name, fr)
            if room > 0 and (wanted := _pending_within(state, name, fr[1], room, above)):
                held.setdefault(name, {})[fr] = wanted
    if not held:
        return None
    with tree.simulate(held, sign=1):
        if tree.fits(entry.cq.name, entry.request):
            return None
    return min(held)


def _pending_within(
    state: ClusterState, cluster_queue: str, resource: str, room: int, above: int | None
) -> int:
    """How much of `room` the queue's pending Workloads (those of a priority above `above`,
    when given) would take, each fitting in what the ones before it left; stops once it is
    full."""
    left = room
    for key in state.queues[cluster_queue].workload_keys():
        if above is not None and state.cache.priority_of(key) <= above:
            continue
        request = state.cache.records[key].workload.total_request(resource)
        if 0 < request <= left:
            left -= request
            if not left:
                break
    return room - left


def _entitlement(
    state: ClusterState, cq: str, assignment: FlavorAssignment
) -> dict[FlavorResource, int]:
    """What a head waiting for preemption holds back from later heads this cycle: within
    nominal, what is left of nominal; when borrowing, up to nominal + borrowingLimit."""
    out: dict[FlavorResource, int] = {}
    for fr, value in assignment.usage.items():
        quota = state.cache.quota.quota(cq, fr)
        used = state.cache.quota.usage(cq, fr)
        if assignment.borrowing:
            amount = (
                value
                if quota.borrowing_limit is None
                else min(value, quota.nominal + quota.borrowing_limit - used)
            )
        else:
            amount = min(value, quota.nominal - used)
        if amount > 0:
            out[fr] = amount
    return out
