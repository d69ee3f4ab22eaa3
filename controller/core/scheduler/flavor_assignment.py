"""Flavor assignment: which flavor each podset gets, and whether that fits, borrows,
needs preemption or cannot fit (digest §5.4, Kueue `flavorassigner.go`).

Per podset and resource group, the group's flavors are tried in list order; every
resource of the group the podset requests gets the same flavor. A flavor's mode is the
worst over its resources. FlavorFungibility decides whether a flavor that fits only by
borrowing or by preempting stops the scan. The result records, per (flavor, resource),
the mode and what is missing, so the preemption engine can plug in: for a pair that
needs preemption it is asked (through `PreemptionOracle`) what a real victim search for that
pair alone finds — no candidates, victims in the queue itself (preempt) or only in other
queues of the cohort (reclaim) — and whether the queue would still borrow once they are
gone (Kueue's `preemption_oracle.go`). Flavors are ranked from worst to best: no fit, no
candidates, preempt, reclaim, fit (Kueue's `flavorassigner.go`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum

from api.constants import (
    BorrowWithinCohortPolicy,
    FlavorFungibilityPolicy,
    FlavorFungibilityPreference,
    ReclaimWithinCohortPolicy,
)
from api.quantities import Format, Quantity
from controller.core.cache.quota_tree import QuotaTree
from controller.core.model.clusterqueues import ClusterQueue, FlavorResource, ResourceGroup
from controller.core.model.flavors import ResourceFlavor, mismatch_reason, topology_mismatch
from controller.core.model.workloads import PodSet, Workload

__all__ = [
    "FlavorAssignment",
    "Mode",
    "PodSetFlavors",
    "Preemptible",
    "PreemptionOracle",
    "ResourceCheck",
    "assign_flavors",
    "show",
]


class Preemptible(StrEnum):
    """What preempting could do for one (flavor, resource) a Workload lacks."""

    NO_CANDIDATES = "NoCandidates"  # no set of eligible victims frees enough
    PREEMPT = "Preempt"  # victims include Workloads of the queue itself
    RECLAIM = "Reclaim"  # every victim is in another queue of the cohort


PreemptionOracle = Callable[[str, Workload, FlavorResource, int], tuple[Preemptible, int]]
"""(cluster_queue, preemptor, (flavor, resource), requested) → what preempting for that
pair alone could do, and the borrowing level once the victims are gone (0: within the
queue's nominal quota; see `QuotaTree.lowest_fitting_subtree`). None (no engine) means no
candidates."""


class Mode(StrEnum):
    FIT = "Fit"  # fits within the queue's nominal quota
    BORROW = "Borrow"  # fits now by borrowing from the cohort
    PREEMPT = "Preempt"  # would fit only after preempting admitted Workloads
    NO_FIT = "NoFit"  # cannot fit (no matching flavor, beyond max quota, nothing to preempt)


def show(resource: str, milli: int) -> str:
    """A quantity as Kubernetes prints it (binary suffixes for memory and storage)."""
    binary = "memory" in resource or "storage" in resource
    return str(Quantity(milli, Format.BINARY_SI if binary else Format.DECIMAL_SI))


@dataclass(frozen=True, slots=True)
class ResourceCheck:
    """One (flavor, resource) evaluated for a podset; `requested` includes earlier podsets
    of the same Workload assigned to this pair."""

    flavor: str
    resource: str
    mode: Mode
    requested: int
    available: int
    nominal: int
    reserved: int
    borrowable: int
    potential: int
    preemptible: Preemptible | None = None  # for mode PREEMPT: the oracle's answer
    # Kueue's borrowing level: the height of the lowest subtree whose quota it fits in (0:
    # the queue's nominal quota). FIT/BORROW: now; PREEMPT: once the victims are gone.
    level: int = 0
    # In a tree of cohorts: the level that limits it (QuotaTree.limiting_level).
    limited_by: tuple[str, str, int, int] | None = None

    @property
    def missing(self) -> int:
        return max(0, self.requested - self.available)

    @property
    def borrows(self) -> bool:
        return self.level > 0

    def reason(self) -> str:
        r = self.resource
        head = f"insufficient quota for {r} in flavor {self.flavor}: requested {show(r, self.requested)}"
        if self.requested > self.potential:
            return (
                f"{head}, at most {show(r, self.potential)} can ever be available "
                f"(nominal {show(r, self.nominal)})"
            )
        text = (
            f"{head}, available {show(r, self.available)} (nominal {show(r, self.nominal)}, "
            f"reserved {show(r, self.reserved)}, borrowable {show(r, self.borrowable)})"
        )
        if self.limited_by is None:
            return text
        kind, name, limit, used = self.limited_by
        if kind == "root":
            where = f"the quota of Cohort {name} ({show(r, used)} of {show(r, limit)} in use)"
        else:
            where = (
                f"the borrowingLimit of {kind} {name} ({show(r, used)} of "
                f"{show(r, limit)} borrowed)"
            )
        return f"{text}; limited by {where}"


@dataclass(frozen=True, slots=True)
class PodSetFlavors:
    name: str
    count: int
    flavors: Mapping[str, str]  # resource → flavor
    requests: Mapping[str, int]  # resource → total for `count` pods
    mode: Mode
    borrowing: bool
    checks: tuple[ResourceCheck, ...]  # the chosen flavors' checks
    reason: str = ""  # why it does not fit (NO_FIT / PREEMPT)
    condition_reason: str = ""  # Kueue's QuotaReserved=False reason
    level: int = 0  # the largest borrowing level of its flavors (0: none borrows)


@dataclass(frozen=True, slots=True)
class FlavorAssignment:
    cluster_queue: str
    pod_sets: tuple[PodSetFlavors, ...]
    mode: Mode
    borrowing: bool
    usage: Mapping[FlavorResource, int]
    reason: str = ""
    condition_reason: str = ""  # NoMatchingFlavor, ExceedsMaxQuota or WaitingForQuota
    # Kueue's `Borrows()`: how far it borrows (0: not at all); the cycle admits lower
    # levels first.
    borrowing_level: int = 0

    @property
    def fits(self) -> bool:
        return self.mode in (Mode.FIT, Mode.BORROW)

    def missing(self) -> dict[FlavorResource, int]:
        """Per (flavor, resource) how much more is needed than is available now."""
        out: dict[FlavorResource, int] = {}
        for pod_set in self.pod_sets:
            for check in pod_set.checks:
                if check.missing:
                    fr = (check.flavor, check.resource)
                    out[fr] = max(out.get(fr, 0), check.missing)
        return out


# Kueue's ranking: noFit < noPreemptionCandidates < preempt < reclaim < fit (borrowing is a
# level beside it).
_NO_CANDIDATES, _FIT = 1, 4
_PREEMPTIBLE_RANK = {Preemptible.NO_CANDIDATES: 1, Preemptible.PREEMPT: 2, Preemptible.RECLAIM: 3}


def _rank(check: ResourceCheck) -> int:
    if check.mode is Mode.NO_FIT:
        return 0
    if check.mode is Mode.PREEMPT:
        return _PREEMPTIBLE_RANK[check.preemptible or Preemptible.NO_CANDIDATES]
    return _FIT


Granular = tuple[int, int]
"""Kueue's granularMode: (rank of the preemption mode, borrowing level)."""


@dataclass(frozen=True, slots=True)
class _Option:
    flavor: str
    rank: int
    level: int
    checks: tuple[ResourceCheck, ...]


def _preferred(a: Granular, b: Granular, preference: FlavorFungibilityPreference) -> bool:
    """Kueue's `isPreferred`: is mode `a` better than `b`? Ties are not. A lower borrowing
    level is better: the quota comes from nearer in the tree of cohorts."""
    (a_rank, a_level), (b_rank, b_level) = a, b
    if a_rank == 0:
        return False
    if b_rank == 0:
        return True
    if (a_rank == _NO_CANDIDATES) != (b_rank == _NO_CANDIDATES):
        return b_rank == _NO_CANDIDATES
    if preference is FlavorFungibilityPreference.PREEMPTION_OVER_BORROWING:
        if a_level != b_level:
            return a_level < b_level
        return a_rank > b_rank
    if a_rank != b_rank:
        return a_rank > b_rank
    return a_level < b_level


def _representative(
    checks: tuple[ResourceCheck, ...], preference: FlavorFungibilityPreference
) -> Granular:
    """A flavor's mode: the worst of its resources' (Kueue's representativeMode)."""
    worst: Granular = (_FIT, 0)
    for check in checks:
        mode = (_rank(check), check.level)
        if _preferred(worst, mode, preference):
            worst = mode
        if worst[0] == 0:
            break
    return worst


@dataclass(frozen=True, slots=True)
class _Preemption:
    """What flavor assignment may ask of preemption: the oracle (None: no engine), and
    whether a request beyond the queue's nominal quota may preempt (Kueue's
    `canPreemptWhileBorrowing`: borrowWithinCohort, or fair sharing with reclaim)."""

    oracle: PreemptionOracle | None
    while_borrowing: bool


def _check(
    tree: QuotaTree,
    cq: ClusterQueue,
    workload: Workload,
    fr: FlavorResource,
    requested: int,
    preemption: _Preemption,
) -> ResourceCheck:
    quota = tree.quota(cq.name, fr)
    reserved = tree.usage(cq.name, fr)
    available = tree.available(cq.name, fr)
    potential = tree.potential_available(cq.name, fr)
    borrowable = max(0, available - max(0, quota.nominal - reserved))
    args = (fr[0], fr[1])
    numbers = (requested, available, quota.nominal, reserved, borrowable, potential)
    if requested > potential:
        return ResourceCheck(*args, Mode.NO_FIT, *numbers)
    if requested > available and tree.hierarchical(cq.name):
        check = _decide(tree, cq, workload, fr, requested, preemption, args, numbers)
        return replace(check, limited_by=tree.limiting_level(cq.name, fr))
    return _decide(tree, cq, workload, fr, requested, preemption, args, numbers)


def _decide(
    tree: QuotaTree,
    cq: ClusterQueue,
    workload: Workload,
    fr: FlavorResource,
    requested: int,
    preemption: _Preemption,
    args: tuple[str, str],
    numbers: tuple[int, int, int, int, int, int],
) -> ResourceCheck:
    quota = tree.quota(cq.name, fr)
    available = numbers[1]
    level, below_root = tree.lowest_fitting_subtree(cq.name, fr, requested)
    if requested <= available:
        mode = Mode.BORROW if level else Mode.FIT
        return ResourceCheck(*args, mode, *numbers, level=level)
    # Kueue compares the request (not usage + request) with nominal quota (digest §8.1);
    # in a tree, a request that fits within a subtree below the root may reclaim too.
    if quota.nominal >= requested or preemption.while_borrowing or below_root:
        preemptible, level_after = Preemptible.NO_CANDIDATES, level
        if preemption.oracle is not None:
            preemptible, level_after = preemption.oracle(cq.name, workload, fr, requested)
        if preemptible is Preemptible.NO_CANDIDATES:
            level_after = level  # nothing is removed: Kueue measures the level now
        return ResourceCheck(
            *args, Mode.PREEMPT, *numbers, preemptible=preemptible, level=level_after
        )
    return ResourceCheck(*args, Mode.NO_FIT, *numbers, level=level)


def tas_only(flavors: Mapping[str, ResourceFlavor], cq: ClusterQueue) -> bool:
    """Whether every flavor of the queue has a topology (Kueue's `IsTASOnly`): its pod sets
    then get one even when they ask for none."""
    return all(
        (flavor := flavors.get(fq.name)) is not None and flavor.topology_name is not None
        for group in cq.resource_groups
        for fq in group.flavors
    )


def _scan_group(
    tree: QuotaTree,
    flavors: Mapping[str, ResourceFlavor],
    cq: ClusterQueue,
    workload: Workload,
    pod_set: PodSet,
    group: ResourceGroup,
    wanted: Mapping[str, int],
    assigned: Mapping[FlavorResource, int],
    preemption: _Preemption,
) -> tuple[_Option | None, list[str], int]:
    fungibility = cq.flavor_fungibility
    best: _Option | None = None
    reasons: list[str] = []
    severity = len(_CONDITION_REASONS) - 1
    for flavor_quotas in group.flavors:
        flavor = flavors.get(flavor_quotas.name)
        if flavor is None:
            reasons.append(f"flavor {flavor_quotas.name} not found")
            continue
        mismatch = mismatch_reason(flavor, pod_set)
        if mismatch is None and (flavor.topology_name is not None or pod_set.topology is not None):
            mismatch = topology_mismatch(
                flavor, pod_set, tas_only(flavors, cq), frozenset(group.covered_resources)
            )
        if mismatch is not None:
            reasons.append(mismatch)
            continue
        checks = tuple(
            _check(
                tree,
                cq,
                workload,
                (flavor.name, r),
                assigned.get((flavor.name, r), 0) + v,
                preemption,
            )
            for r, v in wanted.items()
        )
        option = _Option(flavor.name, *_representative(checks, fungibility.preference), checks)
        reasons.extend(c.reason() for c in checks if c.mode in (Mode.NO_FIT, Mode.PREEMPT))
        exceeds = any(c.requested > c.potential for c in checks)
        severity = min(severity, 1 if exceeds else 0)
        if option.rank == 0:
            continue
        try_next = (
            option.rank == _NO_CANDIDATES
            or (
                option.rank < _FIT
                and fungibility.when_can_preempt is FlavorFungibilityPolicy.TRY_NEXT_FLAVOR
            )
            or (
                option.level
                and fungibility.when_can_borrow is FlavorFungibilityPolicy.TRY_NEXT_FLAVOR
            )
        )
        if not try_next:
            return option, reasons, severity
        if best is None or _preferred(
            (option.rank, option.level), (best.rank, best.level), fungibility.preference
        ):
            best = option
    return best, reasons, severity


# Kueue's QuotaReserved=False reasons, least to most severe.
_CONDITION_REASONS = ("WaitingForQuota", "ExceedsMaxQuota", "NoMatchingFlavor")
_SEVERITY = {Mode.NO_FIT: 0, Mode.PREEMPT: 1, Mode.BORROW: 2, Mode.FIT: 3}


def _totals(cq: ClusterQueue, pod_set: PodSet, ignore_undeclared: bool) -> dict[str, int]:
    """What the pod set charges; with `quotaCheckStrategy: IgnoreUndeclared`, only the
    resources the ClusterQueue covers (Kueue skips the others, and charges nothing for
    them)."""
    totals = {
        r: v * pod_set.count
        for r, v in pod_set.requests.items()
        if v and (not ignore_undeclared or cq.covers(r))
    }
    if cq.covers("pods"):
        totals["pods"] = totals.get("pods", 0) + 1000 * pod_set.count
    return totals


def assign_flavors(
    tree: QuotaTree,
    flavors: Mapping[str, ResourceFlavor],
    cq: ClusterQueue,
    workload: Workload,
    oracle: PreemptionOracle | None = None,
    *,
    preempt_while_borrowing: bool = False,
    ignore_undeclared: bool = False,
) -> FlavorAssignment:
    """Choose flavors for every podset of `workload` in `cq` against the current usage.
    `preempt_while_borrowing`: fair sharing is on, so a queue that may reclaim within its
    cohort may also preempt for a request beyond its nominal quota (Kueue's
    `canPreemptWhileBorrowing`). `ignore_undeclared`: Kueue's `quotaCheckStrategy:
    IgnoreUndeclared`, resources the ClusterQueue does not cover are neither checked nor
    charged."""
    policy = cq.preemption
    may_preempt_borrowing = policy.borrow_within_cohort is not BorrowWithinCohortPolicy.NEVER or (
        preempt_while_borrowing
        and policy.reclaim_within_cohort is not ReclaimWithinCohortPolicy.NEVER
    )
    assigned: dict[FlavorResource, int] = {}
    results: list[PodSetFlavors] = []
    many = len(workload.pod_sets) > 1
    for pod_set in workload.pod_sets:
        totals = _totals(cq, pod_set, ignore_undeclared)
        chosen: dict[str, str] = {}
        checks: list[ResourceCheck] = []
        mode, level, reasons, severity = Mode.FIT, 0, [], 0
        by_group: dict[int, dict[str, int]] = {}
        for resource, value in totals.items():
            group = cq.group_for(resource)
            if group is None:
                mode = Mode.NO_FIT
                reasons.append(f"resource {resource} unavailable in ClusterQueue {cq.name}")
                severity = 2
                continue
            by_group.setdefault(id(group), {})[resource] = value
        for group in cq.resource_groups:
            wanted = by_group.get(id(group))
            if not wanted or mode is Mode.NO_FIT:
                continue
            option, why, group_severity = _scan_group(
                tree,
                flavors,
                cq,
                workload,
                pod_set,
                group,
                wanted,
                assigned,
                _Preemption(oracle, may_preempt_borrowing),
            )
            if option is None:
                mode = Mode.NO_FIT
                severity = max(severity, group_severity)
                reasons.extend(why or [f"no flavor of ClusterQueue {cq.name} matches"])
                continue
            for resource in wanted:
                chosen[resource] = option.flavor
            checks.extend(option.checks)
            level = max(level, option.level)
            if option.rank < _FIT:
                mode = Mode.PREEMPT
                reasons.extend(why)
        borrowing = level > 0
        if mode is Mode.FIT and borrowing:
            mode = Mode.BORROW
        if mode is not Mode.NO_FIT:
            for resource, flavor in chosen.items():
                fr = (flavor, resource)
                assigned[fr] = assigned.get(fr, 0) + totals[resource]
        reason = "; ".join(dict.fromkeys(reasons)) if mode in (Mode.NO_FIT, Mode.PREEMPT) else ""
        if reason and many:
            reason = f"podset {pod_set.name}: {reason}"
        condition = _CONDITION_REASONS[severity] if mode in (Mode.NO_FIT, Mode.PREEMPT) else ""
        results.append(
            PodSetFlavors(
                pod_set.name,
                pod_set.count,
                chosen,
                totals,
                mode,
                borrowing,
                tuple(checks),
                reason,
                condition,
                level,
            )
        )
    worst = min((r.mode for r in results), key=_SEVERITY.__getitem__, default=Mode.FIT)
    return FlavorAssignment(
        cq.name,
        tuple(results),
        worst,
        any(r.borrowing for r in results),
        assigned,
        "; ".join(r.reason for r in results if r.reason and r.mode is worst),
        max(
            (r.condition_reason for r in results if r.condition_reason),
            key=_CONDITION_REASONS.index,
            default="",
        ),
        max((r.level for r in results), default=0),
    )
