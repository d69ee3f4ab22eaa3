"""The Debian packages `make image` and the real node need, installed when missing.

`python -m tests.cluster host-packages [--for image|node]` checks them with dpkg-query
(a few milliseconds when all are there) and installs the missing ones with apt-get as
root; elsewhere it names them and exits 1.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

# mmdebstrap makes the image's base from Debian's packages (image/debian.py).
IMAGE = ("mmdebstrap",)
# The real node (tests/cluster/kubelet.py): the runtime, the pod network, and the packages
# its sandbox (catatonit) and test containers (busybox) come from.
NODE = (
    "containerd",
    "runc",
    "containernetworking-plugins",
    "nftables",
    "catatonit",
    "busybox-static",
)
FOR = {"image": IMAGE, "node": IMAGE + NODE}


def missing(packages: tuple[str, ...]) -> list[str]:
    if shutil.which("dpkg-query") is None:
        return list(packages)
    result = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Package} ${db:Status-Status}\n", *packages],
        capture_output=True,
        text=True,
    )
    installed = {
        line.split()[0] for line in result.stdout.splitlines() if line.endswith(" installed")
    }
    return [package for package in packages if package not in installed]


def ensure(packages: tuple[str, ...]) -> int:
    absent = missing(packages)
    if not absent:
        print(f"host packages: {len(packages)} present ({', '.join(packages)})")
        return 0
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        print(
            f"error: missing Debian packages: {' '.join(absent)} "
            f"(install them: apt-get install {' '.join(absent)})",
            file=sys.stderr,
        )
        return 1
    started = time.monotonic()
    print(f"host packages: installing {' '.join(absent)} …", flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (
        ["apt-get", "update", "-q"],
        ["apt-get", "install", "-y", "-q", "--no-install-recommends", *absent],
    ):
        result = subprocess.run(command, capture_output=True, text=True, env=env)
        if result.returncode != 0:
            print(f"error: {' '.join(command)} failed:\n{result.stderr.strip()}", file=sys.stderr)
            return 1
    still = missing(packages)
    if still:
        print(f"error: still missing after apt-get: {' '.join(still)}", file=sys.stderr)
        return 1
    print(f"host packages: installed {len(absent)} in {time.monotonic() - started:.0f}s")
    return 0
