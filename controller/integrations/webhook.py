"""The mutating admission webhook's decisions, for the enabled integrations: a
queue-labelled pod gets the scheduling gate, a queue-labelled object of a job kind is
created suspended (its adapter's `suspend`), one of a kind that runs through its pods
(Deployment, StatefulSet, LeaderWorkerSet) gets its pod templates marked for the pod
integration (its `ObjectAdmission`, on creation and update), and any is refused when a
Kueue label or annotation on it is invalid, naming it and why
(`kueue.x-k8s.io/max-exec-time-seconds`, `kueue.x-k8s.io/admission-gated-by`, an elastic job or a prebuilt Workload on a kind
Kueue refuses them for, the kind's own checks such as the Job's
`kueue.x-k8s.io/job-min-parallelism` or a StatefulSet's replicas changed while queued).
Anything without the queue label, or of a kind whose integration is off, is answered
"allowed, no change" — unless the configuration's job-management rules
(`job_management.py`) say otherwise: in a namespace `managedJobsNamespaceSelector` does
not match nothing is touched; an unlabelled object created in a namespace with a
LocalQueue named `default` is labelled with it (Kueue's `ApplyDefaultLocalQueue`); with
`manageJobsWithoutQueueName` an unlabelled one is created suspended (gated, its templates
marked) too. The MutatingWebhookConfiguration's rules and selectors (also here) keep what
cannot be managed from being sent at all. The TLS server and its certificates are the runtime's
(controller/runtime/webhook_server.py): every replica answers; only the leader acts on the
objects.
"""

from __future__ import annotations

import base64
import copy
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from aiohttp import web

from api.constants import ADMISSION_GATE as GATE
from api.constants import (
    ELASTIC_JOB_ANNOTATION,
    POD_GROUP_POD_INDEX_LABEL,
    POD_GROUP_POD_INDEX_LABEL_ANNOTATION,
    POD_SUSPENDING_PARENT_ANNOTATION,
    TOPOLOGY_SCHEDULING_GATE,
)
from api.constants import QUEUE_NAME_LABEL as QUEUE_LABEL
from api.validation import aggregate
from api.validation.admission_gates import validate_gates
from api.validation.tas_annotations import validate_templates
from controller.integrations.framework.ancestors import owner_framework
from controller.integrations.framework.generic_job import GenericJob
from controller.integrations.framework.patches import json_patch
from controller.integrations.framework.registry import Framework, by_kind, frameworks
from controller.integrations.framework.workload_names import api_group
from controller.integrations.framework.workloads import prebuilt_workload_name
from controller.integrations.job_labels import max_exec_time_problem
from controller.integrations.job_management import DEFAULT_LOCAL_QUEUE, Decision, JobManagement
from controller.integrations.job_names import prebuilt_workload_name_problems, queue_name_problems
from controller.integrations.job_update import (
    job_update_problems,
    pod_suspended,
    prebuilt_workload_path,
)
from controller.integrations.pod_validation import pod_common_problems, pod_update_problems

log = logging.getLogger(__name__)

CONFIG_NAME = "quotagate"
SYSTEM_NAMESPACES = ("kube-system", "kube-node-lease")

Enabled = Mapping[tuple[str, str], Framework]
"""The enabled integrations by (API group, kind) of the objects they manage."""


class Lookup(Protocol):
    """What the webhook asks of the controller's view of the cluster."""

    def namespace_labels(self, name: str) -> Mapping[str, str] | None: ...

    def local_queue_exists(self, namespace: str, name: str) -> bool: ...


def decision_for(
    obj: Mapping[str, Any],
    namespace: str,
    management: JobManagement | None,
    lookup: Lookup | None,
    *,
    creating: bool = True,
) -> Decision:
    """The job-management decision for an object being created, or updated (`creating`
    False: the default LocalQueue is not given); without a configuration: queue-labelled
    objects only, in any namespace, as before the rules existed."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    rules = management or JobManagement()
    namespace_labels = lookup.namespace_labels(namespace) if lookup is not None else None
    default = (
        creating
        and lookup is not None
        and lookup.local_queue_exists(namespace, DEFAULT_LOCAL_QUEUE)
    )
    return rules.decide(labels, namespace, namespace_labels, default)


def _label_patch(obj: Mapping[str, Any], queue: str) -> list[dict[str, Any]]:
    """JSON patch adding the queue-name label (the default LocalQueue)."""
    labels = (obj.get("metadata") or {}).get("labels")
    if labels is None:
        return [{"op": "add", "path": "/metadata/labels", "value": {QUEUE_LABEL: queue}}]
    key = QUEUE_LABEL.replace("~", "~0").replace("/", "~1")
    return [{"op": "add", "path": f"/metadata/labels/{key}", "value": queue}]


def _all() -> Enabled:
    return by_kind(tuple(frameworks()))


def by_default(enabled: Enabled | None) -> Enabled:
    """`enabled`, or every integration quotagate has when not given."""
    return _all() if enabled is None else enabled


def pod_patch(
    pod: dict[str, Any], enabled: Enabled | None = None, decision: Decision | None = None
) -> list[dict[str, Any]]:
    """JSON patch gating a managed pod (`decision`; default: managed when queue-labelled),
    and labelling it with the default LocalQueue when the decision says so; none for other
    pods, for pods an enabled job integration runs — the job itself is queued. A pod whose
    template a parent kind marked (`kueue.x-k8s.io/pod-suspending-parent`: a StatefulSet's,
    a LeaderWorkerSet's, a Deployment's) is gated whatever owns it, as Kueue's pod webhook
    does. Every gated pod is also held by the `kueue.x-k8s.io/topology` gate, and the label
    its `kueue.x-k8s.io/pod-group-pod-index-label` annotation names is copied into
    `kueue.x-k8s.io/pod-group-pod-index` (its rank), as Kueue's webhook does while
    TopologyAwareScheduling is on (always, here): whether its pod set is placed by topology
    is known only at admission, which removes the topology gate with the admission gate
    when it is not (pods.py). A gate the pod already has is not added again."""
    if decision is None:
        decision = decision_for(pod, "", None, None)
    meta = pod.get("metadata") or {}
    if not decision.managed:
        return []
    managed_kinds = by_default(enabled)
    suspended_by_parent = POD_SUSPENDING_PARENT_ANNOTATION in (meta.get("annotations") or {})
    for owner in meta.get("ownerReferences") or []:
        group = api_group(str(owner.get("apiVersion", "")))
        framework = managed_kinds.get((group, str(owner.get("kind"))))
        if framework is not None and framework.job is not None and not suspended_by_parent:
            return []
    patch = _label_patch(pod, decision.queue_name) if decision.default_queue else []
    patch.extend(_pod_index_patch(pod, labelled=bool(patch)))
    gates = (pod.get("spec") or {}).get("schedulingGates")
    present = {g.get("name") for g in gates or ()}
    wanted = [name for name in (GATE, TOPOLOGY_SCHEDULING_GATE) if name not in present]
    if not wanted:
        return patch
    if gates is None:
        value = [{"name": name} for name in wanted]
        return [*patch, {"op": "add", "path": "/spec/schedulingGates", "value": value}]
    return [
        *patch,
        *({"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": n}} for n in wanted),
    ]


def _pod_index_patch(pod: Mapping[str, Any], labelled: bool) -> list[dict[str, Any]]:
    """JSON patch copying the label `kueue.x-k8s.io/pod-group-pod-index-label` names into
    `kueue.x-k8s.io/pod-group-pod-index` (Kueue copies it, or "" when the label is absent);
    `labelled`: the patch so far adds the labels map."""
    meta = pod.get("metadata") or {}
    source = (meta.get("annotations") or {}).get(POD_GROUP_POD_INDEX_LABEL_ANNOTATION)
    if source is None:
        return []
    labels = meta.get("labels")
    value = str((labels or {}).get(source, ""))
    if labels is None and not labelled:
        return [
            {"op": "add", "path": "/metadata/labels", "value": {POD_GROUP_POD_INDEX_LABEL: value}}
        ]
    key = POD_GROUP_POD_INDEX_LABEL.replace("~", "~0").replace("/", "~1")
    return [{"op": "add", "path": f"/metadata/labels/{key}", "value": value}]


def job_patch(
    obj: dict[str, Any],
    framework: Framework,
    enabled: Enabled | None = None,
    decision: Decision | None = None,
) -> list[dict[str, Any]]:
    """JSON patch creating a managed object of a job kind (`decision`; default: managed
    when queue-labelled) suspended (Kueue's `ApplyDefaultForSuspend`), labelled with the
    default LocalQueue when the decision says so (Kueue's `ApplyDefaultLocalQueue`); none
    for an object that is not queued (`skip`) or whose controller owner is of an enabled
    job kind (a RayJob's RayCluster: it runs as part of its owner's Workload,
    framework/ancestors.py)."""
    if decision is None:
        decision = decision_for(obj, "", None, None)
    if not decision.managed or framework.job is None:
        return []
    if owner_framework(obj, by_default(enabled)):
        return []
    job = framework.job(copy.deepcopy(obj))
    if decision.default_queue:
        job.obj.setdefault("metadata", {}).setdefault("labels", {})[QUEUE_LABEL] = (
            decision.queue_name
        )
    if job.skip():
        return []
    if not job.is_suspended():
        job.suspend()
    job.default()
    return json_patch(obj, job.obj)


def admission_patch(
    obj: dict[str, Any], framework: Framework, decision: Decision | None = None
) -> list[dict[str, Any]]:
    """JSON patch of a managed object of a kind that runs through its pods (`decision`;
    default: managed when queue-labelled): labelled with the default LocalQueue when the
    decision says so, then its `ObjectAdmission.default`."""
    if decision is None:
        decision = decision_for(obj, "", None, None)
    if not decision.managed or framework.admission is None:
        return []
    defaulted = copy.deepcopy(obj)
    if decision.default_queue:
        defaulted.setdefault("metadata", {}).setdefault("labels", {})[QUEUE_LABEL] = (
            decision.queue_name
        )
    framework.admission.default(defaulted)
    return json_patch(obj, defaulted)


def _framework_of(request: Mapping[str, Any], enabled: Enabled) -> Framework | None:
    """The enabled integration of the request's kind (by kind alone when the request
    names no group, as a hand-written review may)."""
    kind = request.get("kind") or {}
    name = str(kind.get("kind") or "")
    if "group" in kind:
        return enabled.get((str(kind.get("group") or ""), name))
    return next((f for (_, k), f in enabled.items() if k == name), None)


def review_response(
    review: dict[str, Any],
    enabled: Enabled | None = None,
    management: JobManagement | None = None,
    lookup: Lookup | None = None,
) -> dict[str, Any]:
    """An AdmissionReview answer: a JSONPatch for objects we manage; refused only for an
    invalid Kueue label or annotation on a queue-labelled object. `enabled`: the enabled
    integrations (default: every one quotagate has); `management` and `lookup`: the
    job-management rules and the cluster they are applied to (default: queue-labelled
    objects only)."""
    enabled = by_default(enabled)
    request = review.get("request") or {}
    obj = request.get("object") or {}
    framework = _framework_of(request, enabled)
    patch: list[dict[str, Any]] = []
    decision: Decision | None = None
    operation = request.get("operation")
    try:
        if framework is not None and operation in framework.operations:
            namespace = str(
                request.get("namespace") or (obj.get("metadata") or {}).get("namespace") or ""
            )
            # The default LocalQueue is given to objects being created only.
            decision = decision_for(
                obj, namespace, management, lookup, creating=operation == "CREATE"
            )
            if framework.admission is not None:
                patch = admission_patch(obj, framework, decision)
            elif operation == "CREATE":
                patch = (
                    pod_patch(obj, enabled, decision)
                    if framework.job is None
                    else job_patch(obj, framework, enabled, decision)
                )
    except (
        AttributeError,
        TypeError,
        KeyError,
        ValueError,
    ) as exc:  # never reject what we cannot read
        log.warning("webhook could not read a %s: %s", (request.get("kind") or {}).get("kind"), exc)
        patch = []
    response: dict[str, Any] = {"uid": request.get("uid", ""), "allowed": True}
    if decision is not None and decision.default_queue:
        obj = copy.deepcopy(obj)
        obj.setdefault("metadata", {}).setdefault("labels", {})[QUEUE_LABEL] = decision.queue_name
    problem = _refusal(request, framework, obj, lookup)
    if problem is not None:
        response["allowed"] = False
        response["status"] = {"code": 422, "reason": "Invalid", "message": problem}
        patch = []
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


def _refusal(
    request: Mapping[str, Any],
    framework: Framework | None,
    obj: Mapping[str, Any],
    lookup: Lookup | None = None,
) -> str | None:
    """Why a queue-labelled object is refused on creation, or an update of one that has
    (or had) the queue label, as Kueue's webhooks refuse them (None: allowed); several
    problems are joined with "; ", each once."""
    operation = request.get("operation")
    if framework is None or operation not in framework.operations:
        return None
    try:
        if operation == "UPDATE":
            old = request.get("oldObject") or {}
            if not (_queued(old) or _queued(obj)):
                return None
            problems = _update_problems(framework, old, obj, lookup)
        elif operation == "CREATE" and _queued(obj):
            problems = _create_problems(framework, obj)
        else:
            return None
        return "; ".join(dict.fromkeys(problems)) or None
    except (AttributeError, TypeError, KeyError, ValueError):
        return None  # never reject what we cannot read


def _pod(framework: Framework) -> bool:
    """The pod integration's webhook (pods are neither a job kind nor a serving kind)."""
    return framework.job is None and framework.admission is None


def _prebuilt_problems(framework: Framework, obj: Mapping[str, Any]) -> list[str]:
    """Kueue's `validateCreateForPrebuiltWorkload`: the prebuilt Workload's name (a job
    kind's or a pod's), and a prebuilt Workload on a kind Kueue does not run under one
    (pods it does)."""
    problems = prebuilt_workload_name_problems(obj) if framework.admission is None else []
    job = framework.job(copy.deepcopy(dict(obj))) if framework.job is not None else None
    supported = _pod(framework) or (job is not None and job.supports_prebuilt_workload())
    if prebuilt_workload_name(obj) and not supported:
        problems.append(
            f'{prebuilt_workload_path(obj)}: Forbidden: Is not supported for "{_kind(framework)}"'
        )
    return problems


def _kind(framework: Framework) -> str:
    """Go's `GroupVersionKind.String()` ("/v1, Kind=Pod" for the core group)."""
    resource = framework.resource
    return f"{resource.group}/{resource.version}, Kind={resource.kind}"


def _common_create_problems(framework: Framework, obj: Mapping[str, Any]) -> list[str]:
    """Kueue's `ValidateJobOnCreate`, in its order: the queue name, the prebuilt
    Workload, the max-exec-time label, the elastic-job annotation, the admission gates."""
    problems = queue_name_problems(obj) + _prebuilt_problems(framework, obj)
    problems += [p for p in (max_exec_time_problem(obj),) if p is not None]
    job = framework.job(copy.deepcopy(dict(obj))) if framework.job is not None else None
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    if annotations.get(ELASTIC_JOB_ANNOTATION) == "true" and not (
        job is not None and job.supports_elastic_job()
    ):
        problems.append(
            f"metadata.annotations[{ELASTIC_JOB_ANNOTATION}]: Forbidden: elastic job is "
            f'not supported for "{_kind(framework)}"'
        )
    gates = validate_gates(obj)  # Kueue's jobframework checks the annotation too
    return problems + ([aggregate(gates)] if gates else [])


def _job_topology_problems(job: GenericJob) -> list[str]:
    topology = validate_templates(job.topology_templates(), grouping=job.groups_pod_sets())
    return [aggregate(topology)] if topology else []


def _create_problems(framework: Framework, obj: Mapping[str, Any]) -> list[str]:
    """Why a queue-labelled object is refused on creation: Kueue's `ValidateJobOnCreate`,
    then for a pod `validateCommon`, for another kind its own rules."""
    problems = _common_create_problems(framework, obj)
    if _pod(framework):
        return problems + pod_common_problems(obj)
    if framework.job is not None:
        job = framework.job(copy.deepcopy(dict(obj)))
        return problems + job.validate_on_create() + _job_topology_problems(job)
    assert framework.admission is not None
    return problems + framework.admission.validate_create(obj)


def _update_problems(
    framework: Framework,
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    lookup: Lookup | None,
) -> list[str]:
    """Why an update of an object that has (or had) the queue label is refused: for a job
    kind, Kueue's `ValidateJobOnUpdate` and the kind's create checks of the new object in
    the kind's order; for a pod, `ValidateJobOnUpdate`, `validateCommon` and its update
    rules; for a kind that runs through its pods, the queue name then its own rules."""
    if framework.admission is not None:
        return queue_name_problems(new) + framework.admission.validate_update(old, new)

    def default_queue_exists(namespace: str) -> bool:
        return lookup is not None and lookup.local_queue_exists(namespace, DEFAULT_LOCAL_QUEUE)

    if framework.job is None:
        # Kueue's pod webhook: ValidateJobOnUpdate, validateCommon, then its update rules.
        common = job_update_problems(
            old,
            new,
            old_suspended=pod_suspended(old),
            new_suspended=pod_suspended(new),
            prebuilt_on_create=lambda obj: _prebuilt_problems(framework, obj),
            default_queue_exists=default_queue_exists,
        )
        return common + pod_common_problems(new) + pod_update_problems(old, new)
    old_job = framework.job(copy.deepcopy(dict(old)))
    new_job = framework.job(copy.deepcopy(dict(new)))
    common = job_update_problems(
        old,
        new,
        old_suspended=old_job.is_suspended(),
        new_suspended=new_job.is_suspended(),
        prebuilt_on_create=lambda obj: _prebuilt_problems(framework, obj),
        default_queue_exists=default_queue_exists,
    )
    create = _common_create_problems(framework, new) + new_job.validate_on_update(old_job)
    first, then = (common, create) if new_job.updates_checked_first() else (create, common)
    return first + then + new_job.validate_after_update(old_job) + _job_topology_problems(new_job)


def _queued(obj: Mapping[str, Any]) -> bool:
    return QUEUE_LABEL in ((obj.get("metadata") or {}).get("labels") or {})


def handler(
    enabled: Enabled | None = None,
    management: JobManagement | None = None,
    lookup: Lookup | None = None,
) -> Callable[[web.Request], Awaitable[web.Response]]:
    """The aiohttp handler for the enabled integrations: an AdmissionReview in, our answer
    out."""

    async def handle(request: web.Request) -> web.Response:
        try:
            review = await request.json()
        except (ValueError, UnicodeDecodeError):
            return web.json_response({"error": "not an AdmissionReview"}, status=400)
        return web.json_response(review_response(review, enabled, management, lookup))

    return handle


handle = handler()


def webhook_selectors(
    framework: Framework,
    own_namespace: str,
    manage_jobs_without_queue_name: bool = False,
    namespace_selector: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The objectSelector and namespaceSelector of one kind's webhook: never system
    namespaces or our own, only namespaces `managedJobsNamespaceSelector` matches, and, for
    pods unless `manageJobsWithoutQueueName`, only queue-labelled ones (so that an outage
    never blocks other pods). Objects of job kinds and of the kinds that run through their
    pods (Deployment, StatefulSet, LeaderWorkerSet) are all sent: an unlabelled one may get
    the default LocalQueue."""
    excluded = sorted({*SYSTEM_NAMESPACES, own_namespace})
    selector: dict[str, Any] = {
        "matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": excluded},
            *((namespace_selector or {}).get("matchExpressions") or ()),
        ]
    }
    if (namespace_selector or {}).get("matchLabels"):
        selector["matchLabels"] = dict(namespace_selector["matchLabels"])  # type: ignore[index]
    out: dict[str, Any] = {"namespaceSelector": selector}
    pods = framework.job is None and framework.admission is None
    if pods and not manage_jobs_without_queue_name:
        out["objectSelector"] = {"matchExpressions": [{"key": QUEUE_LABEL, "operator": "Exists"}]}
    return out


def webhook_configuration(
    url_base: str,
    ca_bundle: bytes,
    own_namespace: str,
    enabled: Enabled | None = None,
    manage_jobs_without_queue_name: bool = False,
    namespace_selector: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Our MutatingWebhookConfiguration for the enabled integrations' kinds, with the
    selectors of `webhook_selectors`, so `failurePolicy: Fail` cannot wedge what is not
    managed."""
    chosen = sorted(by_default(enabled).values(), key=lambda f: f.name)

    def entry(framework: Framework) -> dict[str, Any]:
        resource = framework.resource
        return {
            "name": f"{resource.plural}.quotagate.kueue.x-k8s.io",
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Fail",
            "timeoutSeconds": 10,
            "matchPolicy": "Equivalent",
            "reinvocationPolicy": "Never",
            "clientConfig": {
                "url": f"{url_base}{framework.webhook_path}",
                "caBundle": base64.b64encode(ca_bundle).decode(),
            },
            "rules": [
                {
                    "operations": list(framework.operations),
                    "apiGroups": [resource.group],
                    "apiVersions": [resource.version],
                    "resources": [resource.plural],
                }
            ],
            **webhook_selectors(
                framework, own_namespace, manage_jobs_without_queue_name, namespace_selector
            ),
        }

    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": CONFIG_NAME, "labels": {"app.kubernetes.io/name": "quotagate"}},
        "webhooks": [entry(framework) for framework in chosen],
    }
