"""OCI image layers and archives written deterministically from directories and tar files.

The same inputs give the same bytes: entries in sorted order, owned by root, times clamped
to SOURCE_DATE_EPOCH, permissions normalised (0755 or 0644), gzip without a name or a
timestamp. So an image's digest names its content, and a rebuild from the same inputs is
the same image. Only the standard library is used; the archive is an OCI image layout in a
tar file (`oci-archive`), which containerd (`ctr images import`), podman (`podman load`),
Docker 25+ (`docker load`), skopeo and kind (`kind load image-archive`) read.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

LAYER_MEDIA_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip"
CONFIG_MEDIA_TYPE = "application/vnd.oci.image.config.v1+json"
MANIFEST_MEDIA_TYPE = "application/vnd.oci.image.manifest.v1+json"
INDEX_MEDIA_TYPE = "application/vnd.oci.image.index.v1+json"
# The name containerd and Docker give an imported image; podman and skopeo read the OCI one.
CONTAINERD_NAME = "io.containerd.image.name"
REF_NAME = "org.opencontainers.image.ref.name"
GZIP_LEVEL = 6
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Layer:
    """A gzip-compressed layer tar in `path`, with the digests an image refers to it by."""

    path: Path
    digest: str  # sha256 of the compressed bytes (the blob's name)
    diff_id: str  # sha256 of the uncompressed tar (the image config's rootfs)
    size: int
    unpacked: int  # bytes of the uncompressed tar
    created_by: str  # the image history's line for it

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.path.name,
            "digest": self.digest,
            "diff_id": self.diff_id,
            "size": self.size,
            "unpacked": self.unpacked,
            "created_by": self.created_by,
        }

    @classmethod
    def from_json(cls, directory: Path, data: dict[str, Any]) -> Layer:
        return cls(
            directory / data["file"],
            data["digest"],
            data["diff_id"],
            int(data["size"]),
            int(data["unpacked"]),
            data["created_by"],
        )


class _Hashing(io.RawIOBase):
    """A write-only stream that hashes what passes through it into `target`."""

    def __init__(self, target: IO[bytes]) -> None:
        self.target = target
        self.sha256 = hashlib.sha256()
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        view = memoryview(data)
        self.sha256.update(view)
        self.target.write(view)
        self.size += len(view)
        return len(view)


class _LayerStream(io.RawIOBase):
    """Uncompressed tar bytes in, hashed, then gzip'd and hashed again into a file."""

    def __init__(self, dest: IO[bytes]) -> None:
        self.compressed = _Hashing(dest)
        self.gzip = gzip.GzipFile(
            filename="", mode="wb", compresslevel=GZIP_LEVEL, fileobj=self.compressed, mtime=0
        )
        self.diff = hashlib.sha256()
        self.unpacked = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        view = memoryview(data)
        self.diff.update(view)
        self.unpacked += len(view)
        self.gzip.write(view)
        return len(view)

    def close(self) -> None:
        if not self.closed:
            self.gzip.close()
        super().close()


def _write_layer(dest: Path, created_by: str, fill: Callable[[IO[bytes]], None]) -> Layer:
    """Write the layer whose uncompressed tar `fill` writes to the stream it is given."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(dest.name + ".partial")
    with partial.open("wb") as out:
        stream = _LayerStream(out)
        fill(stream)  # type: ignore[arg-type]
        stream.close()
    partial.replace(dest)
    return Layer(
        dest,
        f"sha256:{stream.compressed.sha256.hexdigest()}",
        f"sha256:{stream.diff.hexdigest()}",
        stream.compressed.size,
        stream.unpacked,
        created_by,
    )


def _normalise(info: tarfile.TarInfo, epoch: int) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mtime = min(int(info.mtime), epoch)
    if info.isdir() or (info.isreg() and info.mode & 0o111):
        info.mode = 0o755
    elif info.issym():
        info.mode = 0o777
    else:
        info.mode = 0o644
    return info


def _entries(root: Path) -> Iterator[Path]:
    """Every path under `root`, parents before children, in a fixed (sorted) order."""
    for directory, dirs, files in os.walk(root):
        dirs.sort()
        here = Path(directory)
        if here != root:
            yield here
        for name in sorted(files):
            yield here / name
        # symlinks to directories are listed in `dirs` but not walked into
        for name in dirs:
            if (here / name).is_symlink():
                yield here / name
        dirs[:] = [d for d in dirs if not (here / d).is_symlink()]


def layer_from_directory(root: Path, dest: Path, epoch: int, created_by: str) -> Layer:
    """A layer holding everything under `root` (as the image's `/`), normalised: owned by
    root, mode 0755 (directories, executables) or 0644, times clamped to `epoch`."""

    def fill(stream: IO[bytes]) -> None:
        with tarfile.open(fileobj=stream, mode="w|", format=tarfile.PAX_FORMAT) as tar:
            for path in _entries(root):
                info = tar.gettarinfo(str(path), arcname=path.relative_to(root).as_posix())
                if not (info.isreg() or info.isdir() or info.issym() or info.islnk()):
                    raise ValueError(f"{path}: only files, directories and links go in a layer")
                _normalise(info, epoch)
                if info.isreg():
                    with path.open("rb") as content:
                        tar.addfile(info, content)
                else:
                    tar.addfile(info)

    return _write_layer(dest, created_by, fill)


def layer_from_tar(source: Path, dest: Path, created_by: str) -> Layer:
    """A layer holding an existing (already reproducible) tar file byte for byte."""

    def fill(stream: IO[bytes]) -> None:
        with source.open("rb") as tar:
            while chunk := tar.read(_CHUNK):
                stream.write(chunk)

    return _write_layer(dest, created_by, fill)


@dataclass(frozen=True)
class ImageSpec:
    """What the image runs and as whom (the OCI config's `config` section)."""

    entrypoint: tuple[str, ...]
    cmd: tuple[str, ...] = ()
    user: str = ""
    env: tuple[str, ...] = ("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",)
    labels: tuple[tuple[str, str], ...] = ()
    working_dir: str = "/"


def _timestamp(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _json(data: Any) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":")).encode()


def _digest(data: bytes) -> str:
    return f"sha256:{hashlib.sha256(data).hexdigest()}"


def image_documents(
    layers: list[Layer], spec: ImageSpec, epoch: int, architecture: str = "amd64"
) -> tuple[bytes, bytes]:
    """The image's config and manifest (JSON, canonical: sorted keys, no spaces)."""
    created = _timestamp(epoch)
    container: dict[str, Any] = {"Env": list(spec.env), "WorkingDir": spec.working_dir}
    if spec.entrypoint:
        container["Entrypoint"] = list(spec.entrypoint)
    if spec.cmd:
        container["Cmd"] = list(spec.cmd)
    if spec.user:
        container["User"] = spec.user
    if spec.labels:
        container["Labels"] = dict(spec.labels)
    config = _json(
        {
            "architecture": architecture,
            "os": "linux",
            "created": created,
            "config": container,
            "rootfs": {"type": "layers", "diff_ids": [layer.diff_id for layer in layers]},
            "history": [{"created": created, "created_by": layer.created_by} for layer in layers],
        }
    )
    manifest = _json(
        {
            "schemaVersion": 2,
            "mediaType": MANIFEST_MEDIA_TYPE,
            "config": {
                "mediaType": CONFIG_MEDIA_TYPE,
                "digest": _digest(config),
                "size": len(config),
            },
            "layers": [
                {"mediaType": LAYER_MEDIA_TYPE, "digest": layer.digest, "size": layer.size}
                for layer in layers
            ],
        }
    )
    return config, manifest


def write_archive(dest: Path, name: str, layers: list[Layer], spec: ImageSpec, epoch: int) -> str:
    """Write the image as an OCI layout in a tar file named `name` (a full reference such
    as localhost/quotagate:0.1.0); return the manifest's digest (the image's ID)."""
    config, manifest = image_documents(layers, spec, epoch)
    manifest_digest = _digest(manifest)
    index = _json(
        {
            "schemaVersion": 2,
            "mediaType": INDEX_MEDIA_TYPE,
            "manifests": [
                {
                    "mediaType": MANIFEST_MEDIA_TYPE,
                    "digest": manifest_digest,
                    "size": len(manifest),
                    "annotations": {CONTAINERD_NAME: name, REF_NAME: name},
                }
            ],
        }
    )
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(dest.name + ".partial")

    def entry(path: str, size: int = 0, directory: bool = False) -> tarfile.TarInfo:
        info = tarfile.TarInfo(path)
        info.size = size
        info.mtime = epoch
        info.type = tarfile.DIRTYPE if directory else tarfile.REGTYPE
        info.mode = 0o755 if directory else 0o644
        return info

    blobs: list[tuple[str, bytes | Path]] = [
        (_digest(config), config),
        (manifest_digest, manifest),
        *((layer.digest, layer.path) for layer in layers),
    ]
    with tarfile.open(partial, "w", format=tarfile.PAX_FORMAT) as tar:
        tar.addfile(entry("blobs", directory=True))
        tar.addfile(entry("blobs/sha256", directory=True))
        for digest, content in sorted(blobs, key=lambda blob: blob[0]):
            path = f"blobs/sha256/{digest.removeprefix('sha256:')}"
            if isinstance(content, bytes):
                tar.addfile(entry(path, len(content)), io.BytesIO(content))
            else:
                with content.open("rb") as blob:
                    tar.addfile(entry(path, content.stat().st_size), blob)
        tar.addfile(entry("index.json", len(index)), io.BytesIO(index))
        layout = _json({"imageLayoutVersion": "1.0.0"})
        tar.addfile(entry("oci-layout", len(layout)), io.BytesIO(layout))
    partial.replace(dest)
    return manifest_digest


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as content:
        while chunk := content.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()
