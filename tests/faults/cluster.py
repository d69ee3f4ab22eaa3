"""The fault suite's cluster: a control plane of its own that can be hurt (tests/cluster/
faults.py), two `quotagate run` replicas each behind a proxy that can cut it off from the
API server (tests/cluster/proxy.py), and their webhooks behind one proxy (a Service with
two endpoints). A scenario's load is tests/faults/load.py.

The API server stores objects as JSON, for the etcd recorder (tests/faults/recorder.py),
and keeps an audit log of the replicas' writes, each replica with its own user, so the
fencing of an old leader can be checked from the API server's side.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config

from controller.integrations.framework.registry import by_kind
from controller.integrations.webhook import webhook_configuration
from tests.cluster import certs
from tests.cluster.controlplane import ControlPlane, free_port
from tests.cluster.faults import Faults, kubeconfig_for
from tests.cluster.fixtures import install_crds, wait_for
from tests.cluster.nodes import PodLifecycle, create_node
from tests.cluster.proxy import TcpProxy
from tests.integration.kueue import (
    SYSTEM_NAMESPACE,
    ControllerProcess,
)

REPLICAS = ("replica-0", "replica-1")
# Short terms keep the scenarios short: a standby takes over 5 s after the last renewal
# it saw; a leader that could not renew for 3 s has stopped.
LEADER_ELECTION = {"leaseDurationSeconds": 5, "renewDeadlineSeconds": 3, "retryPeriodSeconds": 1}
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {
            "level": "Metadata",
            "users": list(REPLICAS),
            "verbs": ["create", "update", "patch", "delete", "deletecollection"],
        },
        {"level": "None"},
    ],
}


FRAMEWORKS = ("batch/job", "pod")
"""The integrations the scenarios queue through: Jobs and pods (the webhook is
registered for these only, as `quotagate run` registers it for its list)."""


class FaultCluster:
    """The control plane, its faults, fake nodes, and the webhook endpoint proxy."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="quotagate-faults-"))
        self.audit_log = self.dir / "audit.log"
        (self.dir / "audit-policy.yaml").write_text(yaml.safe_dump(AUDIT_POLICY))
        self.plane = ControlPlane(
            apiserver_flags=[
                "--storage-media-type=application/json",
                f"--audit-policy-file={self.dir / 'audit-policy.yaml'}",
                f"--audit-log-path={self.audit_log}",
            ],
            users={name: uuid.uuid4().hex for name in REPLICAS},
        )
        self.faults = Faults(self.plane)
        self.webhook_ports = {name: free_port() for name in REPLICAS}
        self.webhook = TcpProxy([("127.0.0.1", port) for port in self.webhook_ports.values()])
        self.cert_dir = self.dir / "webhook-certs"

    def start(self) -> FaultCluster:
        self.plane.start(scheduler=True, controller_manager=True)
        self.api_client = config.new_client_from_config(str(self.plane.kubeconfig))
        install_crds(self.api_client)
        core = client.CoreV1Api(self.api_client)
        core.create_namespace({"metadata": {"name": SYSTEM_NAMESPACE}})
        for name in ("node-a", "node-b"):
            create_node(core, name, cpu="1000", pods="1000")
        self.lifecycle = PodLifecycle(self.api_client).start()
        self.webhook.start()
        self._register_webhook()
        return self

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.lifecycle.stop()
        self.webhook.stop()
        self.plane.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _register_webhook(self) -> None:
        """One CA and serving certificate for both replicas (as a Secret mounted in both
        pods would give them), and the MutatingWebhookConfiguration pointing at the proxy
        in front of them."""
        self.cert_dir.mkdir()
        ca = certs.make_ca(self.cert_dir, "webhook-ca")
        serving = certs.issue(ca, self.cert_dir, "serving", "webhook", ip_addresses=("127.0.0.1",))
        shutil.copy(ca.cert, self.cert_dir / "ca.crt")
        shutil.copy(serving.cert, self.cert_dir / "tls.crt")
        shutil.copy(serving.key, self.cert_dir / "tls.key")
        body = webhook_configuration(
            self.webhook.url,
            (self.cert_dir / "ca.crt").read_bytes(),
            SYSTEM_NAMESPACE,
            by_kind(FRAMEWORKS),
        )
        client.AdmissionregistrationV1Api(self.api_client).create_mutating_webhook_configuration(
            body
        )

    def audit_events(self) -> list[dict[str, Any]]:
        """The audit log so far: every write of the replicas, as the API server saw it."""
        if not self.audit_log.exists():
            return []
        return audit_events_of(self.audit_log.read_text())


AUDIT_EVENT_START = '{"kind":"Event"'


def audit_events_of(text: str) -> list[dict[str, Any]]:
    """The events of an audit log that kube-apiserver processes killed with SIGKILL wrote
    to in turn: a killed process may leave its last event cut short, with no newline, and
    the next process's first event then follows on the same line (or nothing does, at the
    end). The cut event is dropped; anything else that is not an event is an error."""
    events: list[dict[str, Any]] = []
    lines = text.splitlines()
    for number, line in enumerate(lines):
        if not line:
            continue
        try:
            events.append(json.loads(line))
            continue
        except json.JSONDecodeError:
            pass
        start = line.rfind(AUDIT_EVENT_START)
        if start > 0:  # a cut event, then a whole one
            events.append(json.loads(line[start:]))
        elif number != len(lines) - 1 or not line.startswith(AUDIT_EVENT_START):
            raise ValueError(f"audit log line {number + 1} is not an audit event: {line[:200]}")
    return events


class Replica:
    """One `quotagate run` replica: its own user, its own proxy to the API server."""

    def __init__(
        self, cluster: FaultCluster, name: str, lease: str, namespaces: list[str], workdir: Path
    ) -> None:
        self.name = name
        plane = cluster.plane
        self.proxy = TcpProxy([("127.0.0.1", plane.api_port)]).start()
        kubeconfig = kubeconfig_for(
            plane, workdir / f"{name}.kubeconfig", user=name, server=self.proxy.url
        )
        settings = {
            "namespaces": namespaces,
            "leaderElection": {
                **LEADER_ELECTION,
                "leaseName": lease,
                "leaseNamespace": SYSTEM_NAMESPACE,
            },
            "integrations": {"frameworks": list(FRAMEWORKS)},
            "webhook": {
                "enabled": True,
                "address": "127.0.0.1",
                "port": cluster.webhook_ports[name],
                "certDir": str(cluster.cert_dir),
            },
        }
        config_file = workdir / f"{name}.yaml"
        config_file.write_text(yaml.safe_dump(settings))
        self.metrics_port = free_port()
        self.process = ControllerProcess(
            str(kubeconfig),
            workdir,
            name,
            lease,
            ["--config", str(config_file), "--metrics-port", str(self.metrics_port)],
        )

    def start(self) -> Replica:
        self.process.start()
        return self

    @property
    def running(self) -> bool:
        return self.process.process is not None and self.process.process.poll() is None

    def leading(self) -> bool:
        return self.metric("quotagate_leader") == 1

    def metric(self, name: str, **labels: str) -> float:
        """The sum of the samples of metric `name` with `labels` (0 when there is none, or
        the replica does not answer)."""
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5
            ) as response:
                text = response.read().decode()
        except OSError:
            return 0.0
        total = 0.0
        for line in text.splitlines():
            if not line.startswith(name) or line.startswith("#"):
                continue
            head, _, value = line.rpartition(" ")
            metric, _, label_text = head.partition("{")
            if metric != name:
                continue
            if all(f'{k}="{v}"' in label_text for k, v in labels.items()):
                total += float(value)
        return total

    def stop(self) -> int | None:
        """SIGTERM; the exit status (None if it had already exited)."""
        was_running = self.running
        self.process.stop()
        self.proxy.stop()
        process = self.process.process
        return process.returncode if was_running and process is not None else None

    def log(self) -> str:
        return self.process.log()


class Replicas:
    """Two replicas of one scenario."""

    def __init__(self, cluster: FaultCluster, namespaces: list[str], workdir: Path) -> None:
        lease = f"faults-{uuid.uuid4().hex[:6]}"
        self.all = [Replica(cluster, name, lease, namespaces, workdir) for name in REPLICAS]

    def start(self) -> Replicas:
        for replica in self.all:
            replica.start()
        wait_for(lambda: self.leader(), timeout=60, what="a replica to lead")
        return self

    def leader(self) -> Replica | None:
        leading = [r for r in self.all if r.running and r.leading()]
        return leading[0] if len(leading) == 1 else None

    def other(self, replica: Replica) -> Replica:
        return next(r for r in self.all if r is not replica)

    def stop(self) -> dict[str, int | None]:
        """Stop every replica at once (each takes seconds); their exit statuses."""
        with ThreadPoolExecutor(len(self.all)) as pool:
            statuses = list(pool.map(Replica.stop, self.all))
        return {replica.name: status for replica, status in zip(self.all, statuses, strict=True)}
