"""Convert Kubernetes/Kueue API objects into the engine's plain objects.

Accepts plain dicts (as decoded from YAML/JSON) or pydantic models from `api/` (anything
with `model_dump`). Pure: no I/O. Problems are collected, not raised one at a time:
`InvalidObject.problems` lists every `(field path, message)` found, so a tool can report
them all (`quotagate plan`) and the runtime can name the field in an Event.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any, TypeVar

from api.constants import (
    ADMISSION_GATED_BY_ANNOTATION,
    EXPECTED_RUNTIME_ANNOTATION,
    MINIMUM_RUNTIME_ANNOTATION,
    OWNER_PREEMPTIBILITY_ANNOTATION,
    POD_PREEMPTIBILITY_ANNOTATION,
    PRIORITY_BOOST_ANNOTATION,
    AdmissionMode,
    BorrowWithinCohortPolicy,
    DisruptionMode,
    FlavorFungibilityPolicy,
    FlavorFungibilityPreference,
    PriorityClassPreemptionPolicy,
    QueueingStrategy,
    ReclaimWithinCohortPolicy,
    StopPolicy,
    WithinClusterQueuePolicy,
)
from api.quantities import InvalidQuantity, exact_value
from api.validation import VALIDATED_KINDS, FieldError, aggregate, validate
from api.validation.field_errors import Path, required
from api.validation.workload import validate_workload, validate_workload_spec
from api.workload_status import PodSetShape, admission_from_api
from controller.core.model.admission_checks import (
    AdmissionCheck,
    admission_check_from_api,
    check_rules_from_api,
    check_statuses_from_api,
)
from controller.core.model.api_fields import FieldReader, parse_time
from controller.core.model.clusterqueues import (
    DEFAULT_WEIGHT,
    ClusterQueue,
    FlavorFungibility,
    FlavorQuotas,
    LocalQueue,
    PreemptionPolicy,
    ResourceGroup,
    ResourceQuota,
)
from controller.core.model.cohorts import Cohort
from controller.core.model.flavors import ResourceFlavor, Taint
from controller.core.model.priorities import (
    KUEUE_GROUP,
    SCHEDULING_GROUP,
    PriorityClass,
    WorkloadPriorityClass,
)
from controller.core.model.requests import Container, pod_requests
from controller.core.model.topology import Node, Topology, TopologyRequest
from controller.core.model.workloads import (
    ConditionState,
    OwnerReference,
    PodSet,
    PriorityClassRef,
    Workload,
)

__all__ = [
    "KINDS",
    "CoreObject",
    "InvalidObject",
    "Namespace",
    "Validated",
    "convert",
    "invalid_message",
    "parse_time",
    "pod_spec_requests",
    "stand_in",
]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Namespace:
    name: str
    labels: Mapping[str, str]


Validated = ResourceFlavor | ClusterQueue | Cohort | LocalQueue | Workload
"""The engine's objects that Kueue's rules apply to (they carry `invalid`)."""

CoreObject = (
    ResourceFlavor
    | AdmissionCheck
    | ClusterQueue
    | Cohort
    | LocalQueue
    | WorkloadPriorityClass
    | PriorityClass
    | Namespace
    | Workload
    | Topology
    | Node
)


class InvalidObject(ValueError):
    """An API object that cannot be converted; `problems` holds (field path, message)."""

    def __init__(self, kind: str, name: str, problems: list[tuple[str, str]]) -> None:
        self.kind, self.name, self.problems = kind, name, problems
        text = "; ".join(f"{path}: {message}" for path, message in problems)
        super().__init__(f"{kind} {name}: {text}")


def _as_dict(obj: Any) -> Mapping[str, Any]:
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        dumped = dump(by_alias=True, exclude_none=True, mode="json")
        if isinstance(dumped, Mapping):
            return dumped
    if not isinstance(obj, Mapping):
        raise InvalidObject("?", "?", [("", f"expected an object, got {type(obj).__name__}")])
    return obj


def _flavor(r: FieldReader, meta: Mapping[str, Any], spec: Mapping[str, Any]) -> ResourceFlavor:
    taints = []
    for i, item in enumerate(r.seq(spec.get("nodeTaints"), "spec.nodeTaints")):
        t = r.obj(item, f"spec.nodeTaints[{i}]")
        taints.append(
            Taint(
                r.text(t.get("key"), f"spec.nodeTaints[{i}].key"),
                str(t.get("value") or ""),
                r.text(t.get("effect"), f"spec.nodeTaints[{i}].effect"),
            )
        )
    return ResourceFlavor(
        r.text(meta.get("name"), "metadata.name"),
        r.labels(spec.get("nodeLabels"), "spec.nodeLabels"),
        tuple(taints),
        r.tolerations(spec.get("tolerations"), "spec.tolerations"),
        _text_or_none(spec.get("topologyName")),
    )


def _topology(r: FieldReader, meta: Mapping[str, Any], spec: Mapping[str, Any]) -> Topology:
    levels = []
    for i, level in enumerate(r.seq(spec.get("levels"), "spec.levels")):
        levels.append(
            r.text(
                r.obj(level, f"spec.levels[{i}]").get("nodeLabel"), f"spec.levels[{i}].nodeLabel"
            )
        )
    return Topology(r.text(meta.get("name"), "metadata.name"), tuple(levels))


def _topology_request(r: FieldReader, obj: Any, path: str) -> TopologyRequest | None:
    """A pod set's `topologyRequest`, or None when it asks for no topology (a request
    holding only the pod index label is Kueue's implicit one)."""
    if obj is None:
        return None
    tr = r.obj(obj, path)
    slice_level = _text_or_none(tr.get("podSetSliceRequiredTopology"))
    slice_size = r.integer(tr.get("podSetSliceSize"), f"{path}.podSetSliceSize")
    layers = r.seq(
        tr.get("podsetSliceRequiredTopologyConstraints"),
        f"{path}.podsetSliceRequiredTopologyConstraints",
    )
    read: list[tuple[str | None, int | None]] = []
    for i, layer in enumerate(layers or ()):  # the layers win over the single slice fields
        at = f"{path}.podsetSliceRequiredTopologyConstraints[{i}]"
        obj = r.obj(layer, at)
        read.append((_text_or_none(obj.get("topology")), r.integer(obj.get("size"), f"{at}.size")))
    if read:
        slice_level, slice_size = read[0]
    request = TopologyRequest(
        _text_or_none(tr.get("required")),
        _text_or_none(tr.get("preferred")),
        tr.get("unconstrained") is True,
        slice_level,
        slice_size,
        _text_or_none(tr.get("podSetGroupName")),
        tuple((level or "", size or 0) for level, size in read[1:]),
    )
    return request if request.explicit or request.group is not None else None


def pod_spec_requests(r: FieldReader, pod: Mapping[str, Any], path: str) -> dict[str, int]:
    """What one pod of this spec requests (milli-units), as Kubernetes computes it."""
    return pod_requests(
        _containers(r, pod.get("containers"), f"{path}.containers"),
        _containers(r, pod.get("initContainers"), f"{path}.initContainers"),
        r.quantities(pod.get("overhead"), f"{path}.overhead"),
        _pod_level(r, pod, path),
    )


def _resource_groups(r: FieldReader, spec: Mapping[str, Any]) -> tuple[ResourceGroup, ...]:
    groups = []
    for g, group in enumerate(r.seq(spec.get("resourceGroups"), "spec.resourceGroups")):
        gpath = f"spec.resourceGroups[{g}]"
        group = r.obj(group, gpath)
        covered = tuple(
            str(x) for x in r.seq(group.get("coveredResources"), f"{gpath}.coveredResources")
        )
        flavors = []
        for f, flavor in enumerate(r.seq(group.get("flavors"), f"{gpath}.flavors")):
            fpath = f"{gpath}.flavors[{f}]"
            flavor = r.obj(flavor, fpath)
            resources: dict[str, ResourceQuota] = {}
            for i, res in enumerate(r.seq(flavor.get("resources"), f"{fpath}.resources")):
                rpath = f"{fpath}.resources[{i}]"
                res = r.obj(res, rpath)
                name = r.text(res.get("name"), f"{rpath}.name")
                nominal = r.quantity(res.get("nominalQuota"), f"{rpath}.nominalQuota")
                borrow = res.get("borrowingLimit")
                lend = res.get("lendingLimit")
                resources[name] = ResourceQuota(
                    nominal,
                    None if borrow is None else r.quantity(borrow, f"{rpath}.borrowingLimit"),
                    None if lend is None else r.quantity(lend, f"{rpath}.lendingLimit"),
                )
            flavors.append(FlavorQuotas(r.text(flavor.get("name"), f"{fpath}.name"), resources))
        groups.append(ResourceGroup(covered, tuple(flavors)))
    return tuple(groups)


def _cluster_queue(
    r: FieldReader, meta: Mapping[str, Any], spec: Mapping[str, Any]
) -> ClusterQueue:
    fung = r.obj(spec.get("flavorFungibility"), "spec.flavorFungibility")
    legacy = {"Borrow": "MayStopSearch", "Preempt": "MayStopSearch"}
    pre = r.obj(spec.get("preemption"), "spec.preemption")
    bwc = r.obj(pre.get("borrowWithinCohort"), "spec.preemption.borrowWithinCohort")
    cohort = spec.get("cohortName", spec.get("cohort"))
    return ClusterQueue(
        name=r.text(meta.get("name"), "metadata.name"),
        resource_groups=_resource_groups(r, spec),
        cohort=r.text(cohort, "spec.cohortName") if cohort else None,
        queueing_strategy=r.enum(
            spec.get("queueingStrategy"),
            "spec.queueingStrategy",
            QueueingStrategy,
            QueueingStrategy.BEST_EFFORT_FIFO,
        ),
        namespace_selector=r.selector(spec.get("namespaceSelector"), "spec.namespaceSelector"),
        flavor_fungibility=FlavorFungibility(
            r.enum(
                legacy.get(str(fung.get("whenCanBorrow")), fung.get("whenCanBorrow")),
                "spec.flavorFungibility.whenCanBorrow",
                FlavorFungibilityPolicy,
                FlavorFungibilityPolicy.MAY_STOP_SEARCH,
            ),
            r.enum(
                legacy.get(str(fung.get("whenCanPreempt")), fung.get("whenCanPreempt")),
                "spec.flavorFungibility.whenCanPreempt",
                FlavorFungibilityPolicy,
                FlavorFungibilityPolicy.TRY_NEXT_FLAVOR,
            ),
            r.enum(
                fung.get("preference"),
                "spec.flavorFungibility.preference",
                FlavorFungibilityPreference,
                FlavorFungibilityPreference.BORROWING_OVER_PREEMPTION,
            ),
        ),
        preemption=PreemptionPolicy(
            r.enum(
                pre.get("reclaimWithinCohort"),
                "spec.preemption.reclaimWithinCohort",
                ReclaimWithinCohortPolicy,
                ReclaimWithinCohortPolicy.NEVER,
            ),
            r.enum(
                pre.get("withinClusterQueue"),
                "spec.preemption.withinClusterQueue",
                WithinClusterQueuePolicy,
                WithinClusterQueuePolicy.NEVER,
            ),
            r.enum(
                bwc.get("policy"),
                "spec.preemption.borrowWithinCohort.policy",
                BorrowWithinCohortPolicy,
                BorrowWithinCohortPolicy.NEVER,
            ),
            r.integer(
                bwc.get("maxPriorityThreshold"),
                "spec.preemption.borrowWithinCohort.maxPriorityThreshold",
            ),
        ),
        stop_policy=r.enum(spec.get("stopPolicy"), "spec.stopPolicy", StopPolicy, StopPolicy.NONE),
        admission_checks=check_rules_from_api(spec),
        minimum_runtime_seconds=_minimum_runtime(r, meta),
        fair_weight=_fair_weight(r, spec),
        admission_mode=_admission_mode(r, spec),
    )


def _admission_mode(r: FieldReader, spec: Mapping[str, Any]) -> AdmissionMode | None:
    """`spec.admissionScope.admissionMode` (None without an admissionScope); Kueue's schema
    requires the mode once the scope is there."""
    scope = spec.get("admissionScope")
    if scope is None:
        return None
    mode = r.obj(scope, "spec.admissionScope").get("admissionMode")
    if mode is None:
        r.problem("spec.admissionScope.admissionMode", "required in an admissionScope")
        return None
    return r.enum(mode, "spec.admissionScope.admissionMode", AdmissionMode, None)


def _local_queue(
    r: FieldReader, meta: Mapping[str, Any], spec: Mapping[str, Any], status: Mapping[str, Any]
) -> LocalQueue:
    """A LocalQueue; the consumed usage its status records (admission fair sharing's
    history, written by an earlier controller or given in a plan's manifest) comes along."""
    return LocalQueue(
        r.text(meta.get("namespace"), "metadata.namespace", "default"),
        r.text(meta.get("name"), "metadata.name"),
        r.text(spec.get("clusterQueue"), "spec.clusterQueue", ""),
        r.enum(spec.get("stopPolicy"), "spec.stopPolicy", StopPolicy, StopPolicy.NONE),
        _fair_weight(r, spec),
        _consumed_status(r, status),
    )


def _consumed_status(r: FieldReader, status: Mapping[str, Any]) -> dict[str, float] | None:
    """`status.fairSharing.admissionFairSharingStatus.consumedResources` in whole units
    (None without that status). A value that is not a non-negative quantity is refused."""
    fair = r.obj(status.get("fairSharing"), "status.fairSharing")
    path = "status.fairSharing.admissionFairSharingStatus"
    afs = fair.get("admissionFairSharingStatus")
    if afs is None:
        return None
    consumed = r.obj(r.obj(afs, path).get("consumedResources"), f"{path}.consumedResources")
    out: dict[str, float] = {}
    for name, value in consumed.items():
        field = f"{path}.consumedResources[{name}]"
        try:
            amount = exact_value(value)
        except InvalidQuantity as exc:
            r.problem(field, str(exc))
            continue
        if amount < 0:
            r.problem(field, f"must not be negative, got {value!r}")
            continue
        out[str(name)] = float(amount)
    return out


def _fair_weight(r: FieldReader, spec: Mapping[str, Any]) -> Fraction:
    """`spec.fairSharing.weight`, exact (unset: 1); a negative weight is refused, as
    Kueue's API does."""
    fair = r.obj(spec.get("fairSharing"), "spec.fairSharing")
    value = fair.get("weight")
    if value is None:
        return DEFAULT_WEIGHT
    try:
        weight = exact_value(value)
    except InvalidQuantity as exc:
        r.problem("spec.fairSharing.weight", str(exc))
        return DEFAULT_WEIGHT
    if weight < 0:
        r.problem("spec.fairSharing.weight", f"must not be negative, got {value!r}")
        return DEFAULT_WEIGHT
    return weight


def _text_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


def _owner_references(meta: Mapping[str, Any]) -> tuple[OwnerReference, ...]:
    refs = meta.get("ownerReferences")
    if not isinstance(refs, list):
        return ()
    return tuple(
        OwnerReference(
            str(ref.get("apiVersion") or ""),
            str(ref.get("kind") or ""),
            str(ref.get("name") or ""),
            str(ref.get("uid") or ""),
        )
        for ref in refs
        if isinstance(ref, Mapping)
    )


def _minimum_runtime(r: FieldReader, meta: Mapping[str, Any]) -> int | None:
    """The ClusterQueue's minimum runtime before preemption (whole seconds), or None."""
    text = (meta.get("annotations") or {}).get(MINIMUM_RUNTIME_ANNOTATION)
    if text is None:
        return None
    if not isinstance(text, str) or not text.isascii() or not text.isdigit():
        r.problem(
            f"metadata.annotations[{MINIMUM_RUNTIME_ANNOTATION}]",
            f'must be a whole number of seconds (such as "300"), not {text!r}',
        )
        return None
    return int(text) or None


def _cohort(r: FieldReader, meta: Mapping[str, Any], spec: Mapping[str, Any]) -> Cohort:
    """A Cohort (a limit without a parent is one of Kueue's rules: api/validation)."""
    parent = r.text(spec.get("parentName"), "spec.parentName", "") or None
    return Cohort(
        r.text(meta.get("name"), "metadata.name"),
        parent,
        _resource_groups(r, spec),
        _fair_weight(r, spec),
    )


def _containers(r: FieldReader, obj: Any, path: str) -> list[Container]:
    out = []
    for i, item in enumerate(r.seq(obj, path)):
        c = r.obj(item, f"{path}[{i}]")
        res = r.obj(c.get("resources"), f"{path}[{i}].resources")
        out.append(
            Container(
                r.quantities(res.get("requests"), f"{path}[{i}].resources.requests"),
                r.quantities(res.get("limits"), f"{path}[{i}].resources.limits"),
                c.get("restartPolicy") == "Always",
            )
        )
    return out


def _pod_level(r: FieldReader, pod: Mapping[str, Any], path: str) -> Container | None:
    """The pod's own `spec.resources` (Kubernetes' PodLevelResources), if it has any."""
    if pod.get("resources") is None:
        return None
    res = r.obj(pod.get("resources"), f"{path}.resources")
    return Container(
        r.quantities(res.get("requests"), f"{path}.resources.requests"),
        r.quantities(res.get("limits"), f"{path}.resources.limits"),
    )


def _pod_set(r: FieldReader, obj: Any, path: str) -> PodSet:
    ps = r.obj(obj, path)
    pod = r.obj(r.obj(ps.get("template"), f"{path}.template").get("spec"), f"{path}.template.spec")
    spath = f"{path}.template.spec"
    requests = pod_spec_requests(r, pod, spath)
    affinity = r.obj(
        r.obj(pod.get("affinity"), f"{spath}.affinity").get("nodeAffinity"),
        f"{spath}.affinity.nodeAffinity",
    )
    required = r.obj(
        affinity.get("requiredDuringSchedulingIgnoredDuringExecution"),
        f"{spath}.affinity.nodeAffinity.required",
    )
    terms = tuple(
        r.requirements(
            r.obj(term, "nodeSelectorTerms").get("matchExpressions"),
            f"{spath}.affinity.nodeAffinity.nodeSelectorTerms[{i}].matchExpressions",
        )
        for i, term in enumerate(r.seq(required.get("nodeSelectorTerms"), "nodeSelectorTerms"))
    )
    count = r.integer(ps.get("count"), f"{path}.count", 1) or 0
    if count < 0:
        r.problem(f"{path}.count", "must not be negative")
    return PodSet(
        r.text(ps.get("name"), f"{path}.name", "main"),
        count,
        requests,
        r.labels(pod.get("nodeSelector"), f"{spath}.nodeSelector"),
        terms,
        r.tolerations(pod.get("tolerations"), f"{spath}.tolerations"),
        r.integer(ps.get("minCount"), f"{path}.minCount"),
        _topology_request(r, ps.get("topologyRequest"), f"{path}.topologyRequest"),
    )


def _conditions(r: FieldReader, status: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    out = {}
    for i, c in enumerate(r.seq(status.get("conditions"), "status.conditions")):
        c = r.obj(c, f"status.conditions[{i}]")
        out[str(c.get("type"))] = c
    return out


def _workload(
    r: FieldReader,
    meta: Mapping[str, Any],
    spec: Mapping[str, Any],
    status: Mapping[str, Any],
    pod_sets: tuple[PodSet, ...] | None = None,
) -> Workload:
    namespace = r.text(meta.get("namespace"), "metadata.namespace", "default")
    name = r.text(meta.get("name"), "metadata.name")
    if pod_sets is None:
        pod_sets = tuple(
            _pod_set(r, ps, f"spec.podSets[{i}]")
            for i, ps in enumerate(r.seq(spec.get("podSets"), "spec.podSets"))
        )
    ref = None
    if spec.get("priorityClassRef") is not None:
        raw = r.obj(spec["priorityClassRef"], "spec.priorityClassRef")
        group = r.text(raw.get("group"), "spec.priorityClassRef.group", KUEUE_GROUP)
        kind = "WorkloadPriorityClass" if group == KUEUE_GROUP else "PriorityClass"
        ref = PriorityClassRef(
            group,
            r.text(raw.get("kind"), "spec.priorityClassRef.kind", kind),
            r.text(raw.get("name"), "spec.priorityClassRef.name"),
        )
    elif spec.get("priorityClassName"):  # v1beta1
        source = spec.get("priorityClassSource") or ""
        group = (
            KUEUE_GROUP if source == "kueue.x-k8s.io/workloadpriorityclass" else SCHEDULING_GROUP
        )
        ref = PriorityClassRef(group, "", str(spec["priorityClassName"]))
    conditions = _conditions(r, status)

    def true(kind: str) -> bool:
        return str(conditions.get(kind, {}).get("status")) == "True"

    # Kueue's rule: the Workload holds quota iff QuotaReserved is True; `status.admission`
    # left behind by a job side that cleared only the condition is not a reservation.
    admission = None
    if true("QuotaReserved"):
        if status.get("admission") is None:
            r.problem("status.admission", "required while the QuotaReserved condition is True")
        else:
            shapes = {ps.name: PodSetShape(ps.count, ps.requests) for ps in pod_sets}
            admission, problems = admission_from_api(status["admission"], shapes)
            for path, message in problems:
                r.problem(path, message)
    requeue = r.obj(status.get("requeueState"), "status.requeueState")
    cost = status.get("preemptionCost")
    return Workload(
        namespace=namespace,
        name=name,
        uid=str(meta.get("uid") or f"{namespace}/{name}"),
        queue_name=r.text(spec.get("queueName"), "spec.queueName"),
        pod_sets=pod_sets,
        creation_timestamp=r.time(meta.get("creationTimestamp"), "metadata.creationTimestamp")
        or 0.0,
        priority=r.integer(spec.get("priority"), "spec.priority"),
        priority_class=ref,
        active=spec.get("active", True) is not False,
        on_hold=_on_hold(conditions),
        preemption_cost=0 if cost is None else r.quantity(cost, "status.preemptionCost"),
        admission=admission,
        evicted=true("Evicted"),
        finished=true("Finished"),
        requeue_at=r.time(requeue.get("requeueAt"), "status.requeueState.requeueAt"),
        requeue_count=r.integer(requeue.get("count"), "status.requeueState.count", 0) or 0,
        pods_ready=_condition_state(r, conditions, "PodsReady"),
        eviction=_true_only(_condition_state(r, conditions, "Evicted")),
        requeued=_condition_state(r, conditions, "Requeued"),
        deactivation_target=_true_only(_condition_state(r, conditions, "DeactivationTarget")),
        preemptibility=spec.get("preemptibility"),
        owner_preemptibility=_owner_preemptibility(meta, r),
        pod_preemptibility=(meta.get("annotations") or {}).get(POD_PREEMPTIBILITY_ANNOTATION),
        expected_runtime=_text_or_none(
            (meta.get("annotations") or {}).get(EXPECTED_RUNTIME_ANNOTATION)
        ),
        admission_gated_by=str(
            (meta.get("annotations") or {}).get(ADMISSION_GATED_BY_ANNOTATION) or ""
        ).strip(),
        priority_boost=_text_or_none(
            (meta.get("annotations") or {}).get(PRIORITY_BOOST_ANNOTATION)
        ),
        owner_references=_owner_references(meta),
        disruption_mode=r.enum(
            spec.get("disruptionMode"),
            "spec.disruptionMode",
            DisruptionMode,
            DisruptionMode.POD_GROUP,
        ),
        maximum_execution_time_seconds=r.integer(
            spec.get("maximumExecutionTimeSeconds"), "spec.maximumExecutionTimeSeconds"
        ),
        accumulated_past_execution_time_seconds=r.integer(
            status.get("accumulatedPastExecutionTimeSeconds"),
            "status.accumulatedPastExecutionTimeSeconds",
            0,
        )
        or 0,
        admission_checks=check_statuses_from_api(r, status),
        admitted=admission is not None and true("Admitted"),
        admitted_at=(
            r.time(conditions["Admitted"].get("lastTransitionTime"), "status.conditions")
            if admission is not None and true("Admitted")
            else None
        ),
        quota_reserved_at=(
            r.time(conditions["QuotaReserved"].get("lastTransitionTime"), "status.conditions")
            if admission is not None
            else None
        ),
        unhealthy_nodes=tuple(
            r.text(
                r.obj(item, f"status.unhealthyNodes[{i}]").get("name"),
                f"status.unhealthyNodes[{i}].name",
            )
            for i, item in enumerate(r.seq(status.get("unhealthyNodes"), "status.unhealthyNodes"))
        ),
    )


def _on_hold(conditions: Mapping[str, Mapping[str, Any]]) -> bool:
    """Kueue's `workload.IsOnHold`: QuotaReserved=False with reason OnHold, written by the
    job side (Kueue's `JobWithOnHold`); such a Workload is not queued."""
    found = conditions.get("QuotaReserved") or {}
    return str(found.get("status")) == "False" and found.get("reason") == "OnHold"


def _condition_state(
    r: FieldReader, conditions: Mapping[str, Mapping[str, Any]], kind: str
) -> ConditionState | None:
    found = conditions.get(kind)
    if found is None:
        return None
    return ConditionState(
        status=str(found.get("status")) == "True",
        reason=str(found.get("reason") or ""),
        message=str(found.get("message") or ""),
        last_transition=r.time(found.get("lastTransitionTime"), "status.conditions") or 0.0,
    )


def _true_only(found: ConditionState | None) -> ConditionState | None:
    return found if found is not None and found.status else None


def _owner_preemptibility(meta: Mapping[str, Any], r: FieldReader) -> tuple[str, ...]:
    text = (meta.get("annotations") or {}).get(OWNER_PREEMPTIBILITY_ANNOTATION)
    if text is None:
        return ()
    try:
        values = json.loads(text)
    except ValueError:
        values = None
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        r.problem(
            f"metadata.annotations[{OWNER_PREEMPTIBILITY_ANNOTATION}]",
            f"must be a JSON list of strings, not {text!r}",
        )
        return ()
    return tuple(values)


KINDS = (
    "ResourceFlavor",
    "AdmissionCheck",
    "Cohort",
    "ClusterQueue",
    "LocalQueue",
    "WorkloadPriorityClass",
    "PriorityClass",
    "Namespace",
    "Workload",
    "Topology",
)


def convert(
    obj: Any,
    *,
    pod_sets: tuple[PodSet, ...] | None = None,
    spec_errors: tuple[FieldError, ...] | None = None,
) -> CoreObject:
    """One API object (dict or pydantic model) → the engine's object; raises InvalidObject.
    `pod_sets` and `spec_errors`, for a Workload: its pod sets and what Kueue's rules found
    on its spec, from an earlier copy of the same spec (same uid and metadata.generation),
    used instead of reading `spec.podSets` again."""
    data = _as_dict(obj)
    kind = str(data.get("kind") or "")
    r = FieldReader()
    meta = r.obj(data.get("metadata"), "metadata")
    spec = r.obj(data.get("spec"), "spec")
    name = str(meta.get("name") or "?")
    if meta.get("namespace"):
        name = f"{meta['namespace']}/{name}"
    result: CoreObject
    if kind == "ResourceFlavor":
        result = _flavor(r, meta, spec)
    elif kind == "ClusterQueue":
        result = _cluster_queue(r, meta, spec)
    elif kind == "Topology":
        result = _topology(r, meta, spec)
    elif kind == "Cohort":
        result = _cohort(r, meta, spec)
    elif kind == "AdmissionCheck":
        result = admission_check_from_api(r, meta, spec, r.obj(data.get("status"), "status"))
    elif kind == "LocalQueue":
        result = _local_queue(r, meta, spec, r.obj(data.get("status"), "status"))
    elif kind == "WorkloadPriorityClass":
        result = WorkloadPriorityClass(
            r.text(meta.get("name"), "metadata.name"), r.integer(data.get("value"), "value", 0) or 0
        )
        if data.get("value") is None:
            r.problem("value", "required")
    elif kind == "PriorityClass":
        result = PriorityClass(
            r.text(meta.get("name"), "metadata.name"),
            r.integer(data.get("value"), "value", 0) or 0,
            r.enum(
                data.get("preemptionPolicy"),
                "preemptionPolicy",
                PriorityClassPreemptionPolicy,
                PriorityClassPreemptionPolicy.PREEMPT_LOWER_PRIORITY,
            ),
            data.get("globalDefault") is True,
        )
        if data.get("value") is None:
            r.problem("value", "required")
    elif kind == "Namespace":
        result = Namespace(
            r.text(meta.get("name"), "metadata.name"),
            r.labels(meta.get("labels"), "metadata.labels"),
        )
    elif kind == "Workload":
        result = _workload(r, meta, spec, r.obj(data.get("status"), "status"), pod_sets)
    else:
        raise InvalidObject(
            kind or "?",
            name,
            [("kind", f"unsupported kind {kind!r}; expected one of {', '.join(KINDS)}")],
        )
    if r.problems:
        raise InvalidObject(kind, name, r.problems)
    if isinstance(result, Workload):
        found = spec_errors if spec_errors is not None else tuple(validate_workload_spec(data))
        errors = validate_workload(data, spec_errors=found) + _no_pod_sets(data)
        result = replace(result, invalid=aggregate(errors) if errors else None, spec_errors=found)
    elif isinstance(result, Validated):
        invalid = invalid_message(data)
        if invalid is not None:
            result = replace(result, invalid=invalid)
    return result


def _no_pod_sets(data: Mapping[str, Any]) -> list[FieldError]:
    """A Workload without pod sets, which Kueue's schema lets through: it would be admitted
    for nothing."""
    if (data.get("spec") or {}).get("podSets"):
        return []
    return [required(Path("spec.podSets"), "a Workload needs at least one pod set")]


def invalid_message(data: Mapping[str, Any]) -> str | None:
    """What Kueue's rules find wrong with an object (api/validation), as its webhook would
    say it; None for a valid one. A Workload without pod sets, which Kueue's schema lets
    through, is one too: it would be admitted for nothing."""
    kind = str(data.get("kind") or "")
    if kind not in VALIDATED_KINDS:
        return None
    errors = validate(data)
    if kind == "Workload":
        errors += _no_pod_sets(data)
    return aggregate(errors) if errors else None


def stand_in(obj: Mapping[str, Any], message: str) -> CoreObject | None:
    """What a ResourceFlavor, ClusterQueue, Cohort or LocalQueue that cannot be converted
    stands for in the engine: its name and links (a queue's cohort, a Cohort's parent, a
    LocalQueue's ClusterQueue, where readable), no quota, and `message` as what is wrong,
    so that it is inactive, not replaced by its previous version. None for other kinds (an
    unreadable Workload keeps its last readable version: its quota is still held)."""
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    if not isinstance(meta, Mapping) or not isinstance(spec, Mapping):
        return None
    name, kind = meta.get("name"), obj.get("kind")
    if not isinstance(name, str):
        return None

    def text(value: Any) -> str | None:
        return value if isinstance(value, str) and value else None

    if kind == "ResourceFlavor":
        return ResourceFlavor(name, invalid=message)
    if kind == "ClusterQueue":
        return ClusterQueue(name, cohort=text(spec.get("cohortName")), invalid=message)
    if kind == "Cohort":
        return Cohort(name, parent=text(spec.get("parentName")), invalid=message)
    if kind == "LocalQueue" and isinstance(meta.get("namespace"), str):
        queue = text(spec.get("clusterQueue")) or ""
        return LocalQueue(meta["namespace"], name, queue, invalid=message)
    return None
