"""The image's recipe (image/): pinned inputs, and layers and archives that are the same
bytes from the same inputs (issue 44)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from image import debian, oci, wheels

REPO = Path(__file__).resolve().parents[2]
EPOCH = 1767225600


def test_the_constraints_pin_every_requirement_within_its_range() -> None:
    pins = {}
    for line in (REPO / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[name.lower().replace("_", "-")] = version
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    for text in project["dependencies"]:
        requirement = Requirement(text.split("#")[0].strip())
        name = requirement.name.lower().replace("_", "-")
        assert name in pins, f"{name} is not pinned in constraints.txt"
        assert requirement.specifier.contains(pins[name]), (name, pins[name])


def test_the_build_backend_is_pinned() -> None:
    lines = [
        line
        for line in wheels.BUILD_CONSTRAINTS.read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert lines and all("==" in line for line in lines), lines


def _tree(root: Path, umask: int, mtime: int) -> Path:
    old = os.umask(umask)
    try:
        (root / "opt" / "venv" / "bin").mkdir(parents=True)
        (root / "opt" / "venv" / "bin" / "tool").write_text("#!/bin/sh\n")
        (root / "opt" / "venv" / "bin" / "tool").chmod(0o777 & ~umask)
        (root / "opt" / "venv" / "data.txt").write_text("data\n")
        os.link(root / "opt" / "venv" / "data.txt", root / "opt" / "venv" / "same.txt")
        (root / "opt" / "venv" / "bin" / "python").symlink_to("/usr/bin/python3.11")
        (root / "opt" / "venv" / "lib64").symlink_to("lib")
        (root / "opt" / "venv" / "lib").mkdir()
    finally:
        os.umask(old)
    for path in [root, *root.rglob("*")]:
        os.utime(path, (mtime, mtime), follow_symlinks=False)
    return root


def _members(layer: oci.Layer) -> list[tarfile.TarInfo]:
    with tarfile.open(layer.path) as tar:
        return tar.getmembers()


def test_a_directory_layer_is_the_same_bytes_whatever_the_umask_and_file_times(
    tmp_path: Path,
) -> None:
    one = _tree(tmp_path / "one", 0o022, 1_800_000_000)
    two = _tree(tmp_path / "two", 0o077, 1_900_000_000)
    first = oci.layer_from_directory(one, tmp_path / "1.tar.gz", EPOCH, "test")
    second = oci.layer_from_directory(two, tmp_path / "2.tar.gz", EPOCH, "test")
    assert (first.digest, first.diff_id, first.size) == (
        second.digest,
        second.diff_id,
        second.size,
    )
    assert first.path.read_bytes() == second.path.read_bytes()
    members = {m.name: m for m in _members(first)}
    assert list(members) == [
        "opt",
        "opt/venv",
        "opt/venv/data.txt",
        "opt/venv/same.txt",
        "opt/venv/lib64",
        "opt/venv/bin",
        "opt/venv/bin/python",
        "opt/venv/bin/tool",
        "opt/venv/lib",
    ]
    assert all(m.uid == 0 and m.gid == 0 and m.mtime == EPOCH for m in members.values())
    assert members["opt/venv/bin/tool"].mode == 0o755
    assert members["opt/venv/data.txt"].mode == 0o644
    assert members["opt/venv/same.txt"].islnk()
    assert members["opt/venv/bin/python"].linkname == "/usr/bin/python3.11"


def test_a_layer_refuses_what_a_layer_cannot_hold(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    os.mkfifo(root / "fifo")
    with pytest.raises(ValueError, match="fifo: only files, directories and links"):
        oci.layer_from_directory(root, tmp_path / "layer.tar.gz", EPOCH, "test")


def test_the_archive_is_an_oci_layout_naming_the_image_and_is_reproducible(
    tmp_path: Path,
) -> None:
    layer = oci.layer_from_directory(
        _tree(tmp_path / "root", 0o022, 1_800_000_000), tmp_path / "l.tar.gz", EPOCH, "venv"
    )
    spec = oci.ImageSpec(entrypoint=("/opt/venv/bin/tool",), cmd=("run",), user="65532:65532")
    digest = oci.write_archive(tmp_path / "a.tar", "localhost/thing:1.0", [layer], spec, EPOCH)
    again = oci.write_archive(tmp_path / "b.tar", "localhost/thing:1.0", [layer], spec, EPOCH)
    assert digest == again
    assert (tmp_path / "a.tar").read_bytes() == (tmp_path / "b.tar").read_bytes()
    with tarfile.open(tmp_path / "a.tar") as tar:
        files = {m.name: tar.extractfile(m) for m in tar.getmembers() if m.isfile()}
        content = {name: f.read() for name, f in files.items() if f is not None}
    assert json.loads(content["oci-layout"]) == {"imageLayoutVersion": "1.0.0"}
    [entry] = json.loads(content["index.json"])["manifests"]
    assert entry["digest"] == digest
    assert entry["annotations"] == {
        oci.CONTAINERD_NAME: "localhost/thing:1.0",
        oci.REF_NAME: "localhost/thing:1.0",
    }
    manifest = json.loads(content[f"blobs/sha256/{digest.removeprefix('sha256:')}"])
    config_blob = content[f"blobs/sha256/{manifest['config']['digest'].removeprefix('sha256:')}"]
    config = json.loads(config_blob)
    assert config["config"] == {
        "Entrypoint": ["/opt/venv/bin/tool"],
        "Cmd": ["run"],
        "User": "65532:65532",
        "Env": list(spec.env),
        "WorkingDir": "/",
    }
    assert config["created"] == "2026-01-01T00:00:00Z"
    assert config["rootfs"] == {"type": "layers", "diff_ids": [layer.diff_id]}
    [described] = manifest["layers"]
    assert described == {
        "mediaType": oci.LAYER_MEDIA_TYPE,
        "digest": layer.digest,
        "size": layer.size,
    }
    assert (
        content[f"blobs/sha256/{layer.digest.removeprefix('sha256:')}"] == layer.path.read_bytes()
    )


def _rootfs_with_status(path: Path, status: str) -> Path:
    with tarfile.open(path, "w") as tar:
        data = status.encode()
        info = tarfile.TarInfo("./var/lib/dpkg/status")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return path


def test_the_bases_packages_give_the_python_and_glibc_the_wheels_must_fit(
    tmp_path: Path,
) -> None:
    status = (
        "Package: libc6\nStatus: install ok installed\nVersion: 2.36-9+deb12u14\n"
        "Description: GNU C Library\n multi-line description\n\n"
        "Package: python3\nStatus: install ok installed\nVersion: 3.11.2-1+b1\n\n"
        "Package: removed-thing\nStatus: deinstall ok config-files\nVersion: 1.0\n"
    )
    packages = debian.installed_packages(_rootfs_with_status(tmp_path / "r.tar", status))
    assert packages.versions == {"libc6": "2.36-9+deb12u14", "python3": "3.11.2-1+b1"}
    assert packages.python == ("3.11", "3.11.2")
    assert packages.glibc == (2, 36)
    with pytest.raises(debian.BaseError, match="package zlib1g is not installed"):
        packages.version("zlib1g")


def test_the_wheels_platforms_are_every_manylinux_the_bases_glibc_runs() -> None:
    platforms = wheels.manylinux_platforms((2, 36))
    assert platforms[0] == "manylinux_2_36_x86_64"
    assert "manylinux_2_37_x86_64" not in platforms
    for tag in (
        "manylinux_2_17_x86_64",
        "manylinux_2_5_x86_64",
        "manylinux2014_x86_64",
        "manylinux1_x86_64",
    ):
        assert tag in platforms
    assert "manylinux2014_x86_64" not in wheels.manylinux_platforms((2, 12))


def test_a_requirement_the_installed_versions_do_not_meet_is_reported() -> None:
    dists = {
        "quotagate": ("0.1.0", ["kopf>=1.38,<2", "tomli; python_version < '3.11'", "yarl>=1"]),
        "kopf": ("1.45.2", []),
    }
    wheels.check_requirements(
        dists, {"quotagate": "0.1.0", "kopf": "1.45.2", "yarl": "1.25.1"}, "3.11", "3.11.2"
    )
    with pytest.raises(wheels.WheelError) as refused:
        wheels.check_requirements(dists, {"kopf": "2.0.0"}, "3.11", "3.11.2")
    message = str(refused.value)
    assert "quotagate needs kopf<2,>=1.38, installed 2.0.0" in message
    assert "quotagate needs yarl>=1, which is not installed" in message
    assert "tomli" not in message  # its marker is false for Python 3.11


def test_bytecode_is_the_same_bytes_whatever_process_builds_the_image(tmp_path: Path) -> None:
    """marshal writes a string as interned or not by what the compiling process interned
    before (and a set constant's order follows the hash seed): compiled in the build's own
    process, two builds of the same wheels differed. The image's bytecode is compiled in a
    fresh interpreter with a fixed seed."""
    source = 'def unescape(s):\n    return s.replace("~1", "/").replace("~0", "~")\n'
    pycs = []
    for seed, before in (("1", "pass"), ("2", "import sys; sys.intern('~')")):
        directory = tmp_path / f"site-{seed}"
        directory.mkdir()
        (directory / "mod.py").write_text(source)
        code = (
            f"{before}\nfrom pathlib import Path\nfrom image import wheels\n"
            f"wheels._compile(Path({str(directory)!r}), '/opt/venv/lib/python3.11/site-packages')"
        )
        subprocess.run(
            [sys.executable, "-c", code],
            check=True,
            cwd=REPO,
            env={**os.environ, "PYTHONHASHSEED": seed},
        )
        [pyc] = (directory / "__pycache__").glob("mod.*.pyc")
        pycs.append(pyc.read_bytes())
    assert pycs[0] == pycs[1]
    # hash-checked: the header carries the source's hash, not its time
    assert int.from_bytes(pycs[0][4:8], "little") == 0b11
