"""The mutating admission webhook: queue-labelled pods get the scheduling gate, queue-labelled
Jobs are created suspended. Anything without the queue label is answered "allowed, no
change" — and the MutatingWebhookConfiguration's selectors keep it from being sent here.

Served over TLS by an aiohttp server inside the controller process (every replica
answers; only the leader acts on the objects). The serving certificate is either provided
(cert-manager, a Secret) or generated here for local runs, in which case the controller
also registers its own MutatingWebhookConfiguration with a `url:` clientConfig.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import ipaddress
import json
import logging
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from api.constants import ADMISSION_GATE as GATE
from api.constants import QUEUE_NAME_LABEL as QUEUE_LABEL

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
    """An AdmissionReview answer: always allowed; a JSONPatch for objects we manage."""
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
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


async def _handle(request: web.Request) -> web.Response:
    try:
        review = await request.json()
    except (ValueError, UnicodeDecodeError):
        return web.json_response({"error": "not an AdmissionReview"}, status=400)
    return web.json_response(review_response(review))


@dataclass(frozen=True)
class ServingCert:
    cert: Path
    key: Path
    ca_bundle: bytes  # PEM of the CA the API server must trust


def self_signed(directory: Path, host: str) -> ServingCert:
    """A CA and a serving certificate for `host` (an IP or DNS name), for local runs."""
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "quotagate-webhook-ca")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    try:
        san: x509.GeneralName = x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        san = x509.DNSName(host)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.SubjectAlternativeName([san]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    cert_path, key_path = directory / "tls.crt", directory / "tls.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    key_path.chmod(0o600)
    return ServingCert(cert_path, key_path, ca.public_bytes(serialization.Encoding.PEM))


class CertReloader:
    """Serves the current certificate files: new TLS handshakes use `tls.crt`/`tls.key` as
    they are on disk, reloaded when they change (a rotated Secret, or files rewritten by
    the controller's own certificate management), without a restart."""

    def __init__(self, cert: ServingCert) -> None:
        self.cert = cert
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._seen: tuple[tuple[float, int, int], ...] = ()
        self.reload()

    def _stamp(self) -> tuple[tuple[float, int, int], ...]:
        stats = [path.stat() for path in (self.cert.cert, self.cert.key)]
        return tuple((s.st_mtime, s.st_size, s.st_ino) for s in stats)

    def reload(self) -> bool:
        """Load the files if they changed since the last load; whether they were loaded."""
        stamp = self._stamp()
        if stamp == self._seen:
            return False
        self.context.load_cert_chain(str(self.cert.cert), str(self.cert.key))
        self._seen = stamp
        return True

    async def watch(self, interval: float = 5.0) -> None:
        """Reload whenever the files change, until cancelled."""
        while True:
            await asyncio.sleep(interval)
            try:
                if self.reload():
                    log.info("webhook certificate reloaded from %s", self.cert.cert)
            except (OSError, ssl.SSLError) as exc:  # half-written, or being replaced
                log.warning("webhook certificate not reloaded: %s", exc)


async def serve(address: str, port: int, reloader: CertReloader) -> web.AppRunner:
    """Start the HTTPS webhook server; returns the runner (call `cleanup()` to stop)."""
    app = web.Application()
    app.router.add_post("/mutate-pods", _handle)
    app.router.add_post("/mutate-jobs", _handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, address, port, ssl_context=reloader.context).start()
    except OSError:
        await runner.cleanup()
        raise
    log.info("webhook serving on https://%s:%d", address, port)
    return runner


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
