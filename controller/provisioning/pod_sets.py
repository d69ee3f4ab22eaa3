"""The pod sets of a ProvisioningRequest and the PodTemplate each entry points to (pure;
Kueue's `mergePodSets` and `createPodTemplate` in
pkg/controller/admissionchecks/provisioning/controller.go).

- The pod sets asked for are those using one of the config's `managedResources` (all when
  it names none), in the Workload's order, with more than zero pods admitted.
- With a `podSetMergePolicy`, a pod set joins the first entry it can merge with, adding
  its pods to that entry's count: `IdenticalPodTemplates` when the two pod templates are
  the same, `IdenticalWorkloadSchedulingRequirements` when their containers' and init
  containers' requests (one by one), pod-level resources, node selectors, tolerations,
  affinity and resource claims are. The entry keeps the first pod set's name, template and
  assignment (so only that pod set gets the provisioned request's `podSetUpdates`, as in
  Kueue).
- Each entry's PodTemplate is its pod set's template with what the admission puts into the
  pods (`podset.FromAssignment`: the assigned flavors' node labels and tolerations, the
  topology gate) merged in, and every container's limits standing in for missing requests.

Quantities compare by value ("1" and "1000m" are the same), as Kubernetes' semantic
equality compares them.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from api.provisioningrequestconfig import PodSetMergePolicy
from api.quantities import exact_value

# Kueue's `pkg/podset`, shared with the job integrations: what an assignment puts into a
# pod template (the one edge from here into controller.integrations, pyproject.toml).
from controller.integrations.framework.podset_info import (
    FlavorPlacement,
    PodSetInfoError,
    from_assignment,
    merge,
)

__all__ = [
    "FlavorPlacement",
    "InconsistentAssignments",
    "MergedPodSet",
    "PodSetInfoError",
    "can_merge",
    "merged_pod_sets",
    "pod_template",
    "uses_resources",
]


class InconsistentAssignments(ValueError):
    """A pod set without its assignment (Kueue's `errInconsistentPodSetAssignments`)."""


@dataclass(frozen=True, slots=True)
class MergedPodSet:
    """One entry of the request: the first pod set merged into it, its assignment, and
    the pods of every pod set merged into it."""

    name: str
    pod_set: Mapping[str, Any]
    assignment: Mapping[str, Any]
    count: int


def uses_resources(pod_spec: Mapping[str, Any], resources: frozenset[str]) -> bool:
    """Whether a container or init container requests or limits one of `resources`."""
    for key in ("initContainers", "containers"):
        for container in pod_spec.get(key) or ():
            res = container.get("resources") or {}
            for part in ("requests", "limits"):
                if resources & set(res.get(part) or {}):
                    return True
    return False


def _required(pod_sets: Sequence[Mapping[str, Any]], managed: frozenset[str]) -> list[str]:
    """Kueue's `requiredPodSets`: every pod set when no resource is managed."""
    return [
        str(ps.get("name"))
        for ps in pod_sets
        if not managed or uses_resources(((ps.get("template") or {}).get("spec") or {}), managed)
    ]


def merged_pod_sets(
    workload: Mapping[str, Any],
    managed_resources: Sequence[str],
    policy: PodSetMergePolicy | None,
) -> list[MergedPodSet]:
    """The entries of the Workload's request, in order (Kueue's `mergePodSets`)."""
    pod_sets = {str(ps.get("name")): ps for ps in (workload.get("spec") or {}).get("podSets") or ()}
    admission = (workload.get("status") or {}).get("admission") or {}
    assignments = {str(a.get("name")): a for a in admission.get("podSetAssignments") or ()}
    merged: list[MergedPodSet] = []
    for name in _required(list(pod_sets.values()), frozenset(managed_resources)):
        pod_set, assignment = pod_sets[name], assignments.get(name)
        if assignment is None:
            raise InconsistentAssignments(f"pod set {name!r} has no assignment in the admission")
        admitted = assignment.get("count")
        count = int(admitted if admitted is not None else pod_set.get("count", 1))
        if count <= 0:
            continue
        for i, entry in enumerate(merged):
            if policy is not None and can_merge(entry.pod_set, pod_set, policy):
                merged[i] = MergedPodSet(
                    entry.name, entry.pod_set, entry.assignment, entry.count + count
                )
                break
        else:
            merged.append(MergedPodSet(name, pod_set, assignment, count))
    return merged


def can_merge(a: Mapping[str, Any], b: Mapping[str, Any], policy: PodSetMergePolicy) -> bool:
    """Kueue's `canMergePodSets`."""
    first, second = a.get("template") or {}, b.get("template") or {}
    if policy is PodSetMergePolicy.IDENTICAL_POD_TEMPLATES:
        return bool(_normalized(first) == _normalized(second))
    spec1, spec2 = first.get("spec") or {}, second.get("spec") or {}
    return (
        _requests(spec1.get("containers")) == _requests(spec2.get("containers"))
        and _requests(spec1.get("initContainers")) == _requests(spec2.get("initContainers"))
        and all(
            _normalized(spec1.get(key)) == _normalized(spec2.get(key))
            for key in ("resources", "nodeSelector", "tolerations", "affinity", "resourceClaims")
        )
    )


def _requests(containers: Any) -> list[Any]:
    """The containers' requests, one by one, by value (Kueue's `areContainersEqual`)."""
    return [_normalized((c.get("resources") or {}).get("requests") or {}) for c in containers or ()]


def _normalized(value: Any, key: str = "") -> Any:
    """`value` with the quantities under `requests` and `limits` by exact value and empty
    maps and lists as absent, so that equal objects compare equal as Kubernetes'
    semantic equality compares them."""
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            item = _normalized(v, str(k))
            if item not in (None, {}, []):
                out[str(k)] = item
        if key in ("requests", "limits"):
            return {k: exact_value(v) for k, v in out.items()}
        return out
    if isinstance(value, list):
        return [_normalized(v) for v in value]
    return value


def pod_template(
    entry: MergedPodSet, placement: Callable[[str], FlavorPlacement | None]
) -> dict[str, Any]:
    """The `template` of the entry's PodTemplate (Kueue's `createPodTemplate`); a key the
    template already has with another value raises `PodSetInfoError`."""
    template: dict[str, Any] = copy.deepcopy(dict(entry.pod_set.get("template") or {}))
    merge(template, from_assignment(entry.pod_set, entry.assignment, placement))
    spec = template.get("spec") or {}
    for key in ("initContainers", "containers"):
        for container in spec.get(key) or ():
            _limits_as_missing_requests(container.get("resources"))
    _limits_as_missing_requests(spec.get("resources"))
    return template


def _limits_as_missing_requests(resources: Any) -> None:
    """Kueue's `UseLimitsAsMissingRequestsInPod`: a limit without a request becomes the
    request."""
    if not isinstance(resources, dict) or not resources.get("limits"):
        return
    requests = dict(resources.get("requests") or {})
    for name, value in resources["limits"].items():
        requests.setdefault(name, value)
    resources["requests"] = requests
