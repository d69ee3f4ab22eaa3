"""How fast quotagate recovers when its API server comes back: from kube-apiserver's return
(ready again after a kill -9 and a start with the same command line) to the controller's
Workload informer having listed every Workload again, and to the first Workload admitted
after it, at 1,000 and at 15,000 Workloads.

    .venv/bin/python -m tests.bench.bench_recovery [--workloads 1000 15000]
        [--down 0 15] [--admitted 200]

For each size: a fresh local control plane (etcd + kube-apiserver, tests/cluster), one
`quotagate run` (leader election on, its default lease: 15 s, renewal deadline 10 s), one
ClusterQueue of `--admitted` cpu and that many Workloads of 1 cpu each holding it, the rest
of `--workloads` pending. Then for each `--down` (seconds kube-apiserver stays down after
the kill; 0: started again at once): the restart, and as soon as kube-apiserver is ready,
10 of the admitted Workloads are marked Finished (their job side); it prints how long
kube-apiserver was down, when those writes were accepted (a restarted kube-apiserver
answers 429 while it reads its storage again), when the controller had listed the
Workloads again (its log's
`listed … workloads`), whether its term had ended meanwhile (an outage longer than the
renewal deadline: the next term reads everything afresh) and when the first of the pending
Workloads was admitted, all counted from kube-apiserver's return. Figures, not
assertions; the pytest function checks how a controller's log is read.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from kubernetes import client, config, watch

from api.workload_status import has_quota_reservation
from controller.kube.client import WORKLOADS, Api, make_api_client, retrying
from tests.cluster.controlplane import ControlPlane, free_port
from tests.cluster.faults import Faults
from tests.cluster.fixtures import install_crds, wait_for
from tests.integration.kueue import (
    GROUP,
    SYSTEM_NAMESPACE,
    VERSION,
    ControllerProcess,
    Kueue,
    cluster_queue,
    flavor,
    local_queue,
    workload,
)
from tools.bench.kueue_clients import runner_finish

NAMESPACE = "recovery"
FINISHED_AT_RETURN = 10


@dataclass
class Recovery:
    """One restart, in seconds from kube-apiserver's return (None: not seen)."""

    workloads: int
    down: float  # how long kube-apiserver was not serving
    finished: float  # the job side's Finished writes were all accepted
    relisted: float | None  # the controller's Workload informer listed them all again
    term_began: float | None  # a new term's first read was done (the old one had ended)
    first_admission: float | None
    load: float  # the host's 1-minute load average then

    def row(self) -> str:
        def cell(value: float | None) -> str:
            return "-" if value is None else f"{value:.2f} s"

        return (
            f"{self.workloads:>9}  {self.down:>7.1f} s  {cell(self.finished):>10}  "
            f"{cell(self.relisted):>10}  {cell(self.term_began):>10}  "
            f"{cell(self.first_admission):>15}  {self.load:>5.1f}"
        )


HEADER = (
    f"{'WORKLOADS':>9}  {'DOWN':>9}  {'FINISHED':>10}  {'RELISTED':>10}  {'NEW TERM':>10}  "
    f"{'FIRST ADMISSION':>15}  {'LOAD':>5}"
)


def log_times(log: str, since: float) -> tuple[float | None, float | None]:
    """From a controller's JSON log: the first complete Workload list and the first new
    term's read after `since` (Unix time), as seconds after it."""
    relisted = term = None
    for line in log.splitlines():
        if not line.startswith("{"):
            continue
        entry = json.loads(line)
        at = datetime.fromisoformat(entry["ts"].replace("Z", "+00:00")).timestamp()
        if at < since:
            continue
        message = str(entry.get("msg", ""))
        if relisted is None and message.startswith("listed ") and " workloads in " in message:
            relisted = at - since
        if term is None and message.startswith("term began: "):
            term = at - since
    return relisted, term


async def create(kubeconfig: str, count: int) -> None:
    api_client = await make_api_client(kubeconfig, pool_size=40)
    api = Api(api_client)
    gate = asyncio.Semaphore(32)
    path = Api.path(WORKLOADS, None, NAMESPACE)

    async def one(n: int) -> None:
        async with gate:
            body = workload(NAMESPACE, f"w{n}", "lq")
            await retrying(lambda: api.request("POST", path, body))

    try:
        await asyncio.gather(*(one(n) for n in range(count)))
    finally:
        await api_client.close()


class Cluster:
    """A control plane, quotagate, and `workloads` Workloads of which `admitted` hold quota."""

    def __init__(self, workloads: int, admitted: int, workdir: Path) -> None:
        self.workloads, self.admitted = workloads, admitted
        self.plane = ControlPlane().start()
        self.faults = Faults(self.plane)
        self.api_client = config.new_client_from_config(str(self.plane.kubeconfig))
        install_crds(self.api_client)
        core = client.CoreV1Api(self.api_client)
        for ns in (SYSTEM_NAMESPACE, NAMESPACE):
            core.create_namespace({"metadata": {"name": ns}})
        self.kueue = Kueue(self.api_client)
        self.kueue.apply(
            flavor("rf"),
            cluster_queue("cq", {"rf": {"cpu": admitted}}),
            local_queue(NAMESPACE, "lq", "cq"),
        )
        self.controller = ControllerProcess(
            str(self.plane.kubeconfig),
            workdir,
            f"controller-{workloads}",
            "recovery",
            ["--metrics-port", str(free_port())],
        ).start()
        wait_for(self.controller.is_leader, timeout=60, what="the controller to lead")
        started = time.monotonic()
        asyncio.run(create(str(self.plane.kubeconfig), workloads))
        print(f"  {workloads} Workloads created in {time.monotonic() - started:.1f} s", flush=True)
        self.wait_admitted()

    def wait_admitted(self) -> None:
        admitted = self.admitted
        wait_for(
            lambda: len(self.holding()) >= admitted,
            timeout=600,
            interval=2,
            what=f"{admitted} Workloads admitted",
        )

    def listing(self) -> tuple[list[dict[str, Any]], str]:
        found = _answered(
            lambda: self.kueue.custom.list_namespaced_custom_object(
                GROUP, VERSION, NAMESPACE, "workloads"
            )
        )
        return found["items"], found["metadata"]["resourceVersion"]

    def holding(self) -> list[dict[str, Any]]:
        return [w for w in self.listing()[0] if has_quota_reservation(w) and not _finished(w)]

    def restart(self, down: float) -> Recovery:
        pending = {w["metadata"]["name"] for w in self.listing()[0] if not has_quota_reservation(w)}
        outage = self.faults.restart("kube-apiserver", down_seconds=down)
        back = time.time() - (time.monotonic() - outage.ready)  # its return, as Unix time
        first: list[float] = []
        ready = threading.Event()
        watcher = threading.Thread(
            target=self._first_admission, args=(pending, first, ready), daemon=True
        )
        watcher.start()
        ready.wait(60)
        for wl in self.holding()[:FINISHED_AT_RETURN]:  # their job side finishes them
            write = runner_finish(wl, time.time())
            _answered(
                lambda wl=wl, write=write: self.kueue.custom.patch_namespaced_custom_object_status(
                    GROUP,
                    VERSION,
                    NAMESPACE,
                    "workloads",
                    wl["metadata"]["name"],
                    write.body,
                    field_manager=write.field_manager,
                    force=write.force,
                    _content_type="application/apply-patch+yaml",
                )
            )
        finished = time.time() - back
        watcher.join(300)
        time.sleep(1)  # the log lines of the relist are written by now
        relisted, term = log_times(self.controller.log(), back)
        return Recovery(
            self.workloads,
            outage.seconds,
            finished,
            relisted,
            term,
            first[0] - back if first else None,
            os.getloadavg()[0],
        )

    def _first_admission(
        self, pending: set[str], first: list[float], ready: threading.Event
    ) -> None:
        """The time the first of `pending` is seen holding quota, on a watch (listed again
        when it fails: a restarted kube-apiserver refuses some requests at first)."""
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            items, version = self.listing()
            ready.set()
            if any(w["metadata"]["name"] in pending and has_quota_reservation(w) for w in items):
                first.append(time.time())
                return
            stream = watch.Watch()
            try:
                for event in stream.stream(
                    self.kueue.custom.list_namespaced_custom_object,
                    GROUP,
                    VERSION,
                    NAMESPACE,
                    "workloads",
                    resource_version=version,
                    timeout_seconds=60,
                ):
                    wl = event["object"]
                    if wl["metadata"]["name"] in pending and has_quota_reservation(wl):
                        first.append(time.time())
                        stream.stop()
                        return
            except Exception:  # refused or broken: list again
                time.sleep(0.2)

    def stop(self) -> None:
        self.controller.stop()
        self.api_client.close()
        self.plane.stop()


def _answered(call: Any, timeout: float = 300) -> Any:
    """`call()`, tried again while kube-apiserver is not serving yet: a restarted one
    answers 429 (\"storage is (re)initializing\") while it reads the Workloads again."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return call()
        except Exception as exc:  # ApiException, urllib3's connection errors
            status = getattr(exc, "status", None)
            if (status is not None and status not in (429, 500, 503, 504)) or (
                time.monotonic() > deadline
            ):
                raise
            time.sleep(0.2)


def _finished(wl: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Finished" and c.get("status") == "True"
        for c in (wl.get("status") or {}).get("conditions") or ()
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", type=int, nargs="+", default=[1000, 15000])
    parser.add_argument("--down", type=float, nargs="+", default=[0.0, 15.0])
    parser.add_argument("--admitted", type=int, default=200)
    args = parser.parse_args(argv)
    results: list[Recovery] = []
    workdir = Path(tempfile.mkdtemp(prefix="quotagate-recovery-"))
    for size in args.workloads:
        print(f"{size} Workloads: starting a control plane and quotagate", flush=True)
        cluster = Cluster(size, args.admitted, workdir)
        try:
            for down in args.down:
                results.append(cluster.restart(down))
                print(f"{HEADER}\n{results[-1].row()}", flush=True)
                cluster.wait_admitted()  # the Workloads finished at its return are replaced
        finally:
            cluster.stop()
    print(
        "\nkube-apiserver killed (-9) and started again; seconds from its return to the job "
        f"side's Finished writes of {FINISHED_AT_RETURN} admitted Workloads accepted, to "
        "quotagate's Workload informer listed again, to a new term's first read, and to the "
        "first pending Workload admitted; the host's load average then:"
    )
    print(HEADER)
    for result in results:
        print(result.row())
    print(f"controller logs: {workdir}")
    return 0


def test_a_controller_log_says_when_it_listed_and_began_a_term() -> None:
    log = "\n".join(
        [
            '{"ts": "2026-11-27T06:00:00.000Z", "level": "info", "msg": "listed 9 workloads in 0.10s"}',
            "not json: a line of the process's stderr",
            '{"ts": "2026-11-27T06:00:03.500Z", "level": "info", "msg": "listed 2 pods in 0.01s"}',
            '{"ts": "2026-11-27T06:00:04.250Z", "level": "info", "msg": "listed 9 workloads in 0.20s"}',
            '{"ts": "2026-11-27T06:00:06.000Z", "level": "info", "msg": "term began: read 9 Workloads"}',
        ]
    )
    since = datetime.fromisoformat("2026-11-27T06:00:01+00:00").timestamp()
    assert log_times(log, since) == (3.25, 5.0)
    assert log_times(log, since + 10) == (None, None)


if __name__ == "__main__":
    raise SystemExit(main())
