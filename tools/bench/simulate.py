"""`quotagate bench --simulate`: the real `controller/core` engine on a virtual clock.

A discrete-event simulation, in-process, no API server. At every event time (arrivals,
completions, victims releasing their quota) the events are applied to the state, then
admission cycles run until nothing changes. A cycle takes no virtual time (its real CPU
cost is measured separately): the simulated figures say how good the *decisions* are,
the CPU seconds how fast they are made.

- Arrivals follow Kueue's generator (`Scenario` / `WorkloadSet.arrivals`).
- Completion: `runtimeMs` after admission the Workload finishes and releases its quota.
- Preemption: a `Preempt` decision evicts its victims; each releases its quota
  `ack_delay_ms` later (as a job integration would) and waits in its queue again; the
  preemptor is admitted by the first cycle that sees them gone.
- The figures are Kueue's recorder's (tools/bench/recorder.py), fed with the
  simulated events: time to admission from a Workload's arrival to its (last) admission;
  ClusterQueue usage from each queue's reserved quota, written as its status once per
  simulated instant in which it changed, from 0 to the last completion.
- Over-use: after every admission each ClusterQueue must hold at most nominal +
  borrowingLimit and each cohort tree (a root Cohort and everything under it) at most its
  total nominal quota, its queues' and its Cohorts' own; any excess is counted.
- A preemption loop (the engine evicting the same Workload again and again while no
  simulated time passes: it would decide forever) ends the run with an error naming it,
  instead of hanging: `FLAPPING_LIMIT` preemptions of one Workload within one instant.
- A scenario's Cohort tree and weights (`parentCohorts`, `parent:`, `weight:`) are built
  into the state, and its `fairSharing` section turns Kueue's fair sharing on.
"""

from __future__ import annotations

import json
import time
from fractions import Fraction
from typing import TextIO

from api.constants import ReclaimWithinCohortPolicy, WithinClusterQueuePolicy
from controller.core.decisions import CycleResult
from controller.core.engine import Engine, Event, Timeline, release_victim
from controller.core.model.clusterqueues import (
    DEFAULT_WEIGHT,
    ClusterQueue,
    FlavorQuotas,
    LocalQueue,
    PreemptionPolicy,
    ResourceGroup,
    ResourceQuota,
)
from controller.core.model.cohorts import Cohort
from controller.core.model.flavors import ResourceFlavor
from controller.core.model.selectors import LabelSelector
from controller.core.model.topology import Topology
from controller.core.model.workloads import PodSet, Workload, WorkloadKey
from controller.core.state import ClusterState
from tools.bench.recorder import ClusterQueueEvent, Recorder, WorkloadEvent
from tools.bench.report import Job, Progress, Report, Sample, summarize
from tools.bench.scenario import ParentCohort, Scenario

__all__ = [
    "FLAPPING_LIMIT",
    "PreemptionLoop",
    "build",
    "decision_line",
    "lower_bound",
    "simulate",
]

RESOURCE = "cpu"
FLAVOR = "rf"  # the name Kueue's generator gives its flavor

FLAPPING_LIMIT = 20
"""Preemptions of one Workload within one simulated instant that make a preemption loop:
between two of them it was admitted again without running at all."""


class PreemptionLoop(RuntimeError):
    """The engine keeps preempting the same Workload while no simulated time passes."""


def _weight(weight: Fraction | None) -> Fraction:
    return DEFAULT_WEIGHT if weight is None else weight  # 0 is a weight (an infinite share)


def _cpu_group(quota: ResourceQuota, flavor: str = FLAVOR) -> tuple[ResourceGroup, ...]:
    return (ResourceGroup((RESOURCE,), (FlavorQuotas(flavor, {RESOURCE: quota}),)),)


def _parent_cohort(pc: ParentCohort) -> Cohort:
    groups = (
        _cpu_group(ResourceQuota(pc.nominal or 0, pc.borrowing_limit, pc.lending_limit))
        if pc.has_quota
        else ()
    )
    return Cohort(pc.name, pc.parent, groups, _weight(pc.weight))


def build(scenario: Scenario) -> tuple[ClusterState, list[Job], dict[str, int]]:
    """The state (flavor, Cohorts, queues, fair sharing), every Workload's plan (arrival
    order) and the nominal capacity of each cohort tree, by its root (milli-units)."""
    state = ClusterState()
    tas = scenario.tas
    flavor = FLAVOR if tas is None else tas.flavor
    if tas is None:
        state.set_flavor(ResourceFlavor(FLAVOR))
    else:
        state.set_flavor(
            ResourceFlavor(tas.flavor, {tas.flavor_label: "tas"}, topology_name=tas.topology)
        )
        state.set_topology(Topology(tas.topology, tuple(label for _, _, label in tas.levels)))
        for node in tas.nodes():
            state.set_node(node)
    state.fair_sharing = scenario.fair_sharing
    roots = scenario.roots()
    capacity: dict[str, int] = {}
    for pc in scenario.parent_cohorts:
        state.set_cohort(_parent_cohort(pc))
        capacity[roots[pc.name]] = capacity.get(roots[pc.name], 0) + (pc.nominal or 0)
    for cs in scenario.cohort_sets:
        for c in range(cs.count if cs.explicit else 0):
            state.set_cohort(Cohort(f"{cs.name}-{c}", cs.parent, (), _weight(cs.weight)))
    jobs: list[Job] = []
    for name, cohort, qs in scenario.queues():
        state.set_cluster_queue(
            ClusterQueue(
                name,
                _cpu_group(ResourceQuota(qs.nominal, qs.borrowing_limit), flavor),
                cohort,
                namespace_selector=LabelSelector(),
                preemption=PreemptionPolicy(
                    reclaim_within_cohort=ReclaimWithinCohortPolicy(qs.reclaim_within_cohort),
                    within_cluster_queue=WithinClusterQueuePolicy(qs.within_cluster_queue),
                ),
                fair_weight=_weight(qs.weight),
            )
        )
        state.set_local_queue(LocalQueue(name, name, name))
        root = roots[cohort]
        capacity[root] = capacity.get(root, 0) + qs.nominal
        for s, ws in enumerate(qs.workload_sets):
            for at, wc, index in ws.arrivals():
                jobs.append(
                    Job(
                        f"{name}/{wc.name}-{s}-{index}-{ws.classes.index(wc)}",
                        wc.name,
                        name,
                        root,
                        wc.request * wc.pods,
                        wc.runtime_ms / 1000,
                        wc.priority,
                        at,
                        wc.pods,
                        wc.topology,
                    )
                )
    jobs.sort(key=lambda job: job.created)
    return state, jobs, capacity


def lower_bound(jobs: list[Job], capacity: dict[str, int]) -> float:
    """No schedule finishes before the last arrival has run, nor before each cohort tree
    has pushed its work (request × runtime) through its total nominal quota — borrowing
    moves quota inside a root's tree, never between trees."""
    bound = 0.0
    work: dict[str, float] = {}
    for job in jobs:
        bound = max(bound, job.created + job.runtime)
        work[job.root_cohort] = work.get(job.root_cohort, 0.0) + job.request * job.runtime
    for cohort, amount in work.items():
        if capacity.get(cohort):
            bound = max(bound, amount / capacity[cohort])
    return bound


def decision_line(now: float, result: CycleResult) -> str:
    """One cycle's decisions as a JSON line, in the cycle's order: the admissions (with
    their ClusterQueue, flavors and counts, a TAS pod set's topologyAssignment, and
    whether they borrow), the preemptions and
    their victims, the evictions, the heads requeued and the refusals with their reasons.
    Two engines that decide alike write the same lines."""
    return json.dumps(
        {
            "t": round(now, 6),
            "admitted": [
                [
                    a.workload_key,
                    a.cluster_queue,
                    a.borrowing,
                    [
                        [
                            ps.name,
                            ps.count,
                            sorted(ps.flavors.items()),
                            *([ps.topology_assignment] if ps.topology_assignment else []),
                        ]
                        for ps in a.pod_sets
                    ],
                ]
                for a in result.admitted
            ],
            "preempting": [
                [
                    p.preemptor_key,
                    p.cluster_queue,
                    [
                        [v.workload_key, v.cluster_queue, v.reason, v.pods, v.leaving]
                        for v in p.victims
                    ],
                ]
                for p in result.preempting
            ],
            "evicted": [[e.workload_key, e.reason] for e in result.evicted],
            "requeued": list(result.requeued),
            "inadmissible": [
                [i.workload_key, i.cluster_queue, i.condition_reason, i.reason]
                for i in result.inadmissible
            ],
        },
        separators=(",", ":"),
    )


def simulate(
    scenario: Scenario,
    *,
    ack_delay_ms: int = 0,
    progress: TextIO | None = None,
    sample_every: float = 0.5,
    park_alike: bool = True,
    decisions: TextIO | None = None,
) -> Report:
    """Run the scenario to the end; the report (raises RuntimeError if a Workload never
    finishes, which would be an engine bug). With `decisions`, every cycle that decided
    something is written to it as one JSON line (`decision_line`)."""
    cpu_start = time.process_time()
    state, jobs, capacity = build(scenario)
    by_key = {job.key: job for job in jobs}
    limits = {
        name: (None if qs.borrowing_limit is None else qs.nominal + qs.borrowing_limit)
        for name, _, qs in scenario.queues()
    }
    nominal_total = sum(capacity.values())
    engine = Engine(state, park_alike=park_alike)
    timeline = Timeline()
    for job in jobs:
        timeline.schedule(job.created, Event.ARRIVE, WorkloadKey(job.key))
    per_queue: dict[str, int] = dict.fromkeys(limits, 0)
    per_cohort: dict[str, int] = dict.fromkeys(capacity, 0)
    # What each ClusterQueue's status would say: its recorder events.
    queue_class = {name: qs.name for name, _, qs in scenario.queues()}
    nominal = {name: qs.nominal for name, _, qs in scenario.queues()}
    pending_in = dict.fromkeys(limits, 0)
    reserving_in = dict.fromkeys(limits, 0)
    changed_queues: set[str] = set(limits)
    recorder = Recorder()
    reserved_by_class: dict[str, int] = dict.fromkeys(scenario.class_names(), 0)
    pending_by_class: dict[str, int] = dict.fromkeys(scenario.class_names(), 0)
    counters = {"created": 0, "admitted": 0, "finished": 0}
    overuse = preemptions = 0
    reserved = 0
    usage_integral = 0.0
    last_t = 0.0
    samples: list[Sample] = []
    meter = Progress(progress, len(jobs), clock=time.process_time, unit="simulated")

    def charge(job: Job, sign: int) -> None:
        nonlocal reserved
        reserved += sign * job.request
        per_queue[job.cluster_queue] += sign * job.request
        per_cohort[job.root_cohort] += sign * job.request
        reserved_by_class[job.class_name] += sign * job.request
        reserving_in[job.cluster_queue] += sign
        changed_queues.add(job.cluster_queue)

    def wait(job: Job, sign: int) -> None:
        pending_by_class[job.class_name] += sign
        pending_in[job.cluster_queue] += sign
        changed_queues.add(job.cluster_queue)

    def observe(job: Job, **flags: bool) -> None:
        namespace, name = job.key.split("/", 1)
        recorder.record_workload(
            WorkloadEvent(now, job.key, job.class_name, namespace, name, **flags)
        )

    def write_queue_status() -> None:
        for cq in sorted(changed_queues):
            recorder.record_cluster_queue(
                ClusterQueueEvent(
                    now,
                    cq,
                    queue_class[cq],
                    nominal[cq],
                    per_queue[cq],
                    per_queue[cq],
                    pending=pending_in[cq],
                    reserving=reserving_in[cq],
                    admitted=reserving_in[cq],
                )
            )
        changed_queues.clear()

    now = 0.0
    write_queue_status()  # every queue's first event: created, empty
    preempted_now: dict[str, int] = {}  # per Workload, its preemptions at `now`
    while (next_time := timeline.next_time()) is not None:
        now = next_time
        if now != last_t:
            preempted_now.clear()
        usage_integral += reserved * (now - last_t)
        last_t = now
        for event, key, pods in timeline.due(now):
            job = by_key[key]
            if event is Event.ARRIVE:
                namespace, name = key.split("/", 1)
                state.upsert_workload(
                    Workload(
                        namespace,
                        name,
                        key,
                        job.cluster_queue,
                        (
                            PodSet(
                                "main",
                                job.pods,
                                {RESOURCE: job.request // job.pods},
                                topology=job.topology,
                            ),
                        ),
                        creation_timestamp=job.created,
                        priority=job.priority,
                    )
                )
                wait(job, 1)
                observe(job)
                counters["created"] += 1
            elif event is Event.FINISH and key in state.cache.admitted:
                state.release(key, requeue=False)
                charge(job, -1)
                observe(job, admitted=True, finished=True)
                job.finished_at = now
                counters["finished"] += 1
            elif event is Event.RELEASE and key in state.cache.admitted:
                # The victim's job has stopped (its one pod): it releases its quota and
                # waits again.
                release_victim(state, key, pods)
                timeline.released(key)
                charge(job, -1)
                observe(job)
                wait(job, 1)
        for result in engine.until_quiet(now):
            if decisions is not None and (result.decisions or result.requeued):
                decisions.write(decision_line(now, result) + "\n")
            for admit in result.admitted:
                job = by_key[admit.workload_key]
                if job.first_admitted_at is None:
                    job.first_admitted_at = now
                    counters["admitted"] += 1
                charge(job, 1)
                limit = limits[job.cluster_queue]
                if per_cohort[job.root_cohort] > capacity[job.root_cohort] or (
                    limit is not None and per_queue[job.cluster_queue] > limit
                ):
                    overuse += 1
                wait(job, -1)
                observe(job, admitted=True)
                timeline.run(admit.workload_key, now + job.runtime)
            for preempt in result.preempting:
                for victim in preempt.to_evict:  # the others' release is on its way
                    preemptions += 1
                    times = preempted_now[victim.workload_key] = (
                        preempted_now.get(victim.workload_key, 0) + 1
                    )
                    if times > FLAPPING_LIMIT:
                        raise PreemptionLoop(
                            f"preemption loop at {now:.3f} s: {victim.workload_key} preempted "
                            f"{times} times while no time passed (last for "
                            f"{preempt.preemptor_key}, {victim.reason.value})"
                        )
                    observe(by_key[victim.workload_key], admitted=True, evicted=True)
                    timeline.schedule(
                        now + ack_delay_ms / 1000, Event.RELEASE, victim.workload_key, victim.pods
                    )
        write_queue_status()
        if not samples or now - samples[-1].t >= sample_every:
            samples.append(Sample(now, dict(pending_by_class), dict(reserved_by_class)))
        meter.update(now, counters)
    meter.done(now, counters)
    unfinished = [job.key for job in jobs if job.finished_at is None]
    if unfinished:
        raise RuntimeError(f"{len(unfinished)} Workloads never finished, e.g. {unfinished[:3]}")
    makespan = max(job.finished_at or 0.0 for job in jobs)
    samples.append(Sample(makespan, dict(pending_by_class), dict(reserved_by_class)))
    return summarize(
        mode="simulate",
        scenario=scenario,
        jobs=jobs,
        makespan=makespan,
        bound=lower_bound(jobs, capacity),
        cpu=time.process_time() - cpu_start,
        recorder=recorder,
        reserved_integral=usage_integral,
        preemptions=preemptions,
        overuse=overuse,
        samples=samples,
        nominal_total=nominal_total,
        extra={"cycles": engine.cycles, "ack_delay_ms": ack_delay_ms},
    )
