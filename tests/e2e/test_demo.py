"""`make demo` — the README's first command — runs start to finish on its own control plane."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_demo_runs_and_tells_the_story(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "QUOTAGATE_CLUSTER_DIR": str(tmp_path / ".cluster"),
        "PYTHONUNBUFFERED": "1",
    }
    try:
        result = subprocess.run(
            [sys.executable, "-m", "tools.demo"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        down = subprocess.run(
            [sys.executable, "-m", "tests.cluster", "down"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    assert "STATUS: deployed" in out  # installed with real helm
    # Workloads are named as Kueue names them: job-<name>-<hash of the Job's uid>
    assert re.search(r"job-sample-job-[0-9a-f]{5}\s+main\s+team-a", out)
    assert 'false {"topology.kubernetes.io/zone":"node-a"}' in out
    assert re.search(r"job-big-job-[0-9a-f]{5} is pending: insufficient quota for cpu", out)
    assert "preemptionCost of team-b/batch-1 set to 2" in out
    assert "victim: batch-2 (cost 0), not batch-1 (cost 2)" in out
    assert "Evicted=True (Preempted)" in out
    assert "tear down: make cluster-down" in out
    assert "Traceback" not in out + result.stderr
    assert down.returncode == 0 and "stopped and removed" in down.stdout
    assert not (tmp_path / "bin" / "kubectl").exists()
