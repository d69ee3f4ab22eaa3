"""The live cluster as the engine sees it: converted objects and a `ClusterState`. Pure.

An object the engine cannot read is skipped with a warning (the controller ignores it
too, reporting it in an Event), so one bad object never hides the answer for the rest.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from controller.core.from_api import CoreObject, InvalidObject, apply, convert
from controller.core.priorities import PriorityClass, PriorityClasses, WorkloadPriorityClass
from controller.core.state import ClusterState

__all__ = ["Snapshot"]


@dataclass(slots=True)
class Snapshot:
    """Converted engine objects (definitions first, as listed) and what was skipped."""

    objects: list[CoreObject] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @classmethod
    def convert(cls, items: Iterable[dict[str, Any]], warnings: Iterable[str] = ()) -> Snapshot:
        snapshot = cls(warnings=list(warnings))
        for item in items:
            try:
                snapshot.objects.append(convert(item))
            except InvalidObject as exc:
                snapshot.warnings.append(f"ignoring invalid {exc}")
        return snapshot

    def state(self) -> ClusterState:
        """A fresh engine state holding every object (Workloads keep their admission)."""
        state = ClusterState()
        for obj in self.objects:
            apply(state, obj)
        return state

    def priority_classes(self) -> PriorityClasses:
        classes = PriorityClasses()
        for obj in self.objects:
            if isinstance(obj, WorkloadPriorityClass):
                classes.set_workload_priority_class(obj)
            elif isinstance(obj, PriorityClass):
                classes.set_priority_class(obj)
        return classes
