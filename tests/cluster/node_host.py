"""The real node's share of the host, and how it is kept to it.

containerd, its shims and the kubelet run in a mount namespace of the node's own
(`confine`), where

- the host paths they write to whatever their flags say (REDIRECTED: /var/lib/kubelet,
  /var/lib/cni, /var/log/pods, /var/log/containers, /run/containerd, /run/netns) are
  directories of the node's: their mount points are left on the host, empty, at most;
- the kernel settings the kubelet insists on (KERNEL_DEFAULTS) read as it wants them, so
  it has nothing to rewrite (with `protectKernelDefaults` it refuses to start rather than
  change them; without, it would set vm.overcommit_memory=1 and kernel.panic_on_oops=1 for
  the whole machine).

Their mounts (pod volumes, container root filesystems, network namespaces) end with the
namespace, when its last process does. The pods' processes live under the node's cgroup
root. `Footprint` is both, as a record: `end()` kills every process left in either and
removes the cgroups; the record is saved beside the pod network's lock, so a session that
takes the same index ends what a killed one left (tests/cluster/podnetwork.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import time
from dataclasses import asdict, dataclass
from pathlib import Path

CGROUP_V1 = Path("/sys/fs/cgroup")
REDIRECTED = (
    "/var/lib/kubelet",
    "/var/lib/cni",
    "/var/log/pods",
    "/var/log/containers",
    "/run/containerd",
    "/run/netns",
)
# pkg/kubelet/cm/container_manager_linux.go, setupKernelTunables.
KERNEL_DEFAULTS = {
    "vm/overcommit_memory": 1,
    "vm/panic_on_oom": 0,
    "kernel/panic": 10,
    "kernel/panic_on_oops": 1,
    "kernel/keys/root_maxkeys": 1000000,
    "kernel/keys/root_maxbytes": 25000000,
}


def redirected(node_dir: Path, path: str) -> Path:
    """Where the node's `path` (one of REDIRECTED) is, seen from the host."""
    return node_dir / "host" / path.strip("/").replace("/", "-")


def confine(node_dir: Path, command: list[str]) -> list[str]:
    """`command` run in a new mount namespace set up as the module docstring says."""
    setup = []
    for path in REDIRECTED:
        ours = redirected(node_dir, path)
        setup.append(shlex.join(["mkdir", "-p", path, str(ours)]))
        setup.append(shlex.join(["mount", "--bind", str(ours), path]))
    fakes = node_dir / "kernel"
    fakes.mkdir(parents=True, exist_ok=True)
    for flag, wanted in KERNEL_DEFAULTS.items():
        real = Path("/proc/sys") / flag
        if int(real.read_text().split()[0]) == wanted:
            continue
        fake = fakes / flag.replace("/", ".")
        fake.write_text(f"{wanted}\n")
        setup.append(shlex.join(["mount", "--bind", str(fake), str(real)]))
    script = "\n".join([*setup, shlex.join(["exec", *command])])
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-ec", script]


def _hierarchies() -> list[Path]:
    return [p for p in CGROUP_V1.iterdir() if p.is_dir() and (p / "cgroup.procs").exists()]


@dataclass
class Footprint:
    """The node's cgroup root, its directory and its mount namespace (as /proc/PID/ns/mnt
    reads; a namespace's number is reused once it is gone, so a process counts as the
    node's only if its command line also names the node's directory)."""

    cgroup_root: str
    directory: str
    mount_namespace: str = ""

    def create_cgroups(self) -> None:
        """The cgroup root in every v1 hierarchy (the kubelet wants it to exist)."""
        for hierarchy in _hierarchies():
            (hierarchy / self.cgroup_root.lstrip("/")).mkdir(exist_ok=True)

    def processes(self) -> list[int]:
        """What still runs in its cgroups (the pods' processes) or its mount namespace
        (containerd, the kubelet, and containerd's shims, which outlive it)."""
        pids: set[int] = set()
        for hierarchy in _hierarchies():
            for directory, _, files in os.walk(hierarchy / self.cgroup_root.lstrip("/")):
                if "cgroup.procs" in files:
                    with contextlib.suppress(OSError, ValueError):
                        text = (Path(directory) / "cgroup.procs").read_text()
                        pids.update(int(pid) for pid in text.split())
        if self.mount_namespace:
            for proc in Path("/proc").iterdir():
                if proc.name.isdigit():
                    with contextlib.suppress(OSError):
                        if (
                            os.readlink(proc / "ns" / "mnt") == self.mount_namespace
                            and self.directory.encode() in (proc / "cmdline").read_bytes()
                        ):
                            pids.add(int(proc.name))
        pids.discard(os.getpid())
        return sorted(pids)

    def end(self, timeout: float = 15) -> None:
        """Kill what is left (by pid, each one the node's) and remove the cgroups."""
        deadline = time.monotonic() + timeout
        while (pids := self.processes()) and time.monotonic() < deadline:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.2)
        for hierarchy in _hierarchies():
            top = hierarchy / self.cgroup_root.lstrip("/")
            if top.exists():
                for directory, _, _ in sorted(os.walk(top), key=lambda w: -len(w[0])):
                    with contextlib.suppress(OSError):
                        os.rmdir(directory)

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self)))

    @classmethod
    def load(cls, path: Path) -> Footprint | None:
        try:
            return cls(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            return None
