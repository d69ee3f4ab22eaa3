"""Build the control-plane binaries from their Go modules into a cache outside the repo.

kube-apiserver, kube-scheduler, kube-controller-manager and kubectl come from
`k8s.io/kubernetes` (tests/cluster/go/kube), etcd from `go.etcd.io/etcd/server/v3`
(tests/cluster/go/etcd) and helm from `helm.sh/helm/v3` (tests/cluster/go/helm), all
through the Go module proxy. Output goes to `~/.cache/quotagate/bin/<version>/` (or
$QUOTAGATE_BIN_DIR); a stamp holding a hash of the module files and the Go version makes
a second run build nothing. A failed build stops with Go's own error output.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

KUBERNETES_VERSION = "v1.36.3"
GO_DIR = Path(__file__).resolve().parent / "go"
FLAGS = ["-trimpath"]
# Stamp the Kubernetes version the way its own release build does, so `kubectl version`,
# helm's kubeVersion checks and clients see v1.36.x rather than v0.0.0-master.
_VERSION_VARS = [
    f"-X {package}.{var}={value}"
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
    for var, value in (
        ("gitVersion", KUBERNETES_VERSION),
        ("gitMajor", KUBERNETES_VERSION.lstrip("v").split(".")[0]),
        ("gitMinor", KUBERNETES_VERSION.lstrip("v").split(".")[1]),
        ("gitTreeState", "clean"),
    )
]


def _module_version(module_dir: str, module: str) -> str:
    """The version the build module resolves `module` to (`go list -m`)."""
    result = subprocess.run(
        [_go(), "list", "-m", "-f", "{{.Version}}", module],
        cwd=GO_DIR / module_dir,
        env={**os.environ, "GOFLAGS": "-mod=mod"},
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise BuildError(f"go list -m {module} failed in {module_dir}:\n{result.stderr.strip()}")
    return result.stdout.strip()


def _helm_stamps() -> list[str]:
    """The variables helm's own release build sets (helm's Makefile): its version, and the
    Kubernetes version `helm template` assumes without a cluster, derived from client-go
    (v0.N ⇒ 1.N). Without them helm believes it talks to Kubernetes v1.20.0 and refuses
    charts with a kubeVersion constraint."""
    version = _module_version("helm", "helm.sh/helm/v3")
    client_go = _module_version("helm", "k8s.io/client-go").lstrip("v").split(".")
    major, minor = str(int(client_go[0]) + 1), client_go[1]
    stamps = [
        f"-X helm.sh/helm/v3/internal/version.version={version}",
        "-X helm.sh/helm/v3/internal/version.metadata=",
        "-X helm.sh/helm/v3/internal/version.gitTreeState=clean",
    ]
    for package in ("helm.sh/helm/v3/pkg/lint/rules", "helm.sh/helm/v3/pkg/chartutil"):
        stamps += [f"-X {package}.k8sVersionMajor={major}", f"-X {package}.k8sVersionMinor={minor}"]
    return stamps


def _ldflags(binary: Binary) -> str:
    if binary.module_dir in ("kube", "kubelet"):
        stamps = _VERSION_VARS
    elif binary.module_dir == "helm":
        stamps = _helm_stamps()
    else:
        stamps = []
    return " ".join(["-s", "-w", *stamps])


@dataclass(frozen=True)
class Binary:
    name: str
    module_dir: str
    package: str


BINARIES = (
    Binary("etcd", "etcd", "."),
    Binary("kube-apiserver", "kube", "k8s.io/kubernetes/cmd/kube-apiserver"),
    Binary("kube-scheduler", "kube", "k8s.io/kubernetes/cmd/kube-scheduler"),
    Binary("kube-controller-manager", "kube", "k8s.io/kubernetes/cmd/kube-controller-manager"),
    Binary("kubectl", "kube", "k8s.io/kubernetes/cmd/kubectl"),
    # The real node's kubelet: the same k8s.io/kubernetes version, in a module of its own
    # (its dependencies are not the control plane's, and a shared go.sum would rebuild both).
    Binary("kubelet", "kubelet", "k8s.io/kubernetes/cmd/kubelet"),
    Binary("helm", "helm", "helm.sh/helm/v3/cmd/helm"),
)


class BuildError(RuntimeError):
    """A binary did not build; the message carries Go's output."""


def bin_dir() -> Path:
    override = os.environ.get("QUOTAGATE_BIN_DIR")
    if override:
        return Path(override)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "quotagate" / "bin" / KUBERNETES_VERSION


def _go() -> str:
    go = shutil.which("go")
    if go is None:
        raise BuildError(
            "the Go toolchain (`go`) is not on PATH; it is needed to build the control plane"
        )
    return go


def _fingerprint(binary: Binary, go_version: str) -> str:
    digest = hashlib.sha256()
    digest.update(go_version.encode())
    digest.update(" ".join(FLAGS).encode())
    digest.update(_ldflags(binary).encode())
    digest.update(binary.package.encode())
    module = GO_DIR / binary.module_dir
    for path in sorted(module.iterdir()):
        if path.is_file():
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def ensure_binaries(verbose: bool = True) -> Path:
    """Build whatever is missing or stale; return the directory holding the binaries."""
    out = bin_dir()
    out.mkdir(parents=True, exist_ok=True)
    go = _go()
    go_version = subprocess.run(
        [go, "version"], capture_output=True, text=True, check=True
    ).stdout.strip()
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod"}
    started = time.monotonic()
    built = 0
    for binary in BINARIES:
        target = out / binary.name
        stamp = out / f".{binary.name}.stamp"
        fingerprint = _fingerprint(binary, go_version)
        if target.exists() and stamp.exists() and stamp.read_text() == fingerprint:
            continue
        if verbose:
            print(f"building {binary.name} ({binary.package}) …", flush=True)
        t0 = time.monotonic()
        result = subprocess.run(
            [
                go,
                "build",
                *FLAGS,
                f"-ldflags={_ldflags(binary)}",
                "-o",
                str(target),
                binary.package,
            ],
            cwd=GO_DIR / binary.module_dir,
            env=env,
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            raise BuildError(
                f"building {binary.name} failed (go build {binary.package}, exit {result.returncode}):\n"
                f"{result.stderr.strip()}"
            )
        stamp.write_text(fingerprint)
        built += 1
        if verbose:
            print(f"built {binary.name} in {time.monotonic() - t0:.0f}s", flush=True)
    if verbose:
        what = f"built {built} binaries" if built else "all binaries up to date"
        print(
            f"control plane {KUBERNETES_VERSION}: {what} in {out} ({time.monotonic() - started:.1f}s)"
        )
    return out


def main() -> int:
    try:
        ensure_binaries()
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0
