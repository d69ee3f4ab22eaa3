"""Minimum runtime before preemption (quotagate's, beyond Kueue; KAI's `preemptMinRuntime`).

A ClusterQueue annotated `quotagate.x-k8s.io/minimum-runtime-seconds: "N"` protects each
of its Workloads for N seconds after its quota reservation (the QuotaReserved condition's
`lastTransitionTime`): until then the Workload is not a preemption candidate. The
victim's ClusterQueue decides, since the setting protects the work running in it.

One exception: reclamation of borrowed quota (`InCohortReclamation`, a preemptor that
fits in its own nominal quota taking back what a borrowing queue uses). A lending queue's
nominal quota is its guarantee; if fresh borrowers were protected, a stream of them could
keep the lender out of its own quota for ever. A preemptor that itself borrows
(`InCohortReclaimWhileBorrowing`) and preemption inside a queue (`InClusterQueue`) respect
the protection.

A Workload whose reservation time is not known yet (admitted by this very controller, its
write not yet seen back) counts as reserved now: protected, never unprotected by accident.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from controller.core.preemption.policy import CandidateVariant
from controller.core.preemption.types import Contender

__all__ = ["EXEMPT_VARIANTS", "RuntimeProtection"]

EXEMPT_VARIANTS = frozenset(
    {CandidateVariant.HIERARCHICAL_RECLAIM, CandidateVariant.RECLAIM_WITHOUT_BORROWING}
)
"""Candidate variants the protection does not apply to: reclamation of borrowed quota by a
preemptor within its nominal quota."""


@dataclass(slots=True)
class RuntimeProtection:
    """The minimum runtimes at time `now` (per ClusterQueue, seconds), and what one victim
    search skipped because of them (`skipped`, `earliest`: when the first protection ends)."""

    now: float
    seconds: Mapping[str, int]
    skipped: int = 0
    earliest: float | None = field(default=None)

    def protected_until(self, contender: Contender) -> float | None:
        """When the contender stops being protected, or None if it is not protected now."""
        seconds = self.seconds.get(contender.cluster_queue)
        if not seconds:
            return None
        reserved = contender.quota_reserved_at
        until = (self.now if reserved is None else reserved) + seconds
        return until if until > self.now else None

    def skips(self, contender: Contender, variant: CandidateVariant) -> bool:
        """Whether the search must pass over this eligible contender; records it if so."""
        if variant in EXEMPT_VARIANTS:
            return False
        until = self.protected_until(contender)
        if until is None:
            return False
        self.skipped += 1
        self.earliest = until if self.earliest is None else min(self.earliest, until)
        return True

    def reset(self) -> None:
        self.skipped, self.earliest = 0, None
