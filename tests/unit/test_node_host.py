"""The real node's confinement (tests/cluster/node_host.py): what its mount namespace
redirects and fakes, and the record a later session ends a killed one's node by."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from tests.cluster import node_host


def test_the_node_runs_in_its_own_mount_namespace_with_the_host_paths_redirected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    current = int(Path("/proc/sys/kernel/panic").read_text())
    monkeypatch.setattr(
        node_host, "KERNEL_DEFAULTS", {"kernel/panic": current, "vm/panic_on_oom": 12345}
    )
    command = node_host.confine(tmp_path, ["/usr/bin/containerd", "--config", "c.toml"])
    assert command[:5] == ["unshare", "--mount", "--propagation", "private", "--"]
    lines = command[-1].splitlines()
    mounts = [shlex.split(line) for line in lines if line.startswith("mount")]
    for path in node_host.REDIRECTED:
        assert ["mount", "--bind", str(node_host.redirected(tmp_path, path)), path] in mounts
    # Only a setting that differs from what the kubelet wants is faked, with its value.
    fake = tmp_path / "kernel" / "vm.panic_on_oom"
    assert ["mount", "--bind", str(fake), "/proc/sys/vm/panic_on_oom"] in mounts
    assert fake.read_text() == "12345\n"
    assert not any("kernel/panic" in " ".join(m) for m in mounts)
    assert shlex.split(lines[-1]) == ["exec", "/usr/bin/containerd", "--config", "c.toml"]


def test_the_footprint_record_survives_the_session_that_wrote_it(tmp_path: Path) -> None:
    footprint = node_host.Footprint(
        "/quotagate-real-node-3", "/tmp/quotagate-cp-x/real-node", "mnt:[4026532001]"
    )
    footprint.save(tmp_path / "3.json")
    assert node_host.Footprint.load(tmp_path / "3.json") == footprint
    assert node_host.Footprint.load(tmp_path / "missing.json") is None
    (tmp_path / "bad.json").write_text("{")
    assert node_host.Footprint.load(tmp_path / "bad.json") is None
