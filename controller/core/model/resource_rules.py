"""Kueue's `resources` configuration, as the engine applies it to a pod set's requests.

Kueue computes what a pod set asks of quota from its pods' requests in two steps
(`totalRequestsFromPodSets` in Kueue's pkg/workload/workload.go): resources whose name
starts with one of `excludeResourcePrefixes` are dropped, then each
`transformations` entry whose `input` the pod requests turns it into its `outputs`
(output = input × factor, or input × the request of `multiplyBy` × factor), keeping the
input (`Retain`, the default) or not (`Replace`). The outputs of every input are summed
first and a negative total becomes 0, so a negative factor only offsets other outputs.
`quotaCheckStrategy: IgnoreUndeclared` then lets a ClusterQueue admit a pod set whose
resources it does not cover, charging only those it does (Kueue's flavorassigner).

Quantities are integers in milli-units; products are exact (fractions) and rounded up to
the milli-unit once, at the end.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from fractions import Fraction

from controller.core.model.workloads import Workload

__all__ = [
    "NO_RULES",
    "QuotaCheckStrategy",
    "ResourceRules",
    "Strategy",
    "Transformation",
]


class Strategy(StrEnum):
    """Whether a transformed resource is kept beside its outputs."""

    RETAIN = "Retain"
    REPLACE = "Replace"


class QuotaCheckStrategy(StrEnum):
    """Kueue's `resources.quotaCheckStrategy`."""

    BLOCK_UNDECLARED = "BlockUndeclared"
    IGNORE_UNDECLARED = "IgnoreUndeclared"


@dataclass(frozen=True, slots=True)
class Transformation:
    """One `resources.transformations` entry: `outputs` are factors per unit of `input`."""

    input: str
    outputs: Mapping[str, Fraction]
    strategy: Strategy = Strategy.RETAIN
    multiply_by: str = ""


def _ceil(value: Fraction) -> int:
    return -((-value.numerator) // value.denominator)


@dataclass(frozen=True, slots=True)
class ResourceRules:
    """The `resources` settings the engine applies to every pod set's requests."""

    exclude_prefixes: tuple[str, ...] = ()
    transformations: tuple[Transformation, ...] = ()
    quota_check: QuotaCheckStrategy = QuotaCheckStrategy.BLOCK_UNDECLARED

    @property
    def ignore_undeclared(self) -> bool:
        return self.quota_check is QuotaCheckStrategy.IGNORE_UNDECLARED

    @property
    def changes_requests(self) -> bool:
        return bool(self.exclude_prefixes or self.transformations)

    def effective_requests(self, requests: Mapping[str, int]) -> dict[str, int]:
        """One pod's requests as quota sees them (milli-units; zero entries dropped)."""
        kept = {
            name: value
            for name, value in requests.items()
            if not any(name.startswith(prefix) for prefix in self.exclude_prefixes)
        }
        by_input = {t.input: t for t in self.transformations}
        if not any(name in by_input for name in kept):
            return {name: value for name, value in kept.items() if value}
        retained: dict[str, int] = {}
        generated: dict[str, Fraction] = {}
        for name, milli in kept.items():
            rule = by_input.get(name)
            if rule is None:
                retained[name] = retained.get(name, 0) + milli
                continue
            # The value the outputs are computed from, in units: the request, times the
            # request of `multiplyBy` when the pod asks for it (Kueue's `outputInputVal`).
            base = Fraction(milli, 1000)
            if rule.multiply_by and rule.multiply_by in kept:
                base *= Fraction(kept[rule.multiply_by], 1000)
            for output, factor in rule.outputs.items():
                generated[output] = generated.get(output, Fraction(0)) + base * factor
            if rule.strategy is Strategy.RETAIN:
                retained[name] = retained.get(name, 0) + milli
        for output, units in generated.items():
            if units > 0:
                retained[output] = retained.get(output, 0) + _ceil(units * 1000)
        return {name: value for name, value in retained.items() if value}

    def apply(self, workload: Workload) -> Workload:
        """`workload` with each pod set's requests as quota sees them (itself when no rule
        changes requests)."""
        if not self.changes_requests:
            return workload
        pod_sets = tuple(
            replace(ps, requests=self.effective_requests(ps.requests)) for ps in workload.pod_sets
        )
        return replace(workload, pod_sets=pod_sets)


NO_RULES = ResourceRules()
"""No exclusions, no transformations, BlockUndeclared: requests as the pods ask."""
