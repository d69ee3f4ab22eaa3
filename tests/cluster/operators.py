"""Real operators built from Go modules (tests/cluster/modules.py), run beside the local
control plane as processes: the JobSet controller, the LeaderWorkerSet controller, the
Kubeflow Trainer controller manager and the MPI operator.

Each installs its CRDs from the same module and runs without leader election where it can
and without certificate rotation: a self-signed serving certificate for 127.0.0.1, and the
module's own webhook configurations registered with a `url:` clientConfig pointing at it.

- `JobSetController`: sigs.k8s.io/jobset's controller manager with its own configuration
  file; JobSet's defaulting and validation webhooks and its pod webhooks, restricted to
  JobSet pods as its kustomization restricts them.
- `LeaderWorkerSetController`: sigs.k8s.io/lws's controller manager, run as JobSet's is;
  the webhook configurations of its Helm chart (LeaderWorkerSet defaulting and validation,
  its pod webhooks for LeaderWorkerSet pods).
- `TrainerController`: Kubeflow Trainer's `trainer-controller-manager` (its configuration
  file; the serving certificate where controller-runtime looks by default, under $TMPDIR);
  the TrainJob defaulting and validation webhooks and the runtimes' validation. It needs the
  JobSet controller running.
- `MPIOperator`: the MPI operator (`mpi-operator`), which has no webhooks, elects a leader
  always (a Lease in its own namespace) and serves its health check on port 8080 of every
  interface, a port it does not let one choose: a host-wide file lock keeps two test
  sessions from starting it at once, and a port taken by anything else is an error saying
  so.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import fcntl
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from controller.runtime.certs import issue, write_files
from tests.cluster.controlplane import free_port
from tests.cluster.modules import ModuleDir, ensure_module

__all__ = [
    "JobSetController",
    "LeaderWorkerSetController",
    "MPIOperator",
    "OperatorProcess",
    "TrainerController",
]

_JOBSET_CONFIG = "config.jobset.x-k8s.io/v1alpha1"
_TRAINER_CONFIG = "config.trainer.kubeflow.org/v1alpha1"
_LWS_CONFIG = "config.lws.x-k8s.io/v1alpha1"
_LWS_WEBHOOKS = "charts/lws/templates/webhook/webhook.yaml"


class OperatorProcess:
    """An operator of a Go module (`module_name`) as a subprocess: started, waited for,
    its webhook configurations registered and removed, stopped, its log kept."""

    module_name: ClassVar[str]
    title: ClassVar[str]
    """What the operator is called in errors ("the JobSet controller")."""

    def __init__(self, kubeconfig: str, workdir: Path) -> None:
        self.kubeconfig = kubeconfig
        self.workdir = workdir
        self.module: ModuleDir = ensure_module(self.module_name)
        self.port = free_port()
        self.health_port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = workdir / f"{self.module_name}.log"
        self.ca_bundle = b""

    def start(self, api_client: client.ApiClient, timeout: float = 60) -> OperatorProcess:
        """Install the CRDs, run the operator, wait until it is ready (and register its
        webhooks); the operator, for chaining."""
        raise NotImplementedError

    def _serving_certificate(self, directory: Path) -> None:
        """A serving certificate for 127.0.0.1 (tls.crt, tls.key, ca.crt in `directory`)."""
        certs = issue(
            ["127.0.0.1"], datetime.datetime.now(datetime.UTC), datetime.timedelta(days=1)
        )
        write_files(directory, certs)
        self.ca_bundle = certs.ca

    def _launch(self, args: list[str], env: dict[str, str] | None = None) -> None:
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [str(self.module.binary), *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "KUBECONFIG": self.kubeconfig, **(env or {})},
            start_new_session=True,
        )

    def _wait_until(self, ready: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"{self.title} exited: {self.log()[-2000:]}")
            with contextlib.suppress(OSError):
                if ready():
                    return
            time.sleep(0.2)
        raise RuntimeError(f"{self.title} was not ready in {timeout}s: {self.log()[-2000:]}")

    def _wait_ready(self, timeout: float, url: str | None = None) -> None:
        """Until `url` (default: the health port's /readyz) answers 200."""
        url = url or f"http://127.0.0.1:{self.health_port}/readyz"

        def answers() -> bool:
            with urllib.request.urlopen(url, timeout=2) as answer:
                return bool(answer.status == 200)

        self._wait_until(answers, timeout)

    def _webhooks(self) -> list[dict[str, Any]]:
        """The operator's webhook configurations, with a `url:` clientConfig."""
        return []

    def _url_client_config(self, doc: dict[str, Any], prefix: str) -> dict[str, Any]:
        """A webhook configuration of the module, named `<prefix>-<name>`, its webhooks
        calling this process."""
        doc["metadata"] = {"name": f"{prefix}-{doc['metadata']['name']}"}
        ca = base64.b64encode(self.ca_bundle).decode()
        for webhook in doc["webhooks"]:
            path = webhook["clientConfig"]["service"]["path"]
            webhook["clientConfig"] = {
                "url": f"https://127.0.0.1:{self.port}{path}",
                "caBundle": ca,
            }
        return doc

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


class JobSetController(OperatorProcess):
    """The JobSet controller manager (see the module docstring)."""

    module_name = "jobset"
    title = "the JobSet controller"
    config_api_version: ClassVar[str] = _JOBSET_CONFIG

    def start(self, api_client: client.ApiClient, timeout: float = 60) -> JobSetController:
        from tests.cluster.fixtures import install_crds

        install_crds(api_client, self.module.crds)
        cert_dir = self.workdir / f"{self.module_name}-certs"
        self._serving_certificate(cert_dir)
        config = {
            "apiVersion": self.config_api_version,
            "kind": "Configuration",
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "webhook": {"port": self.port, "host": "127.0.0.1", "certDir": str(cert_dir)},
            "metrics": {"bindAddress": "0"},
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
        }
        path = self.workdir / f"{self.module_name}-config.yaml"
        path.write_text(yaml.safe_dump(config))
        self._launch(["--config", str(path), "--zap-log-level", "info"])
        self._wait_ready(timeout)
        self._register(api_client)
        return self

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
        for doc in docs:
            for op in yaml.safe_load(self.module.file(patches[doc["kind"]]).read_text()):
                assert op["op"] == "replace" and op["path"].startswith("/webhooks/")
                doc["webhooks"][int(op["path"].rsplit("/", 1)[1])] = op["value"]
        return [self._url_client_config(doc, "jobset") for doc in docs]


class LeaderWorkerSetController(JobSetController):
    """The LeaderWorkerSet controller manager of `sigs.k8s.io/lws` (see the module
    docstring)."""

    module_name = "lws"
    title = "the LeaderWorkerSet controller"
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
        return [self._url_client_config(d, "lws") for d in yaml.safe_load_all(text) if d]


class TrainerController(OperatorProcess):
    """Kubeflow Trainer's controller manager (see the module docstring)."""

    module_name = "trainer"
    title = "the Kubeflow Trainer controller"

    def start(self, api_client: client.ApiClient, timeout: float = 60) -> TrainerController:
        from tests.cluster.fixtures import install_crds

        install_crds(api_client, self.module.crds)
        # No certDir setting: controller-runtime reads $TMPDIR/k8s-webhook-server/serving-certs.
        temporary = self.workdir / "trainer-tmp"
        self._serving_certificate(temporary / "k8s-webhook-server" / "serving-certs")
        config = {
            "apiVersion": _TRAINER_CONFIG,
            "kind": "Configuration",
            "leaderElection": {"leaderElect": False},
            "certManagement": {"enable": False},
            "webhook": {"port": self.port, "host": "127.0.0.1"},
            "metrics": {"bindAddress": "0"},
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
        }
        path = self.workdir / "trainer-config.yaml"
        path.write_text(yaml.safe_dump(config))
        self._launch(["--config", str(path), "--zap-log-level", "info"], {"TMPDIR": str(temporary)})
        self._wait_ready(timeout)
        self._register(api_client)
        return self

    def _webhooks(self) -> list[dict[str, Any]]:
        """The module's TrainJob defaulting and validation and the runtimes' validation,
        named `trainer-…`, with a url clientConfig."""
        text = self.module.file("manifests/base/webhook/manifests.yaml").read_text()
        return [self._url_client_config(d, "trainer") for d in yaml.safe_load_all(text) if d]


class MPIOperator(OperatorProcess):
    """The MPI operator (see the module docstring)."""

    module_name = "mpi-operator"
    title = "the MPI operator"
    HEALTH_PORT = 8080  # fixed by the MPI operator (cmd/mpi-operator/app/server.go)
    LOCK_NAMESPACE = "mpi-operator"

    def __init__(self, kubeconfig: str, workdir: Path) -> None:
        super().__init__(kubeconfig, workdir)
        self._port_lock: Any = None

    def start(
        self, api_client: client.ApiClient, timeout: float = 60, lock_timeout: float = 900
    ) -> MPIOperator:
        from tests.cluster.fixtures import install_crds

        install_crds(api_client, self.module.crds)
        with contextlib.suppress(ApiException):  # 409: it exists
            client.CoreV1Api(api_client).create_namespace(
                {"metadata": {"name": self.LOCK_NAMESPACE}}
            )
        self._take_port(lock_timeout)
        self._launch(
            [
                "--lock-namespace",
                self.LOCK_NAMESPACE,
                "--kube-api-qps",
                "50",
                "--kube-api-burst",
                "100",
            ]
        )
        self._wait_ready(timeout, f"http://127.0.0.1:{self.HEALTH_PORT}/healthz")
        coordination = client.CoordinationV1Api(api_client)

        def leading() -> bool:  # it starts its controller once it holds the Lease
            try:
                lease = coordination.read_namespaced_lease("mpi-operator", self.LOCK_NAMESPACE)
            except ApiException:
                return False
            return bool(lease.spec.holder_identity)

        self._wait_until(leading, timeout)
        return self

    def _take_port(self, timeout: float) -> None:
        """Hold the host-wide lock on port 8080 (waiting for another session's operator),
        then check that nothing else listens there."""
        path = Path(tempfile.gettempdir()) / f"quotagate-mpi-operator-{self.HEALTH_PORT}.lock"
        self._port_lock = path.open("w")
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(self._port_lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"another test session has run the MPI operator for over {timeout}s "
                        f"(it holds {path})"
                    ) from None
                time.sleep(1)
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(("0.0.0.0", self.HEALTH_PORT))
            except OSError as exc:
                self._release_port()
                raise RuntimeError(
                    f"port {self.HEALTH_PORT}, where the MPI operator always serves its health "
                    f"check, is taken by another process: {exc}"
                ) from None

    def _release_port(self) -> None:
        if self._port_lock is not None:
            self._port_lock.close()  # closing the file releases the lock
            self._port_lock = None

    def stop(self, timeout: float = 15) -> None:
        try:
            super().stop(timeout)
        finally:
            self._release_port()
