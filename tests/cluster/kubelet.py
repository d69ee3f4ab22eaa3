"""A real node beside the fake ones: containerd and runc (Debian's packages) and a kubelet
built from k8s.io/kubernetes v1.36.3, joined to the local control plane.

Everything it writes is under its own directory (containerd's root, state and socket, the
kubelet's root, pod logs, the CNI configuration), its pod cgroups under a cgroup of its
own, its pod network named by an index of its own (tests/cluster/podnetwork.py), so test
sessions running at once do not meet and `stop()` leaves nothing behind. The node is
tainted `quotagate.test/real-node=true:NoSchedule`: only pods that tolerate it (and select
it) run here, while every other test's pods keep going to the fake nodes.

containerd, its shims and the kubelet run in a mount namespace of the node's own, which
keeps what they would write for the whole machine to the node (tests/cluster/node_host.py).

What this host needs, and why:
- cgroup v1: the kubelet refuses it from 1.35 on unless `failCgroupV1: false`; the cgroupfs
  driver (there is no systemd);
- root may not lower an oom_score_adj here: containerd's `restrict_oom_score_adj` and the
  kubelet's `oomScoreAdj: 0` keep both from trying;
- no registry: the sandbox image and every image pods use are imported beforehand
  (`import_image`), and pods name them with a tag so the kubelet never pulls;
- runc, not crun (which refuses this host's hybrid cgroup layout).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.cluster import certs
from tests.cluster.controlplane import Component, ControlPlane, _terminate, free_port
from tests.cluster.node_host import Footprint, confine, redirected
from tests.cluster.node_images import NodeImage, busybox_image, pause_image
from tests.cluster.podnetwork import CNI_BIN_DIR, PodNetwork, host_address

REAL_NODE_LABEL = "quotagate.test/real-node"
TAINT = {"key": REAL_NODE_LABEL, "value": "true", "effect": "NoSchedule"}
TOLERATION = {"key": REAL_NODE_LABEL, "operator": "Equal", "value": "true", "effect": "NoSchedule"}
RUNC = "/usr/sbin/runc"


class RealNodeError(RuntimeError):
    pass


@dataclass
class RealNode:
    """containerd + kubelet registered as Node `name`; `start()`, then `stop()`.

    Attached to `plane` (its `attachments`), so the plane stops it first, also at exit and
    when the test session is interrupted; its processes are the plane's components."""

    plane: ControlPlane
    name: str = ""
    processes: dict[str, Component] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.dir = self.plane.dir / "real-node"
        self.network = PodNetwork(self.plane.api_port, self.dir / "cni")
        self.pause: NodeImage | None = None
        self.busybox: NodeImage | None = None
        self.footprint: Footprint | None = None
        self._started = False

    # -- paths ---------------------------------------------------------------------------------

    @property
    def socket(self) -> Path:
        return self.dir / "containerd" / "containerd.sock"

    @property
    def pod_logs(self) -> Path:
        """/var/log/pods of the node, as seen from the host."""
        return redirected(self.dir, "/var/log/pods")

    @property
    def node_selector(self) -> dict[str, str]:
        return {"kubernetes.io/hostname": self.name}

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self, timeout: float = 120) -> RealNode:
        if os.geteuid() != 0:
            raise RealNodeError(
                "the real node needs root (containerd, runc, network namespaces, cgroups)"
            )
        assert self.plane.bin_dir is not None and self.plane.ca is not None
        self.dir.mkdir(parents=True, exist_ok=True)
        self._started = True
        self.plane.attachments.append(self)
        try:
            self.network.start()
            previous = Footprint.load(self.network.record)
            if previous is not None:  # a killed session's node had this index
                previous.end()
            self.name = self.name or f"real-node-{self.network.index}"
            self.footprint = Footprint(f"/quotagate-{self.name}", str(self.dir))
            self.footprint.save(self.network.record)
            self.pause = pause_image()
            self._start_containerd()
            self.import_image(self.pause.path)
            self.busybox = busybox_image()
            self.import_image(self.busybox.path)
            self._start_kubelet()
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Drain the node, stop the kubelet and containerd, remove what they left."""
        if not self._started:
            return
        self._started = False
        with contextlib.suppress(ValueError):
            self.plane.attachments.remove(self)
        kubelet = self.processes.pop("kubelet", None)
        self.plane.components.pop("kubelet", None)
        if kubelet is not None and kubelet.process.poll() is None:
            self._drain()
        if kubelet is not None:
            _terminate(kubelet.process)
        containerd = self.processes.pop("containerd", None)
        self.plane.components.pop("containerd", None)
        if containerd is not None:
            if containerd.process.poll() is None:
                self._kill_tasks()
            _terminate(containerd.process)
        if self.footprint is not None:
            self.footprint.end()
            self.network.record.unlink(missing_ok=True)
        self.network.stop()

    # -- containerd ----------------------------------------------------------------------------

    def _containerd_config(self) -> str:
        root = self.dir / "containerd"
        cri = 'plugins."io.containerd.grpc.v1.cri"'
        assert self.pause is not None
        return f"""version = 2
root = "{root / "root"}"
state = "{root / "state"}"
disabled_plugins = [
  "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing",
]
[grpc]
  address = "{self.socket}"
[ttrpc]
  address = "{self.socket}.ttrpc"
[debug]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "{root / "opt"}"
[{cri}]
  sandbox_image = "{self.pause.name}"
  restrict_oom_score_adj = true
  disable_apparmor = true
  enable_selinux = false
  [{cri}.containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [{cri}.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [{cri}.containerd.runtimes.runc.options]
        BinaryName = "{RUNC}"
        SystemdCgroup = false
  [{cri}.cni]
    bin_dir = "{CNI_BIN_DIR}"
    conf_dir = "{self.network.conf_dir}"
    max_conf_num = 1
"""

    def _start_containerd(self) -> None:
        binary = shutil.which("containerd")
        if binary is None:
            raise RealNodeError("containerd is not installed (make host-packages)")
        config = self.dir / "containerd.toml"
        config.write_text(self._containerd_config())
        containerd = self._spawn("containerd", confine(self.dir, [binary, "--config", str(config)]))
        deadline = time.monotonic() + 30
        while not self._ctr_ok():
            if containerd.process.poll() is not None or time.monotonic() > deadline:
                raise RealNodeError(f"containerd did not start:\n{containerd.tail()}")
            time.sleep(0.2)
        assert self.footprint is not None
        self.footprint.mount_namespace = os.readlink(f"/proc/{containerd.process.pid}/ns/mnt")
        self.footprint.save(self.network.record)

    def ctr(self, *args: str, check: bool = True) -> str:
        """containerd's own client on this node's containerd, in the CRI's namespace."""
        result = subprocess.run(
            ["ctr", "--address", str(self.socket), "--namespace", "k8s.io", *args],
            capture_output=True,
            text=True,
        )
        if check and result.returncode != 0:
            raise RealNodeError(f"ctr {' '.join(args)} failed: {result.stderr.strip()}")
        return result.stdout

    def _ctr_ok(self) -> bool:
        try:
            self.ctr("version")
        except RealNodeError:
            return False
        return True

    def import_image(self, archive: Path) -> None:
        """Load an OCI archive into the node's image store, where the kubelet finds it."""
        self.ctr("images", "import", str(archive))

    def container_log(self, namespace: str, pod: str, container: str) -> str:
        """What a container of a pod on this node wrote, every run of it, from the node's
        /var/log/pods (each line without the CRI's time, stream and tag)."""
        lines = []
        for directory in sorted(self.pod_logs.glob(f"{namespace}_{pod}_*")):
            for log in sorted((directory / container).glob("*.log")):
                for line in log.read_text(errors="replace").splitlines():
                    parts = line.split(" ", 3)
                    lines.append(parts[3] if len(parts) == 4 else line)
        return "\n".join(lines)

    # -- the kubelet ---------------------------------------------------------------------------

    def _kubelet_config(self, port: int, healthz_port: int) -> dict[str, Any]:
        assert self.plane.ca is not None
        endpoint = f"unix://{self.socket}"
        return {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "failCgroupV1": False,
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": self.footprint.cgroup_root if self.footprint else "",
            "containerRuntimeEndpoint": endpoint,
            "imageServiceEndpoint": endpoint,
            "address": host_address(),
            "port": port,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": healthz_port,
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": str(self.plane.ca.cert)},
            },
            "authorization": {"mode": "Webhook"},
            "protectKernelDefaults": True,
            "volumePluginDir": str(self.dir / "volume-plugins"),
            "registerWithTaints": [TAINT],
            "oomScoreAdj": 0,
            "failSwapOn": False,
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "evictionHard": {
                "memory.available": "50Mi",
                "nodefs.available": "1%",
                "imagefs.available": "1%",
            },
            "serializeImagePulls": False,
            "nodeStatusUpdateFrequency": "5s",
            "syncFrequency": "10s",
            "resolvConf": "",
            # It would add iptables rules for the whole host (KUBE-FIREWALL drops the DNAT
            # to the API server this node's pods use: tests/cluster/podnetwork.py).
            "makeIPTablesUtilChains": False,
            "maxPods": 30,
        }

    def _start_kubelet(self) -> None:
        assert self.plane.ca is not None
        pki = self.dir / "pki"
        pki.mkdir(exist_ok=True)
        client_cert = certs.issue(
            self.plane.ca,
            pki,
            "kubelet-client",
            f"system:node:{self.name}",
            organization="system:nodes",
            client=True,
        )
        kubeconfig = self.dir / "kubelet.kubeconfig"
        kubeconfig.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [
                        {
                            "name": "local",
                            "cluster": {
                                "server": self.plane.server,
                                "certificate-authority": str(self.plane.ca.cert),
                            },
                        }
                    ],
                    "users": [
                        {
                            "name": "kubelet",
                            "user": {
                                "client-certificate": str(client_cert.cert),
                                "client-key": str(client_cert.key),
                            },
                        }
                    ],
                    "contexts": [
                        {"name": "node", "context": {"cluster": "local", "user": "kubelet"}}
                    ],
                    "current-context": "node",
                }
            )
        )
        assert self.footprint is not None
        self.footprint.create_cgroups()
        config = self.dir / "kubelet.yaml"
        self.healthz_port = free_port()
        config.write_text(yaml.safe_dump(self._kubelet_config(free_port(), self.healthz_port)))
        containerd = self.processes["containerd"].process.pid
        self._spawn(
            "kubelet",
            [
                "nsenter",
                f"--mount=/proc/{containerd}/ns/mnt",
                "--",
                self.plane.binary("kubelet"),
                "--config",
                str(config),
                "--kubeconfig",
                str(kubeconfig),
                "--cert-dir",
                str(pki),
                "--hostname-override",
                self.name,
                "--node-ip",
                host_address(),
                "--node-labels",
                f"{REAL_NODE_LABEL}=true",
                "-v",
                "2",
            ],
        )

    def _wait_ready(self, timeout: float) -> None:
        core = client.CoreV1Api(client.ApiClient(self._admin_configuration()))
        kubelet = self.processes["kubelet"]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if kubelet.process.poll() is not None:
                raise RealNodeError(f"the kubelet exited:\n{kubelet.tail(60)}")
            with contextlib.suppress(ApiException):
                node = core.read_node(self.name)
                ready = {c.type: c.status for c in node.status.conditions or []}
                if ready.get("Ready") == "True":
                    # The TaintNodesByCondition admission plugin tainted the new Node
                    # not-ready; the node-lifecycle controller, which would lift it, is not
                    # run (it would find the fake nodes' kubelets silent and evict their
                    # pods). Only the node's own taint stays.
                    core.patch_node(self.name, {"spec": {"taints": [TAINT]}})
                    return
            time.sleep(0.5)
        raise RealNodeError(f"node {self.name} not Ready after {timeout:.0f}s:\n{kubelet.tail(60)}")

    def _admin_configuration(self) -> client.Configuration:
        from kubernetes import config

        configuration = client.Configuration()
        config.load_kube_config(str(self.plane.kubeconfig), client_configuration=configuration)
        return configuration

    # -- teardown ------------------------------------------------------------------------------

    def _drain(self, timeout: float = 20) -> None:
        """Cordon the node (no new pods: a Deployment would replace the ones deleted),
        delete its pods at once, and wait until the kubelet has ended their containers
        and sandboxes (their network released)."""
        core = client.CoreV1Api(client.ApiClient(self._admin_configuration()))
        with contextlib.suppress(ApiException):
            core.patch_node(self.name, {"spec": {"unschedulable": True}})
            for pod in core.list_pod_for_all_namespaces(
                field_selector=f"spec.nodeName={self.name}"
            ).items:
                with contextlib.suppress(ApiException):
                    core.delete_namespaced_pod(
                        pod.metadata.name, pod.metadata.namespace, grace_period_seconds=0
                    )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self._running_tasks():
            time.sleep(0.5)

    def _running_tasks(self) -> list[str]:
        try:
            lines = self.ctr("tasks", "ls").splitlines()[1:]
        except RealNodeError:
            return []
        return [line.split()[0] for line in lines if "RUNNING" in line]

    def _kill_tasks(self) -> None:
        """What the kubelet did not end: every task, through containerd."""
        for task in self._running_tasks():
            self.ctr("tasks", "kill", "--signal", "SIGKILL", task, check=False)
        for container in self.ctr("containers", "ls", "--quiet", check=False).split():
            self.ctr("tasks", "delete", "--force", container, check=False)

    def _spawn(self, name: str, args: list[str]) -> Component:
        """A process of the plane's (its log beside theirs), stopped by the node."""
        self.processes[name] = self.plane._spawn(name, args)
        return self.processes[name]
