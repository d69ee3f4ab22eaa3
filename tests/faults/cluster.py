"""The fault suite's cluster: a control plane of its own that can be hurt (tests/cluster/
faults.py), two `quotagate run` replicas each behind a proxy that can cut it off from the
API server (tests/cluster/proxy.py), their webhooks behind one proxy (a Service with two
endpoints), and a scenario's load of bare Workloads, Jobs and pods with the job side that
finishes them.

The API server stores objects as JSON, for the etcd recorder (tests/faults/recorder.py),
and keeps an audit log of the replicas' writes, each replica with its own user, so the
fencing of an old leader can be checked from the API server's side.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config

from api.workload_status import has_quota_reservation, is_evicted, is_finished
from controller.bench.kueue_clients import runner_finish, runner_release
from controller.integrations.webhook import webhook_configuration
from tests.cluster import certs
from tests.cluster.controlplane import ControlPlane, free_port
from tests.cluster.faults import Faults, kubeconfig_for
from tests.cluster.fixtures import install_crds, wait_for
from tests.cluster.nodes import RUN_SECONDS, PodLifecycle, create_node, queued_job
from tests.cluster.proxy import TcpProxy
from tests.integration.kueue import (
    GROUP,
    SYSTEM_NAMESPACE,
    VERSION,
    ControllerProcess,
    Kueue,
    cluster_queue,
    flavor,
    local_queue,
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
RUNTIME_LABEL = "quotagate.test/runtime-ms"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


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
            self.webhook.url, (self.cert_dir / "ca.crt").read_bytes(), SYSTEM_NAMESPACE
        )
        client.AdmissionregistrationV1Api(self.api_client).create_mutating_webhook_configuration(
            body
        )

    def audit_events(self) -> list[dict[str, Any]]:
        """The audit log so far: every write of the replicas, as the API server saw it."""
        if not self.audit_log.exists():
            return []
        return [json.loads(line) for line in self.audit_log.read_text().splitlines() if line]


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
        return {replica.name: replica.stop() for replica in self.all}


class Load:
    """A scenario's queues and Workloads: two namespaces, each with a LocalQueue `lq` of
    its own ClusterQueue, both in one cohort; bare Workloads, Jobs and pods of 1 cpu."""

    def __init__(self, cluster: FaultCluster, tag: str, nominal: int) -> None:
        self.api_client = cluster.api_client
        self.kueue = Kueue(cluster.api_client)
        self.core = client.CoreV1Api(cluster.api_client)
        self.batch = client.BatchV1Api(cluster.api_client)
        self.tag = tag
        self.namespaces = [f"{tag}-a", f"{tag}-b"]
        self.cluster_queues = {ns: ns for ns in self.namespaces}
        self.nominal = nominal
        self.created = 0
        self._job_side: threading.Thread | None = None
        self._stop = threading.Event()
        self.job_side_errors = 0
        self.job_side_error = ""

    def setup(self) -> Load:
        rf = f"{self.tag}-rf"
        self.kueue.apply(flavor(rf))
        for ns in self.namespaces:
            self.core.create_namespace({"metadata": {"name": ns}})
            self.kueue.apply(
                cluster_queue(
                    self.cluster_queues[ns],
                    {rf: {"cpu": self.nominal}},
                    cohort=self.tag,
                    preemption={"withinClusterQueue": "LowerPriority"},
                ),
                local_queue(ns, "lq", self.cluster_queues[ns]),
            )
        return self

    # -- the objects ---------------------------------------------------------------------------

    def bare(self, namespace: str, name: str, runtime_ms: int, priority: int = 0) -> None:
        self.kueue.custom.create_namespaced_custom_object(
            GROUP,
            VERSION,
            namespace,
            "workloads",
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "Workload",
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "labels": {RUNTIME_LABEL: str(runtime_ms)},
                },
                "spec": {
                    "queueName": "lq",
                    "priority": priority,
                    "podSets": [
                        {
                            "name": "main",
                            "count": 1,
                            "template": {
                                "spec": {
                                    "containers": [
                                        {
                                            "name": "c",
                                            "resources": {"requests": {"cpu": "1"}},
                                        }
                                    ]
                                }
                            },
                        }
                    ],
                },
            },
        )
        self.created += 1

    def job(self, namespace: str, name: str) -> None:
        self.batch.create_namespaced_job(namespace, queued_job(name))
        self.created += 1

    def pod(self, namespace: str, name: str, seconds: int = 1) -> None:
        self.core.create_namespaced_pod(namespace, queued_pod(name, seconds))
        self.created += 1

    def create(
        self,
        bare: int,
        jobs: int = 0,
        pods: int = 0,
        prefix: str = "",
        runtime_ms: int = 1000,
        priority: int = 0,
    ) -> None:
        """`bare` Workloads (`runtime_ms`, `priority`), `jobs` Jobs and `pods` pods (1 s
        each), spread over both namespaces."""
        for i in range(max(bare, jobs, pods)):
            ns = self.namespaces[i % 2]
            if i < bare:
                self.bare(ns, f"{prefix}w{i}", runtime_ms, priority)
            if i < jobs:
                self.job(ns, f"{prefix}j{i}")
            if i < pods:
                self.pod(ns, f"{prefix}p{i}")

    # -- reading -------------------------------------------------------------------------------

    def workloads(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        for ns in self.namespaces:
            items += self.kueue.workloads(ns)
        return items

    def counts(self) -> dict[str, int]:
        found = {"workloads": 0, "finished": 0, "holding": 0}
        for wl in self.workloads():
            found["workloads"] += 1
            if is_finished(wl):
                found["finished"] += 1
            elif has_quota_reservation(wl):
                found["holding"] += 1
        return found

    def wait_admitting(self, holding: int, timeout: float = 60) -> None:
        """Until at least `holding` Workloads hold quota at once (admissions are flowing)."""
        wait_for(
            lambda: self._safely(self.counts)["holding"] >= holding,
            timeout=timeout,
            interval=0.2,
            what=f"{holding} Workloads holding quota",
        )

    def wait_evicting(self, timeout: float = 60) -> None:
        """Until some Workload is evicted while it still holds quota."""

        def evicting() -> bool:
            try:
                return any(is_evicted(w) and has_quota_reservation(w) for w in self.workloads())
            except Exception:
                return False

        wait_for(evicting, timeout=timeout, interval=0.1, what="an eviction")

    def wait_finished(self, expected: int, timeout: float = 180) -> None:
        """Until `expected` Workloads exist and all are finished."""

        def done() -> bool:
            counts = self._safely(self.counts)
            return counts["workloads"] == expected and counts["finished"] == expected

        wait_for(done, timeout=timeout, interval=0.5, what=f"all {expected} Workloads finished")

    @staticmethod
    def _safely(read: Any) -> Any:
        try:
            return read()
        except Exception as exc:  # the API server is down (urllib3's errors are no OSError)
            return {"workloads": -1, "finished": -1, "holding": -1, "error": str(exc)}

    # -- the job side of bare Workloads --------------------------------------------------------

    def start_job_side(self) -> Load:
        """A thread that plays the owner of the bare Workloads, as Kueue's runner does: marks
        them Finished their runtime after they were admitted, and releases the reservation
        of an evicted one so it competes again. It rides out API server outages."""
        self._job_side = threading.Thread(target=self._play, daemon=True, name="job-side")
        self._job_side.start()
        return self

    def stop_job_side(self) -> None:
        self._stop.set()
        if self._job_side is not None:
            self._job_side.join(10)

    def _play(self) -> None:
        admitted_at: dict[str, float] = {}
        while not self._stop.wait(0.25):
            try:
                for wl in self.workloads():
                    meta = wl["metadata"]
                    runtime = (meta.get("labels") or {}).get(RUNTIME_LABEL)
                    if runtime is None or is_finished(wl):
                        continue
                    key = f"{meta['namespace']}/{meta['name']}/{meta['uid']}"
                    if not has_quota_reservation(wl):
                        admitted_at.pop(key, None)
                        continue
                    if is_evicted(wl):
                        self._send(wl, runner_release(wl, time.time()))
                        admitted_at.pop(key, None)
                        continue
                    since = admitted_at.setdefault(key, time.monotonic())
                    if time.monotonic() - since >= int(runtime) / 1000:
                        self._send(wl, runner_finish(wl, time.time()))
            except Exception as exc:  # an outage (urllib3's errors too), a conflict: next round
                self.job_side_errors += 1
                self.job_side_error = f"{type(exc).__name__}: {exc}"

    def _send(self, wl: dict[str, Any], write: Any) -> None:
        meta = wl["metadata"]
        self.kueue.custom.patch_namespaced_custom_object_status(
            GROUP,
            VERSION,
            meta["namespace"],
            "workloads",
            meta["name"],
            write.body,
            field_manager=write.field_manager,
            force=write.force,
            _content_type="application/apply-patch+yaml",
        )


def queued_pod(name: str, seconds: int = 1, queue: str = "lq") -> dict[str, Any]:
    """A pod of 1 cpu for LocalQueue `queue` that the fake nodes run for `seconds`."""
    return {
        "metadata": {
            "name": name,
            "labels": {QUEUE_LABEL: queue},
            "annotations": {RUN_SECONDS: str(seconds)},
        },
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
            ],
        },
    }
