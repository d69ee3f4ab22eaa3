"""Real operators built from Go modules (tests/cluster/modules.py), run beside the local
control plane as processes: the JobSet controller and the LeaderWorkerSet controller.

`JobSetController` runs the JobSet controller manager of `sigs.k8s.io/jobset` with its own
configuration file (no leader election, no certificate rotation: a self-signed serving
certificate for 127.0.0.1), installs the JobSet CRD from the same module, and registers
the module's own webhook configurations (JobSet's defaulting and validation, its pod
webhooks, restricted to JobSet pods as its kustomization restricts them) with a `url:`
clientConfig pointing at it.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any, Self

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from controller.runtime.certs import issue, write_files
from tests.cluster.controlplane import free_port
from tests.cluster.modules import ModuleDir, ensure_module

__all__ = ["JobSetController", "LeaderWorkerSetController"]

_JOBSET_CONFIG = "config.jobset.x-k8s.io/v1alpha1"


class JobSetController:
    """The JobSet controller manager as a subprocess (see the module docstring)."""

    what = "the JobSet controller"
    name = "jobset"  # its module in tests/cluster/modules.py; its files' prefix
    config_api_version = _JOBSET_CONFIG

    def __init__(self, kubeconfig: str, workdir: Path) -> None:
        self.kubeconfig = kubeconfig
        self.workdir = workdir
        self.module: ModuleDir = ensure_module(self.name)
        self.port = free_port()
        self.health_port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = workdir / f"{self.name}-controller.log"
        self.ca_bundle = b""

    def start(self, api_client: client.ApiClient, timeout: float = 60) -> Self:
        from tests.cluster.fixtures import install_crds

        install_crds(api_client, self.module.crds)
        certs = issue(
            ["127.0.0.1"], datetime.datetime.now(datetime.UTC), datetime.timedelta(days=1)
        )
        cert_dir = self.workdir / f"{self.name}-certs"
        write_files(cert_dir, certs)
        self.ca_bundle = certs.ca
        config = {
            "apiVersion": self.config_api_version,
            "kind": "Configuration",
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "webhook": {"port": self.port, "host": "127.0.0.1", "certDir": str(cert_dir)},
            "metrics": {"bindAddress": "0"},
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
        }
        path = self.workdir / f"{self.name}-config.yaml"
        path.write_text(yaml.safe_dump(config))
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [str(self.module.binary), "--config", str(path), "--zap-log-level", "info"],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "KUBECONFIG": self.kubeconfig},
            start_new_session=True,
        )
        self._wait_ready(timeout)
        self._register(api_client)
        return self

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        url = f"http://127.0.0.1:{self.health_port}/readyz"
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"{self.what} exited: {self.log()[-2000:]}")
            with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status == 200:
                    return
            time.sleep(0.2)
        raise RuntimeError(f"{self.what} was not ready in {timeout}s: {self.log()[-2000:]}")

    def _webhooks(self) -> list[dict[str, Any]]:
        """The module's webhook configurations, with its kustomize patches applied (they
        replace the pod webhooks by ones limited to JobSet pods) and a url clientConfig."""
        docs = [
            d
            for d in yaml.safe_load_all(
                self.module.file("config/components/webhook/manifests.yaml").read_text()
            )
            if d
        ]
        patches = {
            "MutatingWebhookConfiguration": "config/components/webhook/patches/mutating-patch.yaml",
            "ValidatingWebhookConfiguration": "config/components/webhook/patches/validating-patch.yaml",
        }
        ca = base64.b64encode(self.ca_bundle).decode()
        for doc in docs:
            for op in yaml.safe_load(self.module.file(patches[doc["kind"]]).read_text()):
                assert op["op"] == "replace" and op["path"].startswith("/webhooks/")
                doc["webhooks"][int(op["path"].rsplit("/", 1)[1])] = op["value"]
            doc["metadata"] = {"name": f"jobset-{doc['metadata']['name']}"}
            for webhook in doc["webhooks"]:
                path = webhook["clientConfig"]["service"]["path"]
                webhook["clientConfig"] = {
                    "url": f"https://127.0.0.1:{self.port}{path}",
                    "caBundle": ca,
                }
        return docs

    def _register(self, api_client: client.ApiClient) -> None:
        admission = client.AdmissionregistrationV1Api(api_client)
        for doc in self._webhooks():
            mutating = doc["kind"] == "MutatingWebhookConfiguration"
            read = (
                admission.read_mutating_webhook_configuration
                if mutating
                else admission.read_validating_webhook_configuration
            )
            try:
                existing = read(doc["metadata"]["name"])
                doc["metadata"]["resourceVersion"] = existing.metadata.resource_version
                (
                    admission.replace_mutating_webhook_configuration
                    if mutating
                    else admission.replace_validating_webhook_configuration
                )(doc["metadata"]["name"], doc)
            except ApiException as exc:
                if exc.status != 404:
                    raise
                (
                    admission.create_mutating_webhook_configuration
                    if mutating
                    else admission.create_validating_webhook_configuration
                )(doc)

    def unregister(self, api_client: client.ApiClient) -> None:
        admission = client.AdmissionregistrationV1Api(api_client)
        for doc in self._webhooks():
            delete = (
                admission.delete_mutating_webhook_configuration
                if doc["kind"] == "MutatingWebhookConfiguration"
                else admission.delete_validating_webhook_configuration
            )
            with contextlib.suppress(ApiException):
                delete(doc["metadata"]["name"])

    def stop(self, timeout: float = 15) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


_LWS_CONFIG = "config.lws.x-k8s.io/v1alpha1"
_LWS_WEBHOOKS = "charts/lws/templates/webhook/webhook.yaml"


class LeaderWorkerSetController(JobSetController):
    """The LeaderWorkerSet controller manager of `sigs.k8s.io/lws` (v0.9.0) as a
    subprocess, as `JobSetController` runs JobSet's: its CRDs installed, its own
    configuration file (no leader election, no certificate rotation), and the webhook
    configurations of its Helm chart (LeaderWorkerSet defaulting and validation, its pod
    webhooks for LeaderWorkerSet pods) registered with a `url:` clientConfig."""

    what = "the LeaderWorkerSet controller"
    name = "lws"
    config_api_version = _LWS_CONFIG

    def _webhooks(self) -> list[dict[str, Any]]:
        """The chart's webhook configurations, rendered with the chart's defaults (its
        namespace aside: the webhooks are called by URL) and a url clientConfig."""
        lines, skipping = [], False
        for line in self.module.file(_LWS_WEBHOOKS).read_text().splitlines():
            if line.strip().startswith("{{- if"):
                skipping = True  # DisaggregatedSet's webhook, off by default
            elif line.strip().startswith("{{- end"):
                skipping = False
            elif not skipping:
                lines.append(line.replace("{{ .Release.Namespace }}", "lws-system"))
        text = "\n".join(lines)
        assert "{{" not in text, f"{_LWS_WEBHOOKS}: a template this renderer does not know"
        ca = base64.b64encode(self.ca_bundle).decode()
        docs = [d for d in yaml.safe_load_all(text) if d]
        for doc in docs:
            for webhook in doc["webhooks"]:
                path = webhook["clientConfig"]["service"]["path"]
                webhook["clientConfig"] = {
                    "url": f"https://127.0.0.1:{self.port}{path}",
                    "caBundle": ca,
                }
        return docs
