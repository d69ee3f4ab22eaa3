"""Start and stop a real local control plane: etcd, kube-apiserver and, on request,
kube-scheduler and kube-controller-manager, on free loopback ports in a temp dir.

Every process runs in its own process group and is killed (TERM, then KILL) on `stop()`,
at interpreter exit and on SIGTERM/SIGINT, so a failed or interrupted test run leaves
no orphans. Logs stay in the temp dir; a component that fails to start raises with the
tail of its log.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.cluster import certs
from tests.cluster.build import ensure_binaries

ADMIN_TOKEN_USER = "quotagate-admin"
FEATURE_GATES = "GenericWorkload=true,GangScheduling=true,WorkloadAwarePreemption=true"
RUNTIME_CONFIG = "scheduling.k8s.io/v1alpha2=true"
KCM_CONTROLLERS = ",".join(
    [
        "job-controller",
        "garbage-collector-controller",
        "namespace-controller",
        "serviceaccount-controller",
        "serviceaccount-token-controller",
        "replicaset-controller",
        # Real pods behind Services (the webhook on the real node): their EndpointSlices.
        "endpointslice-controller",
        "deployment-controller",
        # StatefulSets (the statefulset integration; LeaderWorkerSets run on them).
        "statefulset-controller",
        "pod-garbage-collector-controller",
        "ttl-after-finished-controller",
        "root-ca-certificate-publisher-controller",
        "clusterrole-aggregation-controller",
        "podgroup-protection-controller",
    ]
)


class ControlPlaneError(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Component:
    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


_RUNNING: list[ControlPlane] = []


def _stop_all() -> None:
    for plane in list(_RUNNING):
        plane.stop()


def _on_signal(signum: int, frame: object) -> None:
    _stop_all()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


atexit.register(_stop_all)


@dataclass
class ControlPlane:
    """A running local control plane. Use `start()`/`stop()` or as a context manager."""

    workdir: Path | None = None
    bin_dir: Path | None = None
    components: dict[str, Component] = field(default_factory=dict)
    token: str = "quotagate-admin-token"
    # What runs beside the components and needs them until it stops (a real node:
    # tests/cluster/kubelet.py): each has `stop()`, called first by `stop()`.
    attachments: list[Any] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._own_workdir = self.workdir is None
        self.workdir = Path(self.workdir or tempfile.mkdtemp(prefix="quotagate-cp-"))
        self.api_port = 0
        self.ca: certs.KeyPair | None = None

    # -- paths ---------------------------------------------------------------------------------

    @property
    def dir(self) -> Path:
        assert self.workdir is not None
        return self.workdir

    @property
    def kubeconfig(self) -> Path:
        return self.dir / "kubeconfig"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.api_port}"

    def binary(self, name: str) -> str:
        assert self.bin_dir is not None
        return str(self.bin_dir / name)

    # -- lifecycle -----------------------------------------------------------------------------

    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, scheduler: bool = False, controller_manager: bool = False) -> ControlPlane:
        """etcd + kube-apiserver, ready to serve; optionally the scheduler and KCM too."""
        if self.bin_dir is None:
            self.bin_dir = ensure_binaries(verbose=False)
        if not _RUNNING:
            for sig in (signal.SIGTERM, signal.SIGINT):
                with contextlib.suppress(ValueError):  # not the main thread: atexit still covers us
                    signal.signal(sig, _on_signal)
        _RUNNING.append(self)
        try:
            self._pki()
            self._start_etcd()
            self._start_apiserver()
            if scheduler:
                self.start_scheduler()
            if controller_manager:
                self.start_controller_manager()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every component (reverse order) and remove the temp dir we made."""
        for attachment in reversed(list(self.attachments)):
            attachment.stop()
        self.attachments.clear()
        for name in reversed(list(self.components)):
            component = self.components.pop(name)
            _terminate(component.process)
        if self in _RUNNING:
            _RUNNING.remove(self)
        if self._own_workdir and self.workdir is not None and self.workdir.exists():
            shutil.rmtree(self.workdir, ignore_errors=True)

    # -- components ----------------------------------------------------------------------------

    def _pki(self) -> None:
        pki = self.dir / "pki"
        pki.mkdir(exist_ok=True)
        self.ca = certs.make_ca(pki)
        self.serving = certs.issue(
            self.ca,
            pki,
            "apiserver",
            "kube-apiserver",
            dns_names=("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"),
            ip_addresses=("127.0.0.1", "10.96.0.1"),
        )
        self.sa_private, self.sa_public = certs.make_service_account_key(pki)
        # The API server's identity towards kubelets (logs, exec): a real node's kubelet
        # authenticates it by the cluster's CA.
        self.kubelet_client = certs.issue(
            self.ca,
            pki,
            "apiserver-kubelet-client",
            "kube-apiserver-kubelet-client",
            organization="system:masters",
            client=True,
        )
        (pki / "tokens.csv").write_text(
            f"{self.token},{ADMIN_TOKEN_USER},{ADMIN_TOKEN_USER},system:masters\n"
        )

    def _spawn(self, name: str, args: list[str]) -> Component:
        log = self.dir / f"{name}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                args,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        component = Component(name, process, log)
        self.components[name] = component
        return component

    def _start_etcd(self) -> None:
        client, peer = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client}"
        etcd = self._spawn(
            "etcd",
            [
                self.binary("etcd"),
                "--data-dir",
                str(self.dir / "etcd"),
                "--listen-client-urls",
                self.etcd_url,
                "--advertise-client-urls",
                self.etcd_url,
                "--listen-peer-urls",
                f"http://127.0.0.1:{peer}",
                "--initial-advertise-peer-urls",
                f"http://127.0.0.1:{peer}",
                "--initial-cluster",
                f"default=http://127.0.0.1:{peer}",
                "--unsafe-no-fsync",
                "--log-level",
                "warn",
            ],
        )
        self._wait(etcd, lambda: _http_ok(f"{self.etcd_url}/health"), 30)

    def _start_apiserver(self) -> None:
        assert self.ca is not None
        self.api_port = free_port()
        pki = self.dir / "pki"
        apiserver = self._spawn(
            "kube-apiserver",
            [
                self.binary("kube-apiserver"),
                "--etcd-servers",
                self.etcd_url,
                "--bind-address",
                "127.0.0.1",
                "--advertise-address",
                "127.0.0.1",
                "--secure-port",
                str(self.api_port),
                "--tls-cert-file",
                str(self.serving.cert),
                "--tls-private-key-file",
                str(self.serving.key),
                "--client-ca-file",
                str(self.ca.cert),
                "--token-auth-file",
                str(pki / "tokens.csv"),
                "--service-account-key-file",
                str(self.sa_public),
                "--service-account-signing-key-file",
                str(self.sa_private),
                "--service-account-issuer",
                "https://kubernetes.default.svc",
                "--kubelet-client-certificate",
                str(self.kubelet_client.cert),
                "--kubelet-client-key",
                str(self.kubelet_client.key),
                # A node's address, not its name: nothing resolves node names here.
                "--kubelet-preferred-address-types",
                "InternalIP",
                "--service-cluster-ip-range",
                "10.96.0.0/16",
                "--authorization-mode",
                "Node,RBAC",
                # The ServiceAccount admission plugin stays on, as in every cluster: the
                # real node's pods reach the API server with the token it mounts. Pods need
                # their ServiceAccount to exist (the `namespace` fixture makes `default`
                # where no controller-manager runs).
                "--allow-privileged",
                "--feature-gates",
                FEATURE_GATES,
                "--runtime-config",
                RUNTIME_CONFIG,
                "--profiling=false",
                # Webhook Services resolve through their EndpointSlices (there is no
                # kube-proxy): the real node's pods (tests/cluster/kubelet.py) are reached so.
                "--enable-aggregator-routing=true",
                "-v",
                "1",
            ],
        )
        self._write_kubeconfig()
        self._wait(apiserver, lambda: self._api_ok("/readyz"), 60)

    def start_scheduler(self) -> None:
        if "kube-scheduler" in self.components:
            return
        port = free_port()
        scheduler = self._spawn(
            "kube-scheduler",
            [
                self.binary("kube-scheduler"),
                "--kubeconfig",
                str(self.kubeconfig),
                "--authentication-kubeconfig",
                str(self.kubeconfig),
                "--authorization-kubeconfig",
                str(self.kubeconfig),
                "--bind-address",
                "127.0.0.1",
                "--secure-port",
                str(port),
                "--leader-elect=false",
                "--feature-gates",
                FEATURE_GATES,
                "-v",
                "1",
            ],
        )
        self._wait(
            scheduler, lambda: _http_ok(f"https://127.0.0.1:{port}/healthz", insecure=True), 60
        )

    def start_controller_manager(self) -> None:
        if "kube-controller-manager" in self.components:
            return
        assert self.ca is not None
        port = free_port()
        kcm = self._spawn(
            "kube-controller-manager",
            [
                self.binary("kube-controller-manager"),
                "--kubeconfig",
                str(self.kubeconfig),
                "--authentication-kubeconfig",
                str(self.kubeconfig),
                "--authorization-kubeconfig",
                str(self.kubeconfig),
                "--bind-address",
                "127.0.0.1",
                "--secure-port",
                str(port),
                "--leader-elect=false",
                "--controllers",
                KCM_CONTROLLERS,
                "--service-account-private-key-file",
                str(self.sa_private),
                "--root-ca-file",
                str(self.ca.cert),
                "--feature-gates",
                FEATURE_GATES,
                "--concurrent-job-syncs",
                "10",
                "-v",
                "1",
            ],
        )
        self._wait(kcm, lambda: _http_ok(f"https://127.0.0.1:{port}/healthz", insecure=True), 60)

    # -- helpers -------------------------------------------------------------------------------

    def _write_kubeconfig(self) -> None:
        assert self.ca is not None
        self.kubeconfig.write_text(
            "apiVersion: v1\nkind: Config\n"
            "clusters:\n"
            f"- name: quotagate-local\n  cluster:\n    server: {self.server}\n"
            f"    certificate-authority: {self.ca.cert}\n"
            "users:\n"
            f"- name: admin\n  user:\n    token: {self.token}\n"
            "contexts:\n"
            "- name: quotagate-local\n  context:\n    cluster: quotagate-local\n    user: admin\n"
            "current-context: quotagate-local\n"
        )
        self.kubeconfig.chmod(0o600)

    def _api_ok(self, path: str) -> bool:
        assert self.ca is not None
        return _http_ok(f"{self.server}{path}", ca=self.ca.cert, token=self.token)

    def _wait(self, component: Component, ready: object, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if component.process.poll() is not None:
                raise ControlPlaneError(
                    f"{component.name} exited with {component.process.returncode}; last log lines:\n"
                    f"{component.tail()}"
                )
            if ready():  # type: ignore[operator]
                return
            time.sleep(0.2)
        raise ControlPlaneError(
            f"{component.name} not ready after {timeout:.0f}s; last log lines:\n{component.tail()}"
        )

    def rss_mib(self) -> float:
        """Resident memory of all components (MiB), from /proc."""
        total = 0
        for component in self.components.values():
            with contextlib.suppress(OSError):
                for line in Path(f"/proc/{component.process.pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        return total / 1024


def _http_ok(
    url: str, ca: Path | None = None, token: str | None = None, insecure: bool = False
) -> bool:
    context: ssl.SSLContext | None = None
    if url.startswith("https"):
        context = ssl.create_default_context(cafile=str(ca) if ca else None)
        if insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=2, context=context) as response:
            return bool(response.status == 200)
    except (OSError, ValueError):
        return False


def _terminate(process: subprocess.Popen[bytes], grace: float = 5.0) -> None:
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(grace)
