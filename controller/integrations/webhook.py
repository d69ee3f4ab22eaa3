"""The mutating admission webhook's decisions, for the enabled integrations: a
queue-labelled pod gets the scheduling gate, a queue-labelled object of a job kind is
created suspended (its adapter's `suspend`), and either is refused when a Kueue label or
annotation on it is invalid, naming it and why (`kueue.x-k8s.io/max-exec-time-seconds`,
`kueue.x-k8s.io/admission-gated-by`, an elastic job or a prebuilt Workload on a kind Kueue
refuses them for, the kind's own checks such as the Job's `kueue.x-k8s.io/job-min-parallelism`). Anything without the queue
label, or of a kind whose integration is off, is answered "allowed, no change" — unless the
configuration's job-management rules (`job_management.py`) say otherwise: in a namespace
`managedJobsNamespaceSelector` does not match nothing is touched; an unlabelled object in a
namespace with a LocalQueue named `default` is labelled with it (Kueue's
`ApplyDefaultLocalQueue`); with `manageJobsWithoutQueueName` an unlabelled one is created
suspended (gated) too. The MutatingWebhookConfiguration's rules and selectors (also here)
keep what cannot be managed from being sent at all. The TLS server and its certificates are the runtime's
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
from api.constants import ELASTIC_JOB_ANNOTATION
from api.constants import QUEUE_NAME_LABEL as QUEUE_LABEL
from api.validation import aggregate
from api.validation.admission_gates import validate_gates
from controller.integrations.framework.ancestors import owner_framework
from controller.integrations.framework.patches import json_patch
from controller.integrations.framework.registry import Framework, by_kind, frameworks
from controller.integrations.framework.workloads import prebuilt_workload_name
from controller.integrations.job_labels import max_exec_time_problem
from controller.integrations.job_management import Decision, JobManagement

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
) -> Decision:
    """The job-management decision for an object being created (without a configuration:
    queue-labelled objects only, in any namespace, as before the rules existed)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    rules = management or JobManagement()
    namespace_labels = lookup.namespace_labels(namespace) if lookup is not None else None
    default = lookup is not None and lookup.local_queue_exists(namespace, "default")
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
    pods, for pods an enabled job integration runs — the job itself is queued — or if
    already gated."""
    if decision is None:
        decision = decision_for(pod, "", None, None)
    if not decision.managed:
        return []
    managed_kinds = by_default(enabled)
    for owner in (pod.get("metadata") or {}).get("ownerReferences") or []:
        group = str(owner.get("apiVersion", "")).rpartition("/")[0]
        if (group, owner.get("kind")) in managed_kinds and owner.get("kind") != "Pod":
            return []
    patch = _label_patch(pod, decision.queue_name) if decision.default_queue else []
    spec = pod.get("spec") or {}
    gates = spec.get("schedulingGates")
    if gates is None:
        return [*patch, {"op": "add", "path": "/spec/schedulingGates", "value": [{"name": GATE}]}]
    if any(g.get("name") == GATE for g in gates):
        return patch
    return [*patch, {"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": GATE}}]


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
    return json_patch(obj, job.obj)


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
    try:
        if request.get("operation") == "CREATE" and framework is not None:
            namespace = str(
                request.get("namespace") or (obj.get("metadata") or {}).get("namespace") or ""
            )
            decision = decision_for(obj, namespace, management, lookup)
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
    problem = _refusal(request, framework, obj)
    if problem is not None:
        response["allowed"] = False
        response["status"] = {"code": 422, "reason": "Invalid", "message": problem}
        patch = []
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


def _refusal(
    request: Mapping[str, Any], framework: Framework | None, obj: Mapping[str, Any]
) -> str | None:
    """Why a queue-labelled object is refused on creation, as Kueue's webhooks refuse it
    (None: allowed); several problems are joined with "; "."""
    if request.get("operation") != "CREATE" or framework is None:
        return None
    try:
        meta = obj.get("metadata") or {}
        if QUEUE_LABEL not in (meta.get("labels") or {}):
            return None
        gates = validate_gates(obj)  # Kueue's jobframework checks the annotation too
        problems = [aggregate(gates)] if gates else []
        problems += [p for p in (max_exec_time_problem(obj),) if p is not None]
        if framework.job is not None:
            job = framework.job(copy.deepcopy(dict(obj)))
            kind = f"{framework.resource.api_version}, Kind={framework.resource.kind}"
            annotations = meta.get("annotations") or {}
            if annotations.get(ELASTIC_JOB_ANNOTATION) == "true" and not job.supports_elastic_job():
                problems.append(
                    f"metadata.annotations[{ELASTIC_JOB_ANNOTATION}]: Forbidden: elastic job is "
                    f'not supported for "{kind}"'
                )
            if prebuilt_workload_name(obj) and not job.supports_prebuilt_workload():
                problems.append(
                    f"metadata.labels[kueue.x-k8s.io/prebuilt-workload-name]: Forbidden: Is not "
                    f'supported for "{kind}"'
                )
            problems.extend(job.validate_on_create())
        return "; ".join(problems) or None
    except (AttributeError, TypeError, KeyError, ValueError):
        return None  # never reject what we cannot read


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
    never blocks other pods). Objects of job kinds are all sent: an unlabelled one may get
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
    if framework.job is None and not manage_jobs_without_queue_name:
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
                    "operations": ["CREATE"],
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
