"""Preemptibility: may a running Workload be disrupted, and how much of it.

Resolution follows KAI-Scheduler's priority/preemptibility separation (design §4,
ecosystem §A.1), first valid value wins:

1. `Workload.spec.preemptibility`;
2. the `kai.scheduler/preemptibility` label on the pod's owners, nearest owner first up
   to the top owner (KAI's pod-grouper walks the chain in that order);
3. the same label on the pod;
4. the priority threshold, when configured (KAI uses 100): priority < threshold ⇒
   preemptible, otherwise non-preemptible;
5. preemptible (Kueue's behaviour: every admitted Workload may be preempted).

An invalid value never fails resolution: it is skipped so the next source decides, and
it is reported in `Resolution.problems` for the runtime to publish as a Warning Event.
An empty string means "unset", as in KAI's `ParsePreemptibility`. The value sets come
from `api.constants` and are re-exported here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from api.constants import PREEMPTIBILITY_LABEL, Preemptibility, PreemptibilitySource

__all__ = [
    "PREEMPTIBILITY_LABEL",
    "Preemptibility",
    "PreemptibilitySource",
    "Resolution",
    "may_borrow",
    "protected_pods",
    "resolve_preemptibility",
]

_ALLOWED: Final = ", ".join(p.value for p in Preemptibility)


@dataclass(frozen=True, slots=True)
class Resolution:
    """The decided preemptibility, its source, and any invalid values that were skipped."""

    value: Preemptibility
    source: PreemptibilitySource
    problems: tuple[str, ...] = ()


def resolve_preemptibility(
    spec_value: str | None,
    owner_labels: Sequence[Mapping[str, str]],
    pod_labels: Mapping[str, str] | None,
    priority: int,
    threshold: int | None,
) -> Resolution:
    """Resolve a Workload's preemptibility; `owner_labels` lists the nearest owner first."""
    problems: list[str] = []

    value = _parse(spec_value, "spec.preemptibility", problems)
    if value is not None:
        return Resolution(value, PreemptibilitySource.SPEC, tuple(problems))

    for depth, labels in enumerate(owner_labels, start=1):
        where = f"label {PREEMPTIBILITY_LABEL} on owner {depth} (1 = nearest)"
        value = _parse(labels.get(PREEMPTIBILITY_LABEL), where, problems)
        if value is not None:
            return Resolution(value, PreemptibilitySource.OWNER_LABEL, tuple(problems))

    if pod_labels is not None:
        where = f"label {PREEMPTIBILITY_LABEL} on the pod"
        value = _parse(pod_labels.get(PREEMPTIBILITY_LABEL), where, problems)
        if value is not None:
            return Resolution(value, PreemptibilitySource.POD_LABEL, tuple(problems))

    if threshold is not None:
        value = (
            Preemptibility.PREEMPTIBLE if priority < threshold else Preemptibility.NON_PREEMPTIBLE
        )
        return Resolution(value, PreemptibilitySource.PRIORITY_THRESHOLD, tuple(problems))

    return Resolution(Preemptibility.PREEMPTIBLE, PreemptibilitySource.DEFAULT, tuple(problems))


def _parse(raw: str | None, where: str, problems: list[str]) -> Preemptibility | None:
    """A valid value, or None (unset or invalid; an invalid one is added to `problems`)."""
    if raw is None or raw == "":
        return None
    try:
        return Preemptibility(raw)
    except ValueError:
        problems.append(
            f"{where}: invalid preemptibility {raw!r} (want one of {_ALLOWED}); ignored"
        )
        return None


def protected_pods(preemptibility: Preemptibility, count: int, min_count: int | None) -> int:
    """How many of a podset's `count` pods may not be preempted.

    Non-preemptible: all of them. Semi-preemptible: the `minCount` core (all pods when
    the podset has no `minCount`), as in KAI's semi-preemptible design where the core is
    the minimum. Preemptible: none.
    """
    if count < 0:
        raise ValueError(f"pod count must not be negative, got {count}")
    if min_count is not None and min_count < 0:
        raise ValueError(f"minCount must not be negative, got {min_count}")
    if preemptibility is Preemptibility.NON_PREEMPTIBLE:
        return count
    if preemptibility is Preemptibility.SEMI_PREEMPTIBLE:
        return count if min_count is None else min(min_count, count)
    return 0


def may_borrow(preemptibility: Preemptibility) -> bool:
    """Whether a Workload may use borrowed quota.

    A non-preemptible Workload may not: it must fit within its ClusterQueue's nominal
    quota, because borrowed capacity must stay reclaimable (KAI `NonPreemptibleOverQuota`).
    A semi-preemptible one may, but only for pods above its protected core
    (`protected_pods`), which the caller keeps within nominal quota.
    """
    return preemptibility is not Preemptibility.NON_PREEMPTIBLE
