"""`quotagate bench --api-floor`: how fast the API server alone can serve a scenario's
irreducible Workload traffic, with no controller deciding anything.

Every live run of a scenario, whatever controller admits it, makes the API server do at
least this per Workload: its creation, the status write that admits it (QuotaReserved and
Admitted, `status.admission`: a server-side apply as `kueue-admission`, as Kueue's
scheduler and quotagate send it) and the one that marks it Finished (the apply Kueue's
scheduler-perf runner sends), each sent to a controller's watch and the job side's watch. This mode sends exactly that, as fast as
`parallelism` concurrent Workloads allow (the arrival schedule is ignored: the figure is
throughput), with two watchers, and reports the wall time, the writes per second and,
given the API server's process id, its CPU seconds per write. A live run against the same
API server cannot be faster than this floor, nor than the scenario's quota lower bound.

The Workloads carry the same body as `--live` creates, in one namespace per ClusterQueue
of the scenario; no queues are created. The run must be alone with the Workloads: a
status write by any other field manager (a controller running on the cluster) fails it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from dataclasses import dataclass
from typing import Any, TextIO

from kubernetes.aio import client as aio_client
from kubernetes.aio.client.exceptions import ApiException

from api import workload_status
from api.workload_status import (
    ADMISSION_FIELD_MANAGER,
    Admission,
    PodSetAssignment,
    admission_to_api,
    apply_body,
)
from controller.kube.client import (
    NAMESPACES,
    WORKLOADS,
    Api,
    make_api_client,
    retrying,
)
from tools.bench import kueue_clients
from tools.bench.live import (
    FIELD_MANAGER,
    RUN_LABEL,
    LiveError,
    follow,
    process_cpu,
    staged,
    workload_body,
)
from tools.bench.report import KUEUE_REFERENCE, Job, Progress
from tools.bench.scenario import Scenario
from tools.bench.simulate import FLAVOR, RESOURCE, build, lower_bound

__all__ = ["FloorReport", "render_floor", "run_floor"]

# The writers of a live run: the job side creates and finishes, the controller admits.
CREATING_MANAGER = FIELD_MANAGER
ADMITTING_MANAGER = ADMISSION_FIELD_MANAGER
FINISHING_MANAGER = kueue_clients.RUNNER_FINISH_MANAGER
WATCHERS = 2  # the controller's Workload watch and the job side's


@dataclass(frozen=True)
class FloorReport:
    scenario: str
    workloads: int
    writes: int
    parallelism: int
    wall_s: float
    lower_bound_s: float  # the scenario's quota lower bound, for comparison
    watch_events: tuple[int, ...]  # per watcher
    runner_cpu_s: float
    apiserver_cpu_s: float | None
    run_id: str

    @property
    def writes_per_s(self) -> float:
        return self.writes / self.wall_s if self.wall_s else 0.0

    @property
    def apiserver_ms_per_write(self) -> float | None:
        if self.apiserver_cpu_s is None or not self.writes:
            return None
        return 1000 * self.apiserver_cpu_s / self.writes

    def to_json(self) -> dict[str, Any]:
        reference = KUEUE_REFERENCE.get(self.scenario)
        ms = self.apiserver_ms_per_write
        return {
            "mode": "api-floor",
            "scenario": self.scenario,
            "workloads": self.workloads,
            "writes": self.writes,
            "parallelism": self.parallelism,
            "wall_s": round(self.wall_s, 3),
            "writes_per_s": round(self.writes_per_s, 1),
            "lower_bound_s": round(self.lower_bound_s, 3),
            "watch_events": list(self.watch_events),
            "runner_cpu_s": round(self.runner_cpu_s, 3),
            "apiserver_cpu_s": None
            if self.apiserver_cpu_s is None
            else round(self.apiserver_cpu_s, 3),
            "apiserver_ms_per_write": None if ms is None else round(ms, 3),
            "kueue_wall_s": reference["wall_s"] if reference else None,
            "run_id": self.run_id,
        }


def render_floor(report: FloorReport) -> str:
    ms = report.apiserver_ms_per_write
    cpu = (
        "not measured (pass --apiserver-pid)"
        if report.apiserver_cpu_s is None or ms is None
        else f"{report.apiserver_cpu_s:.1f} s ({ms:.2f} ms per write)"
    )
    lines = [
        f"scenario {report.scenario} (api-floor): {report.workloads} Workloads, "
        f"{report.writes} writes, {report.parallelism} at a time, {WATCHERS} watchers",
        f"  wall                     {report.wall_s:7.1f} s   ({report.writes_per_s:.0f} writes/s)",
        f"  kube-apiserver CPU       {cpu}",
        f"  this runner's CPU        {report.runner_cpu_s:7.1f} s",
        f"  watch events             {' + '.join(str(n) for n in report.watch_events)}",
        "",
        f"The API server served these writes in {report.wall_s:.1f} s with "
        f"{report.parallelism} at a time (quota lower bound {report.lower_bound_s:.1f} s); "
        "a live run spreads them over more clients at once and can be faster.",
    ]
    reference = KUEUE_REFERENCE.get(report.scenario)
    if reference:
        lines.append(f"Kueue's published wall for {report.scenario}: {reference['wall_s']:.0f} s.")
    return "\n".join(lines)


class FloorRun:
    def __init__(
        self,
        api_client: aio_client.ApiClient,
        scenario: Scenario,
        *,
        progress: TextIO | None,
        parallelism: int,
        timeout: float,
        apiserver_pid: int | None,
        run_id: str | None = None,
    ) -> None:
        self.api = Api(api_client)
        self.scenario = scenario
        self.run_id = run_id or uuid.uuid4().hex[:8]
        self.progress = progress
        self.parallelism = parallelism
        self.timeout = timeout
        self.apiserver_pid = apiserver_pid
        _, self.jobs, capacity = build(scenario)
        self.bound = lower_bound(self.jobs, capacity)
        self.namespaces = sorted({self._ns(job.cluster_queue) for job in self.jobs})
        self.counters = {"created": 0, "admitted": 0, "finished": 0}
        self.watch_events = [0] * WATCHERS
        self.writes = 0
        self.foreign: str | None = None

    def _ns(self, cluster_queue: str) -> str:
        return f"{cluster_queue}-{self.run_id}"

    @property
    def selector(self) -> str:
        return f"{RUN_LABEL}={self.run_id}"

    async def setup(self) -> None:
        gate = asyncio.Semaphore(self.parallelism)

        async def create(ns: str) -> None:
            async with gate:
                body = {"metadata": {"name": ns, "labels": {RUN_LABEL: self.run_id}}}
                await retrying(lambda: self.api.request("POST", Api.path(NAMESPACES, None), body))

        await asyncio.gather(*(create(ns) for ns in self.namespaces))

    async def run(self) -> FloorReport:
        start = await self._start_version()
        watchers: list[asyncio.Future[Any]] = [
            asyncio.ensure_future(self._watch(i, start)) for i in range(WATCHERS)
        ]
        gate = asyncio.Semaphore(self.parallelism)
        meter = Progress(self.progress, len(self.jobs))
        cpu_before = process_cpu(self.apiserver_pid)
        if self.apiserver_pid is not None and cpu_before is None:
            raise LiveError(f"--apiserver-pid {self.apiserver_pid}: no such process on this host")
        own_before = time.process_time()
        t0 = time.monotonic()

        async def one(job: Job) -> None:
            async with gate:
                await self._lifecycle(job)
                meter.update(time.monotonic() - t0, self.counters)

        work: asyncio.Future[Any] = asyncio.ensure_future(
            asyncio.gather(*(one(job) for job in self.jobs))
        )
        try:
            done, _ = await asyncio.wait(
                [work, *watchers], timeout=self.timeout, return_when=asyncio.FIRST_COMPLETED
            )
            if work not in done:
                for task in done:  # a watcher ended: its error, or that it ended
                    task.result()
                    raise LiveError("a Workload watch ended")
                raise LiveError(
                    f"timed out after {self.timeout:.0f}s: {self.counters['finished']} of "
                    f"{len(self.jobs)} Workloads finished"
                )
            work.result()
            wall = time.monotonic() - t0
            cpu_after = process_cpu(self.apiserver_pid)
            await self._drain_watches()
        finally:
            for task in (work, *watchers):
                task.cancel()
            await asyncio.gather(work, *watchers, return_exceptions=True)
        meter.done(wall, self.counters)
        if self.foreign:
            raise LiveError(self.foreign)
        return FloorReport(
            scenario=self.scenario.name,
            workloads=len(self.jobs),
            writes=self.writes,
            parallelism=self.parallelism,
            wall_s=wall,
            lower_bound_s=self.bound,
            watch_events=tuple(self.watch_events),
            runner_cpu_s=time.process_time() - own_before,
            apiserver_cpu_s=None
            if cpu_before is None or cpu_after is None
            else cpu_after - cpu_before,
            run_id=self.run_id,
        )

    async def _start_version(self, patience: float = 60.0) -> str:
        """The resourceVersion to watch from, so every write is delivered as an event. Right
        after the CRDs are installed the API server answers 429 (its Workload cache is
        still filling) for a while: wait for it, up to `patience` seconds."""
        deadline = time.monotonic() + patience
        while True:
            try:
                listing = await self.api.request(
                    "GET",
                    Api.path(WORKLOADS, None),
                    params={"labelSelector": self.selector, "limit": "1"},
                )
                return str(listing["metadata"]["resourceVersion"])
            except ApiException as exc:
                if exc.status != 429 or time.monotonic() > deadline:
                    raise
            await asyncio.sleep(1.0)

    async def _lifecycle(self, job: Job) -> None:
        """Create, admit, finish: each write preconditioned on the previous one's
        resourceVersion, as the controller's and the job side's are."""
        if self.foreign:
            raise LiveError(self.foreign)
        ns = self._ns(job.cluster_queue)
        name = job.key.split("/", 1)[1]
        created = await retrying(
            lambda: self.api.request(
                "POST",
                Api.path(WORKLOADS, None, ns),
                workload_body(job, ns, {RUN_LABEL: self.run_id}),
                params={"fieldManager": CREATING_MANAGER},
            )
        )
        self.writes += 1
        self.counters["created"] += 1
        assignment = PodSetAssignment("main", 1, {RESOURCE: FLAVOR}, {RESOURCE: job.request})
        admission = admission_to_api(Admission(ns, (assignment,)))  # as the controller writes it
        admitted = await self._write(
            ns, name, apply_body(created, workload_status.admit(created, admission, time.time()))
        )
        self.writes += 1
        self.counters["admitted"] += 1
        await self._write(ns, name, kueue_clients.runner_finish(admitted, time.time()))
        self.writes += 1
        self.counters["finished"] += 1

    async def _write(
        self, ns: str, name: str, write: dict[str, Any] | kueue_clients.Write
    ) -> dict[str, Any]:
        """A status write preconditioned on the resourceVersion it was computed from (an
        admission apply as the controller sends it, or the job side's `Write`); a conflict
        can only mean that someone else wrote the Workload, which this mode cannot
        measure around."""
        try:
            if isinstance(write, kueue_clients.Write):
                return await kueue_clients.send(self.api, WORKLOADS, ns, name, write)
            return await self.api.apply_workload_status(write)
        except ApiException as exc:
            if exc.status != 409:
                raise
            body = await self.api.get_workload(ns, name)
            self._note_foreign(body)
            raise LiveError(
                self.foreign or f"Workload {ns}/{name} was changed by another writer (409)"
            ) from None

    def _note_foreign(self, body: dict[str, Any]) -> None:
        meta = body.get("metadata") or {}
        for entry in meta.get("managedFields") or ():
            manager = entry.get("manager")
            if manager not in (CREATING_MANAGER, ADMITTING_MANAGER, FINISHING_MANAGER) and (
                self.foreign is None
            ):
                self.foreign = (
                    f"Workload {meta.get('namespace')}/{meta.get('name')} was also written by "
                    f"field manager {manager!r}: --api-floor needs an API server where no "
                    "controller acts on Workloads"
                )

    async def _watch(self, index: int, version: str) -> None:
        """Count events; note any Workload written by a field manager not this run's."""
        async for kind, body in follow(self.api, WORKLOADS, self.selector, version):
            if kind != "BOOKMARK":
                self.watch_events[index] += 1
                self._note_foreign(body)

    async def _drain_watches(self, quiet_for: float = 1.0, limit: float = 30.0) -> None:
        """Wait until the watches stop receiving events (each got every write), so the
        counts and the foreign-writer check cover the whole run."""
        deadline = time.monotonic() + limit
        last = sum(self.watch_events)
        while time.monotonic() < deadline:
            await asyncio.sleep(quiet_for)
            now = sum(self.watch_events)
            if now == last:
                return
            last = now

    async def cleanup(self) -> None:
        gate = asyncio.Semaphore(self.parallelism)

        async def delete(ns: str) -> None:
            async with gate:
                with contextlib.suppress(ApiException):
                    await self.api.request("DELETE", Api.path(NAMESPACES, ns))

        await asyncio.gather(*(delete(ns) for ns in self.namespaces))


async def run_floor(
    kubeconfig: str | None,
    scenario: Scenario,
    *,
    progress: TextIO | None = None,
    parallelism: int = 32,
    timeout: float = 1800.0,
    apiserver_pid: int | None = None,
    keep: bool = False,
) -> FloorReport:
    """Set up the namespaces, run the floor and (unless `keep`) delete them again."""
    api_client = await make_api_client(kubeconfig, pool_size=parallelism + WATCHERS + 4)
    floor = FloorRun(
        api_client,
        scenario,
        progress=progress,
        parallelism=parallelism,
        timeout=timeout,
        apiserver_pid=apiserver_pid,
    )
    announce = (
        f"creating {len(floor.namespaces)} namespaces (run {floor.run_id}); "
        "no controller may act on the Workloads"
    )
    return await staged(floor, api_client, progress=progress, keep=keep, announce=announce)
