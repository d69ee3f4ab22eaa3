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
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from api.quantities import InvalidQuantity, Quantity

__all__ = [
    "CohortSet",
    "QueueSet",
    "Scenario",
    "ScenarioError",
    "WorkloadClass",
    "WorkloadSet",
    "load",
    "parse",
]


class ScenarioError(ValueError):
    """A scenario that cannot be used; the message names the offending key."""


@dataclass(frozen=True)
class WorkloadClass:
    name: str
    runtime_ms: int
    priority: int
    request: int  # milli-units


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


@dataclass(frozen=True)
class CohortSet:
    name: str
    count: int
    queue_sets: tuple[QueueSet, ...]


@dataclass(frozen=True)
class Scenario:
    name: str
    cohort_sets: tuple[CohortSet, ...]

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
    return WorkloadClass(
        wc["className"],
        _int(wc, "runtimeMs", where, 1),
        _int(wc, "priority", where, -(2**31), 0),
        request,
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
    )


def parse(data: Any, name: str = "scenario") -> Scenario:
    """A Scenario from the loaded YAML; ScenarioError names the first bad key."""
    where = "cohorts"
    if isinstance(data, dict):
        if "cohorts" not in data:
            raise ScenarioError("cohorts: required (a list of cohort sets)")
        data = data["cohorts"]
    if not isinstance(data, list) or not data:
        raise ScenarioError(f"{where}: expected a non-empty list of cohort sets")
    cohort_sets = []
    for i, raw in enumerate(data):
        cwhere = f"{where}[{i}]"
        cs = _mapping(raw, cwhere)
        cohort_sets.append(
            CohortSet(
                _name(cs, cwhere, f"cohort{i}"),
                _int(cs, "count", cwhere, 1),
                tuple(
                    _queue_set(item, f"{cwhere}.queuesSets[{j}]", j)
                    for j, item in enumerate(_items(cs, "queuesSets", cwhere))
                ),
            )
        )
    scenario = Scenario(name, tuple(cohort_sets))
    names = [queue for queue, _, _ in scenario.queues()]
    if len(set(names)) != len(names):
        raise ScenarioError(f"{where}: two queue sets produce the same ClusterQueue names")
    return scenario


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
