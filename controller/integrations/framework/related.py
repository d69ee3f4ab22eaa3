"""The objects of other kinds an adapter reads to describe its job (`Framework.related`):
Kueue's TrainJob integration reads the TrainingRuntime or ClusterTrainingRuntime a
TrainJob names to know its pod sets. Each related kind is watched whole by an informer
into a cache; an adapter looks objects up in it (`GenericJob.related`), and a job whose
related object is missing (`RelatedObjectMissing`) waits for it: the next event of that
kind reconciles it again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from controller.kube.client import Resource
from controller.kube.informer import ObjectCache

__all__ = ["RelatedCache", "RelatedLookup", "RelatedObjectMissing", "no_related"]

RelatedLookup = Callable[[Resource, str | None, str], Mapping[str, Any] | None]
"""(kind, namespace — None for a cluster-scoped kind —, name) → the object, or None."""


class RelatedObjectMissing(LookupError):
    """An object the adapter needs to describe its job does not exist (yet)."""


def no_related(resource: Resource, namespace: str | None, name: str) -> None:
    """The lookup of an adapter built without a cache (the webhook's): nothing is found."""
    return None


class RelatedCache:
    """The caches of a framework's related kinds. `on_change` is called after every event
    (and after each informer's first complete list)."""

    def __init__(self, resources: tuple[Resource, ...], on_change: Callable[[], None]) -> None:
        self._sinks = {resource: ObjectCache(on_change) for resource in resources}

    def sinks(self) -> list[tuple[Resource, ObjectCache]]:
        """Each related kind with the sink its informer feeds."""
        return list(self._sinks.items())

    def listed(self) -> bool:
        """Whether every related kind has been listed (before that, a missing object may
        only not have arrived yet)."""
        return all(sink.listed for sink in self._sinks.values())

    def lookup(self, resource: Resource, namespace: str | None, name: str) -> dict[str, Any] | None:
        sink = self._sinks.get(resource)
        if sink is None:
            return None
        return sink.objects.get(f"{namespace or ''}/{name}")
