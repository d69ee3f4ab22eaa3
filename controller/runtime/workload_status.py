"""Workload status transitions written back Kueue-style (kueue-semantics §1.6, §5.9).

Pure functions: each takes the Workload's current `status` (a dict, as read from the API
server) and returns the *new* status fragment to send as a JSON merge patch on the status
subresource. Conditions are recomputed as a whole list (a merge patch replaces lists), and
a condition keeps its `lastTransitionTime` when its status does not change, as
`meta.SetStatusCondition` does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

QUOTA_RESERVED = "QuotaReserved"
ADMITTED = "Admitted"
EVICTED = "Evicted"
PREEMPTED = "Preempted"
REQUEUED = "Requeued"
FINISHED = "Finished"

Status = Mapping[str, Any]
Condition = dict[str, Any]


def rfc3339(moment: float) -> str:
    """Kubernetes' `metav1.Time` text for an epoch timestamp (second precision, UTC)."""
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def set_condition(
    conditions: Sequence[Mapping[str, Any]],
    type_: str,
    status: bool,
    reason: str,
    message: str,
    now: float,
    observed_generation: int | None = None,
) -> list[Condition]:
    """Return `conditions` with `type_` set; other conditions are kept as they are."""
    text = "True" if status else "False"
    result: list[Condition] = []
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
        condition: Condition = {
            "type": type_,
            "status": text,
            "reason": reason,
            "message": message[:32768],
            "lastTransitionTime": rfc3339(now),
        }
        if observed_generation is not None:
            condition["observedGeneration"] = observed_generation
        result.append(condition)
    return result


def condition(status: Status, type_: str) -> Mapping[str, Any] | None:
    for existing in status.get("conditions") or ():
        if existing.get("type") == type_:
            return existing  # type: ignore[no-any-return]
    return None


def is_true(status: Status, type_: str) -> bool:
    found = condition(status, type_)
    return found is not None and found.get("status") == "True"


def admitted(
    status: Status, admission: Mapping[str, Any], now: float, generation: int | None
) -> dict[str, Any]:
    """Quota reserved and admitted (no admission checks): QuotaReserved=True, Admitted=True;
    a previous Evicted/Preempted=True is reset to False with reason QuotaReserved."""
    cq = admission["clusterQueue"]
    conditions = list(status.get("conditions") or ())
    conditions = set_condition(
        conditions,
        QUOTA_RESERVED,
        True,
        "QuotaReserved",
        f"Quota reserved in ClusterQueue {cq}",
        now,
        generation,
    )
    conditions = set_condition(
        conditions, ADMITTED, True, "Admitted", "The workload is admitted", now, generation
    )
    for type_ in (EVICTED, PREEMPTED):
        previous = condition(status, type_)
        if previous is not None and previous.get("status") == "True":
            conditions = set_condition(
                conditions,
                type_,
                False,
                "QuotaReserved",
                f"Previously: {previous.get('message', '')}",
                now,
                generation,
            )
    return {"admission": dict(admission), "conditions": conditions}


def pending(
    status: Status, reason: str, message: str, now: float, generation: int | None
) -> dict[str, Any]:
    """Tried and not admitted: QuotaReserved=False with the exact reason, Admitted=False."""
    conditions = set_condition(
        list(status.get("conditions") or ()),
        QUOTA_RESERVED,
        False,
        reason,
        message,
        now,
        generation,
    )
    conditions = set_condition(
        conditions,
        ADMITTED,
        False,
        "NoReservation",
        "The workload has no reservation",
        now,
        generation,
    )
    return {"conditions": conditions}


def pending_changed(status: Status, reason: str, message: str) -> bool:
    """Whether writing `pending(reason, message)` would change anything (avoid write storms)."""
    current = condition(status, QUOTA_RESERVED)
    return current is None or (
        current.get("status"),
        current.get("reason"),
        current.get("message"),
    ) != (
        "False",
        reason,
        message,
    )


def evicted(
    status: Status,
    reason: str,
    message: str,
    now: float,
    generation: int | None,
    preemption_reason: str | None = None,
) -> dict[str, Any]:
    """Evicted=True (and Preempted=True with its variant for a preemption); the eviction is
    counted in `schedulingStats.evictions[(reason, underlyingCause="")]`. Quota stays
    reserved until the Workload's owner acknowledges (see `released`)."""
    conditions = set_condition(
        list(status.get("conditions") or ()), EVICTED, True, reason, message, now, generation
    )
    if preemption_reason is not None:
        conditions = set_condition(
            conditions, PREEMPTED, True, preemption_reason, message, now, generation
        )
    return {"conditions": conditions, "schedulingStats": count_eviction(status, reason)}


def count_eviction(status: Status, reason: str, underlying_cause: str = "") -> dict[str, Any]:
    stats = dict(status.get("schedulingStats") or {})
    evictions = [dict(entry) for entry in stats.get("evictions") or ()]
    for entry in evictions:
        if entry.get("reason") == reason and entry.get("underlyingCause", "") == underlying_cause:
            entry["count"] = int(entry.get("count", 0)) + 1
            break
    else:
        evictions.append({"reason": reason, "underlyingCause": underlying_cause, "count": 1})
    stats["evictions"] = evictions
    return stats


def released(status: Status, now: float, generation: int | None) -> dict[str, Any]:
    """The owner's acknowledgement of an eviction: quota reservation cleared, Requeued=True
    for a preemption (the Workload competes again), admission removed."""
    eviction = condition(status, EVICTED)
    message = str(eviction.get("message", "")) if eviction else ""
    reason = str(eviction.get("reason", "")) if eviction else ""
    conditions = set_condition(
        list(status.get("conditions") or ()),
        QUOTA_RESERVED,
        False,
        "PendingEvaluation",
        message,
        now,
        generation,
    )
    conditions = set_condition(
        conditions,
        ADMITTED,
        False,
        "NoReservation",
        "The workload has no reservation",
        now,
        generation,
    )
    requeue = reason in ("Preempted", "NodeFailures")
    conditions = set_condition(
        conditions, REQUEUED, requeue, reason or "Evicted", message, now, generation
    )
    return {"admission": None, "conditions": conditions}


def finished(
    status: Status, reason: str, message: str, now: float, generation: int | None
) -> dict[str, Any]:
    conditions = set_condition(
        list(status.get("conditions") or ()), FINISHED, True, reason, message, now, generation
    )
    return {"conditions": conditions}
