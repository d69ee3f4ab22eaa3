"""The validating webhook for Kueue's kinds: ResourceFlavor, ClusterQueue, Cohort,
LocalQueue and Workload creates and updates are refused where Kueue's webhooks refuse them,
with Kueue's messages (the rules are api/validation's, shared with the controller).

Served by the webhook's TLS server (controller/runtime/webhook_server.py) on Kueue's paths
(`/validate-kueue-x-k8s-io-v1beta2-<kind>`), registered by the chart and by
`quotagate run --webhook-manage-config`. It is not on the Workload status path: every
admission write goes there, and only controllers write status (the controller checks a
Workload's status itself when it reads it). Its failure policy is Kueue's, `Fail`, unless
configured otherwise (docs/validation.md says what each choice means).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any, Final

import orjson
from aiohttp import web

from api.constants import GROUP, PRIORITY_BOOST_ANNOTATION, VERSION
from api.validation import aggregate, validate, validate_update
from api.validation.field_errors import FieldError, Path, invalid
from controller.core.model.priorities import parse_priority_boost

PRIORITY_BOOST_GATE: Final = web.AppKey("priority_boost", bool)
"""The application's PriorityBoost gate (set by webhook_server.serve)."""

__all__ = ["KINDS", "handle", "path_of", "review_response", "validating_configuration"]

KINDS: Final = {
    "resourceflavors": "ResourceFlavor",
    "clusterqueues": "ClusterQueue",
    "cohorts": "Cohort",
    "localqueues": "LocalQueue",
    "workloads": "Workload",
}
"""The resources checked (plural → kind). WorkloadPriorityClass has no rule beyond its
schema, as in Kueue; a Topology's rules are all in its CRD (Kueue has no Topology webhook),
so the API server enforces them and the controller re-checks what it reads."""


def path_of(plural: str) -> str:
    """The URL path of one kind's validation (Kueue's)."""
    return f"/validate-{GROUP.replace('.', '-')}-{VERSION}-{KINDS[plural].lower()}"


def priority_boost_errors(obj: Mapping[str, Any]) -> list[FieldError]:
    """Kueue's check of the `kueue.x-k8s.io/priority-boost` annotation while the
    PriorityBoost gate is on: missing is fine, present it must be a signed 32-bit integer."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    if PRIORITY_BOOST_ANNOTATION not in annotations:
        return []
    value = annotations[PRIORITY_BOOST_ANNOTATION]
    path = Path("metadata").child("annotations").key(PRIORITY_BOOST_ANNOTATION)
    if value == "":
        detail = 'must be a valid signed integer; use "0" explicitly, empty string is not allowed'
        return [invalid(path, value, detail, "priority-boost")]
    try:
        parse_priority_boost(str(value))
    except ValueError:
        return [invalid(path, value, "must be a valid signed integer", "priority-boost")]
    return []


def review_response(review: Mapping[str, Any], priority_boost: bool = False) -> dict[str, Any]:
    """The AdmissionReview answer: allowed, or refused as Kueue refuses it (403 Forbidden
    with the field errors, joined as `field.ErrorList.ToAggregate` joins them).
    `priority_boost`: Kueue's PriorityBoost gate."""
    request = review.get("request") or {}
    operation = request.get("operation")
    obj = request.get("object") or {}
    if operation == "CREATE":
        errors = validate(obj)
    elif operation == "UPDATE":
        errors = validate_update(request.get("oldObject") or {}, obj)
    else:
        errors = []
    if priority_boost and operation in ("CREATE", "UPDATE") and obj.get("kind") == "Workload":
        errors = [*errors, *priority_boost_errors(obj)]
    response: dict[str, Any] = {"uid": request.get("uid", ""), "allowed": not errors}
    if errors:
        response["status"] = {"code": 403, "reason": "Forbidden", "message": aggregate(errors)}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


async def handle(request: web.Request) -> web.Response:
    """The aiohttp handler: an AdmissionReview in, the answer out."""
    try:
        review = orjson.loads(await request.read())
    except orjson.JSONDecodeError:
        return web.json_response({"error": "not an AdmissionReview"}, status=400)
    if not isinstance(review, dict):
        return web.json_response({"error": "not an AdmissionReview"}, status=400)
    answer = review_response(review, request.app.get(PRIORITY_BOOST_GATE, False))
    return web.Response(body=orjson.dumps(answer), content_type="application/json")


def validating_configuration(
    url_base: str, ca_bundle: bytes, failure_policy: str, name: str = "quotagate"
) -> dict[str, Any]:
    """Our ValidatingWebhookConfiguration for local runs (a `url:` clientConfig): one
    webhook per kind, on CREATE and UPDATE of the main resource only (never
    `workloads/status`). The chart ships the same with a Service clientConfig."""
    bundle = base64.b64encode(ca_bundle).decode()

    def entry(plural: str) -> dict[str, Any]:
        return {
            "name": f"{plural}.validate.quotagate.kueue.x-k8s.io",
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": failure_policy,
            "timeoutSeconds": 10,
            "matchPolicy": "Equivalent",
            "clientConfig": {"url": f"{url_base}{path_of(plural)}", "caBundle": bundle},
            "rules": [
                {
                    "operations": ["CREATE", "UPDATE"],
                    "apiGroups": [GROUP],
                    "apiVersions": [VERSION],
                    "resources": [plural],
                }
            ],
        }

    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/name": "quotagate"}},
        "webhooks": [entry(plural) for plural in KINDS],
    }
