"""A slow or refusing API server, made with what the API server offers: a validating
admission webhook (ours, in the test process) that it calls for every write the rules
match, and that waits before answering (every write slowed) or denies them with a status of
our choice (429 throttled, 500 storage failure), or lets them through.

    faults = AdmissionFaults(api_client, namespaces=["ns-a"], rules=WORKLOAD_WRITES).start()
    faults.delay(0.5)           # every matching write waits half a second
    faults.refuse(429)          # every matching write is refused with 429
    faults.allow()              # back to normal
    faults.stop()               # the webhook configuration is removed

Only writes in the listed namespaces that match the rules are affected (Leases never are:
leader election goes on). The configuration is registered with `failurePolicy: Fail`; the
API server reaches the webhook over TLS with a CA made here.
"""

from __future__ import annotations

import base64
import contextlib
import json
import ssl
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.cluster import certs
from tests.cluster.fixtures import wait_for

__all__ = ["JOB_WRITES", "POD_WRITES", "WORKLOAD_WRITES", "AdmissionFaults"]

WORKLOAD_WRITES = {
    "apiGroups": ["kueue.x-k8s.io"],
    "apiVersions": ["*"],
    "operations": ["CREATE", "UPDATE"],
    "resources": ["workloads", "workloads/status"],
}
POD_WRITES = {
    "apiGroups": [""],
    "apiVersions": ["v1"],
    "operations": ["UPDATE"],
    "resources": ["pods"],
}
JOB_WRITES = {
    "apiGroups": ["batch"],
    "apiVersions": ["v1"],
    "operations": ["UPDATE"],
    "resources": ["jobs"],
}
_REASONS = {429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable"}


class AdmissionFaults:
    """The webhook server and its ValidatingWebhookConfiguration."""

    def __init__(
        self,
        api_client: client.ApiClient,
        namespaces: list[str],
        rules: list[dict[str, Any]],
    ) -> None:
        self.api = client.AdmissionregistrationV1Api(api_client)
        self.namespaces = namespaces
        self.rules = rules
        self.name = f"faults-{uuid.uuid4().hex[:8]}"
        self.mode = "allow"
        self.seconds = 0.0
        self.code = 0
        self.reviewed = 0  # requests the API server sent here
        self.refused = 0
        self._lock = threading.Lock()
        self._dir = Path(tempfile.mkdtemp(prefix="quotagate-admission-faults-"))
        self._server: ThreadingHTTPServer | None = None

    # -- the fault ------------------------------------------------------------------------------

    def delay(self, seconds: float) -> None:
        """Every matching write waits `seconds` (under the webhook's 10 s timeout)."""
        with self._lock:
            self.mode, self.seconds = "delay", seconds

    def refuse(self, code: int = 429) -> None:
        """Every matching write is refused with `code`."""
        with self._lock:
            self.mode, self.code = "refuse", code

    def allow(self) -> None:
        with self._lock:
            self.mode = "allow"

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> AdmissionFaults:
        ca = certs.make_ca(self._dir, "admission-faults-ca")
        serving = certs.issue(
            ca, self._dir, "serving", "admission-faults", ip_addresses=("127.0.0.1",)
        )
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(str(serving.cert), str(serving.key))
        faults = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                review = json.loads(self.rfile.read(length))
                answer = faults._review(review["request"])
                body = json.dumps(
                    {
                        "apiVersion": "admission.k8s.io/v1",
                        "kind": "AdmissionReview",
                        "response": answer,
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        server.socket = context.wrap_socket(server.socket, server_side=True)
        self._server = server
        threading.Thread(target=server.serve_forever, daemon=True, name=self.name).start()
        port = server.server_address[1]
        self.api.create_validating_webhook_configuration(
            {
                "metadata": {"name": self.name},
                "webhooks": [
                    {
                        "name": f"{self.name}.quotagate.test",
                        "admissionReviewVersions": ["v1"],
                        "sideEffects": "None",
                        "failurePolicy": "Fail",
                        "timeoutSeconds": 10,
                        "matchPolicy": "Equivalent",
                        "clientConfig": {
                            "url": f"https://127.0.0.1:{port}/validate",
                            "caBundle": _b64(ca.cert.read_bytes()),
                        },
                        "rules": self.rules,
                        "namespaceSelector": {
                            "matchExpressions": [
                                {
                                    "key": "kubernetes.io/metadata.name",
                                    "operator": "In",
                                    "values": self.namespaces,
                                }
                            ]
                        },
                    }
                ],
            }
        )
        return self

    def wait_active(self, probe: Any) -> None:
        """Until the API server calls the webhook: `probe()` makes a dry-run write that the
        rules match (a new configuration reaches the API server through an informer)."""
        before = self.reviewed

        def called() -> bool:
            with contextlib.suppress(ApiException):
                probe()
            return self.reviewed > before

        wait_for(called, timeout=30, interval=0.2, what=f"webhook {self.name} called")

    def stop(self) -> None:
        with contextlib.suppress(ApiException):
            self.api.delete_validating_webhook_configuration(self.name)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    # -- answering -----------------------------------------------------------------------------

    def _review(self, request: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.reviewed += 1
            mode, seconds, code = self.mode, self.seconds, self.code
        answer: dict[str, Any] = {"uid": request["uid"], "allowed": True}
        if request.get("dryRun"):
            return answer
        if mode == "delay":
            time.sleep(seconds)
        elif mode == "refuse":
            with self._lock:
                self.refused += 1
            answer["allowed"] = False
            answer["status"] = {
                "code": code,
                "reason": _REASONS.get(code, "Forbidden"),
                "message": f"refused by the test's admission faults ({code})",
            }
        return answer


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
