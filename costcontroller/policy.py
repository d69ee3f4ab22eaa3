"""The `CostPolicy` interface and the bundled policies (KEP-7990).

A policy turns a Workload into a preemption cost: a `Quantity` (higher = more expensive to
preempt), or None to leave `status.preemptionCost` unset. It gets the Workload as the
pydantic model from `api` and a clock (a callable returning epoch seconds), and must not
do I/O. Write your own as a small class:

    from api.quantities import Quantity

    class GpuHoursPolicy:
        def __init__(self, per_gpu: str = "1") -> None:
            self.per_gpu = Quantity.parse(per_gpu)

        def cost(self, workload, clock):
            gpus = sum(ps.count for ps in workload.spec.pod_sets)
            return self.per_gpu * gpus

and run `quotagate cost-controller --policy mypkg.policies:GpuHoursPolicy --policy-arg per_gpu=2`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from datetime import datetime
from importlib.metadata import entry_points
from typing import Any, Protocol, runtime_checkable

from api.quantities import Quantity
from api.workload import Workload

Clock = Callable[[], float]

ENTRY_POINT_GROUP = "quotagate.cost_policies"


@runtime_checkable
class CostPolicy(Protocol):
    """What a cost controller calls for every Workload it sees."""

    def cost(self, workload: Workload, clock: Clock) -> Quantity | None:
        """The Workload's preemption cost, or None to leave the field unset."""


class PolicyLoadError(ValueError):
    """A `--policy` that cannot be loaded; the message says which and why."""


class EvictionCountPolicy:
    """The reference policy: `base + number of evictions with reason Preempted`, read from
    `status.schedulingStats.evictions[]`. A Workload that was already preempted often
    costs more to preempt again (and, with the queue order, waits less)."""

    def __init__(self, base: str | int = 0) -> None:
        self.base = Quantity.parse(base)

    def cost(self, workload: Workload, clock: Clock) -> Quantity | None:
        status = workload.status
        stats = status.scheduling_stats if status is not None else None
        evictions = (stats.evictions if stats is not None else None) or []
        preempted = sum(int(entry.count) for entry in evictions if entry.reason == "Preempted")
        return self.base + Quantity.from_units(preempted)


class TimeSinceReservedPolicy:
    """An example of a checkpoint-style cost: it grows by 1 every `per_seconds` since quota
    was reserved (the work that would be lost), capped at `cap`; unset while pending.
    Time-based costs change without any event: run the controller with `--resync`."""

    def __init__(self, per_seconds: str | float = 60, cap: str | int = 100) -> None:
        self.per_seconds = float(per_seconds)
        if self.per_seconds <= 0:
            raise ValueError(f"per_seconds must be positive, got {per_seconds!r}")
        self.cap = Quantity.parse(cap)

    def cost(self, workload: Workload, clock: Clock) -> Quantity | None:
        status = workload.status
        if status is None:
            return None
        # Reserved since the QuotaReserved condition's transition (Kueue's rule: the
        # condition, not `status.admission`, says whether the Workload holds quota).
        reserved = next(
            (
                c
                for c in status.conditions or []
                if c.type == "QuotaReserved" and c.status == "True"
            ),
            None,
        )
        if reserved is None:
            return None
        since = _epoch(reserved.last_transition_time)
        units = max(0, int((clock() - since) // self.per_seconds))
        return min(Quantity.from_units(units), self.cap)


def _epoch(value: Any) -> float:
    if isinstance(value, datetime):
        return value.timestamp()
    return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()


BUILTIN: dict[str, type] = {
    "eviction-count": EvictionCountPolicy,
    "time-since-reserved": TimeSinceReservedPolicy,
}


def load_policy(spec: str, args: dict[str, str] | None = None) -> CostPolicy:
    """A policy by built-in name, `module.path:ClassName`, or entry-point name."""
    args = args or {}
    factory: Any
    if spec in BUILTIN:
        factory = BUILTIN[spec]
    elif ":" in spec:
        module_name, _, attribute = spec.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise PolicyLoadError(f"--policy {spec}: cannot import {module_name}: {exc}") from exc
        factory = getattr(module, attribute, None)
        if factory is None:
            raise PolicyLoadError(f"--policy {spec}: {module_name} has no attribute {attribute}")
    else:
        found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == spec]
        if not found:
            known = ", ".join(sorted(BUILTIN))
            raise PolicyLoadError(
                f"--policy {spec}: not a built-in ({known}), an import path (module:Class) "
                f"or an entry point in group {ENTRY_POINT_GROUP}"
            )
        factory = found[0].load()
    try:
        policy = factory(**args)
    except (TypeError, ValueError) as exc:
        raise PolicyLoadError(f"--policy {spec}: cannot construct it with {args}: {exc}") from exc
    if not isinstance(policy, CostPolicy):
        raise PolicyLoadError(
            f"--policy {spec}: {type(policy).__name__} has no cost(workload, clock) method"
        )
    return policy
