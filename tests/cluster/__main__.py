"""`python -m tests.cluster build|modules|up|down|status` — the local control plane for humans.

`up` starts etcd, kube-apiserver, kube-scheduler, kube-controller-manager, two fake nodes
and the pod-lifecycle helper in the background (a detached supervisor process), prints
`export KUBECONFIG=…` on a line of its own and leaves `bin/kubectl` and `bin/helm`
wrappers that talk to it. `up --kubelet` adds a real node (containerd and a kubelet:
tests/cluster/kubelet.py) with quotagate's image (`make image`'s) in its image store.
`down` stops every process it started and removes its dir. `host-packages` installs the
Debian packages the image and the real node need (tests/cluster/host_packages.py).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.cluster.build import BuildError, ensure_binaries

REPO = Path(__file__).resolve().parents[2]
# QUOTAGATE_CLUSTER_DIR moves the state (and the bin/ wrappers beside it) elsewhere, so a
# test can run the demo without touching a developer's own local cluster.
STATE_DIR = Path(os.environ.get("QUOTAGATE_CLUSTER_DIR") or REPO / ".cluster")
STATE_FILE = STATE_DIR / "state.json"
WRAPPER_DIR = STATE_DIR.parent / "bin"


def _read_state() -> dict[str, object] | None:
    try:
        data: dict[str, object] = json.loads(STATE_FILE.read_text())
        return data
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def serve(workdir: Path, kubelet: bool = False) -> int:
    """The supervisor: runs the control plane (and the real node) until SIGTERM."""
    from kubernetes import client, config

    from tests.cluster.controlplane import ControlPlane
    from tests.cluster.nodes import PodLifecycle, create_node

    stopping = False

    def on_term(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    plane = ControlPlane(workdir=workdir)
    plane.start(scheduler=True, controller_manager=True)
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    api_client = config.new_client_from_config(str(plane.kubeconfig))
    core = client.CoreV1Api(api_client)
    for name in ("node-a", "node-b"):
        create_node(core, name, labels={"topology.kubernetes.io/zone": name})
    lifecycle = PodLifecycle(api_client).start()
    state: dict[str, object] = {
        "pid": os.getpid(),
        "kubeconfig": str(plane.kubeconfig),
        "server": plane.server,
    }
    if kubelet:
        from image.build import build
        from tests.cluster.kubelet import RealNode

        node = RealNode(plane).start()
        built = build()  # `up` built it already: found in the cache
        node.import_image(built.path)
        state.update(realNode=node.name, image=built.name)
    watched = list(plane.components.values())  # the real node's containerd and kubelet too
    STATE_FILE.write_text(json.dumps({**state, "ready": True}))
    try:
        while not stopping:
            time.sleep(0.5)
            for component in watched:
                if component.process.poll() is not None:
                    print(
                        f"{component.name} exited; last log lines:\n{component.tail()}",
                        file=sys.stderr,
                    )
                    stopping = True
    finally:
        lifecycle.stop()
        plane.stop()
    return 0


def up(kubelet: bool = False) -> int:
    state = _read_state()
    if state and isinstance(state.get("pid"), int) and _alive(int(state["pid"])):  # type: ignore[arg-type]
        print(f"already running (pid {state['pid']})")
        _print_export(str(state["kubeconfig"]))
        return 0
    try:
        bin_dir = ensure_binaries()
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if kubelet:
        from image.build import build

        build()  # here, where its progress shows; the supervisor finds it in the cache
    shutil.rmtree(STATE_DIR, ignore_errors=True)
    STATE_DIR.mkdir(parents=True)
    log = (STATE_DIR / "supervisor.log").open("wb")
    started = time.monotonic()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.cluster",
            "serve",
            str(STATE_DIR / "run"),
            *(["--kubelet"] if kubelet else []),
        ],
        cwd=REPO,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        state = _read_state()
        if state and state.get("ready"):
            break
        if process.poll() is not None:
            print(
                (STATE_DIR / "supervisor.log").read_text(errors="replace")[-4000:], file=sys.stderr
            )
            print("error: the control plane failed to start", file=sys.stderr)
            return 1
        time.sleep(0.3)
    else:
        print("error: the control plane did not become ready within 120s", file=sys.stderr)
        return 1
    kubeconfig = str(state["kubeconfig"])
    _write_wrappers(bin_dir, kubeconfig)
    real = (
        f" and the real node {state['realNode']} with {state['image']}"
        if state.get("realNode")
        else ""
    )
    print(
        f"control plane ready in {time.monotonic() - started:.1f}s (etcd, kube-apiserver, kube-scheduler, "
        f"kube-controller-manager, nodes node-a and node-b{real})"
    )
    print("bin/kubectl and bin/helm talk to it; or run:")
    _print_export(kubeconfig)
    return 0


def _print_export(kubeconfig: str) -> None:
    print(f"export KUBECONFIG={kubeconfig}")


def _write_wrappers(bin_dir: Path, kubeconfig: str) -> None:
    target = WRAPPER_DIR
    target.mkdir(exist_ok=True)
    for tool in ("kubectl", "helm"):
        wrapper = target / tool
        wrapper.write_text(
            f'#!/bin/sh\nexport KUBECONFIG="{kubeconfig}"\nexec "{bin_dir / tool}" "$@"\n'
        )
        wrapper.chmod(0o755)


def down() -> int:
    state = _read_state()
    if not state:
        print("no local control plane is running")
        shutil.rmtree(STATE_DIR, ignore_errors=True)
        return 0
    for pid_file in STATE_DIR.glob("*.pid"):  # processes `make demo` started
        with contextlib.suppress(ValueError, ProcessLookupError, PermissionError):
            os.killpg(int(pid_file.read_text()), signal.SIGTERM)
    pid = int(state["pid"])  # type: ignore[call-overload]
    if _alive(pid):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 60  # a real node drains and removes its pods first
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if _alive(pid):
            os.killpg(pid, signal.SIGKILL)
    shutil.rmtree(STATE_DIR, ignore_errors=True)
    for tool in ("kubectl", "helm"):
        (WRAPPER_DIR / tool).unlink(missing_ok=True)
    print("local control plane stopped and removed")
    return 0


def status() -> int:
    state = _read_state()
    if state and _alive(int(state["pid"])):  # type: ignore[call-overload]
        print(f"running (pid {state['pid']}), API server {state['server']}")
        _print_export(str(state["kubeconfig"]))
        return 0
    print("not running")
    return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.cluster")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("build", help="build (or reuse) the control-plane binaries")
    modules_parser = sub.add_parser(
        "modules", help="fetch (and build) the Go modules' CRDs and operators the tests use"
    )
    modules_parser.add_argument("names", nargs="*", help="modules (default: all)")
    up_parser = sub.add_parser("up", help="start the full local control plane in the background")
    up_parser.add_argument(
        "--kubelet", action="store_true", help="add a real node (containerd and a kubelet)"
    )
    packages = sub.add_parser("host-packages", help="install the Debian packages needed")
    packages.add_argument("--for", dest="purpose", choices=("image", "node"), default="node")
    sub.add_parser("down", help="stop it and remove its files")
    sub.add_parser("status", help="say whether it runs")
    serve_parser = sub.add_parser("serve", help=argparse.SUPPRESS)
    serve_parser.add_argument("workdir", type=Path)
    serve_parser.add_argument("--kubelet", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "build":
        try:
            ensure_binaries()
        except BuildError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        return 0
    if args.command == "modules":
        from tests.cluster.modules import main as modules_main

        return modules_main(args.names)
    if args.command == "serve":
        args.workdir.mkdir(parents=True, exist_ok=True)
        return serve(args.workdir, args.kubelet)
    if args.command == "host-packages":
        from tests.cluster.host_packages import FOR, ensure

        return ensure(FOR[args.purpose])
    if args.command == "up":
        return up(args.kubelet)
    return {"down": down, "status": status}[args.command]()


if __name__ == "__main__":
    sys.exit(main())
