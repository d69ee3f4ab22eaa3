"""Kubernetes parts taken from Go modules at build time, as the control plane is built
(tests/cluster/build.py): a project's CRD manifests (and the other manifests a test
needs, such as its webhook configuration) copied out of its Go module as the Go module
proxy serves it, and its operator built from that module (in a module of our own that requires only it).

Everything goes to `~/.cache/quotagate/modules/<name>@<version>/` (or
$QUOTAGATE_MODULES_DIR): `crds/*.yaml`, `files/<path in the module>`, `bin/<binary>`; a
stamp holding the Go version and the entry makes a second run do nothing. Nothing from a
module goes into the repository.

A new part is one more `GoModule` line in `MODULES`; a test asks for it with
`ensure_module(name)`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.cluster.build import BuildError, _go

__all__ = ["MODULES", "GoModule", "ModuleDir", "ensure_module", "main", "modules_dir"]


@dataclass(frozen=True)
class GoModule:
    """One Go module's Kubernetes parts."""

    name: str
    module: str
    version: str
    crds: tuple[str, ...] = ()
    """Directories of the module holding CRD manifests (every *.yaml in them), or single
    CRD files (a path ending in .yaml) where a directory holds other manifests too."""
    files: tuple[str, ...] = ()
    """Other files of the module the tests read (webhook configurations, …)."""
    operator: str | None = None
    """The main package to build (`go install <operator>@<version>`); None: CRDs only."""
    binary: str | None = None
    """The binary's name (default: the last element of `operator`)."""

    @property
    def key(self) -> str:
        return f"{self.name}@{self.version}"

    @property
    def binary_name(self) -> str:
        return self.binary or (self.operator or self.module).rstrip("/").rsplit("/", 1)[-1]


MODULES = (
    # JobSet: the proxy refuses the module's version list, but serves this version (and its
    # go.sum entries); v0.12.0 is the JobSet Kueue (ff69552) and Kubeflow Trainer v2.3.0
    # build against.
    GoModule(
        "jobset",
        "sigs.k8s.io/jobset",
        "v0.12.0",
        crds=("config/components/crd/bases",),
        files=(
            "config/components/webhook/manifests.yaml",
            "config/components/webhook/patches/mutating-patch.yaml",
            "config/components/webhook/patches/validating-patch.yaml",
        ),
        operator="sigs.k8s.io/jobset",
    ),
    # KubeRay: the proxy lists v1.4.0 and v1.5.0 but serves v1.6.2, the newest it serves
    # (Kueue ff69552 builds against v1.7.0, which it does not serve).
    GoModule(
        "kuberay",
        "github.com/ray-project/kuberay/ray-operator",
        "v1.6.2",
        crds=("config/crd/bases",),
        operator="github.com/ray-project/kuberay/ray-operator",
    ),
    # Kubeflow Trainer: v2.3.0 is the version Kueue (ff69552) builds against (TrainJob
    # `runtimePatches`, which v2.0.0 lacks); the proxy lists only v2.0.0 but serves it.
    GoModule(
        "trainer",
        "github.com/kubeflow/trainer/v2",
        "v2.3.0",
        crds=(
            "manifests/base/crds/trainer.kubeflow.org_trainjobs.yaml",
            "manifests/base/crds/trainer.kubeflow.org_trainingruntimes.yaml",
            "manifests/base/crds/trainer.kubeflow.org_clustertrainingruntimes.yaml",
        ),
        files=("manifests/base/webhook/manifests.yaml",),
        operator="github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager",
    ),
    # The MPI operator (MPIJob v2beta1): the proxy refuses the version list, serves v0.8.2
    # (the version Kueue ff69552 builds against).
    GoModule(
        "mpi-operator",
        "github.com/kubeflow/mpi-operator",
        "v0.8.2",
        crds=("manifests/base/kubeflow.org_mpijobs.yaml",),
        operator="github.com/kubeflow/mpi-operator/cmd/mpi-operator",
    ),
    # LeaderWorkerSet: the proxy refuses the version list and v0.10.0's zip (the version
    # Kueue requires), but serves v0.9.0 (built against Kubernetes 1.36).
    GoModule(
        "lws",
        "sigs.k8s.io/lws",
        "v0.9.0",
        crds=("config/crd/bases",),
        files=("charts/lws/templates/webhook/webhook.yaml",),
        operator="sigs.k8s.io/lws/cmd",
        binary="lws-manager",
    ),
)


@dataclass(frozen=True)
class ModuleDir:
    """Where one module's parts are."""

    root: Path
    module: GoModule

    @property
    def crds(self) -> Path:
        return self.root / "crds"

    def file(self, path: str) -> Path:
        return self.root / "files" / path

    @property
    def binary(self) -> Path:
        return self.root / "bin" / self.module.binary_name


def modules_dir() -> Path:
    override = os.environ.get("QUOTAGATE_MODULES_DIR")
    if override:
        return Path(override)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "quotagate" / "modules"


def _run(args: list[str], env: dict[str, str], what: str) -> str:
    result = subprocess.run(args, env=env, capture_output=True, text=True, cwd=modules_dir())
    if result.returncode != 0:
        raise BuildError(f"{what} failed (exit {result.returncode}):\n{result.stderr.strip()}")
    return result.stdout


def ensure_module(name: str, verbose: bool = True) -> ModuleDir:
    """Fetch (and build) the module `name` of `MODULES` unless its parts are cached."""
    module = next((m for m in MODULES if m.name == name), None)
    if module is None:
        raise BuildError(f"no Go module named {name} in tests/cluster/modules.py")
    go = _go()
    go_version = subprocess.run([go, "version"], capture_output=True, text=True, check=True)
    stamp_text = json.dumps([go_version.stdout.strip(), repr(module)])
    out = ModuleDir(modules_dir() / module.key, module)
    stamp = out.root / ".stamp"
    if stamp.exists() and stamp.read_text() == stamp_text:
        return out
    started = time.monotonic()
    modules_dir().mkdir(parents=True, exist_ok=True)
    if out.root.exists():
        shutil.rmtree(out.root)
    out.root.mkdir(parents=True)
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "", "GO111MODULE": "on"}
    if verbose:
        print(f"fetching {module.module}@{module.version} …", flush=True)
    info = json.loads(
        _run(
            [go, "mod", "download", "-json", f"{module.module}@{module.version}"],
            env,
            f"go mod download {module.module}@{module.version}",
        )
    )
    source = Path(info["Dir"])
    out.crds.mkdir()
    for directory in module.crds:
        if directory.endswith(".yaml"):
            found = [source / directory]
        else:
            found = sorted((source / directory).glob("*.yaml"))
        if not found:
            raise BuildError(f"{module.key}: no CRD manifests in {directory}")
        for path in found:
            shutil.copyfile(path, out.crds / path.name)
    for path in module.files:
        target = out.file(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / path, target)
    if module.operator is not None:
        if verbose:
            print(
                f"building {module.binary_name} ({module.operator}@{module.version}) …", flush=True
            )
        _build_operator(go, module, out, env, source)
    stamp.write_text(stamp_text)
    if verbose:
        print(f"{module.key}: ready in {out.root} ({time.monotonic() - started:.1f}s)", flush=True)
    return out


def _build_operator(
    go: str, module: GoModule, out: ModuleDir, env: dict[str, str], source: Path
) -> None:
    """Build the operator in a module of our own that requires only `module` (written in
    the cache, not the repository), so the build list is the module's own requirements.
    Not `go install module@version`: it also asks the proxy for the module's version list,
    which the proxy refuses for some modules (sigs.k8s.io/jobset). Our module declares the
    module's `go` version (so that its dependencies' graph is pruned, as when the module is
    built on its own) and starts from its go.sum (so that the checksums it recorded are
    used: the checksum database does not know every version a dependency names, e.g.
    KubeRay's volcano.sh/apis requiring a k8s.io/gengo/v2 pseudo-version)."""
    work = out.root / "build"
    work.mkdir()
    go_line = next(
        (line for line in (source / "go.mod").read_text().splitlines() if line.startswith("go ")),
        None,
    )
    (work / "go.mod").write_text(
        f"module quotagate.local/modules/{module.name}\n\n"
        + (f"{go_line}\n\n" if go_line else "")
        + f"require {module.module} {module.version}\n"
    )
    if (source / "go.sum").exists():
        (work / "go.sum").write_text((source / "go.sum").read_text())
    (out.root / "bin").mkdir()
    result = subprocess.run(
        [
            go,
            "build",
            "-mod=mod",
            "-trimpath",
            "-ldflags=-s -w",
            "-o",
            str(out.binary),
            module.operator or module.module,
        ],
        env=env,
        cwd=work,
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise BuildError(
            f"building {module.operator}@{module.version} failed (exit {result.returncode}):\n"
            f"{result.stderr.strip()}"
        )


def main(names: list[str] | None = None) -> int:
    started = time.monotonic()
    chosen = [m for m in MODULES if not names or m.name in names]
    try:
        for module in chosen:
            ensure_module(module.name)
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(
        f"Go modules: {', '.join(m.key for m in chosen)} ready in {modules_dir()} "
        f"({time.monotonic() - started:.1f}s)"
    )
    return 0
