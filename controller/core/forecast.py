"""When will a pending Workload be admitted? The engine's own cycle run forward in virtual
time on a copy of the live state (quotagate's, beyond Kueue; Kueue #13159). Pure.

The forecast replays what the controller would do if nothing new arrived:

- every Workload holding quota finishes when its expected runtime is over, counted from its
  quota reservation and net of `status.accumulatedPastExecutionTimeSeconds`; the expected
  runtime is the `quotagate.x-k8s.io/expected-runtime-seconds` annotation if it is valid,
  else `spec.maximumExecutionTimeSeconds` (the controller stops the Workload then), else
  unknown;
- a Workload with an unknown runtime never finishes in the forecast (it is assumed to run
  beyond the answer); if the target can only be admitted once one of them ends, there is no
  estimate, and the answer names them (those of its ClusterQueue and cohort);
- admission cycles run at every event (a finish, a victim's release, a requeueAt, the end
  of a minimum-runtime protection) exactly as the controller's engine decides them
  (controller/core/engine.py), preemptions included; a victim releases its quota at once and waits again, starting over;
- Workloads created after the forecast's start, spec changes, PodsReady timeouts and
  `blockAdmission` are not modelled.

The work is bounded (`max_cycles`, `horizon_seconds`); hitting a bound is an answer of its
own, never a guess: "not before" the simulated time reached. Each simulated cycle costs what
a live cycle costs (tests/bench/bench_forecast.py prints the figures).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Final

from api.constants import EXPECTED_RUNTIME_ANNOTATION
from api.workload_status import rfc3339
from controller.core.engine import Engine, Event, Timeline, release_victim
from controller.core.model.workloads import Workload, WorkloadKey
from controller.core.pending import why_pending
from controller.core.state import ClusterState

__all__ = ["MAXIMUM_EXECUTION_TIME", "Forecast", "Runtime", "expected_runtime", "forecast"]

MAXIMUM_EXECUTION_TIME: Final = "spec.maximumExecutionTimeSeconds"


@dataclass(frozen=True, slots=True)
class Runtime:
    """A Workload's expected total runtime (None: unknown) and where it comes from."""

    seconds: int | None
    source: str | None  # EXPECTED_RUNTIME_ANNOTATION | MAXIMUM_EXECUTION_TIME | None
    invalid: str | None = None  # the annotation's value when it is not a whole number


def expected_runtime(workload: Workload) -> Runtime:
    """The annotation if valid, else `spec.maximumExecutionTimeSeconds`, else unknown."""
    text = workload.expected_runtime
    invalid = None
    if text is not None:
        if text.isascii() and text.isdigit():
            return Runtime(int(text), EXPECTED_RUNTIME_ANNOTATION)
        invalid = text
    if workload.maximum_execution_time_seconds is not None:
        return Runtime(workload.maximum_execution_time_seconds, MAXIMUM_EXECUTION_TIME, invalid)
    return Runtime(None, None, invalid)


@dataclass(slots=True)
class Forecast:
    """The answer: `admitted_at` (None: no estimate, `reason` says why) and the assumptions
    it rests on."""

    key: WorkloadKey
    now: float
    admitted_at: float | None = None
    # When a bound was hit: the simulated time reached, a lower bound of the admission.
    not_before: float | None = None
    cluster_queue: str | None = None
    reason: str | None = None
    # Workloads whose runtime the forecast used, by source (each counted once).
    runtime_sources: Counter[str] = field(default_factory=Counter)
    # Workloads that held quota with an unknown runtime when the forecast ended.
    unknown: list[WorkloadKey] = field(default_factory=list)
    # Workloads whose expected-runtime annotation is not a whole number (value).
    invalid: dict[WorkloadKey, str] = field(default_factory=dict)
    admitted_before: int = 0  # Workloads the forecast admits before the target
    preemptions: int = 0  # victims the forecast evicts
    cycles: int = 0


def forecast(
    state: ClusterState,
    key: WorkloadKey,
    now: float,
    *,
    horizon_seconds: float = 30 * 86400.0,
    max_cycles: int = 20_000,
) -> Forecast:
    """Run the engine forward from `now` until `key` is admitted. `state` is consumed: pass
    a copy built for the forecast (`Snapshot.state()`)."""
    answer = Forecast(key, now)
    record = state.cache.records.get(key)
    if record is None:
        answer.reason = "the engine does not hold this Workload"
        return answer
    if record.holds_quota:
        answer.reason = "it already holds quota"
        return answer
    engine = Engine(state)
    timeline = Timeline()
    seen: set[WorkloadKey] = set()

    def started(held: WorkloadKey, at: float, elapsed: float) -> None:
        """A Workload holds quota from `at - elapsed` on: when its run ends."""
        workload = state.cache.records[held].workload
        runtime = expected_runtime(workload)
        if runtime.invalid is not None:
            answer.invalid[held] = runtime.invalid
        if held not in seen and runtime.source is not None:
            answer.runtime_sources[runtime.source] += 1
        seen.add(held)
        if runtime.seconds is None:
            timeline.run(held, None)
            return
        left = runtime.seconds - workload.accumulated_past_execution_time_seconds - elapsed
        timeline.run(held, at + max(0.0, left))

    for held in sorted(state.cache.admitted):
        reserved = state.cache.records[held].workload.quota_reserved_at
        started(held, now, max(0.0, now - reserved) if reserved is not None else 0.0)

    at = now
    while True:
        quiet = False  # cycles at this instant until nothing changes
        for result in engine.until_quiet(at, max_cycles=max_cycles - answer.cycles):
            answer.cycles += 1
            for admit in result.admitted:
                if admit.workload_key == key:
                    answer.admitted_at, answer.cluster_queue = at, admit.cluster_queue
                    return _unknown(answer, state)
                answer.admitted_before += 1
                started(admit.workload_key, at, 0.0)
            for preempt in result.preempting:
                for victim in preempt.to_evict:  # the others' release is on its way
                    answer.preemptions += 1
                    timeline.schedule(at, Event.RELEASE, victim.workload_key, victim.pods)
            quiet = not result.changed
        if not quiet:
            answer.not_before = at
            answer.reason = (
                f"no estimate within {max_cycles} simulated admission cycles; under these "
                f"assumptions not before {rfc3339(at)}"
            )
            return _unknown(answer, state)
        following = (timeline.next_time(), state.queues.next_timed_retry())
        upcoming = [t for t in following if t is not None]
        if not upcoming:
            if not _waits_for_unknown(state, key):
                answer.reason = f"not admitted as things stand: {why_pending(state, key)}"
            return _unknown(answer, state, blocked=True)
        at = max(at, min(upcoming))
        if at - now > horizon_seconds:
            answer.not_before = now + horizon_seconds
            answer.reason = f"not admitted within {horizon_seconds / 86400:g} days"
            return _unknown(answer, state)
        for event, held, detail in timeline.due(at):
            holding = state.cache.records.get(held)
            if holding is None or not holding.holds_quota:
                continue
            if event is Event.FINISH:
                state.release(held, requeue=False)
            elif event is Event.RELEASE:
                release_victim(state, held, detail)
                timeline.released(held)  # its scheduled end no longer holds


def _in_reach(state: ClusterState, key: WorkloadKey) -> frozenset[str]:
    """The ClusterQueues whose usage can hold the Workload back: its own (through its
    LocalQueue) and the other members of its cohort."""
    local_queue = state.objects.local_queues.get(state.cache.local_queue_key(key))
    if local_queue is None:
        return frozenset()
    return state.cache.quota.reach(local_queue.cluster_queue)


def _waits_for_unknown(state: ClusterState, key: WorkloadKey) -> bool:
    reach = _in_reach(state, key)
    return any(
        record.cluster_queue in reach and expected_runtime(record.workload).seconds is None
        for record in state.cache.admitted.values()
    )


def _unknown(answer: Forecast, state: ClusterState, blocked: bool = False) -> Forecast:
    """Record the Workloads still holding quota with an unknown runtime; when the target
    is blocked and no reason was given, they are the reason."""
    reach = _in_reach(state, answer.key)
    answer.unknown = sorted(
        held
        for held, record in state.cache.admitted.items()
        if held != answer.key
        and record.cluster_queue in reach
        and expected_runtime(record.workload).seconds is None
    )
    if blocked and answer.reason is None:
        names = ", ".join(answer.unknown[:3]) + (" …" if len(answer.unknown) > 3 else "")
        answer.reason = (
            f"cannot estimate: it waits for {len(answer.unknown)} admitted Workload"
            f"{'s' if len(answer.unknown) != 1 else ''} whose runtime is unknown ({names}); "
            f"set spec.maximumExecutionTimeSeconds or the {EXPECTED_RUNTIME_ANNOTATION} "
            "annotation on them"
        )
    return answer
