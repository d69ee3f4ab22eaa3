"""Per-pod resource requests, computed the way Kubernetes (and so Kueue) computes them.

A pod requests max(sum of containers + restartable init containers, the largest init
phase) plus its overhead; a container's request defaults to its limit. Pod-level
resources (Kubernetes' PodLevelResources, `spec.resources`) replace that sum for the
resources they may set (cpu, memory, hugepages-*), their requests too defaulting to their
limits (Kueue's `UseLimitsAsMissingRequestsInPod`, then component-helpers' `PodRequests`).
Values are milli-units.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = ["EMPTY_INT", "Container", "is_pod_level_resource", "pod_requests"]

ResourceList = Mapping[str, int]

EMPTY_INT: ResourceList = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Container:
    """A container's resources in milli-units. `sidecar` = init container with restartPolicy Always."""

    requests: ResourceList = field(default_factory=lambda: EMPTY_INT)
    limits: ResourceList = field(default_factory=lambda: EMPTY_INT)
    sidecar: bool = False

    def effective_requests(self) -> dict[str, int]:
        """Requests, each missing one defaulted to the limit (Kubernetes defaulting)."""
        merged = dict(self.limits)
        merged.update(self.requests)
        return merged


def _add(into: dict[str, int], other: Mapping[str, int]) -> None:
    for name, value in other.items():
        into[name] = into.get(name, 0) + value


def _max(into: dict[str, int], other: Mapping[str, int]) -> None:
    for name, value in other.items():
        if value > into.get(name, 0):
            into[name] = value


def is_pod_level_resource(name: str) -> bool:
    """Whether a pod's own `spec.resources` may set `name` (Kubernetes'
    `IsSupportedPodLevelResource`): cpu, memory and huge pages."""
    return name in ("cpu", "memory") or name.startswith("hugepages-")


def pod_requests(
    containers: Iterable[Container],
    init_containers: Iterable[Container] = (),
    overhead: ResourceList = EMPTY_INT,
    pod_level: Container | None = None,
) -> dict[str, int]:
    """One pod's requests (k8s `PodRequests`): sidecars add to the running total and to
    every later init phase; regular init containers only set a floor; the pod's own
    requests (`pod_level`, limits standing in for missing requests) replace the total of
    the resources they may set. Zero entries dropped."""
    total: dict[str, int] = {}
    for container in containers:
        _add(total, container.effective_requests())
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for container in init_containers:
        own = container.effective_requests()
        if container.sidecar:
            _add(sidecars, own)
            _max(init_peak, sidecars)
        else:
            phase = dict(sidecars)
            _add(phase, own)
            _max(init_peak, phase)
    _add(total, sidecars)
    _max(total, init_peak)
    if pod_level is not None:
        total.update(
            (name, value)
            for name, value in pod_level.effective_requests().items()
            if is_pod_level_resource(name)
        )
    _add(total, overhead)
    return {name: value for name, value in total.items() if value != 0}
