"""Hurting a local control plane on purpose: one component stopped, killed or restarted
while the others stay up, and etcd compacted so that watches resumed from before it expire.

    faults = Faults(plane)
    outage = faults.restart("kube-apiserver")        # SIGKILL, then the same command line
    faults.stop("etcd"); ...; faults.start("etcd")   # down for as long as the test wants
    faults.compact_etcd()                            # history before now is gone

A component is started again with its own command line (the same ports, certificates and
etcd data dir), and `start` returns once its readiness check passes again, as at the
first start. `python -m tests.cluster fault …` does the same to the control plane of `make
cluster-up` (tests/cluster/__main__.py). The CPU a component spent is kept across its
restarts (`cpu_seconds`), so a benchmark can count all of it.

What a kube-apiserver restart does to its clients (measured here): every connection breaks;
the new server's watch cache starts at etcd's current revision, so a watch resumed from
an older resourceVersion is refused with 410 Gone ("too old resource version") and the
client must list again. etcd's compaction alone expires nothing a running API server
serves from its cache.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import socketserver
import subprocess
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.cluster.controlplane import Component, ControlPlane, ControlPlaneError, _terminate

__all__ = ["COMPONENTS", "Faults", "Outage", "ask_faults", "kubeconfig_for", "serve_faults"]

COMPONENTS = ("etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager")
READY_TIMEOUT = 120.0


@dataclass(frozen=True)
class Outage:
    """One component's stop and start (monotonic seconds): down from `stopped` until it
    was started again at `started`, and serving again at `ready`."""

    component: str
    stopped: float
    started: float
    ready: float

    @property
    def seconds(self) -> float:
        return self.ready - self.stopped


def _process_cpu(pid: int) -> float:
    """User + system CPU seconds of a live process (Linux /proc), 0 if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stream:
            fields = stream.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Faults:
    """Stop, start and restart components of `plane`; compact its etcd."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self.down: set[str] = set()  # stopped on purpose, not started again yet
        self.outages: list[Outage] = []
        self._cpu_before: dict[str, float] = {}  # CPU of earlier incarnations
        self._stopped_at: dict[str, float] = {}

    def component(self, name: str) -> Component:
        try:
            return self.plane.components[name]
        except KeyError:
            running = ", ".join(self.plane.components) or "none"
            raise ControlPlaneError(f"no component {name!r} (running: {running})") from None

    def pid(self, name: str) -> int:
        return self.component(name).process.pid

    def cpu_seconds(self, name: str) -> float:
        """CPU seconds `name` spent so far, over all its restarts."""
        component = self.component(name)
        now = 0.0 if name in self.down else _process_cpu(component.process.pid)
        return self._cpu_before.get(name, 0.0) + now

    def stop(self, name: str, sig: int = signal.SIGKILL, timeout: float = 30.0) -> None:
        """Stop `name` with `sig` (SIGKILL: a crash; SIGTERM: a graceful shutdown, killed if
        it takes longer than `timeout`); the others keep running."""
        component = self.component(name)
        process = component.process
        if name in self.down or process.poll() is not None:
            raise ControlPlaneError(f"{name} is not running")
        self._cpu_before[name] = self._cpu_before.get(name, 0.0) + _process_cpu(process.pid)
        self._stopped_at[name] = time.monotonic()
        self.down.add(name)
        _terminate(process, timeout, sig)

    def start(self, name: str, timeout: float = READY_TIMEOUT) -> Outage:
        """Start `name` again with its own command line; returns once it is ready."""
        component = self.component(name)
        if name not in self.down and component.process.poll() is None:
            raise ControlPlaneError(f"{name} is running")
        started = time.monotonic()
        with component.log.open("ab") as out:
            out.write(
                f"\n--- started again by tests/cluster/faults.py at {time.ctime()} ---\n".encode()
            )
            out.flush()
            component.process = subprocess.Popen(
                component.args,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.down.discard(name)
        self.plane._wait(component, component.ready, timeout)
        outage = Outage(name, self._stopped_at.pop(name, started), started, time.monotonic())
        self.outages.append(outage)
        return outage

    def restart(self, name: str, sig: int = signal.SIGKILL, down_seconds: float = 0.0) -> Outage:
        """Stop `name`, leave it down for `down_seconds`, start it again."""
        self.stop(name, sig)
        if down_seconds > 0:
            time.sleep(down_seconds)
        return self.start(name)

    # -- etcd ----------------------------------------------------------------------------------

    def _etcd(self, path: str, body: dict[str, object]) -> dict[str, object]:
        request = urllib.request.Request(
            self.plane.etcd_url + path,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            answer: dict[str, object] = json.loads(response.read())
            return answer

    def etcd_revision(self) -> int:
        """etcd's current revision (every write to any object moves it)."""
        header = self._etcd("/v3/kv/range", {"key": base64.b64encode(b"/").decode()})["header"]
        return int(header["revision"])  # type: ignore[index]

    def compact_etcd(self, revision: int | None = None) -> int:
        """Compact etcd's history up to `revision` (default: the current one), physically;
        a watch or list from an older resourceVersion that reaches etcd fails with 410
        Gone. Returns the revision compacted to."""
        revision = revision or self.etcd_revision()
        self._etcd("/v3/kv/compaction", {"revision": str(revision), "physical": True})
        return revision


def kubeconfig_for(
    plane: ControlPlane, path: Path, *, user: str | None = None, server: str | None = None
) -> Path:
    """A kubeconfig at `path` for `plane`, as `user` (one of `plane.users`; default the
    admin) and through `server` (default the API server itself; e.g. a proxy's
    `https://127.0.0.1:PORT`: the API server's certificate names 127.0.0.1, so TLS holds)."""
    assert plane.ca is not None
    token = plane.users[user] if user is not None else plane.token
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        "clusters:\n"
        f"- name: local\n  cluster:\n    server: {server or plane.server}\n"
        f"    certificate-authority: {plane.ca.cert}\n"
        f"users:\n- name: u\n  user:\n    token: {token}\n"
        "contexts:\n- name: local\n  context:\n    cluster: local\n    user: u\n"
        "current-context: local\n"
    )
    path.chmod(0o600)
    return path


# -- the supervisor's fault API (tests/cluster/__main__.py) ------------------------------------


def _act(faults: Faults, request: dict[str, Any]) -> str:
    action, name = request.get("action"), request.get("component")
    sig = signal.SIGTERM if request.get("signal") == "TERM" else signal.SIGKILL
    if action == "restart":
        outage = faults.restart(str(name), sig, float(request.get("down") or 0))
        return f"{name} restarted: down {outage.seconds:.1f}s, ready again"
    if action == "stop":
        faults.stop(str(name), sig)
        return f"{name} stopped ({sig.name}); the others keep running"
    if action == "start":
        outage = faults.start(str(name))
        return f"{name} started again: ready {outage.ready - outage.started:.1f}s after its start"
    if action == "compact-etcd":
        return f"etcd compacted to revision {faults.compact_etcd()}"
    if action == "status":
        lines = []
        for component in faults.plane.components.values():
            process = component.process
            state = "running" if process.poll() is None else f"exited ({process.returncode})"
            if component.name in faults.down:
                state = "stopped on purpose"
            lines.append(f"{component.name}: {state}, pid {process.pid}")
        return "\n".join(lines)
    raise ControlPlaneError(f"unknown fault action {action!r}")


def serve_faults(faults: Faults, path: Path) -> socketserver.BaseServer:
    """Serve fault requests (one JSON object a line, answered likewise) on the Unix socket
    `path`, in a thread; `shutdown()` ends it."""

    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            request = json.loads(self.rfile.readline())
            try:
                answer = {"ok": True, "message": _act(faults, request)}
            except (ControlPlaneError, OSError, ValueError) as exc:
                answer = {"ok": False, "error": str(exc)}
            self.wfile.write(json.dumps(answer).encode() + b"\n")

    path.unlink(missing_ok=True)
    server = socketserver.ThreadingUnixStreamServer(str(path), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True, name="faults").start()
    return server


def ask_faults(path: Path, request: dict[str, Any], timeout: float = 300) -> dict[str, Any]:
    """Send one fault request to the supervisor listening on `path`; its answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        try:
            sock.connect(str(path))
        except OSError as exc:
            return {"ok": False, "error": f"cannot reach the supervisor at {path}: {exc}"}
        sock.sendall(json.dumps(request).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    answer: dict[str, Any] = json.loads(data or b'{"ok": false, "error": "no answer"}')
    return answer
