"""What an integration may ask of the controller that hosts it, and nothing more.

The Job and pod integrations see the controller through `ControllerView`: whether this
replica leads, the newest copy of a Workload, where a ResourceFlavor places pods, a
WorkloadPriorityClass's value, the Event sink, whether waitForPodsReady is on, and the
metrics the job side observes (PodsReady wait times, Workload creation latency, scheduling
gate removal). They never reach into its state; the
operator hands them the controller, which implements the view.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

# (object, type, reason, message) → a Kubernetes Event on the object (best effort).
EventSink = Callable[[dict[str, Any], str, str, str], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Placement:
    """Where admitted pods go: a flavor's node labels and the tolerations of its taints, as
    a pod spec writes them."""

    node_labels: dict[str, str] = field(default_factory=dict)
    tolerations: list[dict[str, Any]] = field(default_factory=list)


class ControllerView(Protocol):
    @property
    def leading(self) -> bool:
        """Whether this replica leads (followers never write)."""
        ...

    @property
    def events(self) -> EventSink | None: ...

    def workload(self, key: str) -> dict[str, Any] | None:
        """The newest copy of the Workload `namespace/name` (None: not known)."""
        ...

    @property
    def workloads_listed(self) -> bool:
        """Whether this term's copies of the Workloads are in (a new leader lists them
        again): before, a Workload not known may exist, and a job's is not looked for."""
        ...

    def flavor_placement(self, name: str) -> Placement | None:
        """The ResourceFlavor's placement (None: no such flavor)."""
        ...

    def node_usable(self, name: str) -> bool:
        """Whether the node is known and Ready (a TAS pod is released to no other: its
        Workload's failed node is being replaced)."""
        ...

    def pinned_pods_termination(self, workload: str, node: str) -> str | None:
        """Why the Workload's released, unbound Pending pods pinned to `node` are to be
        marked Failed now (not Ready, or a taint they do not tolerate), or None
        (controller/core/tas/pod_termination.py)."""
        ...

    def priority_of_class(self, name: str) -> int | None:
        """The WorkloadPriorityClass's value (None: no such class)."""
        ...

    def namespace_labels(self, name: str) -> Mapping[str, str] | None:
        """The Namespace's labels (None: not seen)."""
        ...

    def local_queue_exists(self, namespace: str, name: str) -> bool:
        """Whether the LocalQueue `namespace/name` exists."""
        ...

    def priority_of_pod_class(self, name: str) -> int | None:
        """The scheduling.k8s.io PriorityClass's value (None: no such class)."""
        ...

    @property
    def wait_for_pods_ready(self) -> bool:
        """Whether waitForPodsReady is configured: only then do the integrations keep the
        Workloads' `PodsReady` condition (as Kueue's jobframework does)."""
        ...

    def pods_ready_started(
        self, workload: Mapping[str, Any], queued_seconds: float, admitted_seconds: float
    ) -> None:
        """A Workload's pods became ready for the first time since its admission
        (`PodsReady` True `Started` written): observe the ready wait-time histograms."""
        ...

    def workload_created(self, job_kind: str, job: Mapping[str, Any], workload: object) -> None:
        """The job side created `workload` (as the API server answered) for `job` of kind
        `job_kind`: observe the Workload creation latency."""
        ...

    def scheduling_gate_removed(self, gate: str, workload: Mapping[str, Any], group: bool) -> None:
        """The pod integration removed the scheduling gate `gate` of a pod of the admitted
        `workload` (`group`: a pod group's): observe the time since its admission."""
        ...


def placement_of(
    view: ControllerView, status: Mapping[str, Any], pod_set: str | None = None
) -> Placement:
    """The merged placement of every flavor a Workload's `status.admission` assigns to
    `pod_set` (None: to any pod set; a flavor that no longer exists adds nothing)."""
    labels: dict[str, str] = {}
    tolerations: list[dict[str, Any]] = []
    for assignment in (status.get("admission") or {}).get("podSetAssignments") or []:
        if pod_set is not None and assignment.get("name") != pod_set:
            continue
        for name in (assignment.get("flavors") or {}).values():
            found = view.flavor_placement(name)
            if found is not None:
                labels.update(found.node_labels)
                tolerations.extend(t for t in found.tolerations if t not in tolerations)
    return Placement(labels, tolerations)
