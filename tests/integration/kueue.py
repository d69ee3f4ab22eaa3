"""Builders and waiters for Kueue objects in integration tests, and a controller process.

The controller runs as a real `quotagate run` subprocess against the test API server, so
tests see exactly what a user would (and can kill it like a crashed pod).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from controller.integrations.framework.registry import frameworks
from controller.integrations.framework.workload_names import workload_name
from tests.cluster.fixtures import wait_for

GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
REPO = Path(__file__).resolve().parents[2]
SYSTEM_NAMESPACE = "quotagate-system"


def flavor(
    name: str,
    node_labels: dict[str, str] | None = None,
    tolerations: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if node_labels:
        spec["nodeLabels"] = node_labels
    if tolerations:
        spec["tolerations"] = tolerations
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ResourceFlavor",
        "metadata": {"name": name},
        "spec": spec,
    }


def cluster_queue(
    name: str,
    flavors: dict[str, dict[str, Any]],
    cohort: str | None = None,
    preemption: dict[str, Any] | None = None,
    strategy: str | None = None,
) -> dict[str, Any]:
    """`flavors` maps flavor name → {resource: nominal} or {resource: (nominal, borrowingLimit)}."""
    resources = sorted({r for quotas in flavors.values() for r in quotas})
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": resources,
                "flavors": [
                    {
                        "name": flavor_name,
                        "resources": [_quota(resource, quotas[resource]) for resource in resources],
                    }
                    for flavor_name, quotas in flavors.items()
                ],
            }
        ],
    }
    if cohort:
        spec["cohortName"] = cohort
    if preemption:
        spec["preemption"] = preemption
    if strategy:
        spec["queueingStrategy"] = strategy
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": spec,
    }


def _quota(resource: str, value: Any) -> dict[str, Any]:
    if isinstance(value, tuple):
        nominal, borrowing = value
        return {"name": resource, "nominalQuota": str(nominal), "borrowingLimit": str(borrowing)}
    return {"name": resource, "nominalQuota": str(value)}


def local_queue(namespace: str, name: str, cq: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cq},
    }


def workload(
    namespace: str,
    name: str,
    queue: str,
    cpu: str = "1",
    count: int = 1,
    priority: int | None = None,
    preemptibility: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "queueName": queue,
        "podSets": [
            {
                "name": "main",
                "count": count,
                "template": {
                    "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
                },
            }
        ],
    }
    if priority is not None:
        spec["priority"] = priority
    if preemptibility is not None:
        spec["preemptibility"] = preemptibility
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


class Kueue:
    """Create/read Kueue objects through the real API server."""

    def __init__(self, api_client: client.ApiClient) -> None:
        self.custom = client.CustomObjectsApi(api_client)
        self.core = client.CoreV1Api(api_client)

    def workload_name(self, namespace: str, kind: str, name: str) -> str:
        """The name of the Workload of the object `kind` `name` (Kueue's, from its uid:
        `workload_names.py`; a pod group's Workload is named after the group instead)."""
        if kind == "Pod":
            pod = self.core.read_namespaced_pod(name, namespace)
            return workload_name("Pod", "", name, str(pod.metadata.uid))
        resource = next(f.resource for f in frameworks().values() if f.resource.kind == kind)
        obj = self.custom.get_namespaced_custom_object(
            resource.group, resource.version, namespace, resource.plural, name
        )
        return workload_name(kind, resource.group, name, str(obj["metadata"]["uid"]))

    def apply(self, *objects: dict[str, Any]) -> None:
        for obj in objects:
            kind = obj["kind"].lower()
            plural = kind + ("es" if kind.endswith("s") else "s")
            namespace = obj["metadata"].get("namespace")
            if namespace:
                self.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, plural, obj)
            else:
                self.custom.create_cluster_custom_object(GROUP, VERSION, plural, obj)

    def get_workload(self, namespace: str, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self.custom.get_namespaced_custom_object(
            GROUP, VERSION, namespace, "workloads", name
        )
        return result

    def workloads(self, namespace: str) -> list[dict[str, Any]]:
        result = self.custom.list_namespaced_custom_object(GROUP, VERSION, namespace, "workloads")
        return list(result["items"])

    def get_cluster_queue(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self.custom.get_cluster_custom_object(
            GROUP, VERSION, "clusterqueues", name
        )
        return result

    def get_local_queue(self, namespace: str, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self.custom.get_namespaced_custom_object(
            GROUP, VERSION, namespace, "localqueues", name
        )
        return result

    def patch_workload_status(
        self, namespace: str, name: str, status: dict[str, Any]
    ) -> dict[str, Any]:
        result: dict[str, Any] = self.custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, namespace, "workloads", name, {"status": status}
        )
        return result

    def finish(self, namespace: str, name: str) -> None:
        """Mark a Workload Finished=True, as its job integration would."""
        wl = self.get_workload(namespace, name)
        conditions = [
            c for c in wl.get("status", {}).get("conditions", []) if c["type"] != "Finished"
        ]
        conditions.append(
            {
                "type": "Finished",
                "status": "True",
                "reason": "Succeeded",
                "message": "done",
                "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            }
        )
        self.patch_workload_status(namespace, name, {"conditions": conditions})

    def acknowledge_eviction(self, namespace: str, name: str) -> dict[str, Any]:
        """What a bare Workload's owner does after Evicted=True, as Kueue's job side writes
        it: the reservation cleared by a server-side apply as `kueue-admission`."""
        from tools.bench.kueue_clients import runner_release

        wl = self.get_workload(namespace, name)
        write = runner_release(wl, time.time())
        result: dict[str, Any] = self.custom.patch_namespaced_custom_object_status(
            GROUP,
            VERSION,
            namespace,
            "workloads",
            name,
            write.body,
            field_manager=write.field_manager,
            force=write.force,
            _content_type="application/apply-patch+yaml",
        )
        return result

    def delete_cluster_scoped(self, plural: str, name: str) -> None:
        try:
            self.custom.delete_cluster_custom_object(GROUP, VERSION, plural, name)
        except ApiException as exc:
            if exc.status != 404:
                raise


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == type_:
            return dict(c)
    return None


def is_admitted(obj: dict[str, Any]) -> bool:
    found = condition(obj, "Admitted")
    return bool(found and found["status"] == "True" and (obj.get("status") or {}).get("admission"))


def wait_admitted(kueue: Kueue, namespace: str, name: str, timeout: float = 30) -> dict[str, Any]:
    def admitted() -> dict[str, Any] | None:
        wl = kueue.get_workload(namespace, name)
        return wl if is_admitted(wl) else None

    result: dict[str, Any] = wait_for(
        admitted, timeout=timeout, what=f"Workload {namespace}/{name} admitted"
    )
    return result


def wait_pending_reason(kueue: Kueue, namespace: str, name: str, timeout: float = 30) -> str:
    def reason() -> str | None:
        found = condition(kueue.get_workload(namespace, name), "QuotaReserved")
        if found and found["status"] == "False":
            return str(found["message"])
        return None

    result: str = wait_for(
        reason, timeout=timeout, what=f"Workload {namespace}/{name} pending with a reason"
    )
    return result


# The API server's words for an RBAC refusal of a ServiceAccount (in a log line, or in the
# JSON of an error body, where its quotes are escaped).
RBAC_REFUSAL = re.compile(r'forbidden: User \\?"system:serviceaccount:[^"\\]*\\?" cannot [^"\\]*')


def rbac_refusals(log: str) -> list[str]:
    """Every RBAC refusal of a ServiceAccount a process logged."""
    return RBAC_REFUSAL.findall(log)


def delete_webhook_configurations(api_client: client.ApiClient, name: str = "quotagate") -> None:
    """Remove what `quotagate run --webhook-manage-config` registered, both configurations:
    one left behind with `failurePolicy: Fail` and a dead address refuses every later write
    of the kinds it names."""
    admission = client.AdmissionregistrationV1Api(api_client)
    for delete in (
        admission.delete_mutating_webhook_configuration,
        admission.delete_validating_webhook_configuration,
    ):
        try:
            delete(name)
        except ApiException as exc:
            if exc.status != 404:
                raise


class ControllerProcess:
    """`quotagate run` as a subprocess with its own log file."""

    def __init__(
        self,
        kubeconfig: str,
        log_dir: Path,
        name: str = "controller",
        lease_name: str = "quotagate-test",
        extra: list[str] | None = None,
        argv: list[str] | None = None,
    ) -> None:
        """`quotagate run` on `kubeconfig` with `extra` arguments, or `argv` whole (another
        controller's command line)."""
        from tests.cluster.controlplane import free_port

        self.kubeconfig = kubeconfig
        self.log_path = log_dir / f"{name}.log"
        self.health_port = free_port()
        self.args = argv or [
            sys.executable,
            "-m",
            "controller",
            "--kubeconfig",
            kubeconfig,
            "--metrics-port",
            "0",
            "--health-port",
            str(self.health_port),
            "--lease-namespace",
            SYSTEM_NAMESPACE,
            "--lease-name",
            lease_name,
            *(extra or []),
        ]
        self.process: subprocess.Popen[bytes] | None = None
        self.metrics_port = 0

    def start(self) -> ControllerProcess:
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            self.args,
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            start_new_session=True,
        )
        return self

    def stop(self, timeout: float = 15) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def is_leader(self) -> bool:
        return "acquired lease" in self.log()


def maybe_workload(kueue: Kueue, namespace: str, name: str) -> dict[str, Any] | None:
    """The Workload, or None while it does not exist."""
    try:
        return kueue.get_workload(namespace, name)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
