"""The two small images the real node needs besides quotagate's, from Debian's packages and
packed the same way (image/oci.py), since no registry can be reached:

- the pod sandbox's image: catatonit (a static init for containers) in its pause mode,
  which holds a pod's namespaces until it is told to end, as the `pause` image does;
- busybox (Debian's static build) for the containers of test Jobs and pods: `sleep`,
  `sh` and the other applets in /bin.

Each is read from the host's installed package (tests/cluster/host.py installs it), cached
by the package's version under the image cache, and reproducible like quotagate's.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from image import oci
from image.build import cache_root, source_date_epoch


@dataclass(frozen=True)
class NodeImage:
    name: str  # the full reference pods use
    path: Path  # the OCI archive


def _package_version(package: str) -> str:
    result = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Version}", package], capture_output=True, text=True
    )
    if result.returncode != 0 or not result.stdout:
        raise RuntimeError(f"the Debian package {package} is not installed (make host-packages)")
    return result.stdout


def _upstream(version: str) -> str:
    """1:1.35.0-4+deb12u1+b1 -> 1.35.0"""
    return version.split(":")[-1].split("-")[0]


def _image(
    name: str, package: str, files: dict[str, str], links: dict[str, str], spec: oci.ImageSpec
) -> NodeImage:
    """An image of the host's `files` (image path -> host path) and `links` (path -> target)."""
    version = _package_version(package)
    epoch = source_date_epoch()
    cache = cache_root() / "node"
    slug = name.split("/", 1)[1].replace("/", "-").replace(":", "-")
    target = cache / f"{slug}-{version.replace(':', '_')}-{epoch}.oci.tar"
    if target.exists():
        return NodeImage(name, target)
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as work:
        root = Path(work) / "rootfs"
        for path, source in files.items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, root / path)
        for path, link in links.items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).symlink_to(link)
        layer = oci.layer_from_directory(
            root, Path(work) / "layer.tar.gz", epoch, f"{package} {version} (Debian)"
        )
        oci.write_archive(target, name, [layer], spec, epoch)
    return NodeImage(name, target)


def pause_image() -> NodeImage:
    version = _upstream(_package_version("catatonit"))
    return _image(
        f"localhost/quotagate-pause:catatonit-{version}",
        "catatonit",
        {"catatonit": "/usr/bin/catatonit"},
        {},
        oci.ImageSpec(entrypoint=("/catatonit", "-P"), user="65535:65535"),
    )


def busybox_image() -> NodeImage:
    version = _upstream(_package_version("busybox-static"))
    applets = subprocess.run(
        ["/bin/busybox", "--list"], capture_output=True, text=True, check=True
    ).stdout.split()
    return _image(
        f"localhost/busybox:{version}",
        "busybox-static",
        {"bin/busybox": "/bin/busybox"},
        {f"bin/{applet}": "busybox" for applet in applets if applet != "busybox"},
        oci.ImageSpec(entrypoint=(), cmd=("sh",)),
    )
