"""The image's base layer: a Debian root filesystem made by mmdebstrap from Debian's packages
(no base image is pulled from any registry), reproducible with SOURCE_DATE_EPOCH.

mmdebstrap uses Debian's default mirror with the release's updates and security suites;
with SOURCE_DATE_EPOCH set its tar output is the same bytes for the same package versions.
The host's resolv.conf and hostname, which mmdebstrap copies in, are removed (the container
runtime provides both), and so are the device nodes (the runtime mounts /dev).
"""

from __future__ import annotations

import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

SUITE = "bookworm"
PACKAGES = ("python3",)
# Non-root user of the image (as distroless's `nonroot`): the chart runs as non-root.
USER_ID = 65532
USER_NAME = "nonroot"
_DPKG_OPTIONS = (
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
    "path-exclude=/usr/share/locale/*",
    "path-exclude=/usr/share/info/*",
)
_USER_HOOK = (
    f'echo "{USER_NAME}:x:{USER_ID}:{USER_ID}:nonroot:/home/{USER_NAME}:/usr/sbin/nologin" '
    f'>> "$1/etc/passwd" && echo "{USER_NAME}:x:{USER_ID}:" >> "$1/etc/group" && '
    f'install -d -o {USER_ID} -g {USER_ID} -m 0750 "$1/home/{USER_NAME}"'
)


class BaseError(RuntimeError):
    """The base root filesystem could not be made; the message says why."""


@dataclass(frozen=True)
class Packages:
    """The Debian packages installed in a root filesystem, from its dpkg status."""

    versions: dict[str, str]

    def version(self, package: str) -> str:
        try:
            return self.versions[package]
        except KeyError:
            raise BaseError(f"package {package} is not installed in the base") from None

    @property
    def python(self) -> tuple[str, str]:
        """(X.Y, X.Y.Z) of the base's python3: what wheels and bytecode must match."""
        upstream = self.version("python3").split("-")[0]
        return ".".join(upstream.split(".")[:2]), upstream

    @property
    def glibc(self) -> tuple[int, int]:
        """The base's glibc (libc6) version: the newest manylinux wheels it can run."""
        major, minor = self.version("libc6").split("-")[0].split(".")[:2]
        return int(major), int(minor)

    def lines(self) -> list[str]:
        return [f"{name} {version}" for name, version in sorted(self.versions.items())]


def recipe() -> str:
    """Everything that decides the base layer besides Debian's package versions."""
    return "\n".join([SUITE, *PACKAGES, *_DPKG_OPTIONS, _USER_HOOK])


def installed_packages(rootfs_tar: Path) -> Packages:
    """The packages dpkg installed, read from the tar's /var/lib/dpkg/status."""
    with tarfile.open(rootfs_tar) as tar:
        member = tar.extractfile("./var/lib/dpkg/status")
        if member is None:
            raise BaseError(f"{rootfs_tar} has no /var/lib/dpkg/status")
        status = member.read().decode()
    versions = {}
    for paragraph in status.split("\n\n"):
        fields = dict(
            line.split(": ", 1)
            for line in paragraph.splitlines()
            if ": " in line and line[0] != " "
        )
        if fields.get("Status", "").endswith(" installed"):
            versions[fields["Package"]] = fields["Version"]
    return Packages(versions)


def make_rootfs(dest: Path, epoch: int, log: Path) -> None:
    """Write the base root filesystem as a tar file `dest` (about a minute, from the network)."""
    mmdebstrap = shutil.which("mmdebstrap")
    mmtarfilter = shutil.which("mmtarfilter")
    if mmdebstrap is None or mmtarfilter is None:
        raise BaseError(
            "mmdebstrap is not installed (Debian/Ubuntu: apt-get install mmdebstrap); "
            "it makes the image's base from Debian's packages"
        )
    command = [
        mmdebstrap,
        "--mode=auto",  # root here; user namespaces (unshare) for a non-root user
        "--variant=essential",
        f"--include={','.join(PACKAGES)}",
        *(f"--dpkgopt={option}" for option in _DPKG_OPTIONS),
        '--customize-hook=rm -f "$1/etc/resolv.conf" "$1/etc/hostname"',
        f"--customize-hook={_USER_HOOK}",
        SUITE,
        "-",
    ]
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "SOURCE_DATE_EPOCH": str(epoch)}
    partial = dest.with_name(dest.name + ".partial")
    with log.open("wb") as errors, partial.open("wb") as out:
        build = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, env=env)
        assert build.stdout is not None
        strip = subprocess.run(
            [mmtarfilter, "--path-exclude=/dev/*"], stdin=build.stdout, stdout=out, stderr=errors
        )
        build.stdout.close()
        code = build.wait()
    if code != 0 or strip.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:])
        raise BaseError(f"mmdebstrap failed (exit {code}); the end of {log}:\n{tail}")
    partial.replace(dest)
