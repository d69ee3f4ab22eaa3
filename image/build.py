"""`make image` (`python -m image`): quotagate's OCI image from Debian's and PyPI's packages.

Three layers, each cached by everything that decides it under ~/.cache/quotagate/image
(or $QUOTAGATE_IMAGE_CACHE), so a rebuild redoes only what changed:

1. base: Debian bookworm's python3 and what it needs, and the non-root user 65532
   (image/debian.py; about a minute from nothing);
2. dependencies: /opt/venv with exactly constraints.txt's wheels (image/wheels.py);
3. quotagate: this checkout's wheel in the same venv.

The image runs `quotagate run` as user 65532. SOURCE_DATE_EPOCH (default DEFAULT_EPOCH)
sets every file's time and the image's date: from the same inputs (Debian's package
versions, the wheels, this checkout, the epoch) the archive is the same bytes.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from image import debian, oci, wheels

REPO = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
REPOSITORY = "localhost/quotagate"
DEFAULT_EPOCH = 1767225600  # 2026-01-01T00:00:00Z
CONSTRAINTS = REPO / "constraints.txt"
_SOURCES = ("api", "controller", "costcontroller")
_KEEP = 3  # cached versions kept of each layer kind, the newest first


def version() -> str:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return str(project["version"])


def cache_root() -> Path:
    override = os.environ.get("QUOTAGATE_IMAGE_CACHE")
    if override:
        return Path(override)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "quotagate" / "image"


def source_date_epoch() -> int:
    return int(os.environ.get("SOURCE_DATE_EPOCH") or DEFAULT_EPOCH)


def _key(*parts: str | bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return digest.hexdigest()[:20]


def _code(*modules: str) -> bytes:
    """The recipe's own code: changing how a layer is made changes its key."""
    return b"".join((HERE / module).read_bytes() for module in sorted(modules))


def checkout_digest() -> str:
    """What goes into quotagate's wheel: the packages' files and the project metadata."""
    digest = hashlib.sha256()
    files = [REPO / "pyproject.toml", REPO / "README.md", wheels.BUILD_CONSTRAINTS]
    for package in _SOURCES:
        files += [
            path
            for path in (REPO / package).rglob("*")
            if path.is_file() and "__pycache__" not in path.parts
        ]
    for path in sorted(files):
        digest.update(str(path.relative_to(REPO)).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


@dataclass(frozen=True)
class Built:
    """A written image archive."""

    path: Path
    name: str  # the full reference it is imported as
    digest: str  # the manifest's digest
    image_id: str  # the config's digest: what a container runtime calls the image's ID
    layers: list[oci.Layer]
    debian: dict[str, str]
    python: dict[str, str]

    @property
    def size(self) -> int:
        return self.path.stat().st_size


class _Progress:
    def __init__(self, say: Callable[[str], None]) -> None:
        self.say = say
        self.started = time.monotonic()
        self.built: list[str] = []
        self.reused: list[str] = []

    @contextlib.contextmanager
    def step(self, what: str) -> Iterator[None]:
        self.say(f"image: {what} …")
        started = time.monotonic()
        yield
        self.say(f"image: {what}: done in {time.monotonic() - started:.1f}s")


def _layer(
    directory: Path,
    label: str,
    progress: _Progress,
    make: Callable[[Path], tuple[oci.Layer, dict[str, Any]]],
) -> tuple[oci.Layer, dict[str, Any]]:
    """The cached layer in `directory`, made by `make(work_dir)` when it is not there."""
    meta = directory / "layer.json"
    if meta.exists():
        data = json.loads(meta.read_text())
        os.utime(directory)  # the most recently used are kept
        progress.reused.append(label)
        return oci.Layer.from_json(directory, data["layer"]), data["extra"]
    work = directory.with_name(directory.name + ".partial")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    with progress.step(f"{label} layer"):
        layer, extra = make(work)
    (work / "layer.json").write_text(json.dumps({"layer": layer.to_json(), "extra": extra}))
    shutil.rmtree(directory, ignore_errors=True)
    work.replace(directory)
    progress.built.append(label)
    return oci.Layer.from_json(directory, layer.to_json()), extra


def _prune(cache: Path, kind: str, keep: set[Path]) -> None:
    entries = sorted(
        (p for p in cache.glob(f"{kind}-*") if not p.name.endswith(".partial")),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    for stale in [p for p in entries if p not in keep][max(0, _KEEP - len(keep)) :]:
        if stale.is_dir():
            shutil.rmtree(stale, ignore_errors=True)
        else:
            stale.unlink(missing_ok=True)


@contextlib.contextmanager
def _locked(cache: Path) -> Iterator[None]:
    """One build at a time per cache (test sessions may start together)."""
    cache.mkdir(parents=True, exist_ok=True)
    with (cache / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def build(out: Path | None = None, say: Callable[[str], None] = print) -> Built:
    """Build (or reuse) the three layers and write the archive to `out` (default: in the
    cache, named by its digest, where a second call finds it)."""
    cache = cache_root()
    epoch = source_date_epoch()
    progress = _Progress(say)
    with _locked(cache):
        base_key = _key("base", _code("debian.py", "oci.py"), debian.recipe(), str(epoch))

        def make_base(work: Path) -> tuple[oci.Layer, dict[str, Any]]:
            rootfs = work / "rootfs.tar"
            debian.make_rootfs(rootfs, epoch, work / "mmdebstrap.log")
            packages = debian.installed_packages(rootfs)
            layer = oci.layer_from_tar(
                rootfs,
                work / "layer.tar.gz",
                f"mmdebstrap {debian.SUITE} --variant=essential --include="
                f"{','.join(debian.PACKAGES)}; user {debian.USER_ID}",
            )
            rootfs.unlink()
            return layer, {"packages": packages.versions}

        base, base_extra = _layer(cache / f"base-{base_key}", "base (Debian)", progress, make_base)
        packages = debian.Packages(base_extra["packages"])
        python, python_full = packages.python

        deps_key = _key("deps", base_key, _code("wheels.py", "oci.py"), CONSTRAINTS.read_bytes())

        def make_deps(work: Path) -> tuple[oci.Layer, dict[str, Any]]:
            found = wheels.download_dependencies(
                CONSTRAINTS, work / "wheels", python, packages.glibc
            )
            staging = work / "staging"
            wheels.make_venv(staging, python, python_full)
            wheels.install_wheels(staging, found, python)
            dists = wheels.installed(staging / wheels.site_packages(python).lstrip("/"))
            versions = {name: version for name, (version, _) in dists.items()}
            wheels.check_requirements(dists, versions, python, python_full)
            layer = oci.layer_from_directory(
                staging,
                work / "layer.tar.gz",
                epoch,
                f"{wheels.VENV}: {len(found)} wheels pinned by constraints.txt",
            )
            shutil.rmtree(staging)
            shutil.rmtree(work / "wheels")
            return layer, {"python": versions}

        deps, deps_extra = _layer(
            cache / f"deps-{deps_key}", "dependencies (PyPI wheels)", progress, make_deps
        )
        app_key = _key("app", deps_key, checkout_digest())

        def make_app(work: Path) -> tuple[oci.Layer, dict[str, Any]]:
            wheel = wheels.build_project_wheel(work / "wheel")
            staging = work / "staging"
            wheels.install_wheels(staging, [wheel], python)
            dists = wheels.installed(staging / wheels.site_packages(python).lstrip("/"))
            versions = {**deps_extra["python"], **{n: v for n, (v, _) in dists.items()}}
            wheels.check_requirements(dists, versions, python, python_full)
            layer = oci.layer_from_directory(
                staging, work / "layer.tar.gz", epoch, f"{wheels.VENV}: {wheel.name}"
            )
            shutil.rmtree(staging)
            shutil.rmtree(work / "wheel")
            return layer, {"python": {n: v for n, (v, _) in dists.items()}}

        app, app_extra = _layer(
            cache / f"app-{app_key}", "quotagate (this checkout)", progress, make_app
        )
        layers = [base, deps, app]
        tag = version()
        name = f"{REPOSITORY}:{tag}"
        spec = oci.ImageSpec(
            entrypoint=(f"{wheels.VENV}/bin/quotagate",),
            cmd=("run",),
            user=f"{debian.USER_ID}:{debian.USER_ID}",
            env=(
                f"PATH={wheels.VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "PYTHONUNBUFFERED=1",
            ),
            labels=(
                ("org.opencontainers.image.title", "quotagate"),
                ("org.opencontainers.image.version", tag),
                ("org.opencontainers.image.licenses", "Apache-2.0"),
            ),
        )
        config, manifest = oci.image_documents(layers, spec, epoch)
        digest = f"sha256:{hashlib.sha256(manifest).hexdigest()}"
        target = out or cache / f"archive-{digest.removeprefix('sha256:')[:20]}.oci.tar"
        if out is not None or not target.exists():
            with progress.step(f"archive {target}"):
                written = oci.write_archive(target, name, layers, spec, epoch)
            assert written == digest, (written, digest)
        for kind, used in (
            ("base", base.path.parent),
            ("deps", deps.path.parent),
            ("app", app.path.parent),
            ("archive", target),
        ):
            _prune(cache, kind, {used})
    built = Built(
        target,
        name,
        digest,
        f"sha256:{hashlib.sha256(config).hexdigest()}",
        layers,
        dict(packages.versions),
        {**deps_extra["python"], **app_extra["python"]},
    )
    _summary(built, progress)
    return built


def _mb(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


def _summary(built: Built, progress: _Progress) -> None:
    labels = ("base", "dependencies", "quotagate")
    parts = ", ".join(
        f"{label} {_mb(layer.size)}" for label, layer in zip(labels, built.layers, strict=True)
    )
    unpacked = sum(layer.unpacked for layer in built.layers)
    progress.say(
        f"image {built.name} {built.digest}: {_mb(built.size)} ({parts}; {_mb(unpacked)} unpacked)"
    )
    reused = f"; reused: {', '.join(progress.reused)}" if progress.reused else ""
    made = ", ".join(progress.built) or "nothing"
    progress.say(
        f"image: {built.path} in {time.monotonic() - progress.started:.1f}s (built: {made}{reused})"
    )


def package_list(built: Built) -> str:
    """What the image holds: every Debian package and Python distribution with its version."""
    lines = [f"# {built.name} {built.digest}"]
    lines += [f"debian {name} {version}" for name, version in sorted(built.debian.items())]
    lines += [f"python {name} {version}" for name, version in sorted(built.python.items())]
    return "\n".join(lines) + "\n"


def load(built: Built, say: Callable[[str], None] = print) -> bool:
    """Load the image into a local podman or Docker (25 or newer) that answers; False when
    there is none."""
    for tool in ("podman", "docker"):
        path = shutil.which(tool)
        if path is None:
            continue
        if subprocess.run([path, "info"], capture_output=True, timeout=30).returncode != 0:
            say(f"image: {tool} is installed but does not answer (`{tool} info` failed)")
            continue
        say(f"image: {tool} load -i {built.path} …")
        result = subprocess.run(
            [path, "load", "-i", str(built.path)], capture_output=True, text=True
        )
        if result.returncode != 0:
            raise LoadError(f"{tool} load failed: {result.stderr.strip()}")
        say(f"image: loaded into {tool} as {built.name}")
        return True
    say(
        "image: not loaded (no local podman or docker answers): push it with skopeo or load "
        "it into kind, as the README's 'Install on a cluster' shows"
    )
    return False


class LoadError(RuntimeError):
    """The local runtime refused the image."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m image", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "dist", help="directory (default dist/)")
    parser.add_argument("--no-load", action="store_true", help="do not load it into podman/docker")
    args = parser.parse_args(argv)
    target = args.out / f"quotagate-{version()}.oci.tar"
    try:
        built = build(target)
    except (debian.BaseError, wheels.WheelError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    listing = target.with_name(f"quotagate-{version()}.packages.txt")
    listing.write_text(package_list(built))
    print(
        f"image: {listing}: {len(built.debian)} Debian packages, {len(built.python)} Python distributions"
    )
    if not args.no_load:
        try:
            load(built)
        except LoadError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    return 0
