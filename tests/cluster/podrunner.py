"""Run a rendered Deployment's container as a local process, as the kubelet would run it.

There is no container runtime here, so the chart's pods would never start and a broken
Deployment would go unnoticed. `DeploymentProcess` does what the kubelet does with the
pod template, as far as the program inside can tell:

- the container's `command` (the image's ENTRYPOINT, `quotagate`, when unset) and `args`;
- its `env` (values, and `fieldRef` to the pod's name and namespace);
- its ConfigMap, Secret and emptyDir volumes, materialised from the API server's objects.
  They cannot be mounted at their absolute paths without privileges, so they are written
  under a temporary root and every occurrence of a mount path in the args and in the
  materialised files is rewritten to it (the only change made to what the chart renders);
- credentials: a token of the pod's ServiceAccount from the TokenRequest API, in a
  kubeconfig with the cluster's CA. Nothing else: the process can do exactly what the
  chart's RBAC grants.

Its Services are made reachable as a kube-proxy would: an EndpointSlice for each Service
selecting the pod points at this host's address and the container's port, and the API
server (started with `--enable-aggregator-routing`) resolves webhook Services through
EndpointSlices.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

REPO = Path(__file__).resolve().parents[2]
IMAGE_ENTRYPOINT = ["quotagate"]  # the Dockerfile's ENTRYPOINT


def host_address() -> str:
    """A non-loopback IPv4 address of this host (EndpointSlices refuse loopback)."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("10.255.255.255", 1))  # no packet is sent: it only picks a route
        address = str(probe.getsockname()[0])
    except OSError:
        address = ""
    finally:
        probe.close()
    if not address or address.startswith("127."):
        raise RuntimeError("this host has no non-loopback IPv4 address for an EndpointSlice")
    return address


def find(manifests: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    for doc in manifests:
        if doc.get("kind") == kind and doc["metadata"]["name"] == name:
            return doc
    raise KeyError(f"no {kind} {name} in the rendered chart")


class DeploymentProcess:
    """One replica of a rendered Deployment, run here (see the module docstring)."""

    def __init__(
        self,
        api_client: client.ApiClient,
        manifests: list[dict[str, Any]],
        deployment: str,
        workdir: Path,
        pod_name: str | None = None,
    ) -> None:
        self.api_client = api_client
        self.core = client.CoreV1Api(api_client)
        self.manifests = manifests
        self.deployment = find(manifests, "Deployment", deployment)
        self.namespace = self.deployment["metadata"]["namespace"]
        self.pod_name = pod_name or f"{deployment}-local"
        self.workdir = workdir
        self.root = workdir / "root"
        self.log_path = workdir / f"{deployment}.log"
        self.process: subprocess.Popen[bytes] | None = None
        spec = self.deployment["spec"]["template"]["spec"]
        [self.container] = spec["containers"]
        self.pod_spec = spec

    # -- what the kubelet prepares -------------------------------------------------------

    def _local(self, path: str) -> str:
        return str(self.root / path.lstrip("/"))

    def _rewrite(self, text: str) -> str:
        for mount in sorted(
            self.container.get("volumeMounts") or [], key=lambda m: -len(m["mountPath"])
        ):
            text = text.replace(mount["mountPath"], self._local(mount["mountPath"]))
        return text

    def _volumes(self) -> None:
        volumes = {v["name"]: v for v in self.pod_spec.get("volumes") or []}
        for mount in self.container.get("volumeMounts") or []:
            volume = volumes[mount["name"]]
            target = Path(self._local(mount["mountPath"]))
            target.mkdir(parents=True, exist_ok=True)
            if "configMap" in volume:
                config_map = self.core.read_namespaced_config_map(
                    volume["configMap"]["name"], self.namespace
                )
                for key, value in (config_map.data or {}).items():
                    (target / key).write_text(self._rewrite(value))
            elif "secret" in volume:
                secret = self._wait_for_secret(volume["secret"]["secretName"])
                import base64

                for key, value in (secret.data or {}).items():
                    (target / key).write_bytes(base64.b64decode(value))
            elif "emptyDir" not in volume:
                raise NotImplementedError(
                    f"volume {mount['name']}: only configMap, secret, emptyDir"
                )

    def _wait_for_secret(self, name: str, timeout: float = 60) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.core.read_namespaced_secret(name, self.namespace)
            except ApiException as exc:  # the kubelet waits for a missing Secret too
                if exc.status != 404 or time.monotonic() > deadline:
                    raise
            time.sleep(0.5)

    def _kubeconfig(self) -> Path:
        """The ServiceAccount's token (TokenRequest) and the cluster's CA, nothing else."""
        account = self.pod_spec["serviceAccountName"]
        request = client.AuthenticationV1TokenRequest(
            spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=3600)
        )
        token = self.core.create_namespaced_service_account_token(
            account, self.namespace, request
        ).status.token
        configuration = self.api_client.configuration
        path = self.workdir / "serviceaccount.kubeconfig"
        path.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [
                        {
                            "name": "local",
                            "cluster": {
                                "server": configuration.host,
                                "certificate-authority": configuration.ssl_ca_cert,
                            },
                        }
                    ],
                    "users": [{"name": account, "user": {"token": token}}],
                    "contexts": [
                        {
                            "name": "pod",
                            "context": {
                                "cluster": "local",
                                "user": account,
                                "namespace": self.namespace,
                            },
                        }
                    ],
                    "current-context": "pod",
                }
            )
        )
        return path

    def _env(self, kubeconfig: Path) -> dict[str, str]:
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith("KUBE") and key not in ("HOME",)
        }
        env.update(KUBECONFIG=str(kubeconfig), HOME=str(self.workdir), PYTHONUNBUFFERED="1")
        fields = {"metadata.name": self.pod_name, "metadata.namespace": self.namespace}
        for item in self.container.get("env") or []:
            if "value" in item:
                env[item["name"]] = self._rewrite(str(item["value"]))
            elif "fieldRef" in (item.get("valueFrom") or {}):
                env[item["name"]] = fields[item["valueFrom"]["fieldRef"]["fieldPath"]]
        return env

    def command(self) -> list[str]:
        """The container's command line, with `quotagate` this checkout's entry point."""
        command = self.container.get("command") or IMAGE_ENTRYPOINT
        if command[0] != "quotagate":
            raise NotImplementedError(f"unexpected entry point {command!r}")
        entry = [
            sys.executable,
            "-c",
            "import sys; from controller.cli import main; sys.exit(main())",
        ]
        return [*entry, *command[1:], *(self._rewrite(a) for a in self.container.get("args") or [])]

    # -- the Services it backs -------------------------------------------------------------

    def publish(self) -> None:
        """An EndpointSlice for every Service of the chart selecting this pod's labels."""
        labels = self.deployment["spec"]["template"]["metadata"]["labels"]
        ports = {p["name"]: p["containerPort"] for p in self.container.get("ports") or []}
        address = host_address()
        discovery = client.DiscoveryV1Api(self.api_client)
        for service in (d for d in self.manifests if d.get("kind") == "Service"):
            selector = service["spec"].get("selector") or {}
            if not selector or any(labels.get(k) != v for k, v in selector.items()):
                continue
            name = service["metadata"]["name"]
            slice_ports = [
                {"name": p.get("name", ""), "port": ports[p["targetPort"]], "protocol": "TCP"}
                for p in service["spec"]["ports"]
                if p["targetPort"] in ports
            ]
            body = {
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    "name": f"{name}-local",
                    "namespace": self.namespace,
                    "labels": {"kubernetes.io/service-name": name},
                },
                "addressType": "IPv4",
                "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
                "ports": slice_ports,
            }
            try:
                discovery.create_namespaced_endpoint_slice(self.namespace, body)
            except ApiException as exc:
                if exc.status != 409:
                    raise
                discovery.replace_namespaced_endpoint_slice(f"{name}-local", self.namespace, body)

    # -- the process -------------------------------------------------------------------------

    def start(self) -> DeploymentProcess:
        if self.root.exists():
            shutil.rmtree(self.root)
        self._volumes()
        kubeconfig = self._kubeconfig()
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            self.command(),
            cwd=self.workdir,
            env=self._env(kubeconfig),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.publish()
        return self

    def port(self, name: str) -> int:
        for port in self.container.get("ports") or []:
            if port["name"] == name:
                return int(port["containerPort"])
        raise KeyError(f"the container has no port {name}")

    def probe(self, path: str) -> int:
        """The HTTP status of a probe path on the container's `health` port (0: no answer)."""
        import urllib.error
        import urllib.request

        url = f"http://127.0.0.1:{self.port('health')}{path}"
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return int(response.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)
        except OSError:
            return 0

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, timeout: float = 15) -> int | None:
        """SIGTERM, as the kubelet sends it; the exit status."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        return self.process.returncode
