"""Priority resolution (controller/core/model/priorities.py)."""

from __future__ import annotations

from controller.core.model.priorities import (
    KUEUE_GROUP,
    SCHEDULING_GROUP,
    PriorityClass,
    PriorityClasses,
    WorkloadPriorityClass,
)
from controller.core.model.workloads import PriorityClassRef
from tests.unit.core.builders import wl


def classes() -> PriorityClasses:
    out = PriorityClasses()
    out.set_workload_priority_class(WorkloadPriorityClass("batch", 50))
    out.set_priority_class(PriorityClass("high", 1000, "Never"))
    return out


def test_spec_priority_wins() -> None:
    ref = PriorityClassRef(KUEUE_GROUP, "WorkloadPriorityClass", "batch")
    assert classes().resolve(wl("w", priority=7, priority_class=ref)).value == 7


def test_workload_priority_class_and_pod_priority_class() -> None:
    kueue = PriorityClassRef(KUEUE_GROUP, "WorkloadPriorityClass", "batch")
    pod = PriorityClassRef(SCHEDULING_GROUP, "PriorityClass", "high")
    assert classes().resolve(wl("w", priority_class=kueue)).value == 50
    resolved = classes().resolve(wl("w", priority_class=pod))
    assert (resolved.value, resolved.preemption_policy, resolved.source) == (
        1000,
        "Never",
        "priorityClass",
    )


def test_global_default_lowest_then_zero() -> None:
    pcs = classes()
    assert pcs.resolve(wl("w")).value == 0
    pcs.set_priority_class(PriorityClass("d1", 20, global_default=True))
    pcs.set_priority_class(PriorityClass("d2", 10, global_default=True))
    assert pcs.resolve(wl("w")).value == 10
    missing = PriorityClassRef(KUEUE_GROUP, "WorkloadPriorityClass", "nope")
    assert pcs.resolve(wl("w", priority_class=missing)).source == "globalDefault"
