"""The real node's pod network: a Linux bridge with a /24 of 10.88.0.0/16 of its own, the
CNI bridge plugin (Debian's containernetworking-plugins) giving each pod an address on it,
and the one Service route pods need without kube-proxy: the `kubernetes` Service
(10.96.0.1:443) to the API server, which listens on 127.0.0.1.

Nothing leaves the machine: pods get no default route, only their subnet and the Service
range; forwarding from and to the bridge is dropped; IP forwarding is left as it is (the
plugin's gateway mode, which would switch it on, is off: the bridge's address is set
here). The kernel lets the bridge's traffic reach 127.0.0.1 (route_localnet on that
bridge only), so the DNAT to the API server works. Several test sessions can run at once:
each takes a free index under a lock held for its lifetime, and names its bridge, its
nftables table and its CNI network by it. `stop()` removes the bridge and the table (the
CNI plugins' state is the node's: tests/cluster/node_host.py).
"""

from __future__ import annotations

import fcntl
import json
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

SERVICE_IP = "10.96.0.1"  # the `kubernetes` Service: first address of 10.96.0.0/16
SERVICE_RANGE = "10.96.0.0/16"  # the control plane's --service-cluster-ip-range
LOCK_DIR = Path("/run/quotagate/podnetwork")
CNI_BIN_DIR = "/usr/lib/cni"
_INDEXES = range(1, 255)


class PodNetworkError(RuntimeError):
    pass


def host_address() -> str:
    """A non-loopback IPv4 address of this host: the node's InternalIP."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("10.255.255.255", 1))  # no packet is sent: it only picks a route
        address = str(probe.getsockname()[0])
    except OSError:
        address = ""
    finally:
        probe.close()
    if not address or address.startswith("127."):
        raise PodNetworkError("this host has no non-loopback IPv4 address for the node")
    return address


def _run(*command: str, check: bool = True, stdin: str | None = None) -> str:
    result = subprocess.run(command, capture_output=True, text=True, input=stdin)
    if check and result.returncode != 0:
        raise PodNetworkError(f"{' '.join(command)} failed: {result.stderr.strip()}")
    return result.stdout


@dataclass
class PodNetwork:
    """One node's pod network; `start()` it before containerd, `stop()` it after."""

    api_port: int
    workdir: Path
    index: int = 0
    _lock: IO[str] | None = field(default=None, repr=False)

    @property
    def bridge(self) -> str:
        return f"qgbr{self.index}"

    @property
    def table(self) -> str:
        return f"quotagate_pods_{self.index}"

    @property
    def name(self) -> str:
        return f"quotagate-{self.index}"

    @property
    def subnet(self) -> str:
        return f"10.88.{self.index}.0/24"

    @property
    def gateway(self) -> str:
        return f"10.88.{self.index}.1"

    @property
    def record(self) -> Path:
        """Beside the lock: what the node holding this index left (tests/cluster/node_host.py)."""
        return LOCK_DIR / f"{self.index}.json"

    @property
    def conf_dir(self) -> Path:
        return self.workdir / "net.d"

    def start(self) -> PodNetwork:
        self._take_index()
        try:
            self._remove()  # what a killed session with this index may have left
            _run("ip", "link", "add", self.bridge, "type", "bridge")
            _run("ip", "addr", "add", f"{self.gateway}/24", "dev", self.bridge)
            _run("ip", "link", "set", self.bridge, "up")
            Path(f"/proc/sys/net/ipv4/conf/{self.bridge}/route_localnet").write_text("1\n")
            _run("nft", "-f", "-", stdin=self._rules())
            self._write_conf()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self._lock is None:
            return
        self._remove()
        self._lock.close()  # releases the index
        self._lock = None

    # -- pieces ------------------------------------------------------------------------------

    def _take_index(self) -> None:
        LOCK_DIR.mkdir(parents=True, exist_ok=True)
        for index in _INDEXES:
            lock = (LOCK_DIR / f"{index}.lock").open("w")
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                lock.close()
                continue
            self.index, self._lock = index, lock
            return
        raise PodNetworkError(f"every pod network index under {LOCK_DIR} is taken")

    def _rules(self) -> str:
        return f"""table ip {self.table} {{
  chain prerouting {{
    type nat hook prerouting priority dstnat; policy accept;
    iifname "{self.bridge}" ip daddr {SERVICE_IP} tcp dport 443 dnat to 127.0.0.1:{self.api_port}
  }}
  chain forward {{
    type filter hook forward priority filter; policy accept;
    iifname "{self.bridge}" drop
    oifname "{self.bridge}" drop
  }}
}}
"""

    def _write_conf(self) -> None:
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        conf = {
            "cniVersion": "1.0.0",
            "name": self.name,
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": self.bridge,
                    "isGateway": False,
                    "ipMasq": False,
                    "ipam": {
                        "type": "host-local",
                        "dataDir": str(self.workdir / "ipam"),
                        "ranges": [
                            [
                                {
                                    "subnet": self.subnet,
                                    "rangeStart": f"10.88.{self.index}.10",
                                    "gateway": self.gateway,
                                }
                            ]
                        ],
                        "routes": [{"dst": SERVICE_RANGE, "gw": self.gateway}],
                    },
                }
            ],
        }
        (self.conf_dir / "10-quotagate.conflist").write_text(json.dumps(conf, indent=2))

    def _remove(self) -> None:
        _run("nft", "delete", "table", "ip", self.table, check=False)
        _run("ip", "link", "delete", self.bridge, check=False)
