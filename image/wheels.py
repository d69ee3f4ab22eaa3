"""The image's Python layers: a virtual environment in /opt/venv holding the pinned
dependencies (constraints.txt) and then quotagate, installed from wheels only.

Wheels are installed with `installer` (PyPA's wheel installer) into a staging directory as
if it were `/`: console scripts point at /opt/venv/bin/python. Bytecode is compiled with
the paths the image will have, as hash-checked .pyc files that carry no timestamp, in a
fresh interpreter with a fixed hash seed: a .pyc's bytes depend on the compiling process
(set constants follow the hash seed, marshal's references follow what else is loaded), so
compiling in the build's own process gave different bytes from one build to the next.
Nothing runs inside the image to do it, so no root and no chroot are needed. Every requirement of every installed distribution is checked against
what is installed, as `pip check` would, before the layer is written.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from importlib.metadata import distributions
from pathlib import Path

from installer import install
from installer.destinations import SchemeDictionaryDestination
from installer.sources import WheelFile
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

VENV = "/opt/venv"
REPO = Path(__file__).resolve().parents[1]
BUILD_CONSTRAINTS = Path(__file__).resolve().parent / "build-constraints.txt"


class WheelError(RuntimeError):
    """A wheel could not be fetched, built or installed; the message says which and why."""


def _pip(*args: str) -> None:
    # The host's pip settings for extra wheel directories would leak in: PyPI only.
    env = {k: v for k, v in os.environ.items() if k not in ("PIP_FIND_LINKS", "PIP_NO_INDEX")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    result = subprocess.run(
        [sys.executable, "-m", "pip", *args], capture_output=True, text=True, env=env
    )
    if result.returncode != 0:
        raise WheelError(f"pip {' '.join(args[:2])} failed:\n{result.stderr.strip()[-3000:]}")


def manylinux_platforms(glibc: tuple[int, int], machine: str = "x86_64") -> list[str]:
    """Every manylinux platform tag a system with this glibc runs, newest first (pip does
    not widen an explicit --platform by itself)."""
    major, newest = glibc
    tags = [f"manylinux_{major}_{minor}_{machine}" for minor in range(newest, 4, -1)]
    legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
    return tags + [f"{name}_{machine}" for minor, name in legacy.items() if minor <= newest]


def download_dependencies(
    constraints: Path, dest: Path, python: str, glibc: tuple[int, int]
) -> list[Path]:
    """The wheels pinned by `constraints` (every one of the closure) for the image's Python
    and glibc, binary only: nothing is compiled for the image."""
    requirements = dest / "requirements.txt"
    dest.mkdir(parents=True, exist_ok=True)
    requirements.write_text(
        "".join(
            line + "\n"
            for line in constraints.read_text().splitlines()
            if line.strip() and not line.startswith("#")
        )
    )
    platforms = [f"--platform={tag}" for tag in manylinux_platforms(glibc)]
    nodot = python.replace(".", "")
    _pip(
        "download",
        "--quiet",
        "--no-deps",
        "--only-binary=:all:",
        *platforms,
        f"--python-version={python}",
        "--implementation=cp",
        f"--abi=cp{nodot}",
        "--abi=abi3",
        "--abi=none",
        "-r",
        str(requirements),
        "-d",
        str(dest),
    )
    wheels = sorted(dest.glob("*.whl"))
    if len(wheels) != len(requirements.read_text().splitlines()):
        raise WheelError(f"expected one wheel per line of {constraints}, got {len(wheels)}")
    return wheels


_NOT_SOURCE = shutil.ignore_patterns(".*", "build", "dist", "*.egg-info", "__pycache__")
"""What a checkout may hold that is not its source: setuptools builds through `build/`, and a
stale `build/lib` (a module since moved or removed) would go into the wheel."""


def build_project_wheel(dest: Path) -> Path:
    """quotagate's own wheel, built with the pinned build backend from a copy of this
    checkout's source (never from its leftovers of earlier builds)."""
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="quotagate-wheel-") as scratch:
        source = Path(scratch) / "src"
        shutil.copytree(REPO, source, ignore=_NOT_SOURCE, symlinks=True)
        _pip(
            "wheel",
            "--quiet",
            "--no-deps",
            f"--build-constraint={BUILD_CONSTRAINTS}",
            "-w",
            str(dest),
            str(source),
        )
    [wheel] = dest.glob("quotagate-*.whl")
    return wheel


def site_packages(python: str) -> str:
    return f"{VENV}/lib/python{python}/site-packages"


def make_venv(staging: Path, python: str, python_full: str) -> None:
    """An empty virtual environment at /opt/venv over the base's /usr/bin/python3 (what
    `python3 -m venv --without-pip` writes)."""
    venv = staging / VENV.lstrip("/")
    (staging / site_packages(python).lstrip("/")).mkdir(parents=True)
    (venv / "bin").mkdir()
    (venv / "pyvenv.cfg").write_text(
        f"home = /usr/bin\ninclude-system-site-packages = false\nversion = {python_full}\n"
    )
    (venv / "bin" / "python").symlink_to(f"/usr/bin/python{python}")
    (venv / "bin" / "python3").symlink_to("python")
    (venv / "bin" / f"python{python}").symlink_to("python")
    (venv / "lib64").symlink_to("lib")


def install_wheels(staging: Path, wheels: list[Path], python: str) -> None:
    """Install `wheels` into the venv under `staging`, with the image's paths."""
    if sys.version_info[:2] != tuple(int(part) for part in python.split(".")):
        raise WheelError(
            f"the image's Python is {python}: its bytecode must be compiled by Python "
            f"{python}, not {sys.version_info.major}.{sys.version_info.minor} "
            f"(make image PYTHON=python{python})"
        )
    site = site_packages(python)
    scheme = {
        "purelib": site,
        "platlib": site,
        "headers": f"{VENV}/include/site/python{python}",
        "scripts": f"{VENV}/bin",
        "data": VENV,
    }
    destination = SchemeDictionaryDestination(
        scheme,
        interpreter=f"{VENV}/bin/python",
        script_kind="posix",
        destdir=str(staging),
    )
    for wheel in wheels:
        with WheelFile.open(wheel) as source:
            install(source, destination, {"INSTALLER": b"quotagate-image\n"})
    _compile(staging / site.lstrip("/"), site)


_COMPILE = """
import compileall, py_compile, sys
ok = compileall.compile_dir(
    sys.argv[1], ddir=sys.argv[2], quiet=1, workers=1,
    invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH,
)
sys.exit(0 if ok else 1)
"""


def _compile(directory: Path, image_path: str) -> None:
    """Every .py under `directory` compiled as the image's `image_path`, the same bytes each
    time (see the module docstring)."""
    result = subprocess.run(
        [sys.executable, "-I", "-c", _COMPILE, str(directory), image_path],
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONHASHSEED": "0"},
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        output = (result.stdout + result.stderr)[-3000:]
        raise WheelError(f"compiling the bytecode failed:\n{output}")


def _environment(python: str, python_full: str) -> dict[str, str]:
    """The environment markers of the image's interpreter."""
    return {
        "implementation_name": "cpython",
        "implementation_version": python_full,
        "os_name": "posix",
        "platform_machine": "x86_64",
        "platform_python_implementation": "CPython",
        "platform_system": "Linux",
        "python_full_version": python_full,
        "python_version": python,
        "sys_platform": "linux",
        "extra": "",
    }


def installed(site: Path) -> dict[str, tuple[str, list[str]]]:
    """The distributions installed in `site`: name -> (version, requirements)."""
    return {
        canonicalize_name(dist.metadata["Name"]): (dist.version, list(dist.requires or []))
        for dist in distributions(path=[str(site)])
    }


def check_requirements(
    dists: dict[str, tuple[str, list[str]]], versions: dict[str, str], python: str, python_full: str
) -> None:
    """Every requirement of `dists` is met by `versions` (name -> installed version) under
    the image's environment markers, as `pip check` would find."""
    environment = _environment(python, python_full)
    problems = []
    for name, (_, requires) in sorted(dists.items()):
        for text in requires:
            requirement = Requirement(text)
            if requirement.marker and not requirement.marker.evaluate(environment):
                continue
            have = versions.get(canonicalize_name(requirement.name))
            if have is None:
                problems.append(f"{name} needs {requirement}, which is not installed")
            elif not requirement.specifier.contains(have, prereleases=True):
                problems.append(f"{name} needs {requirement}, installed {have}")
    if problems:
        raise WheelError("the image's Python packages do not fit:\n  " + "\n  ".join(problems))
