"""What quotagate reads from and writes to a Workload, in one place.

Kueue's `pkg/workload` serves both its scheduler and its job controllers; this module does
the same for quotagate's engine, controller, Job and pod integrations, bench, kubectl
plugin and cost controller. It is pure (dicts in, dicts out) and sits at the bottom of
the layers, beside the API models.

- **Readers**, one per question. A Workload *holds quota* when its `QuotaReserved`
  condition is True (Kueue's `workload.HasQuotaReservation`), whatever `status.admission`
  still says: a job side that clears the condition has released the quota, and a stale
  `status.admission` is only data.
- **The admission**: `Admission`/`PodSetAssignment`, `admission_to_api` and its inverse
  `admission_from_api`.
- **Status transitions** (`admit`, `unset_quota_reservation`, `evict`, `release`,
  `finish`, `shrink`): each returns the Workload's *Kueue-managed status* after the change
  — the fields Kueue's `pkg/workload/patching` sends, with every admission-managed
  condition — as server-side apply wants it. A condition keeps its `lastTransitionTime`
  when its status does not change and carries the Workload's generation, as
  `meta.SetStatusCondition` does in Kueue.
- **How it is written** (`apply_body`): server-side apply of the status as Kueue's field
  manager `kueue-admission`, with force. Kueue's scheduler and job side write the same way,
  so a job side that applies the status without `admission` really removes it (server-side
  apply removes only fields the applier owns), and one that merge-patches
  `admission: null` removes it too. See docs/kueue-compatibility.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from api.constants import (
    API_VERSION,
    AdmittedReason,
    CheckState,
    EvictionReason,
    Kind,
    QuotaReservedReason,
    RequeueReason,
    WorkloadConditionType,
)
from api.quantities import InvalidQuantity, Quantity

__all__ = [
    "ADMISSION_FIELD_MANAGER",
    "ADMISSION_MANAGED_CONDITIONS",
    "DEACTIVATION_TARGET",
    "JOB_CONTROLLER_FIELD_MANAGER",
    "Admission",
    "Condition",
    "FlavorResource",
    "PodSetAssignment",
    "PodSetShape",
    "admission_from_api",
    "admission_to_api",
    "admit",
    "all_checks_ready",
    "apply_body",
    "condition",
    "count_eviction",
    "evict",
    "finish",
    "finish_backoff",
    "has_quota_reservation",
    "is_admitted",
    "is_evicted",
    "is_finished",
    "is_true",
    "kueue_status",
    "parse_rfc3339",
    "pending_changed",
    "release",
    "rfc3339",
    "set_condition",
    "set_deactivation_target",
    "shrink",
    "sync_admission_checks",
    "sync_checks",
    "unset_quota_reservation",
]

Condition = WorkloadConditionType
FlavorResource = tuple[str, str]
"""(flavor, resource): the unit quota is counted in."""

ADMISSION_FIELD_MANAGER: Final = "kueue-admission"
"""Kueue's `constants.AdmissionName`: the field manager of every admission-status write."""
JOB_CONTROLLER_FIELD_MANAGER: Final = "kueue-job-controller"
"""Kueue's `constants.JobControllerName` (its single-condition writes append `-<type>`)."""

DEACTIVATION_TARGET: Final = "DeactivationTarget"
"""Kueue's condition marking a Workload the controller is about to deactivate."""

ADMISSION_MANAGED_CONDITIONS: Final = (
    Condition.QUOTA_RESERVED,
    "BlockedOnPreemptionGates",
    Condition.EVICTED,
    Condition.ADMITTED,
    Condition.PREEMPTED,
    Condition.REQUEUED,
    DEACTIVATION_TARGET,
    Condition.FINISHED,
    Condition.PODS_READY,
)
"""The condition types an admission-status write carries (Kueue's
`admissionManagedConditions`, pkg/workload/patching)."""

# Status fields an admission-status write carries as they are, besides the conditions,
# the admission and the eviction history (Kueue's `admissionStatusPatch`).
_CARRIED_FIELDS: Final = (
    "requeueState",
    "accumulatedPastExecutionTimeSeconds",
    "admissionChecks",
    "clusterName",
    "nominatedClusterNames",
    "unhealthyNodes",
    "preemptionGates",
    # quotagate's own: the preemptibility the controller resolved rides along with every
    # admission-status write it makes. A foreign writer's apply as `kueue-admission` that
    # omits it removes it; the controller writes it again with its next write.
    "resolvedPreemptibility",
)

Workload = Mapping[str, Any]
Status = dict[str, Any]


# -- readers -------------------------------------------------------------------------------


def _status(wl: Workload) -> Mapping[str, Any]:
    return wl.get("status") or {}


def condition(wl: Workload, type_: str) -> Mapping[str, Any] | None:
    """The Workload's condition of `type_`, if it has one."""
    for existing in _status(wl).get("conditions") or ():
        if existing.get("type") == type_:
            return existing  # type: ignore[no-any-return]
    return None


def is_true(wl: Workload, type_: str) -> bool:
    found = condition(wl, type_)
    return found is not None and found.get("status") == "True"


def has_quota_reservation(wl: Workload) -> bool:
    """QuotaReserved=True: the Workload holds quota (Kueue's `HasQuotaReservation`)."""
    return is_true(wl, Condition.QUOTA_RESERVED)


def is_admitted(wl: Workload) -> bool:
    """Admitted=True: quota reserved and every admission check passed (Kueue's `IsAdmitted`)."""
    return is_true(wl, Condition.ADMITTED)


def is_evicted(wl: Workload) -> bool:
    return is_true(wl, Condition.EVICTED)


def is_finished(wl: Workload) -> bool:
    return is_true(wl, Condition.FINISHED)


def pending_changed(wl: Workload, reason: str, message: str) -> bool:
    """Whether `unset_quota_reservation(reason, message)` would change the condition."""
    current = condition(wl, Condition.QUOTA_RESERVED)
    return current is None or (
        current.get("status"),
        current.get("reason"),
        current.get("message"),
    ) != ("False", reason, message)


# -- the admission -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PodSetAssignment:
    """`status.admission.podSetAssignments[]`: flavor per resource and total usage of `count` pods."""

    name: str
    count: int
    flavors: Mapping[str, str]
    resource_usage: Mapping[str, int]  # milli-units
    # Where the pods go (topology-aware scheduling): `topologyAssignment` as v1beta2
    # writes it; None without one.
    topology_assignment: Mapping[str, Any] | None = field(default=None, hash=False)

    def usage(self) -> dict[FlavorResource, int]:
        return {
            (self.flavors[resource], resource): value
            for resource, value in self.resource_usage.items()
            if resource in self.flavors
        }


@dataclass(frozen=True, slots=True)
class Admission:
    """`status.admission`: the ClusterQueue and what each pod set was assigned."""

    cluster_queue: str
    pod_set_assignments: tuple[PodSetAssignment, ...]

    def usage(self) -> dict[FlavorResource, int]:
        total: dict[FlavorResource, int] = {}
        for assignment in self.pod_set_assignments:
            for fr, value in assignment.usage().items():
                total[fr] = total.get(fr, 0) + value
        return total


def admission_to_api(admission: Admission) -> dict[str, Any]:
    """`status.admission` as Kueue writes it (quantities in canonical text)."""
    return {
        "clusterQueue": admission.cluster_queue,
        "podSetAssignments": [
            {
                "name": psa.name,
                "count": psa.count,
                "flavors": dict(psa.flavors),
                "resourceUsage": {
                    resource: str(Quantity(value)) for resource, value in psa.resource_usage.items()
                },
                **(
                    {"topologyAssignment": psa.topology_assignment}
                    if psa.topology_assignment is not None
                    else {}
                ),
            }
            for psa in admission.pod_set_assignments
        ],
    }


@dataclass(frozen=True, slots=True)
class PodSetShape:
    """What `admission_from_api` needs of a pod set to fill in an assignment that omits
    its count or usage: the pod count and the per-pod requests (milli-units)."""

    count: int
    requests: Mapping[str, int]


def admission_from_api(
    raw: Any, pod_sets: Mapping[str, PodSetShape]
) -> tuple[Admission | None, list[tuple[str, str]]]:
    """`status.admission` → `Admission`, with every problem as (field path, message).

    An assignment without `count` counts its pod set's pods; one without `resourceUsage`
    charges the pod set's requests × count for the resources it has flavors for (and
    `pods` = count when `pods` has a flavor), as Kueue computes it."""
    problems: list[tuple[str, str]] = []
    path = "status.admission"
    if not isinstance(raw, Mapping):
        return None, [(path, f"expected an object, got {type(raw).__name__}")]
    cluster_queue = raw.get("clusterQueue")
    if not isinstance(cluster_queue, str) or not cluster_queue:
        problems.append((f"{path}.clusterQueue", "required"))
    entries = raw.get("podSetAssignments") or []
    if not isinstance(entries, list):
        problems.append((f"{path}.podSetAssignments", "expected a list"))
        entries = []
    assignments = []
    for i, entry in enumerate(entries):
        apath = f"{path}.podSetAssignments[{i}]"
        if not isinstance(entry, Mapping):
            problems.append((apath, f"expected an object, got {type(entry).__name__}"))
            continue
        name = str(entry.get("name") or "main")
        shape = pod_sets.get(name)
        flavors = entry.get("flavors") or {}
        if not isinstance(flavors, Mapping) or not all(
            isinstance(v, str) for v in flavors.values()
        ):
            problems.append((f"{apath}.flavors", "expected a map of resource → flavor name"))
            flavors = {}
        count = entry.get("count", shape.count if shape else 0)
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            problems.append((f"{apath}.count", f"expected a non-negative integer, not {count!r}"))
            count = 0
        usage: dict[str, int] = {}
        raw_usage = entry.get("resourceUsage") or {}
        if not isinstance(raw_usage, Mapping):
            problems.append((f"{apath}.resourceUsage", "expected a map of resource → quantity"))
            raw_usage = {}
        for resource, value in raw_usage.items():
            try:
                usage[str(resource)] = Quantity.parse(value).milli
            except InvalidQuantity as exc:
                problems.append((f"{apath}.resourceUsage.{resource}", str(exc)))
        if not raw_usage and shape is not None:
            usage = {res: v * count for res, v in shape.requests.items() if res in flavors}
            if "pods" in flavors:
                usage["pods"] = 1000 * count
        topology = entry.get("topologyAssignment")
        if topology is not None and not isinstance(topology, Mapping):
            problems.append((f"{apath}.topologyAssignment", "expected an object"))
            topology = None
        assignments.append(PodSetAssignment(name, count, dict(flavors), usage, topology))
    if problems:
        return None, problems
    return Admission(str(cluster_queue), tuple(assignments)), []


# -- status transitions --------------------------------------------------------------------


def parse_rfc3339(text: Any) -> float | None:
    """An RFC 3339 time as Kubernetes writes it (optionally with fractional seconds) as
    seconds since the epoch; None if it is not one."""
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def rfc3339(moment: float) -> str:
    """Kubernetes' `metav1.Time` text for an epoch timestamp (second precision, UTC)."""
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _generation(wl: Workload) -> int | None:
    generation = (wl.get("metadata") or {}).get("generation")
    return generation if isinstance(generation, int) else None


def set_condition(
    conditions: Sequence[Mapping[str, Any]],
    type_: str,
    status: bool,
    reason: str,
    message: str,
    now: float,
    observed_generation: int | None = None,
) -> list[dict[str, Any]]:
    """`conditions` with `type_` set; the others are kept as they are. The transition time
    moves only when the status changes (`meta.SetStatusCondition`)."""
    text = "True" if status else "False"
    result: list[dict[str, Any]] = []
    found = False
    for existing in conditions:
        if existing.get("type") != type_:
            result.append(dict(existing))
            continue
        found = True
        updated = dict(existing)
        if existing.get("status") != text:
            updated["lastTransitionTime"] = rfc3339(now)
        updated.update(status=text, reason=reason, message=message[:32768])
        if observed_generation is not None:
            updated["observedGeneration"] = observed_generation
        result.append(updated)
    if not found:
        added: dict[str, Any] = {
            "type": type_,
            "status": text,
            "reason": reason,
            "message": message[:32768],
            "lastTransitionTime": rfc3339(now),
        }
        if observed_generation is not None:
            added["observedGeneration"] = observed_generation
        result.append(added)
    return result


def kueue_status(wl: Workload) -> Status:
    """The part of the Workload's status an admission-status write owns: the admission
    (only while quota is reserved), the admission-managed conditions, the eviction
    history, the fields Kueue's `admissionStatusPatch` carries and `resolvedPreemptibility`.
    Copies: the caller may change it. `preemptionCost` (the cost controller's) and
    conditions of other types are never part of it."""
    status = _status(wl)
    out: Status = {
        "conditions": [
            dict(c)
            for c in status.get("conditions") or ()
            if c.get("type") in ADMISSION_MANAGED_CONDITIONS
        ]
    }
    if status.get("admission") and has_quota_reservation(wl):
        out["admission"] = status["admission"]
    for name in _CARRIED_FIELDS:
        if status.get(name) is not None:
            out[name] = status[name]
    evictions = (status.get("schedulingStats") or {}).get("evictions")
    if evictions:
        out["schedulingStats"] = {"evictions": [dict(e) for e in evictions]}
    if status.get("resourceRequests") and "admission" not in out:
        out["resourceRequests"] = status["resourceRequests"]
    return out


def _with_condition(
    wl: Workload,
    status: Status,
    type_: str,
    value: bool,
    reason: str,
    message: str,
    now: float,
) -> None:
    status["conditions"] = set_condition(
        status["conditions"], type_, value, reason, message, now, _generation(wl)
    )


def _condition_in(status: Status, type_: str) -> Mapping[str, Any] | None:
    return next((c for c in status["conditions"] if c.get("type") == type_), None)


def all_checks_ready(status: Mapping[str, Any]) -> bool:
    """Every admission check on the Workload is Ready (Kueue's `HasAllChecksReady`; true
    without checks)."""
    return all(c.get("state") == CheckState.READY for c in status.get("admissionChecks") or ())


def sync_admission_checks(status: Status, required: Sequence[str], now: float) -> bool:
    """Keep `status.admissionChecks` to the checks in `required`, as Kueue's workload
    controller does (`syncAdmissionCheckConditions`): a new one Pending, one no longer
    required dropped, sorted by name, none at all without checks; whether it changed."""
    current = {str(c.get("name")): dict(c) for c in status.get("admissionChecks") or ()}
    if not required:
        return bool(status.pop("admissionChecks", None))
    wanted = set(required)
    changed = not wanted.issuperset(current)
    for name in wanted - set(current):
        current[name] = {
            "name": name,
            "state": CheckState.PENDING.value,
            "message": "",
            "lastTransitionTime": rfc3339(now),
        }
        changed = True
    status["admissionChecks"] = [current[name] for name in sorted(wanted)]
    return changed


def _reset_checks_on_eviction(status: Status, now: float) -> None:
    """Every check not Pending back to Pending, a Retry counted in `retryCount` (Kueue's
    `resetChecksOnEviction`): the check is evaluated afresh for the next reservation."""
    checks = status.get("admissionChecks")
    if not checks:
        return
    reset = []
    for check in checks:
        state = check.get("state")
        if state == CheckState.PENDING:
            reset.append(dict(check))
            continue
        entry: dict[str, Any] = {
            "name": check.get("name"),
            "state": CheckState.PENDING.value,
            "message": f"Reset to Pending after eviction. Previously: {state}",
            "lastTransitionTime": rfc3339(now),
        }
        if check.get("requeueAfterSeconds") is not None:
            entry["requeueAfterSeconds"] = check["requeueAfterSeconds"]
        if state == CheckState.RETRY:
            entry["retryCount"] = int(check.get("retryCount") or 0) + 1
        reset.append(entry)
    status["admissionChecks"] = reset


def _sync_admitted(wl: Workload, status: Status, now: float) -> None:
    """Admitted is True once quota is reserved and every admission check is Ready (Kueue's
    `SyncAdmittedCondition`); an admitted Workload stays so until it loses its quota."""
    reserved = _condition_in(status, Condition.QUOTA_RESERVED)
    holds = reserved is not None and reserved.get("status") == "True"
    admitted = _condition_in(status, Condition.ADMITTED)
    if holds and not all_checks_ready(status):
        if admitted is not None and admitted.get("status") == "True":
            return  # Kueue's: the eviction the check asks for takes it back
        _with_condition(
            wl,
            status,
            Condition.ADMITTED,
            False,
            AdmittedReason.UNSATISFIED_ADMISSION_CHECKS,
            "The workload has not all checks ready",
            now,
        )
    elif holds:
        _with_condition(
            wl,
            status,
            Condition.ADMITTED,
            True,
            AdmittedReason.ADMITTED,
            "The workload is admitted",
            now,
        )
    elif _condition_in(status, Condition.ADMITTED) is not None or reserved is not None:
        _accumulate_execution_time(status, now)
        _with_condition(
            wl,
            status,
            Condition.ADMITTED,
            False,
            AdmittedReason.NO_RESERVATION,
            "The workload has no reservation",
            now,
        )


def _accumulate_execution_time(status: Status, now: float) -> None:
    """Admitted True → False: add the whole seconds it was admitted to
    `accumulatedPastExecutionTimeSeconds`, as Kueue's `SyncAdmittedCondition` does."""
    admitted = _condition_in(status, Condition.ADMITTED)
    if admitted is None or admitted.get("status") != "True":
        return
    since = parse_rfc3339(admitted.get("lastTransitionTime"))
    if since is None:
        return
    past = status.get("accumulatedPastExecutionTimeSeconds")
    previous = past if isinstance(past, int) and not isinstance(past, bool) else 0
    status["accumulatedPastExecutionTimeSeconds"] = previous + max(0, int(now - since))


def admit(
    wl: Workload, admission: Mapping[str, Any], now: float, checks: Sequence[str] = ()
) -> Status:
    """Quota reserved: `status.admission` replaced, QuotaReserved=True, `status.admissionChecks`
    kept to `checks` (those the reservation needs), Admitted=True once every one is Ready
    (at once without checks), and a previous Evicted/Preempted=True reset to False with
    reason QuotaReserved ("Previously: …")."""
    status = kueue_status(wl)
    sync_admission_checks(status, checks, now)
    status["admission"] = dict(admission)
    status.pop("resourceRequests", None)
    cq = admission["clusterQueue"]
    _with_condition(
        wl,
        status,
        Condition.QUOTA_RESERVED,
        True,
        QuotaReservedReason.QUOTA_RESERVED,
        f"Quota reserved in ClusterQueue {cq}",
        now,
    )
    _sync_admitted(wl, status, now)
    for type_ in (Condition.EVICTED, Condition.PREEMPTED):
        previous = _condition_in(status, type_)
        if previous is not None and previous.get("status") == "True":
            message = f"Previously: {previous.get('message', '')}"
            _with_condition(
                wl, status, type_, False, QuotaReservedReason.QUOTA_RESERVED, message, now
            )
    return status


def unset_quota_reservation(wl: Workload, reason: str, message: str, now: float) -> Status:
    """QuotaReserved=False with `reason` and `message`, the admission removed and Admitted
    synced (Kueue's `UnsetQuotaReservationWithCondition`): a pending Workload's reason."""
    status = kueue_status(wl)
    status.pop("admission", None)
    _with_condition(wl, status, Condition.QUOTA_RESERVED, False, reason, message, now)
    _sync_admitted(wl, status, now)
    return status


def count_eviction(status: Status, reason: str, underlying_cause: str = "") -> None:
    """Add one to `schedulingStats.evictions[(reason, underlyingCause)]`."""
    evictions = list((status.get("schedulingStats") or {}).get("evictions") or ())
    for i, entry in enumerate(evictions):
        if entry.get("reason") == reason and entry.get("underlyingCause", "") == underlying_cause:
            evictions[i] = {**entry, "count": int(entry.get("count", 0)) + 1}
            break
    else:
        evictions.append({"reason": reason, "underlyingCause": underlying_cause, "count": 1})
    status["schedulingStats"] = {"evictions": evictions}


def evict(
    wl: Workload,
    reason: str,
    message: str,
    now: float,
    preemption_reason: str | None = None,
    underlying_cause: str = "",
    requeue_state: Mapping[str, Any] | None = None,
) -> Status:
    """Evicted=True (and Preempted=True with its variant for a preemption), the eviction
    counted as (reason, underlying_cause), `unhealthyNodes` dropped. Quota stays reserved
    until the Workload's owner releases it (`release`).

    As Kueue's deactivation: a Deactivated eviction with a cause carries the condition
    reason `DeactivatedDueTo<cause>`, and removes the DeactivationTarget condition and
    `requeueState`. `requeue_state` (a PodsReadyTimeout eviction) replaces requeueState."""
    status = kueue_status(wl)
    condition_reason = reason
    if reason == EvictionReason.DEACTIVATED:
        if underlying_cause:
            condition_reason = f"{reason}DueTo{underlying_cause}"
        status["conditions"] = [
            c for c in status["conditions"] if c.get("type") != DEACTIVATION_TARGET
        ]
        status.pop("requeueState", None)
    if requeue_state is not None:
        status["requeueState"] = dict(requeue_state)
    _reset_checks_on_eviction(status, now)
    status.pop("unhealthyNodes", None)  # Kueue's resetUnhealthyNodes
    _with_condition(wl, status, Condition.EVICTED, True, condition_reason, message, now)
    if preemption_reason is not None:
        _with_condition(wl, status, Condition.PREEMPTED, True, preemption_reason, message, now)
    count_eviction(status, reason, underlying_cause)
    return status


def sync_checks(wl: Workload, checks: Sequence[str], now: float) -> Status | None:
    """A Workload holding quota: `status.admissionChecks` kept to `checks`, and Admitted
    set once every one is Ready (Kueue's workload controller); None when nothing changes."""
    status = kueue_status(wl)
    before = (status.get("admissionChecks"), _condition_in(status, Condition.ADMITTED))
    sync_admission_checks(status, checks, now)
    _sync_admitted(wl, status, now)
    after = (status.get("admissionChecks"), _condition_in(status, Condition.ADMITTED))
    return None if before == after else status


def set_deactivation_target(
    wl: Workload, reason: str, message: str, now: float, clear_accumulated: bool = False
) -> Status:
    """DeactivationTarget=True (`reason`, `message`): Kueue's mark that the Workload is to
    be deactivated; with `clear_accumulated`, accumulatedPastExecutionTimeSeconds is
    dropped (maximum execution time reached)."""
    status = kueue_status(wl)
    _with_condition(wl, status, DEACTIVATION_TARGET, True, reason, message, now)
    if clear_accumulated:
        status.pop("accumulatedPastExecutionTimeSeconds", None)
    return status


def finish_backoff(wl: Workload, now: float) -> Status:
    """The requeue backoff has passed: Requeued=True (BackoffFinished) and
    `requeueState.requeueAt` removed (the count stays), as Kueue's workload controller."""
    status = kueue_status(wl)
    requeue = dict(status.get("requeueState") or {})
    requeue.pop("requeueAt", None)
    if requeue:
        status["requeueState"] = requeue
    else:
        status.pop("requeueState", None)
    _with_condition(
        wl,
        status,
        Condition.REQUEUED,
        True,
        RequeueReason.BACKOFF_FINISHED,
        "The workload backoff was finished",
        now,
    )
    return status


def mark_requeued(wl: Workload, reason: str, message: str, now: float) -> Status:
    """Requeued=True with `reason`: what held the Workload back is over (Kueue's
    Reactivated, ClusterQueueRestarted, LocalQueueRestarted)."""
    status = kueue_status(wl)
    _with_condition(wl, status, Condition.REQUEUED, True, reason, message, now)
    return status


_REQUEUED_AFTER: Final = (EvictionReason.PREEMPTED, EvictionReason.NODE_FAILURES)


def release(wl: Workload, now: float) -> Status:
    """The owner's acknowledgement of an eviction, as Kueue's job reconciler writes it:
    QuotaReserved=False (PendingEvaluation, the eviction's message), the admission
    removed, Admitted=False, and Requeued=True after a preemption or node failure (the
    Workload competes again at once), False otherwise."""
    eviction = condition(wl, Condition.EVICTED)
    message = str(eviction.get("message", "")) if eviction else ""
    reason = str(eviction.get("reason", "")) if eviction else ""
    status = unset_quota_reservation(wl, QuotaReservedReason.PENDING_EVALUATION, message, now)
    requeued = reason in _REQUEUED_AFTER
    _with_condition(wl, status, Condition.REQUEUED, requeued, reason or "Evicted", message, now)
    return status


def finish(wl: Workload, reason: str, message: str, now: float) -> Status:
    """Finished=True: the Workload's quota returns."""
    status = kueue_status(wl)
    _with_condition(wl, status, Condition.FINISHED, True, reason, message, now)
    return status


def shrink(wl: Workload, pods: int) -> Status | None:
    """A `DisruptionMode: Pod` preemption of `pods` pods: the single pod set's admitted
    count and usage shrink proportionally, the eviction is counted and the Workload stays
    admitted. None when there is nothing to shrink (not reserved, several pod sets, or
    `pods` would take every pod)."""
    status = kueue_status(wl)
    admission = status.get("admission")
    if not admission:
        return None
    assignments = list(admission.get("podSetAssignments") or ())
    if len(assignments) != 1:
        return None
    first = dict(assignments[0])
    count = int(first.get("count", 0))
    left = count - pods
    if left <= 0:
        return None
    first["count"] = left
    first["resourceUsage"] = {
        resource: str(Quantity(Quantity.parse(value).milli * left // count))
        for resource, value in (first.get("resourceUsage") or {}).items()
    }
    status["admission"] = {**admission, "podSetAssignments": [first]}
    count_eviction(status, EvictionReason.PREEMPTED)
    return status


# -- writing -------------------------------------------------------------------------------


def apply_body(
    wl: Workload,
    status: Mapping[str, Any],
    *,
    strict: bool = True,
    extra: Iterable[tuple[str, Any]] = (),
) -> dict[str, Any]:
    """The server-side apply request for `status` (a `kueue_status` after a transition):
    the object's identity (uid, so a recreated namespace/name is refused; with `strict`,
    the resourceVersion it was computed from, so a stale computation is refused with 409)
    and the status. `extra` adds status fields that ride along (quotagate's own)."""
    meta = wl.get("metadata") or {}
    identity: dict[str, Any] = {"name": meta.get("name"), "namespace": meta.get("namespace")}
    if meta.get("uid"):
        identity["uid"] = meta["uid"]
    if strict and meta.get("resourceVersion"):
        identity["resourceVersion"] = meta["resourceVersion"]
    return {
        "apiVersion": API_VERSION,
        "kind": Kind.WORKLOAD.value,
        "metadata": identity,
        "status": {**status, **dict(extra)},
    }
