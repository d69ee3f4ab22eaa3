"""The product as it ships: quotagate's wheel, built as `make image` builds it, holds the
controller, the cost controller and the kubectl plugin (with the API types they share) and
nothing else; installed into an empty virtual environment with only the dependencies it
declares, every one of its modules imports, and every third-party module they import is a
declared dependency (not one that happens to come with another).

The environment with the dependencies is cached in ~/.cache/quotagate/wheel-check/ by the
hash of what decides its content (the wheel's declared requirements, constraints.txt and
the Python version); quotagate's wheel is installed into it afresh on every run.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from image import wheels

REPO = Path(__file__).resolve().parents[2]
PRODUCT = ("api", "controller", "costcontroller")
CACHE = Path.home() / ".cache" / "quotagate" / "wheel-check"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return wheels.build_project_wheel(tmp_path_factory.mktemp("wheel"))


def _names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def _requirements(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        [metadata] = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        text = archive.read(metadata).decode()
    return sorted(line for line in text.splitlines() if line.startswith("Requires-Dist:"))


def test_the_wheel_holds_the_product_packages_and_nothing_else(wheel: Path) -> None:
    names = _names(wheel)
    tops = {name.split("/", 1)[0] for name in names}
    assert tops == {*PRODUCT, "quotagate-0.1.0.dist-info"}, tops
    assert not [n for n in names if "/bench/" in n or n.startswith(("tools/", "tests/"))]
    shipped = {n for n in names if n.endswith(".py")}
    sources = {
        str(path.relative_to(REPO))
        for package in PRODUCT
        for path in (REPO / package).rglob("*.py")
        if "__pycache__" not in path.parts
    }
    assert shipped == sources, (sorted(shipped - sources), sorted(sources - shipped))
    data = {n for n in names if not n.endswith(".py") and not n.startswith("quotagate-")}
    assert data == {str(p.relative_to(REPO)) for p in (REPO / "api" / "schemas").glob("*.json")}
    with zipfile.ZipFile(wheel) as archive:
        [entry_points] = [n for n in names if n.endswith("entry_points.txt")]
        scripts = archive.read(entry_points).decode()
    assert "quotagate = controller.cli:main" in scripts
    assert "kubectl-quotagate = controller.kubectl.plugin:main" in scripts


@pytest.fixture(scope="module")
def installed(wheel: Path) -> Iterator[Path]:
    """A virtual environment with the wheel's declared dependencies (pinned by
    constraints.txt) and the wheel itself."""
    key = hashlib.sha256(
        json.dumps(
            [
                _requirements(wheel),
                (REPO / "constraints.txt").read_text(),
                sys.version_info[:2],
            ]
        ).encode()
    ).hexdigest()[:16]
    venv = CACHE / key
    python = venv / "bin" / "python"
    if not (venv / ".complete").exists():
        shutil.rmtree(venv, ignore_errors=True)
        venv.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        _pip(python, "-c", str(REPO / "constraints.txt"), str(wheel))
        (venv / ".complete").touch()
    _pip(python, "--no-deps", "--force-reinstall", str(wheel))
    yield python


def _pip(python: Path, *args: str) -> None:
    result = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-3000:]


# Run in the clean environment, from an empty directory (the checkout is not on sys.path):
# import every module of the installed product, then name every third-party module the
# product's code imports (at any depth, lazily or not) that no declared requirement provides.
CHECK = r"""
import ast, importlib, importlib.metadata as md, json, pathlib, re, sys
top = set(sys.argv[1:])
dist = md.distribution("quotagate")
files = [f for f in dist.files if f.suffix == ".py" and f.parts[0] in top]
modules = []
for f in files:
    parts = list(f.with_suffix("").parts)
    if parts[-1] == "__main__":
        continue
    if parts[-1] == "__init__":
        parts.pop()
    modules.append(".".join(parts))
failed = {}
for name in sorted(modules):
    try:
        importlib.import_module(name)
    except Exception as exc:
        failed[name] = f"{type(exc).__name__}: {exc}"
declared = {re.split(r"[ ;<>=!~\[]", r, maxsplit=1)[0].lower().replace("_", "-")
            for r in dist.requires or []}
provides = md.packages_distributions()
undeclared = {}
for f in files:
    tree = ast.parse(pathlib.Path(f.locate()).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            root = name.split(".")[0]
            if root in top or root in sys.stdlib_module_names or root == "__future__":
                continue
            owners = {d.lower().replace("_", "-") for d in provides.get(root, [])}
            if not owners & declared:
                undeclared.setdefault(root, []).append(str(f))
print(json.dumps({"modules": len(modules), "failed": failed, "undeclared": undeclared}))
"""


def test_every_product_module_imports_from_a_clean_install(installed: Path, tmp_path: Path) -> None:
    result = subprocess.run(
        [str(installed), "-I", "-c", CHECK, *PRODUCT],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout)
    assert found["modules"] > 150, found["modules"]
    assert found["failed"] == {}
    assert found["undeclared"] == {}


def test_the_console_scripts_run_from_a_clean_install(installed: Path, tmp_path: Path) -> None:
    for script in ("quotagate", "kubectl-quotagate"):
        result = subprocess.run(
            [str(installed.parent / script), "--help"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, (script, result.stderr[-2000:])
        assert "usage:" in result.stdout
