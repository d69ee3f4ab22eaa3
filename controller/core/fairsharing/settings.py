"""Kueue's fair sharing (KEP-1714), the settings and the weights.

With fair sharing on (the controller configuration's `fairSharing`, as Kueue's), idle
quota in a cohort is shared by weight instead of by arrival order:

- every node of a cohort tree (a ClusterQueue or a Cohort) has a *dominant resource
  share* (DRS): the largest, over resources, of what it uses above its subtree quota
  divided by what its parent could lend, ×1000, divided by its `spec.fairSharing.weight`
  (`controller/core/fairsharing/shares.py`);
- heads are admitted in a tournament: at each cohort, the child whose share would be
  lowest once the head is admitted goes first (`controller/core/fairsharing/tournament.py`);
- preemption takes from the queues with the highest share, as long as the preemptor's
  share stays at most the target's (`controller/core/fairsharing/preemption.py`).

Weights and shares are exact fractions (`spec.fairSharing.weight` is a quantity; default 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final

__all__ = [
    "ALLOWED_STRATEGIES",
    "FairSharing",
    "PreemptionStrategy",
]


class PreemptionStrategy(StrEnum):
    """Kueue's `fairSharing.preemptionStrategies` (KEP-1714 rules S2-a and S2-b)."""

    LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"
    """S2-a: preempt only if the preemptor's share with its Workload is at most the
    target's share without the victim."""
    LESS_THAN_INITIAL_SHARE = "LessThanInitialShare"
    """S2-b: preempt only if the preemptor's share with its Workload is below the target's
    share before the victim goes."""


ALLOWED_STRATEGIES: Final = (
    (PreemptionStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,),
    (PreemptionStrategy.LESS_THAN_INITIAL_SHARE,),
    (
        PreemptionStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
        PreemptionStrategy.LESS_THAN_INITIAL_SHARE,
    ),
)
"""The lists Kueue's configuration validation accepts (any other is refused)."""


@dataclass(frozen=True, slots=True)
class FairSharing:
    """Fair sharing is on (`ClusterState.fair_sharing` is None when it is off)."""

    preemption_strategies: tuple[PreemptionStrategy, ...] = ALLOWED_STRATEGIES[2]

    def __post_init__(self) -> None:
        if self.preemption_strategies not in ALLOWED_STRATEGIES:
            allowed = " or ".join(str(list(map(str, s))) for s in ALLOWED_STRATEGIES)
            raise ValueError(
                f"preemptionStrategies must be one of {allowed}, "
                f"not {list(map(str, self.preemption_strategies))}"
            )
