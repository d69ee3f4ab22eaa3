"""The mutating admission webhook's decisions: queue-labelled pods get the scheduling gate,
queue-labelled Jobs are created suspended, and either is refused when a Kueue label or
annotation on it is invalid (`kueue.x-k8s.io/max-exec-time-seconds`,
`kueue.x-k8s.io/admission-gated-by`), naming it and why. Anything without the queue label is answered
"allowed, no change" — and the MutatingWebhookConfiguration's selectors (also here) keep it
from being sent at all. The TLS server and its certificates are the runtime's
(controller/runtime/webhook_server.py): every replica answers; only the leader acts on the
objects.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from api.constants import ADMISSION_GATE as GATE
from api.constants import QUEUE_NAME_LABEL as QUEUE_LABEL
from api.validation import aggregate
from api.validation.admission_gates import validate_gates
from controller.integrations.job_labels import max_exec_time_problem

log = logging.getLogger(__name__)

CONFIG_NAME = "quotagate"
SYSTEM_NAMESPACES = ("kube-system", "kube-node-lease")


def pod_patch(pod: dict[str, Any]) -> list[dict[str, Any]]:
    """JSON patch gating a queue-labelled pod (none for other pods, or if already gated)."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    if QUEUE_LABEL not in labels:
        return []
    owners = (pod.get("metadata") or {}).get("ownerReferences") or []
    if any(o.get("kind") == "Job" and o.get("apiVersion", "").startswith("batch/") for o in owners):
        return []  # a Job's pods: the Job itself is queued (suspended until admitted)
    spec = pod.get("spec") or {}
    gates = spec.get("schedulingGates")
    if gates is None:
        return [{"op": "add", "path": "/spec/schedulingGates", "value": [{"name": GATE}]}]
    if any(g.get("name") == GATE for g in gates):
        return []
    return [{"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": GATE}}]


def job_patch(job: dict[str, Any]) -> list[dict[str, Any]]:
    """JSON patch creating a queue-labelled Job suspended."""
    labels = (job.get("metadata") or {}).get("labels") or {}
    if QUEUE_LABEL not in labels or (job.get("spec") or {}).get("suspend") is True:
        return []
    return [{"op": "add", "path": "/spec/suspend", "value": True}]


def review_response(review: dict[str, Any]) -> dict[str, Any]:
    """An AdmissionReview answer: a JSONPatch for objects we manage; refused only for an
    invalid Kueue label on a queue-labelled Job or pod."""
    request = review.get("request") or {}
    obj = request.get("object") or {}
    kind = (request.get("kind") or {}).get("kind")
    patch: list[dict[str, Any]] = []
    try:
        if request.get("operation") == "CREATE":
            if kind == "Pod":
                patch = pod_patch(obj)
            elif kind == "Job":
                patch = job_patch(obj)
    except (AttributeError, TypeError) as exc:  # never reject what we cannot read
        log.warning("webhook could not read a %s: %s", kind, exc)
        patch = []
    response: dict[str, Any] = {"uid": request.get("uid", ""), "allowed": True}
    problem = _refusal(request, kind, obj)
    if problem is not None:
        response["allowed"] = False
        response["status"] = {"code": 422, "reason": "Invalid", "message": problem}
        patch = []
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


def _refusal(request: Mapping[str, Any], kind: str | None, obj: Mapping[str, Any]) -> str | None:
    """Why a queue-labelled Job or pod is refused on creation, as Kueue's webhooks refuse it
    (None: allowed)."""
    if request.get("operation") != "CREATE" or kind not in ("Job", "Pod"):
        return None
    try:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        if QUEUE_LABEL not in labels:
            return None
        gates = validate_gates(obj)  # Kueue's jobframework checks the annotation too
        return aggregate(gates) if gates else max_exec_time_problem(obj)
    except (AttributeError, TypeError):
        return None  # never reject what we cannot read


async def handle(request: web.Request) -> web.Response:
    """The aiohttp handler: an AdmissionReview in, our answer out."""
    try:
        review = await request.json()
    except (ValueError, UnicodeDecodeError):
        return web.json_response({"error": "not an AdmissionReview"}, status=400)
    return web.json_response(review_response(review))


def webhook_configuration(url_base: str, ca_bundle: bytes, own_namespace: str) -> dict[str, Any]:
    """Our MutatingWebhookConfiguration: only queue-labelled pods and Jobs outside system
    namespaces and our own are ever sent here, so `failurePolicy: Fail` cannot wedge them."""
    excluded = sorted({*SYSTEM_NAMESPACES, own_namespace})

    def entry(kind: str, group: str) -> dict[str, Any]:
        return {
            "name": f"{kind}.quotagate.kueue.x-k8s.io",
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Fail",
            "timeoutSeconds": 10,
            "matchPolicy": "Equivalent",
            "reinvocationPolicy": "Never",
            "clientConfig": {
                "url": f"{url_base}/mutate-{kind}",
                "caBundle": base64.b64encode(ca_bundle).decode(),
            },
            "rules": [
                {
                    "operations": ["CREATE"],
                    "apiGroups": [group],
                    "apiVersions": ["v1"],
                    "resources": [kind],
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
        "webhooks": [entry("pods", ""), entry("jobs", "batch")],
    }
