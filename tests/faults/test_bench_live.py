"""`python -m tools.bench SCENARIO --live` rides an outage of its API server out, as the controller does,
and reports it: the smoke scenario against two replicas, kube-apiserver killed and
started again during the run by `make bench-compare`'s restarter (tests/bench/compare.py)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from controller.kube.process import run_on_uvloop
from tests.faults.cluster import Replicas
from tools.bench.compare import ApiServerRestarts
from tools.bench.live import run_live
from tools.bench.outages import render_outages
from tools.bench.scenario import SCENARIOS, load

SMOKE = SCENARIOS / "smoke.yaml"


def test_a_live_run_rides_an_apiserver_restart_out(fault_cluster: Any, tmp_path: Path) -> None:
    replicas = Replicas(fault_cluster, [], tmp_path).start()  # every namespace
    progress = io.StringIO()
    try:
        restarts = ApiServerRestarts(fault_cluster.plane, [4.0], progress.write)

        async def run() -> Any:
            return await run_live(
                str(fault_cluster.plane.kubeconfig),
                load(SMOKE),
                progress=progress,
                timeout=180,
                apiserver_cpu=restarts.cpu,
            )

        restarts.start()
        try:
            report = run_on_uvloop(run())
        finally:
            restarts.stop()
        statuses = replicas.stop()
    finally:
        for replica in replicas.all:
            replica.stop()
    print(progress.getvalue()[-1500:])
    assert len(restarts.outages) == 1
    assert report.overuse_events == 0
    assert all(f.admitted == f.count for f in report.classes.values())
    figures = report.extra["api_outages"]
    assert figures["outages"] and figures["outages"][0]["seconds"] is not None
    assert figures["outages"][0]["admission_resumed_after_s"] is not None
    assert figures["watch_relists"] >= 1  # the restarted API server refused the old watches
    assert render_outages(figures)[0].startswith("  API server outages seen by the run: ")
    assert report.apiserver_cpu_s is not None and report.apiserver_cpu_s > 0
    # Summed over both processes: those of the killed one up to the last scrape before the
    # kill (what it wrote in between is not counted), then all of the new one's.
    before_kill, total = restarts._counted, restarts.writes()
    assert before_kill and sum(total.values()) > sum(before_kill.values())
    assert all(total[key] >= count for key, count in before_kill.items())
    assert statuses == {"replica-0": 0, "replica-1": 0}
