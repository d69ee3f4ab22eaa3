"""The cost controller's decision for one Workload, as a pure function."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from api import load_object
from api.quantities import InvalidQuantity, Quantity
from api.workload import Workload
from costcontroller.policy import Clock, CostPolicy


@dataclass(frozen=True, slots=True)
class Decision:
    """`patch` is the status merge patch to send (None = nothing to write); `error` says why
    a policy result was refused (the field is then left unchanged)."""

    patch: dict[str, Any] | None = None
    error: str | None = None
    error_kind: str | None = None


def decide(body: dict[str, Any], policy: CostPolicy, clock: Clock, max_cost: Quantity) -> Decision:
    """What to write for the Workload `body` (a dict as read from the API server)."""
    meta = body.get("metadata") or {}
    name = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    try:
        workload = load_object(body)
    except ValueError as exc:
        return Decision(error=f"{name}: not a valid Workload: {exc}", error_kind="invalid_workload")
    assert isinstance(workload, Workload)
    try:
        result = policy.cost(workload, clock)
    except Exception as exc:  # a user's policy must never crash the controller
        return Decision(
            error=f"{name}: policy raised {type(exc).__name__}: {exc}", error_kind="exception"
        )
    if result is None:
        return Decision()
    if isinstance(result, (int, float)) and not isinstance(result, bool):
        if isinstance(result, float) and not math.isfinite(result):
            return Decision(
                error=f"{name}: policy returned {result!r}, not finite", error_kind="not_finite"
            )
        try:
            result = Quantity.parse(result)
        except InvalidQuantity as exc:
            return Decision(error=f"{name}: {exc}", error_kind="wrong_type")
    if not isinstance(result, Quantity):
        return Decision(
            error=f"{name}: policy returned {type(result).__name__} {result!r}, expected a Quantity or None",
            error_kind="wrong_type",
        )
    if result.milli < 0:
        return Decision(
            error=f"{name}: policy returned {result}, which is negative", error_kind="out_of_range"
        )
    if result > max_cost:
        return Decision(
            error=f"{name}: policy returned {result}, above --max-cost {max_cost}",
            error_kind="out_of_range",
        )
    stored = (body.get("status") or {}).get("preemptionCost")
    if stored is not None:
        try:
            if Quantity.parse(stored) == result:
                return Decision()
        except InvalidQuantity:
            pass
    return Decision(patch={"status": {"preemptionCost": str(result)}})
