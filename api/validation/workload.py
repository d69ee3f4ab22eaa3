"""Workload rules: Kueue's `pkg/webhooks/workload_webhook.go` (with the feature gates at
Kueue's defaults) and the CRD rules of `apis/kueue/v1beta2/workload_types.go` (checked here
too, for objects stored before those rules were in the CRD). The status rules are in
workload_status.py, the admission gates' in admission_gates.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from api.constants import ELASTIC_JOB_ANNOTATION
from api.quantities import InvalidQuantity, Quantity
from api.validation.admission_gates import validate_gates, validate_gates_update
from api.validation.clusterqueue import FIELD_IMMUTABLE
from api.validation.decoded import mapping, mappings
from api.validation.field_errors import FieldError, Path, forbidden, invalid, required, rule_failed
from api.validation.names import validate_annotations, validate_labels
from api.validation.quota import IS_NEGATIVE, quantity_text
from api.validation.resourceflavor import toleration_rules
from api.validation.workload_status import conditions_true, has_quota_reservation, validate_status

__all__ = [
    "MIN_COUNT_MESSAGE",
    "PRIORITY_NEEDS_CLASS_MESSAGE",
    "validate_workload",
    "validate_workload_spec",
    "validate_workload_update",
]

MIN_COUNT_MESSAGE: Final = "minCount should be positive and less or equal to count"
PRIORITY_NEEDS_CLASS_MESSAGE: Final = "priority should not be nil when priorityClassRef is set"
PODS_RESERVED: Final = "the key is reserved for internal kueue use"
ASSIGNMENTS_MATCH_POD_SETS: Final = (
    "podSetAssignments must have the same number of podSets as the spec"
)
_SPEC: Final = Path("spec")
_STATUS: Final = Path("status")
_ROOT: Final = Path("")


def _resource_list(resources: Any, path: Path) -> list[FieldError]:
    """`validateResourceList`: `pods` is Kueue's own, and no quantity is negative."""
    errors = []
    for name, value in mapping(resources).items():
        if name == "pods":
            errors.append(invalid(path.key(name), "pods", PODS_RESERVED, "pods-reserved"))
        try:
            negative = Quantity.parse(value).milli < 0
        except (InvalidQuantity, TypeError, ValueError):
            negative = False
        if negative:
            errors.append(
                invalid(
                    path.key(str(name)), quantity_text(value), IS_NEGATIVE, "requests-not-negative"
                )
            )
    return errors


def _topology_request(request: Any, path: Path) -> list[FieldError]:
    """`validateTASSliceSize`: a slice size exactly with a slice topology, sizes positive."""
    if not isinstance(request, Mapping):
        return []
    errors = []
    size = request.get("podSetSliceSize")
    if request.get("podSetSliceRequiredTopology") is not None:
        if size is None:
            errors.append(
                required(
                    path.child("podSetSliceSize"),
                    "must be set when podSetSliceRequiredTopology is specified",
                    "tas-slice",
                )
            )
        elif isinstance(size, int) and size <= 0:
            errors.append(
                invalid(path.child("podSetSliceSize"), size, "must be greater than 0", "tas-slice")
            )
    elif size is not None:
        errors.append(
            forbidden(
                path.child("podSetSliceSize"),
                "may not be set when podSetSliceRequiredTopology is not specified",
                "tas-slice",
            )
        )
    for i, constraint in enumerate(mappings(request.get("podsetSliceRequiredTopologyConstraints"))):
        value = constraint.get("size")
        if isinstance(value, int) and value <= 0:
            errors.append(
                invalid(
                    path.child("podsetSliceRequiredTopologyConstraints").index(i).child("size"),
                    value,
                    "must be greater than 0",
                    "tas-slice",
                )
            )
    return errors


def _pod_set(pod_set: Mapping[str, Any], path: Path) -> list[FieldError]:
    """`validatePodSet`: template labels and annotations, no `pods` and no negative
    request or limit (containers, init containers, the pod's own), the topology request."""
    template = mapping(pod_set.get("template"))
    meta, spec = mapping(template.get("metadata")), mapping(template.get("spec"))
    errors: list[FieldError] = []
    if meta:
        tpath = path.child("template", "metadata")
        labels, annotations = mapping(meta.get("labels")), mapping(meta.get("annotations"))
        if labels:
            errors += validate_labels(labels, tpath.child("labels"), "template-labels")
        if annotations:
            errors += validate_annotations(
                annotations, tpath.child("annotations"), "template-annotations"
            )
    for kind in ("initContainers", "containers"):
        for i, container in enumerate(mappings(spec.get(kind))):
            resources = mapping(container.get("resources"))
            for part in ("requests", "limits"):
                if resources.get(part):
                    errors += _resource_list(
                        resources[part],
                        path.child("template", "spec", kind).index(i).child("resources", part),
                    )
    pod_resources = mapping(spec.get("resources"))
    for part in ("requests", "limits"):
        if pod_resources.get(part):
            errors += _resource_list(
                pod_resources[part], path.child("template", "spec", "resources", part)
            )
    if pod_set.get("topologyRequest") is not None:
        errors += _topology_request(pod_set["topologyRequest"], path.child("topologyRequest"))
    return errors


def _spec_rules(spec: Mapping[str, Any], pod_sets: list[Mapping[str, Any]]) -> list[FieldError]:
    """The CRD's rules on the spec (no earlier version needed)."""
    errors: list[FieldError] = []
    ref = spec.get("priorityClassRef")
    if ref is not None and spec.get("priority") is None:
        errors.append(rule_failed(_SPEC, PRIORITY_NEEDS_CLASS_MESSAGE, "cel:priority-with-class"))
    for i, pod_set in enumerate(pod_sets):
        min_count = pod_set.get("minCount")
        if min_count is not None and min_count > pod_set.get("count", 1):
            errors.append(
                rule_failed(_SPEC.child("podSets").index(i), MIN_COUNT_MESSAGE, "cel:min-count")
            )
    if isinstance(ref, Mapping):
        group, kind = ref.get("group"), ref.get("kind")
        if group == "scheduling.k8s.io" and kind != "PriorityClass":
            errors.append(
                rule_failed(
                    _SPEC.child("priorityClassRef"),
                    "only the PriorityClass kind is allowed for the scheduling.k8s.io group",
                    "cel:priority-class-kind",
                )
            )
        if group == "kueue.x-k8s.io" and kind != "WorkloadPriorityClass":
            errors.append(
                rule_failed(
                    _SPEC.child("priorityClassRef"),
                    "only the WorkloadPriorityClass kind is allowed for the kueue.x-k8s.io group",
                    "cel:priority-class-kind",
                )
            )
    return errors


def _status_rules(obj: Mapping[str, Any], reserved: bool) -> list[FieldError]:
    """The CRD's rules on the status (and on the whole object)."""
    status = mapping(obj.get("status"))
    if not status:
        return []
    errors: list[FieldError] = []
    admission = status.get("admission")
    if (
        reserved
        and isinstance(admission, Mapping)
        and len(mappings(admission.get("podSetAssignments")))
        != len(mappings(mapping(obj.get("spec")).get("podSets")))
    ):
        errors.append(rule_failed(_ROOT, ASSIGNMENTS_MATCH_POD_SETS, "cel:assignments-per-pod-set"))
    if status.get("clusterName") and status.get("nominatedClusterNames"):
        errors.append(
            rule_failed(
                _STATUS,
                "clusterName and nominatedClusterNames are mutually exclusive",
                "cel:cluster-name-exclusive",
            )
        )
    for i, check in enumerate(mappings(status.get("admissionChecks"))):
        for j, update in enumerate(mappings(check.get("podSetUpdates"))):
            errors += toleration_rules(
                update.get("tolerations"),
                _STATUS.child("admissionChecks")
                .index(i)
                .child("podSetUpdates")
                .index(j)
                .child("tolerations"),
            )
    return errors


def validate_workload_spec(obj: Mapping[str, Any]) -> list[FieldError]:
    """The rules that read only the spec: the same for every copy of one
    `metadata.generation` (the controller reuses them between status changes)."""
    spec = mapping(obj.get("spec"))
    pod_sets = mappings(spec.get("podSets"))
    errors = _spec_rules(spec, pod_sets)
    with_min_count = 0
    for i, pod_set in enumerate(pod_sets):
        errors += _pod_set(pod_set, _SPEC.child("podSets").index(i))
        if pod_set.get("minCount") is not None:
            with_min_count += 1
    if with_min_count > 1:
        errors.append(
            invalid(
                _SPEC.child("podSets"),
                with_min_count,
                "at most one podSet can use minCount",
                "one-min-count",
            )
        )
    return errors


def validate_workload(
    obj: Mapping[str, Any],
    old: Mapping[str, Any] | None = None,
    spec_errors: Sequence[FieldError] | None = None,
) -> list[FieldError]:
    """`ValidateWorkload` (`old` on an update), with the CRD's own rules first;
    `spec_errors`: what `validate_workload_spec` found on this spec already."""
    errors = list(spec_errors) if spec_errors is not None else validate_workload_spec(obj)
    reserved = has_quota_reservation(obj)
    errors += _status_rules(obj, reserved)
    annotations = mapping(mapping(obj.get("metadata")).get("annotations"))
    if annotations:
        with_min_count = sum(
            1
            for pod_set in mappings(mapping(obj.get("spec")).get("podSets"))
            if pod_set.get("minCount") is not None
        )
        if with_min_count and annotations.get(ELASTIC_JOB_ANNOTATION) == "true":
            errors.append(
                invalid(
                    _SPEC.child("podSets"),
                    with_min_count,
                    "partial admission and elastic job cannot be used together",
                    "min-count-not-elastic",
                )
            )
        if old is None:
            errors += validate_gates(obj)
    errors += validate_status(obj, old, reserved)
    return errors


def validate_workload_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[FieldError]:
    """`ValidateWorkloadUpdate`: the new Workload, its pod sets kept while quota is reserved
    (a count may go down, as Kueue allows with elastic jobs on), the CRD's transition
    rules, and admission gates only removed."""
    errors = validate_workload(new, old) + _transition_rules(old, new)
    if has_quota_reservation(old):
        errors += _immutable_pod_sets(
            mappings(mapping(new.get("spec")).get("podSets")),
            mappings(mapping(old.get("spec")).get("podSets")),
        )
    errors += validate_gates_update(old, new)
    return errors


def _immutable_pod_sets(
    new: list[Mapping[str, Any]], old: list[Mapping[str, Any]]
) -> list[FieldError]:
    """`validateImmutablePodSets`; the path of one pod set is Kueue's (`spec.podSets.0`)."""
    path = _SPEC.child("podSets")
    if len(new) != len(old):
        return [invalid(path, new, FIELD_IMMUTABLE, "pod-sets-immutable")]
    errors = []
    for i, (after, before) in enumerate(zip(new, old, strict=True)):
        compared = dict(after)
        if isinstance(after.get("count"), int) and after["count"] < before.get("count", 1):
            compared["count"] = before.get("count", 1)
        if compared != before:
            errors.append(invalid(path.child(str(i)), after, FIELD_IMMUTABLE, "pod-sets-immutable"))
    return errors


def _transition_rules(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[FieldError]:
    """The CRD's rules on a change while quota is reserved (or the Workload admitted)."""
    errors: list[FieldError] = []
    old_spec, spec = mapping(old.get("spec")), mapping(new.get("spec"))
    reserved = has_quota_reservation(old)
    old_ref, ref = old_spec.get("priorityClassRef"), spec.get("priorityClassRef")
    if reserved and (old_ref is None) != (ref is None):
        errors.append(
            rule_failed(
                _ROOT,
                "priorityClassRef is immutable while workload quota reserved",
                "cel:priority-class-immutable",
            )
        )
    if reserved and isinstance(old_ref, Mapping) and isinstance(ref, Mapping):
        for part in ("group", "kind"):
            if old_ref.get(part) != ref.get(part):
                errors.append(
                    rule_failed(
                        _ROOT,
                        f"priorityClassRef.{part} is immutable while workload quota reserved",
                        "cel:priority-class-immutable",
                    )
                )
        if (ref.get("group"), ref.get("kind")) == ("scheduling.k8s.io", "PriorityClass") and (
            old_ref.get("name") != ref.get("name")
        ):
            errors.append(
                rule_failed(
                    _ROOT,
                    "priorityClassRef.name is immutable for scheduling.k8s.io/priorityclass "
                    "while workload quota reserved",
                    "cel:priority-class-immutable",
                )
            )
    if (
        reserved
        and has_quota_reservation(new)
        and old_spec.get("queueName") != spec.get("queueName")
    ):
        errors.append(
            rule_failed(
                _ROOT,
                "queueName is immutable while workload quota reserved",
                "cel:queue-name-immutable",
            )
        )
    if (
        conditions_true(old, "Admitted")
        and conditions_true(new, "Admitted")
        and (old_spec.get("maximumExecutionTimeSeconds") or 0)
        != (spec.get("maximumExecutionTimeSeconds") or 0)
    ):
        errors.append(
            rule_failed(
                _ROOT,
                "maximumExecutionTimeSeconds is immutable while workload quota reserved",
                "cel:max-execution-time-immutable",
            )
        )
    old_cluster = mapping(old.get("status")).get("clusterName")
    cluster = mapping(new.get("status")).get("clusterName")
    if old_cluster and cluster and old_cluster != cluster:
        errors.append(
            rule_failed(_STATUS, "clusterName is immutable once set", "cel:cluster-name-immutable")
        )
    return errors
