"""Benchmark scenarios in the shape of Kueue's scheduler-performance generator config
(kueue `test/performance/scheduler/configs/*/generator.yaml`):

    cohorts:
      - className: cohort            # a set of `count` cohorts
        count: 5
        queuesSets:
          - className: cq            # `count` ClusterQueues in each cohort
            count: 6
            nominalQuota: 20         # quantities: 20, "20", "500m"
            borrowingLimit: 100
            reclaimWithinCohort: Any
            withinClusterQueue: LowerPriority
            workloadsSets:           # every ClusterQueue receives every set
              - count: 350
                creationIntervalMs: 100
                workloads:
                  - {className: small, runtimeMs: 200, priority: 50, request: 1}

As in Kueue's generator, the sets of one queue run side by side; within a set, before each
Workload is created the generator waits `creationIntervalMs`, so the n-th Workload of a set
(counting from 1, templates in order) arrives at n × creationIntervalMs. A Workload
requests `request` of one resource (cpu) and runs `runtimeMs` once admitted. A bare list
of cohort sets (without the `cohorts:` key) is accepted too.

quotagate's extension, all optional (a tree of Cohorts and Kueue's fair sharing):

    fairSharing: {}                  # Kueue's configuration section: on in --simulate
    parentCohorts:                   # explicit Cohorts above the generated ones
      - {name: org, nominalQuota: 8}
      - {name: eng, parent: org, weight: 2, borrowingLimit: 4}
    cohorts:
      - className: team              # every generated cohort team-<i> becomes a Cohort
        count: 2                     # under `parent`, with `weight`
        parent: eng
        weight: "1.5"
        queuesSets:
          - {className: cq, weight: 2, ...}   # the ClusterQueues' spec.fairSharing.weight

Weights are non-negative quantities (Kueue's `spec.fairSharing.weight`, default 1); a
Cohort's quota and limits are cpu quantities, limits only under a parent (Kueue's API
rule).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from api.quantities import InvalidQuantity, Quantity, exact_value
from controller.config import FairSharingConfig
from controller.core.fairsharing.settings import FairSharing
from controller.core.model.cohorts import Cohort, parent_cycle
from controller.core.model.topology import TopologyRequest
from tools.bench.tas_scenario import TASScenarioError, TASSetup, parse_class_topology, parse_setup

__all__ = [
    "SCENARIOS",
    "CohortSet",
    "ParentCohort",
    "QueueSet",
    "Scenario",
    "ScenarioError",
    "WorkloadClass",
    "WorkloadSet",
    "load",
    "parse",
]

SCENARIOS = Path(__file__).resolve().parent / "scenarios"
"""The scenario files: Kueue's (smoke, baseline, large-scale) and quotagate's fair-tree."""


class ScenarioError(ValueError):
    """A scenario that cannot be used; the message names the offending key."""


@dataclass(frozen=True)
class WorkloadClass:
    name: str
    runtime_ms: int
    priority: int
    request: int  # milli-units, per pod
    pods: int = 1  # TAS scenarios: `podCount`
    topology: TopologyRequest | None = None  # TAS scenarios: the pod set's request


@dataclass(frozen=True)
class WorkloadSet:
    count: int
    interval_ms: int
    classes: tuple[WorkloadClass, ...]

    def arrivals(self) -> list[tuple[float, WorkloadClass, int]]:
        """(arrival in seconds from the start, class, index) of every Workload of the set."""
        out = []
        n = 0
        for index in range(self.count):
            for wc in self.classes:
                n += 1
                out.append((n * self.interval_ms / 1000, wc, index))
        return out


@dataclass(frozen=True)
class QueueSet:
    name: str
    count: int
    nominal: int  # milli-units
    borrowing_limit: int | None  # milli-units; None = unlimited
    reclaim_within_cohort: str
    within_cluster_queue: str
    workload_sets: tuple[WorkloadSet, ...]
    weight: Fraction | None = None  # spec.fairSharing.weight; None = unset (1)


@dataclass(frozen=True)
class CohortSet:
    name: str
    count: int
    queue_sets: tuple[QueueSet, ...]
    parent: str | None = None  # a ParentCohort's name; None = the cohorts are roots
    weight: Fraction | None = None  # the cohorts' spec.fairSharing.weight; None = unset (1)

    @property
    def explicit(self) -> bool:
        """Whether its cohorts are Cohort objects (with a parent or a weight), not implicit."""
        return self.parent is not None or self.weight is not None


@dataclass(frozen=True)
class ParentCohort:
    """An explicit Cohort above the generated ones, with cpu quota of its own."""

    name: str
    parent: str | None = None
    nominal: int | None = None  # milli-units; None = no quota of its own
    borrowing_limit: int | None = None  # milli-units; only under a parent
    lending_limit: int | None = None  # milli-units; only under a parent
    weight: Fraction | None = None  # spec.fairSharing.weight; None = unset (1)

    @property
    def has_quota(self) -> bool:
        return any(
            value is not None for value in (self.nominal, self.borrowing_limit, self.lending_limit)
        )


@dataclass(frozen=True)
class Scenario:
    name: str
    cohort_sets: tuple[CohortSet, ...]
    parent_cohorts: tuple[ParentCohort, ...] = ()
    fair_sharing: FairSharing | None = None  # the `fairSharing` section; None = off
    tas: TASSetup | None = None  # the `topology` and `resourceFlavor` sections (TAS)

    def total_workloads(self) -> int:
        return sum(
            cs.count * qs.count * ws.count * len(ws.classes)
            for cs in self.cohort_sets
            for qs in cs.queue_sets
            for ws in qs.workload_sets
        )

    def total_queues(self) -> int:
        return sum(cs.count * qs.count for cs in self.cohort_sets for qs in cs.queue_sets)

    def class_names(self) -> list[str]:
        names: dict[str, None] = {}
        for cs in self.cohort_sets:
            for qs in cs.queue_sets:
                for ws in qs.workload_sets:
                    for wc in ws.classes:
                        names[wc.name] = None
        return list(names)

    def queues(self) -> list[tuple[str, str, QueueSet]]:
        """(ClusterQueue name, cohort name, queue set) of every ClusterQueue, named as
        Kueue's generator names them: `<queue class>-<set index>-<index>-<cohort>`."""
        out = []
        for cs in self.cohort_sets:
            for c in range(cs.count):
                cohort = f"{cs.name}-{c}"
                for s, qs in enumerate(cs.queue_sets):
                    for q in range(qs.count):
                        out.append((f"{qs.name}-{s}-{q}-{cohort}", cohort, qs))
        return out

    def cohort_parents(self) -> dict[str, str | None]:
        """The parent of every Cohort of the tree: the parent cohorts, then the generated
        cohorts that are Cohort objects (a parent or a weight)."""
        parents = {pc.name: pc.parent for pc in self.parent_cohorts}
        for cs in self.cohort_sets:
            if cs.explicit:
                parents.update((f"{cs.name}-{c}", cs.parent) for c in range(cs.count))
        return parents

    def roots(self) -> dict[str, str]:
        """The root of the tree of every cohort, generated or parent (a cohort without a
        parent is its own root): quota moves within a root's tree, never between trees."""
        parents = self.cohort_parents()
        out = {}
        for cohort in [*parents, *(cohort for _, cohort, _ in self.queues())]:
            root = cohort
            while (parent := parents.get(root)) is not None:
                root = parent
            out[cohort] = root
        return out


_POLICIES = {
    "reclaimWithinCohort": ("Never", "LowerPriority", "Any"),
    "withinClusterQueue": ("Never", "LowerPriority", "LowerOrNewerEqualPriority"),
}


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ScenarioError(f"{where}: expected a mapping, got {type(value).__name__}")
    return value


def _items(data: dict[str, Any], key: str, where: str) -> list[Any]:
    value = data.get(key)
    if not isinstance(value, list) or not value:
        raise ScenarioError(f"{where}.{key}: expected a non-empty list")
    return value


def _int(
    data: dict[str, Any], key: str, where: str, minimum: int = 0, default: int | None = None
) -> int:
    value = data.get(key, default)
    if value is None:
        raise ScenarioError(f"{where}.{key}: required")
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ScenarioError(f"{where}.{key}: expected an integer ≥ {minimum}, got {value!r}")
    return int(value)


def _quantity(data: dict[str, Any], key: str, where: str, positive: bool = False) -> int | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool):
        raise ScenarioError(f"{where}.{key}: expected a quantity, got {value!r}")
    try:
        milli = Quantity.parse(value).milli
    except (InvalidQuantity, TypeError, ValueError) as exc:
        raise ScenarioError(f"{where}.{key}: not a quantity: {value!r}") from exc
    if milli < 0 or (positive and milli == 0):
        raise ScenarioError(f"{where}.{key}: must be {'> 0' if positive else '≥ 0'}, got {value!r}")
    return milli


def _weight(data: dict[str, Any], where: str) -> Fraction | None:
    """`weight`, exact (Kueue's `spec.fairSharing.weight`: a quantity, not negative)."""
    value = data.get("weight")
    if value is None:
        return None
    try:
        weight = exact_value(value)
    except InvalidQuantity as exc:
        raise ScenarioError(f"{where}.weight: not a quantity: {value!r}") from exc
    if weight < 0:
        raise ScenarioError(f"{where}.weight: must be ≥ 0, got {value!r}")
    return weight


def _name(data: dict[str, Any], where: str, default: str) -> str:
    value = data.get("className", default)
    if not isinstance(value, str) or not value:
        raise ScenarioError(f"{where}.className: expected a non-empty string")
    return value


def _workload_class(raw: Any, where: str) -> WorkloadClass:
    wc = _mapping(raw, where)
    if not isinstance(wc.get("className"), str) or not wc["className"]:
        raise ScenarioError(f"{where}.className: required")
    request = _quantity(wc, "request", where, positive=True)
    if request is None:
        raise ScenarioError(f"{where}.request: required")
    try:
        pods, topology = parse_class_topology(wc, where)
    except TASScenarioError as exc:
        raise ScenarioError(str(exc)) from None
    return WorkloadClass(
        wc["className"],
        _int(wc, "runtimeMs", where, 1),
        _int(wc, "priority", where, -(2**31), 0),
        request,
        pods,
        topology,
    )


def _workload_set(raw: Any, where: str) -> WorkloadSet:
    ws = _mapping(raw, where)
    classes = tuple(
        _workload_class(item, f"{where}.workloads[{m}]")
        for m, item in enumerate(_items(ws, "workloads", where))
    )
    return WorkloadSet(
        _int(ws, "count", where, 1), _int(ws, "creationIntervalMs", where, 0), classes
    )


def _queue_set(raw: Any, where: str, index: int) -> QueueSet:
    qs = _mapping(raw, where)
    policies = {}
    for key, allowed in _POLICIES.items():
        value = qs.get(key, "Never")
        if value not in allowed:
            raise ScenarioError(f"{where}.{key}: {value!r} is not one of {', '.join(allowed)}")
        policies[key] = value
    nominal = _quantity(qs, "nominalQuota", where)
    if nominal is None:
        raise ScenarioError(f"{where}.nominalQuota: required")
    return QueueSet(
        _name(qs, where, f"cq{index}"),
        _int(qs, "count", where, 1),
        nominal,
        _quantity(qs, "borrowingLimit", where),
        policies["reclaimWithinCohort"],
        policies["withinClusterQueue"],
        tuple(
            _workload_set(item, f"{where}.workloadsSets[{k}]")
            for k, item in enumerate(_items(qs, "workloadsSets", where))
        ),
        _weight(qs, where),
    )


def _parent(data: dict[str, Any], where: str) -> str | None:
    value = data.get("parent")
    if value is not None and (not isinstance(value, str) or not value):
        raise ScenarioError(f"{where}.parent: expected a Cohort's name, got {value!r}")
    return value


_PARENT_COHORT_KEYS = ("name", "parent", "nominalQuota", "borrowingLimit", "lendingLimit", "weight")


def _parent_cohort(raw: Any, where: str) -> ParentCohort:
    pc = _mapping(raw, where)
    unknown = sorted(set(pc) - set(_PARENT_COHORT_KEYS))
    if unknown:
        raise ScenarioError(
            f"{where}.{unknown[0]}: unknown key (known: {', '.join(_PARENT_COHORT_KEYS)})"
        )
    name = pc.get("name")
    if not isinstance(name, str) or not name:
        raise ScenarioError(f"{where}.name: expected a non-empty string")
    cohort = ParentCohort(
        name,
        _parent(pc, where),
        _quantity(pc, "nominalQuota", where),
        _quantity(pc, "borrowingLimit", where),
        _quantity(pc, "lendingLimit", where),
        _weight(pc, where),
    )
    if cohort.parent is None:
        for key, limit in (
            ("borrowingLimit", cohort.borrowing_limit),
            ("lendingLimit", cohort.lending_limit),
        ):
            if limit is not None:
                raise ScenarioError(
                    f"{where}.{key}: only a Cohort with a parent has limits "
                    "(Kueue: must be nil when parent is empty)"
                )
    return cohort


def _parent_cohorts(data: Any) -> tuple[ParentCohort, ...]:
    """The `parentCohorts` list: unique names, known parents, no cycle."""
    if data is None:
        return ()
    if not isinstance(data, list):
        raise ScenarioError("parentCohorts: expected a list of Cohorts")
    cohorts: list[ParentCohort] = []
    for i, raw in enumerate(data):
        cohort = _parent_cohort(raw, f"parentCohorts[{i}]")
        if any(other.name == cohort.name for other in cohorts):
            raise ScenarioError(f"parentCohorts[{i}].name: {cohort.name!r} is listed twice")
        cohorts.append(cohort)
    by_name = {pc.name: Cohort(pc.name, pc.parent) for pc in cohorts}
    for i, pc in enumerate(cohorts):
        if pc.parent is not None and pc.parent not in by_name:
            raise ScenarioError(
                f"parentCohorts[{i}].parent: unknown Cohort {pc.parent!r} (not in parentCohorts)"
            )
        cycle = parent_cycle(by_name, pc.name)
        if cycle is not None:
            raise ScenarioError(
                f"parentCohorts[{i}].parent: {pc.parent!r} makes a cycle ({' -> '.join(cycle)})"
            )
    return tuple(cohorts)


def _fair_sharing(data: Any) -> FairSharing | None:
    """The `fairSharing` section, validated as the controller's configuration validates
    it (controller/config.py); null, like `enable: false`, is off."""
    if data is None:
        return None
    try:
        return FairSharingConfig.model_validate(data).core()
    except ValidationError as exc:
        error = exc.errors()[0]
        key = ".".join(["fairSharing", *(str(part) for part in error["loc"])])
        raise ScenarioError(f"{key}: {error['msg']}") from exc


def parse(data: Any, name: str = "scenario") -> Scenario:
    """A Scenario from the loaded YAML; ScenarioError names the first bad key."""
    where = "cohorts"
    fair_sharing: FairSharing | None = None
    parent_cohorts: tuple[ParentCohort, ...] = ()
    tas: TASSetup | None = None
    if isinstance(data, dict):
        if "cohorts" not in data:
            raise ScenarioError("cohorts: required (a list of cohort sets)")
        if data.get("topology") is not None:
            try:
                tas = parse_setup(data["topology"], data.get("resourceFlavor"))
            except TASScenarioError as exc:
                raise ScenarioError(str(exc)) from None
        fair_sharing = _fair_sharing(data.get("fairSharing"))
        parent_cohorts = _parent_cohorts(data.get("parentCohorts"))
        data = data["cohorts"]
    if not isinstance(data, list) or not data:
        raise ScenarioError(f"{where}: expected a non-empty list of cohort sets")
    known = {pc.name for pc in parent_cohorts}
    cohort_sets = []
    for i, raw in enumerate(data):
        cwhere = f"{where}[{i}]"
        cs = _mapping(raw, cwhere)
        parent = _parent(cs, cwhere)
        if parent is not None and parent not in known:
            raise ScenarioError(
                f"{cwhere}.parent: unknown Cohort {parent!r} (not in parentCohorts)"
            )
        cohort_sets.append(
            CohortSet(
                _name(cs, cwhere, f"cohort{i}"),
                _int(cs, "count", cwhere, 1),
                tuple(
                    _queue_set(item, f"{cwhere}.queuesSets[{j}]", j)
                    for j, item in enumerate(_items(cs, "queuesSets", cwhere))
                ),
                parent,
                _weight(cs, cwhere),
            )
        )
    _check_generated_cohorts(cohort_sets, known)
    scenario = Scenario(name, tuple(cohort_sets), parent_cohorts, fair_sharing, tas)
    names = [queue for queue, _, _ in scenario.queues()]
    if len(set(names)) != len(names):
        raise ScenarioError(f"{where}: two queue sets produce the same ClusterQueue names")
    return scenario


def _check_generated_cohorts(cohort_sets: list[CohortSet], parent_cohorts: set[str]) -> None:
    """A generated cohort is neither a parent cohort nor two different Cohorts (two sets
    of the same className generate the same cohorts: they must agree on parent and weight)."""
    seen: dict[str, tuple[int, str | None, Fraction | None]] = {}
    for i, cs in enumerate(cohort_sets):
        for c in range(cs.count):
            cohort = f"{cs.name}-{c}"
            if cohort in parent_cohorts:
                raise ScenarioError(
                    f"cohorts[{i}].className: generates cohort {cohort!r}, "
                    "which parentCohorts lists too"
                )
            first, parent, weight = seen.setdefault(cohort, (i, cs.parent, cs.weight))
            if (parent, weight) != (cs.parent, cs.weight):
                raise ScenarioError(
                    f"cohorts[{i}]: cohort {cohort!r} is also generated by cohorts[{first}] "
                    "with another parent or weight"
                )


def load(path: Path) -> Scenario:
    """Read and parse a scenario file (named after the file's stem)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{path}: invalid YAML: {' '.join(str(exc).split())}") from exc
    try:
        return parse(data, path.stem)
    except ScenarioError as exc:
        raise ScenarioError(f"{path}: {exc}") from exc
