"""Small builders so each admission scenario is a few lines.

Quantities are written as Kubernetes strings ("10", "500m", "4Gi"). Every ClusterQueue
named X gets a LocalQueue X in namespace "ns" unless told otherwise, so a Workload says
`queue="X"`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from api.constants import AdmissionMode, QueueingStrategy, StopPolicy
from api.quantities import Quantity
from controller.core.decisions import CycleResult
from controller.core.model.clusterqueues import (
    ClusterQueue,
    FlavorFungibility,
    FlavorQuotas,
    LocalQueue,
    PreemptionPolicy,
    ResourceGroup,
    ResourceQuota,
)
from controller.core.model.flavors import ResourceFlavor
from controller.core.model.selectors import LabelSelector
from controller.core.model.workloads import PodSet, PriorityClassRef, Workload
from controller.core.scheduler.cycle import run_cycle
from controller.core.state import ClusterState

ALL_NAMESPACES = LabelSelector()

QuotaSpec = str | int | tuple[Any, Any, Any] | ResourceQuota


def m(value: str | int) -> int:
    """Milli-units of a quantity string."""
    return Quantity.parse(value).milli


def quota(
    nominal: str | int, borrow: str | int | None = None, lend: str | int | None = None
) -> ResourceQuota:
    return ResourceQuota(
        m(nominal), None if borrow is None else m(borrow), None if lend is None else m(lend)
    )


def _quota(spec: QuotaSpec) -> ResourceQuota:
    if isinstance(spec, ResourceQuota):
        return spec
    if isinstance(spec, tuple):
        return quota(*spec)
    return quota(spec)


def group(flavors: Mapping[str, Mapping[str, QuotaSpec]]) -> ResourceGroup:
    covered: dict[str, None] = {}
    for resources in flavors.values():
        covered.update(dict.fromkeys(resources))
    return ResourceGroup(
        tuple(covered),
        tuple(
            FlavorQuotas(name, {r: _quota(q) for r, q in resources.items()})
            for name, resources in flavors.items()
        ),
    )


def cq(
    name: str,
    flavors: Mapping[str, Mapping[str, QuotaSpec]] | None = None,
    *,
    groups: Iterable[ResourceGroup] = (),
    cohort: str | None = None,
    strategy: QueueingStrategy = QueueingStrategy.BEST_EFFORT_FIFO,
    selector: LabelSelector | None = ALL_NAMESPACES,
    fungibility: FlavorFungibility | None = None,
    stop: StopPolicy = StopPolicy.NONE,
    preemption: PreemptionPolicy | None = None,
    admission_mode: AdmissionMode | None = None,
) -> ClusterQueue:
    resource_groups = (group(flavors),) if flavors else ()
    return ClusterQueue(
        name,
        resource_groups + tuple(groups),
        cohort,
        strategy,
        selector,
        fungibility or FlavorFungibility(),
        preemption or PreemptionPolicy(),
        stop,
        admission_mode=admission_mode,
    )


def wl(
    name: str,
    queue: str = "cq",
    *,
    count: int = 1,
    created: float = 0.0,
    priority: int | None = None,
    priority_class: PriorityClassRef | None = None,
    cost: int = 0,
    active: bool = True,
    pod_sets: Iterable[PodSet] | None = None,
    node_selector: Mapping[str, str] | None = None,
    **requests: str | int,
) -> Workload:
    """A Workload "ns/<name>" with one podset "main" of `count` pods requesting `requests`
    (keyword names use _ for / and -: nvidia_com_gpu → nvidia.com/gpu is not supported;
    pass `pod_sets` for unusual resources)."""
    namespace, _, short = name.rpartition("/")
    sets = (
        tuple(pod_sets)
        if pod_sets is not None
        else (PodSet("main", count, {r: m(v) for r, v in requests.items()}, node_selector or {}),)
    )
    return Workload(
        namespace or "ns",
        short,
        f"uid-{short}",
        queue,
        sets,
        creation_timestamp=created,
        priority=priority,
        priority_class=priority_class,
        active=active,
        preemption_cost=cost,
    )


def cluster(
    *queues: ClusterQueue,
    flavors: Iterable[str | ResourceFlavor] = ("default",),
    namespace: str = "ns",
) -> ClusterState:
    state = ClusterState()
    for flavor in flavors:
        state.set_flavor(ResourceFlavor(flavor) if isinstance(flavor, str) else flavor)
    for queue in queues:
        state.set_cluster_queue(queue)
        state.set_local_queue(LocalQueue(namespace, queue.name, queue.name))
    return state


def add(state: ClusterState, *workloads: Workload) -> ClusterState:
    for workload in workloads:
        state.upsert_workload(workload)
    return state


def settle(state: ClusterState, now: float = 0.0, limit: int = 10_000) -> list[CycleResult]:
    """Run cycles until one changes nothing."""
    results = []
    for _ in range(limit):
        result = run_cycle(state, now)
        results.append(result)
        if not result.changed:
            return results
    raise AssertionError("cycles did not settle")


def admitted_keys(state: ClusterState) -> set[str]:
    return set(state.cache.admitted)


def usage(state: ClusterState, cq_name: str, flavor: str = "default", resource: str = "cpu") -> int:
    return state.cache.quota.usage(cq_name, (flavor, resource))
