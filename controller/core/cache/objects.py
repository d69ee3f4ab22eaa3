"""The API objects admission is decided by: ResourceFlavors, ClusterQueues, Cohorts,
LocalQueues, AdmissionChecks, Namespaces and priority classes, as `controller/core/model`
converts them.

The store holds them and answers what follows from them alone: a namespace's labels, and
whether a ClusterQueue or LocalQueue is active (Kueue's cache computes a ClusterQueue's
`Active` condition the same way, from the objects it names). What a change means for the
Workloads — queues to retry, quota to recompute, evictions — is `ClusterState`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from api.constants import StopPolicy
from controller.core.model.admission_checks import AdmissionCheck
from controller.core.model.clusterqueues import ClusterQueue, LocalQueue
from controller.core.model.cohorts import Cohort, invalid_cohort, unsupported_cohort
from controller.core.model.flavors import ResourceFlavor
from controller.core.model.priorities import PriorityClasses
from controller.core.model.selectors import EMPTY_LABELS

__all__ = ["INVALID", "UNSUPPORTED_COHORT", "Inactive", "ObjectStore"]

INVALID: Final = "Invalid"
"""quotagate's `Active=False` reason for a queue that Kueue's rules find invalid, or whose
flavor or Cohort they do (an object stored before the validating webhook, or while it was
down): it admits nothing rather than admit by a spec its owner did not write."""

UNSUPPORTED_COHORT: Final = "UnsupportedCohort"
"""quotagate's `Active=False` reason for a ClusterQueue whose tree of Cohorts has a cycle
of parents (controller/core/model/cohorts.py); Kueue makes such queues inactive too."""

_NAME_LABEL = "kubernetes.io/metadata.name"


@dataclass(frozen=True, slots=True)
class Inactive:
    """Why a ClusterQueue or LocalQueue admits nothing now: its `Active=False` reason, as
    Kueue names it (Stopped, FlavorNotFound, AdmissionCheckNotFound, AdmissionCheckInactive,
    ClusterQueueDoesNotExist, ClusterQueueIsInactive), and a message."""

    reason: str
    message: str


class ObjectStore:
    """The objects by name (LocalQueues by `namespace/name`). A setter stores; whether the
    object changed is for the caller to compare first (`ClusterState` does: a status-only
    echo of our own write must not send parked Workloads back for another assessment)."""

    def __init__(self) -> None:
        self.flavors: dict[str, ResourceFlavor] = {}
        self.cluster_queues: dict[str, ClusterQueue] = {}
        self.cohorts: dict[str, Cohort] = {}  # the explicit ones (Cohort objects)
        self.local_queues: dict[str, LocalQueue] = {}
        self.admission_checks: dict[str, AdmissionCheck] = {}
        self.priority_classes = PriorityClasses()
        self.namespaces: dict[str, Mapping[str, str]] = {}
        # Per ClusterQueue, why it admits nothing (None: it is active), as
        # `cluster_queue_inactive` found it; forgotten whenever a ClusterQueue, a flavor, a
        # Cohort or an AdmissionCheck changes (the cycle asks for every queue with a head).
        self._inactive: dict[str, Inactive | None] = {}

    # -- the objects -------------------------------------------------------------------------

    def set_flavor(self, flavor: ResourceFlavor) -> None:
        self.flavors[flavor.name] = flavor
        self._inactive.clear()

    def remove_flavor(self, name: str) -> None:
        self.flavors.pop(name, None)
        self._inactive.clear()

    def set_cluster_queue(self, cq: ClusterQueue) -> None:
        self.cluster_queues[cq.name] = cq
        self._inactive.clear()

    def remove_cluster_queue(self, name: str) -> ClusterQueue | None:
        cq = self.cluster_queues.pop(name, None)
        if cq is not None:
            self._inactive.clear()
        return cq

    def set_cohort(self, cohort: Cohort) -> None:
        self.cohorts[cohort.name] = cohort
        self._inactive.clear()

    def remove_cohort(self, name: str) -> bool:
        """Forget an explicit Cohort; whether there was one."""
        if self.cohorts.pop(name, None) is None:
            return False
        self._inactive.clear()
        return True

    def set_admission_check(self, check: AdmissionCheck) -> None:
        self.admission_checks[check.name] = check
        self._inactive.clear()

    def remove_admission_check(self, name: str) -> bool:
        """Forget an AdmissionCheck; whether there was one."""
        if self.admission_checks.pop(name, None) is None:
            return False
        self._inactive.clear()
        return True

    def set_local_queue(self, lq: LocalQueue) -> None:
        self.local_queues[lq.key] = lq

    def remove_local_queue(self, key: str) -> LocalQueue | None:
        return self.local_queues.pop(key, None)

    def set_namespace(self, name: str, labels: Mapping[str, str]) -> bool:
        """Store a namespace's labels (with its name label); whether they changed."""
        new = {**labels, _NAME_LABEL: name}
        if self.namespaces.get(name) == new:
            return False
        self.namespaces[name] = new
        return True

    def remove_namespace(self, name: str) -> None:
        self.namespaces.pop(name, None)

    def namespace_labels(self, name: str) -> Mapping[str, str]:
        """A namespace's labels; an unknown namespace still carries its name label."""
        return self.namespaces.get(name) or {_NAME_LABEL: name}

    def admits_namespace(self, cq: ClusterQueue, namespace: str) -> bool:
        """Kueue: a null namespaceSelector admits no namespace; `{}` admits all."""
        if cq.namespace_selector is None:
            return False
        return cq.namespace_selector.matches(self.namespace_labels(namespace) or EMPTY_LABELS)

    # -- what follows from them --------------------------------------------------------------

    def cluster_queue_inactive(self, name: str) -> Inactive | None:
        """Why a ClusterQueue admits nothing now: missing, invalid, stopped, a flavor
        missing, an admission check missing or not Active, or its tree of Cohorts a cycle or
        invalid. Remembered until a queue, flavor, Cohort or AdmissionCheck changes."""
        cache = self._inactive
        if name in cache:
            return cache[name]
        found = cache[name] = self._cluster_queue_inactive(name)
        return found

    def _cluster_queue_inactive(self, name: str) -> Inactive | None:
        cq = self.cluster_queues.get(name)
        if cq is None:
            return Inactive("ClusterQueueDoesNotExist", f"ClusterQueue {name} doesn't exist")
        if cq.invalid is not None:
            return Inactive(INVALID, f"ClusterQueue {cq.name} is inactive: {cq.invalid}")
        if cq.stopped:
            message = f"ClusterQueue {cq.name} is inactive: stopped ({cq.stop_policy.value})"
            return Inactive("Stopped", message)
        missing = sorted({flavor for flavor in cq.flavor_names() if flavor not in self.flavors})
        if missing:
            message = f"ClusterQueue {cq.name} is inactive: flavor {', '.join(missing)} not found"
            return Inactive("FlavorNotFound", message)
        for flavor in dict.fromkeys(cq.flavor_names()):
            problem = self.flavors[flavor].invalid
            if problem is not None:
                message = (
                    f"ClusterQueue {cq.name} is inactive: ResourceFlavor {flavor} is invalid: "
                    f"{problem}"
                )
                return Inactive(INVALID, message)
        checks = self._checks_problem(cq)
        if checks is not None:
            return checks
        unsupported = unsupported_cohort(self.cohorts, cq.cohort) if cq.cohort else None
        if unsupported is not None:
            message = f"ClusterQueue {cq.name} is inactive: {unsupported}"
            return Inactive(UNSUPPORTED_COHORT, message)
        invalid = invalid_cohort(self.cohorts, cq.cohort) if cq.cohort else None
        if invalid is not None:
            return Inactive(INVALID, f"ClusterQueue {cq.name} is inactive: {invalid}")
        return None

    def _checks_problem(self, cq: ClusterQueue) -> Inactive | None:
        """Kueue's: an AdmissionCheck the queue names is missing (AdmissionCheckNotFound) or
        its controller does not report it Active (AdmissionCheckInactive); both listed, the
        first reason given."""
        if not cq.admission_checks:
            return None
        names = [rule.name for rule in cq.admission_checks]
        missing = sorted(name for name in names if name not in self.admission_checks)
        inactive = sorted(
            name
            for name in names
            if name in self.admission_checks and not self.admission_checks[name].active
        )
        if not missing and not inactive:
            return None
        parts = []
        if missing:
            parts.append(f"references missing AdmissionCheck(s): {','.join(missing)}")
        if inactive:
            parts.append(f"references inactive AdmissionCheck(s): {','.join(inactive)}")
        reason = "AdmissionCheckNotFound" if missing else "AdmissionCheckInactive"
        return Inactive(reason, f"Can't admit new workloads: {', '.join(parts)}.")

    def local_queue_inactive(self, lq_key: str) -> Inactive | None:
        """Why a LocalQueue (`namespace/name`) admits nothing now: stopped, invalid, or its
        ClusterQueue is missing or inactive (Kueue's LocalQueue `Active` condition)."""
        lq = self.local_queues.get(lq_key)
        if lq is None:
            return Inactive("NotFound", f"LocalQueue {lq_key} doesn't exist")
        if lq.invalid is not None:
            return Inactive(INVALID, f"LocalQueue {lq.name} is inactive: {lq.invalid}")
        if lq.stop_policy is not StopPolicy.NONE:
            message = f"LocalQueue {lq.name} is inactive: stopped ({lq.stop_policy.value})"
            return Inactive("Stopped", message)
        inactive = self.cluster_queue_inactive(lq.cluster_queue)
        if inactive is None:
            return None
        if lq.cluster_queue not in self.cluster_queues:
            return Inactive("ClusterQueueDoesNotExist", inactive.message)
        return Inactive("ClusterQueueIsInactive", inactive.message)
