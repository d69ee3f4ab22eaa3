"""Partial admission (Kueue's `PartialAdmission`): a Workload whose pod sets declare a
`minCount` may be admitted with fewer pods when all of them do not fit.

Kueue's scheduler (`getInitialAssignments`) tries the full counts first; when they need
preemption and victims exist, that is the answer. Otherwise `PodSetReducer.Search` walks
down from the full counts towards the `minCount`s: every variable pod set gives up the
same fraction of what it may give up, `count − ⌊(count − minCount) · i / Δ⌋` for step `i`
of `Δ` (the sum of what all may give up), and a binary search finds the smallest step —
the most pods — at which the Workload fits, or fits after preempting victims that exist.
With one variable pod set that is the largest count ≥ `minCount` that fits. `search` is
that walk; `fits` is the caller's question, asked at most ⌈log₂(Δ + 1)⌉ + 1 times.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TypeVar

from controller.core.model.workloads import PodSet, Workload

__all__ = ["can_be_partially_admitted", "reduced_counts", "search", "with_counts"]

R = TypeVar("R")


def _floor(pod_set: PodSet) -> int:
    """The fewest pods the pod set runs with (its count when it has no usable minCount)."""
    minimum = pod_set.min_count
    if minimum is None or minimum > pod_set.count:
        return pod_set.count
    return max(0, minimum)


def can_be_partially_admitted(workload: Workload) -> bool:
    """Some pod set may run with fewer pods than its count (Kueue's
    `CanBePartiallyAdmitted`)."""
    return any(_floor(ps) < ps.count for ps in workload.pod_sets)


def reduced_counts(pod_sets: Sequence[PodSet], step: int) -> tuple[int, ...]:
    """The counts at `step` of the walk (0: the full counts; Δ: every `minCount`)."""
    deltas = [ps.count - _floor(ps) for ps in pod_sets]
    total = sum(deltas)
    if total == 0:
        return tuple(ps.count for ps in pod_sets)
    return tuple(ps.count - d * step // total for ps, d in zip(pod_sets, deltas, strict=True))


def search(pod_sets: Sequence[PodSet], fits: Callable[[tuple[int, ...]], R | None]) -> R | None:
    """The answer of `fits` at the most pods it accepts on the walk from the full counts to
    the `minCount`s, or None when it accepts none (or nothing may be reduced). As Kueue's
    binary search, it assumes fewer pods never fit worse."""
    total = sum(ps.count - _floor(ps) for ps in pod_sets)
    if total == 0:
        return None
    low, high = 0, total + 1  # Go's sort.Search over [0, total]
    found: R | None = None
    found_at = -1
    while low < high:
        step = (low + high) // 2
        answer = fits(reduced_counts(pod_sets, step))
        if answer is not None:
            found, found_at = answer, step
            high = step
        else:
            low = step + 1
    return found if low == found_at else None


def with_counts(workload: Workload, counts: Sequence[int]) -> Workload:
    """The Workload with its pod sets at `counts` (what is assigned flavors and charged)."""
    return replace(
        workload,
        pod_sets=tuple(
            replace(ps, count=count) for ps, count in zip(workload.pod_sets, counts, strict=True)
        ),
    )
