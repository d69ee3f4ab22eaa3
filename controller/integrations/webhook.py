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
"allowed, no change" — and the MutatingWebhookConfiguration's rules and selectors (also
here) keep it from being sent at all. The TLS server and its certificates are the runtime's
(controller/runtime/webhook_server.py): every replica answers; only the leader acts on the
objects.
"""

from __future__ import annotations

import base64
import copy
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiohttp import web

from api.constants import ADMISSION_GATE as GATE
from api.constants import ELASTIC_JOB_ANNOTATION, POD_SUSPENDING_PARENT_ANNOTATION
from api.constants import QUEUE_NAME_LABEL as QUEUE_LABEL
from api.validation import aggregate
from api.validation.admission_gates import validate_gates
from controller.integrations.framework.ancestors import owner_framework
from controller.integrations.framework.patches import json_patch
from controller.integrations.framework.registry import Framework, by_kind, frameworks
from controller.integrations.framework.workloads import prebuilt_workload_name
from controller.integrations.job_labels import max_exec_time_problem

log = logging.getLogger(__name__)

CONFIG_NAME = "quotagate"
SYSTEM_NAMESPACES = ("kube-system", "kube-node-lease")

Enabled = Mapping[tuple[str, str], Framework]
"""The enabled integrations by (API group, kind) of the objects they manage."""


def _all() -> Enabled:
    return by_kind(tuple(frameworks()))


def by_default(enabled: Enabled | None) -> Enabled:
    """`enabled`, or every integration quotagate has when not given."""
    return _all() if enabled is None else enabled


def pod_patch(pod: dict[str, Any], enabled: Enabled | None = None) -> list[dict[str, Any]]:
    """JSON patch gating a queue-labelled pod (none for other pods, for pods an enabled job
    integration runs — the job itself is queued — or if already gated). A pod whose
    template a parent kind marked (`kueue.x-k8s.io/pod-suspending-parent`: a
    StatefulSet's, a LeaderWorkerSet's, a Deployment's) is gated whatever owns it, as
    Kueue's pod webhook does."""
    meta = pod.get("metadata") or {}
    if QUEUE_LABEL not in (meta.get("labels") or {}):
        return []
    managed_kinds = by_default(enabled)
    suspended_by_parent = POD_SUSPENDING_PARENT_ANNOTATION in (meta.get("annotations") or {})
    for owner in meta.get("ownerReferences") or []:
        group = str(owner.get("apiVersion", "")).rpartition("/")[0]
        framework = managed_kinds.get((group, str(owner.get("kind"))))
        if framework is not None and framework.job is not None and not suspended_by_parent:
            return []
    spec = pod.get("spec") or {}
    gates = spec.get("schedulingGates")
    if gates is None:
        return [{"op": "add", "path": "/spec/schedulingGates", "value": [{"name": GATE}]}]
    if any(g.get("name") == GATE for g in gates):
        return []
    return [{"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": GATE}}]


def job_patch(
    obj: dict[str, Any], framework: Framework, enabled: Enabled | None = None
) -> list[dict[str, Any]]:
    """JSON patch creating a queue-labelled object of a job kind suspended (Kueue's
    `ApplyDefaultForSuspend`); none for an object that is not queued (`skip`) or whose
    controller owner is of an enabled job kind (a RayJob's RayCluster: it runs as part of
    its owner's Workload, framework/ancestors.py)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if QUEUE_LABEL not in labels or framework.job is None:
        return []
    job = framework.job(copy.deepcopy(obj))
    if job.is_suspended() or job.skip() or owner_framework(obj, by_default(enabled)):
        return []
    job.suspend()
    return json_patch(obj, job.obj)


def admission_patch(obj: dict[str, Any], framework: Framework) -> list[dict[str, Any]]:
    """JSON patch of a queue-labelled object of a kind that runs through its pods: its
    `ObjectAdmission.default`."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if QUEUE_LABEL not in labels or framework.admission is None:
        return []
    defaulted = copy.deepcopy(obj)
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


def review_response(review: dict[str, Any], enabled: Enabled | None = None) -> dict[str, Any]:
    """An AdmissionReview answer: a JSONPatch for objects we manage; refused only for an
    invalid Kueue label or annotation on a queue-labelled object. `enabled`: the enabled
    integrations (default: every one quotagate has)."""
    enabled = by_default(enabled)
    request = review.get("request") or {}
    obj = request.get("object") or {}
    framework = _framework_of(request, enabled)
    patch: list[dict[str, Any]] = []
    operation = request.get("operation")
    try:
        if framework is not None and operation in framework.operations:
            if framework.admission is not None:
                patch = admission_patch(obj, framework)
            elif operation == "CREATE":
                patch = (
                    pod_patch(obj, enabled)
                    if framework.job is None
                    else job_patch(obj, framework, enabled)
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
    """Why a queue-labelled object is refused on creation, or an update of one that has
    (or had) the queue label, as Kueue's webhooks refuse them (None: allowed); several
    problems are joined with "; "."""
    operation = request.get("operation")
    if framework is None or operation not in framework.operations:
        return None
    try:
        if operation == "UPDATE":
            old = request.get("oldObject") or {}
            if framework.admission is None or not (_queued(old) or _queued(obj)):
                return None
            return "; ".join(framework.admission.validate_update(old, obj)) or None
        if operation != "CREATE" or not _queued(obj):
            return None
        meta = obj.get("metadata") or {}
        gates = validate_gates(obj)  # Kueue's jobframework checks the annotation too
        problems = [aggregate(gates)] if gates else []
        problems += [p for p in (max_exec_time_problem(obj),) if p is not None]
        job = framework.job(copy.deepcopy(dict(obj))) if framework.job is not None else None
        if job is None and framework.admission is None:
            return "; ".join(problems) or None
        kind = f"{framework.resource.api_version}, Kind={framework.resource.kind}"
        annotations = meta.get("annotations") or {}
        if annotations.get(ELASTIC_JOB_ANNOTATION) == "true" and not (
            job is not None and job.supports_elastic_job()
        ):
            problems.append(
                f"metadata.annotations[{ELASTIC_JOB_ANNOTATION}]: Forbidden: elastic job is "
                f'not supported for "{kind}"'
            )
        if prebuilt_workload_name(obj) and not (
            job is not None and job.supports_prebuilt_workload()
        ):
            problems.append(
                f"metadata.labels[kueue.x-k8s.io/prebuilt-workload-name]: Forbidden: Is not "
                f'supported for "{kind}"'
            )
        if job is not None:
            problems.extend(job.validate_on_create())
        elif framework.admission is not None:
            problems.extend(framework.admission.validate_create(obj))
        return "; ".join(problems) or None
    except (AttributeError, TypeError, KeyError, ValueError):
        return None  # never reject what we cannot read


def _queued(obj: Mapping[str, Any]) -> bool:
    return QUEUE_LABEL in ((obj.get("metadata") or {}).get("labels") or {})


def handler(enabled: Enabled | None = None) -> Callable[[web.Request], Awaitable[web.Response]]:
    """The aiohttp handler for the enabled integrations: an AdmissionReview in, our answer
    out."""

    async def handle(request: web.Request) -> web.Response:
        try:
            review = await request.json()
        except (ValueError, UnicodeDecodeError):
            return web.json_response({"error": "not an AdmissionReview"}, status=400)
        return web.json_response(review_response(review, enabled))

    return handle


handle = handler()


def webhook_configuration(
    url_base: str,
    ca_bundle: bytes,
    own_namespace: str,
    enabled: Enabled | None = None,
) -> dict[str, Any]:
    """Our MutatingWebhookConfiguration: only queue-labelled objects of the enabled
    integrations' kinds, outside system namespaces and our own, are ever sent here, so
    `failurePolicy: Fail` cannot wedge them."""
    excluded = sorted({*SYSTEM_NAMESPACES, own_namespace})
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
            "objectSelector": {"matchExpressions": [{"key": QUEUE_LABEL, "operator": "Exists"}]},
            "namespaceSelector": {
                "matchExpressions": [
                    {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": excluded}
                ]
            },
        }

    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": CONFIG_NAME, "labels": {"app.kubernetes.io/name": "quotagate"}},
        "webhooks": [entry(framework) for framework in chosen],
    }
