"""What the scheduler keeps from one cycle to the next over one `ClusterState`: the
victim search's contenders (`ContenderCache`) and, for cycles with an admission limit
(cycle step 9), the ClusterQueues whose heads were left untried. The engine driver
(controller/core/engine.py) keeps one per state; a cycle run without one makes a fresh one
(the same decisions: the contenders are rebuilt, and no queue was passed over)."""

from __future__ import annotations

from dataclasses import dataclass, field

from controller.core.scheduler.contenders import ContenderCache
from controller.core.state import ClusterState

__all__ = ["SchedulerMemory"]


@dataclass(slots=True, eq=False)
class SchedulerMemory:
    """The scheduler's memory of `state` (never of another: the versions it keeps its
    contenders by are that state's)."""

    state: ClusterState
    contenders: ContenderCache = field(default_factory=ContenderCache)
    # Cycle step 9: the ClusterQueues whose heads a cycle's admission limit left untried,
    # each with the number of the limited cycle that first passed it over (tried first,
    # longest passed over first, by the next limited cycles).
    passed_over: dict[str, int] = field(default_factory=dict)
    limited_cycles: int = 0
