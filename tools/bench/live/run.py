"""One live run: the scenario's Workloads created on Kueue's generator schedule, followed
on two watches, finished and acknowledged by the job side, and summarized."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any, TextIO

from kubernetes.aio import client as aio_client
from kubernetes.aio.client.exceptions import ApiException

from api import workload_status
from api.workload_status import has_quota_reservation, is_evicted, is_finished
from controller.kube.client import CLUSTER_QUEUES, WORKLOADS, Api, retrying
from controller.kube.process import wait_at_most
from tools.bench.live.cluster import LiveCluster, workload_body
from tools.bench.live.job_side import JobSide, Tracked
from tools.bench.live.ledger import Ledger
from tools.bench.live.staging import LiveError, follow, process_cpu, spent, staged
from tools.bench.live.tas_nodes import NodeLedger
from tools.bench.outages import Outages
from tools.bench.preemptions import PreemptionLog
from tools.bench.recorder import Recorder, cluster_queue_event, workload_event
from tools.bench.report import Job, Progress, Report, Sample, summarize
from tools.bench.scenario import Scenario
from tools.bench.simulate import RESOURCE, build, lower_bound
from tools.bench.tas_scenario import PODS_PER_NODE

__all__ = ["LiveRun", "run_live"]

SETTLE_TIMEOUT = 60.0
"""How long the ClusterQueue watch goes on at least after the last Workload finished, for
the queues' statuses to settle (longer while the run's timeout allows)."""
SETTLE_NOTE_EVERY = 10.0


def _holds_quota(body: dict[str, Any]) -> bool:
    return has_quota_reservation(body) and not is_finished(body)


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


class LiveRun:
    def __init__(
        self,
        api_client: aio_client.ApiClient,
        scenario: Scenario,
        *,
        progress: TextIO | None = None,
        parallelism: int = 32,
        timeout: float = 1800.0,
        controller_pid: int | None = None,
        apiserver_pid: int | None = None,
        run_id: str | None = None,
        setup_timeout: float = 120.0,
        apiserver_cpu: Callable[[], float | None] | None = None,
    ) -> None:
        """`apiserver_cpu`, when given, reads kube-apiserver's CPU seconds instead of
        `apiserver_pid`'s (one that is restarted during the run has several processes)."""
        self.api = Api(api_client)  # the hot calls: no generated-client overhead
        self.scenario = scenario
        self.run_id = run_id or uuid.uuid4().hex[:8]
        self.progress = progress
        # Creation and the job side (completions, eviction acknowledgements) are separate
        # clients in Kueue's runner: a creation backlog must not delay completions.
        self.gate = asyncio.Semaphore(parallelism)
        self.cluster = LiveCluster(api_client, scenario, self.run_id, self.gate)
        self.job_side = JobSide(self.api, asyncio.Semaphore(parallelism), self.now)
        self.timeout = timeout
        self.controller_pid = controller_pid
        self.apiserver_pid = apiserver_pid
        self.apiserver_cpu = apiserver_cpu or (lambda: process_cpu(self.apiserver_pid))
        self.setup_timeout = setup_timeout
        _, jobs, capacity = build(scenario)
        self.jobs = jobs
        self.schedule = [(job.created, job) for job in jobs]  # arrivals, in order
        self.bound = lower_bound(jobs, capacity)
        self.tracked = {job.key: Tracked(job) for job in jobs}
        limits = {
            name: (None if qs.borrowing_limit is None else qs.nominal + qs.borrowing_limit)
            for name, _, qs in scenario.queues()
        }
        self.ledger = Ledger(limits, capacity)
        # A TAS scenario's placements, checked against its nodes' capacity.
        self.nodes = NodeLedger(
            {} if scenario.tas is None else {**scenario.tas.capacity, "pods": PODS_PER_NODE * 1000}
        )
        self.nominal_total = sum(capacity.values())
        self.counters = {"created": 0, "admitted": 0, "finished": 0}
        self.preemptions = 0
        self.preemption_log = PreemptionLog()
        # The job side's Finished patch: answered → seen on the watch.
        self.finish_seen: list[float] = []
        self.samples: list[Sample] = []
        self.pending: dict[str, int] = dict.fromkeys(scenario.class_names(), 0)
        self.recorder = Recorder()
        self.cluster_queue_seen = asyncio.Event()  # set on every ClusterQueue event
        self.t0 = 0.0
        self.all_finished = asyncio.Event()
        self.errors: list[str] = []
        self.tasks: set[asyncio.Task[Any]] = set()
        self.outages = Outages(self.now)
        self.job_side.outages = self.outages

    def now(self) -> float:
        return time.monotonic() - self.t0

    async def setup(self) -> None:
        await self.cluster.setup(self.setup_timeout, self.progress)

    async def cleanup(self) -> None:
        await self.cluster.cleanup()

    # -- the run ---------------------------------------------------------------------------

    async def run(self) -> Report:
        cpu_before = process_cpu(self.controller_pid)
        apiserver_before = self.apiserver_cpu()
        for flag, pid, before in (
            ("--controller-pid", self.controller_pid, cpu_before),
            ("--apiserver-pid", self.apiserver_pid, apiserver_before),
        ):
            if pid is not None and before is None:
                raise LiveError(f"{flag} {pid}: no such process on this host")
        own_before = time.process_time()
        self.t0 = time.monotonic()
        meter = Progress(self.progress, len(self.jobs))
        queues = asyncio.ensure_future(self._watch_cluster_queues())
        watcher = asyncio.ensure_future(self._watch())
        creator = asyncio.ensure_future(self._create_all())
        try:
            while not self.all_finished.is_set():
                if self.errors:
                    raise LiveError(self.errors[0])
                if self.now() > self.timeout:
                    raise LiveError(
                        f"timed out after {self.timeout:.0f}s: {self.counters['finished']} of "
                        f"{len(self.jobs)} Workloads finished"
                    )
                for task, what in ((watcher, "Workload"), (queues, "ClusterQueue")):
                    if task.done():
                        task.result()
                        raise LiveError(f"the {what} watch ended")
                self._sample()
                meter.update(self.now(), self.counters)
                await wait_at_most(self.all_finished, 0.5)
            await creator
            cpu = spent(cpu_before, process_cpu(self.controller_pid))
            apiserver_cpu = spent(apiserver_before, self.apiserver_cpu())
            makespan = max(job.finished_at or 0.0 for job in self.jobs)
            meter.done(makespan, self.counters)
            settled = await self._settle(queues)
        finally:
            for task in (queues, watcher, creator, *self.tasks):
                task.cancel()
            await asyncio.gather(queues, watcher, creator, *self.tasks, return_exceptions=True)
        self.ledger.advance(makespan)
        self._sample(makespan)
        extra: dict[str, Any] = {
            "runner_cpu_s": round(time.process_time() - own_before, 3),
            "settle_s": round(settled, 1),
            "finish_write_mean_s": _mean(self.job_side.finish_write),
            "finish_seen_mean_s": _mean(self.finish_seen),
            "run_id": self.run_id,
            **(
                {}
                if self.scenario.tas is None
                else {"node_overuse_events": self.nodes.overuse, "pods_placed": self.nodes.placed}
            ),
            "api_outages": self.outages.to_json(),
            **self.preemption_log.to_json(
                {
                    job.key: None
                    if job.first_admitted_at is None
                    else job.first_admitted_at - job.created
                    for job in self.jobs
                }
            ),
        }
        return summarize(
            mode="live",
            scenario=self.scenario,
            jobs=self.jobs,
            makespan=makespan,
            bound=self.bound,
            cpu=cpu,
            recorder=self.recorder,
            reserved_integral=self.ledger.integral,
            preemptions=self.preemptions,
            overuse=self.ledger.overuse,
            samples=self.samples,
            nominal_total=self.nominal_total,
            apiserver_cpu=apiserver_cpu,
            extra=extra,
        )

    async def _settle(self, queues: asyncio.Future[None]) -> float:
        """As Kueue's runner: go on recording ClusterQueue events until no active queue
        reports pending or reserving Workloads, so their last status counts. Kueue's
        runner records until its `--timeout`; this waits until the run's timeout, and at
        least SETTLE_TIMEOUT after the last Workload finished (a controller whose client is
        rate-limited, as minimalkueue's is, may take over a minute to write a thousand
        queues' last statuses). Says every SETTLE_NOTE_EVERY seconds how many queues it
        waits for; returns how long it waited."""
        started = time.monotonic()
        deadline = max(self.t0 + self.timeout, started + SETTLE_TIMEOUT)
        note_at = started + SETTLE_NOTE_EVERY
        while busy := self.recorder.busy_cluster_queues():
            if queues.done():
                queues.result()
                raise LiveError("the ClusterQueue watch ended")
            now = time.monotonic()
            if now >= deadline:
                raise LiveError(
                    f"{len(busy)} ClusterQueues (e.g. {busy[0]}) still report pending or "
                    f"reserving Workloads {now - started:.0f}s after the last Workload "
                    "finished, at the run's timeout: the controller does not bring their "
                    "status up to date"
                )
            if now >= note_at and self.progress is not None:
                self.progress.write(
                    f"  all finished; waiting {now - started:.0f}s so far for {len(busy)} "
                    f"ClusterQueues (e.g. {busy[0]}) to report no pending or reserving "
                    "Workloads\n"
                )
                note_at = now + SETTLE_NOTE_EVERY
            self.cluster_queue_seen.clear()
            await wait_at_most(self.cluster_queue_seen, min(deadline, note_at) - now)
        return time.monotonic() - started

    def _sample(self, t: float | None = None) -> None:
        t = self.now() if t is None else t
        self.samples.append(Sample(t, dict(self.pending), dict(self.ledger.per_class)))

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.ensure_future(coroutine)
        self.tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.errors.append(f"{type(task.exception()).__name__}: {task.exception()}")

    # -- creation --------------------------------------------------------------------------

    async def _create_all(self) -> None:
        for at, job in self.schedule:
            delay = at - self.now()
            if delay > 0:
                await asyncio.sleep(delay)
            await self.gate.acquire()
            self._spawn(self._create(job))

    async def _create(self, job: Job) -> None:
        try:
            ns = self.cluster.name(job.key.split("/", 1)[0])
            body = workload_body(job, ns, self.cluster.labels)

            async def post() -> None:
                try:
                    await self.api.request("POST", Api.path(WORKLOADS, None, ns), body)
                except ApiException as exc:
                    # 409 AlreadyExists: an earlier try got through before its reply was
                    # lost (retrying would take the conflict for one worth another try).
                    if exc.status != 409:
                        raise

            # Through an outage, as the controller writes (outages.py).
            await retrying(post, attempts=None, on_retry=self.outages.retried)
            self.counters["created"] += 1
        finally:
            self.gate.release()

    # -- the watches -----------------------------------------------------------------------

    async def _watch(self) -> None:
        selector = self.cluster.selector
        async for kind, body in follow(self.api, WORKLOADS, selector, outages=self.outages):
            if kind in ("ADDED", "MODIFIED"):
                self._observe(body)
            elif kind == "RELISTED":
                # Where each Workload ended up since the watch's last event: the releases
                # first, so that the ledger never holds what the snapshot had released.
                items = body.get("items") or []
                for item in sorted(items, key=_holds_quota):
                    self._observe(item)

    async def _watch_cluster_queues(self) -> None:
        """Every ClusterQueue event, to the recorder; the first ones are the queues as
        they are when the run starts (a watch from now lists them first)."""
        selector = self.cluster.selector
        async for kind, body in follow(self.api, CLUSTER_QUEUES, selector, outages=self.outages):
            for queue in body.get("items") or () if kind == "RELISTED" else [body]:
                if kind in ("ADDED", "MODIFIED", "RELISTED"):
                    self.recorder.record_cluster_queue(cluster_queue_event(queue, self.now()))
                    self.cluster_queue_seen.set()

    def _observe(self, body: dict[str, Any]) -> None:
        key = self.cluster.key_of(body)
        tracked = self.tracked.get(key) if key else None
        if tracked is None:
            return
        t = self.now()
        self.recorder.record_workload(workload_event(body, t))
        job = tracked.job
        if tracked.body is None:
            self.preemption_log.seen(str((body.get("metadata") or {}).get("uid")), job.key)
        tracked.body = body
        if tracked.seen_at is None:
            tracked.seen_at = t
            self.pending[job.class_name] += 1
        reserved = has_quota_reservation(body)
        finished = is_finished(body)
        evicted = is_evicted(body)
        if finished and not tracked.finished:
            tracked.finished = True
            if tracked.finish_answered is not None:
                self.finish_seen.append(max(0.0, t - tracked.finish_answered))
            if tracked.reserved:
                tracked.reserved = False
                self.ledger.charge(job, -1, t)
                self.nodes.release(job.key)
            job.finished_at = t
            self.counters["finished"] += 1
            if self.counters["finished"] == len(self.jobs):
                self.all_finished.set()
            return
        if tracked.finished:
            return
        if reserved and not tracked.reserved:
            tracked.reserved = True
            tracked.evicted = False
            job.epoch += 1
            if job.first_admitted_at is None:
                job.first_admitted_at = t
                self.counters["admitted"] += 1
            self.pending[job.class_name] -= 1
            self.ledger.charge(job, 1, t)
            self.nodes.admit(job.key, body, {RESOURCE: job.request // job.pods})
            self.outages.admitted(t)
            self._spawn(self.job_side.finish_later(tracked, job.epoch))
        elif not reserved and tracked.reserved:
            tracked.reserved = False
            job.epoch += 1
            self.pending[job.class_name] += 1
            self.ledger.charge(job, -1, t)
            self.nodes.release(job.key)
        if evicted and tracked.reserved and not tracked.evicted:
            tracked.evicted = True
            evicted_condition = workload_status.condition(body, "Evicted") or {}
            if evicted_condition.get("reason") == "Preempted":
                self.preemptions += 1
                self.preemption_log.evicted(t, job.key, str(evicted_condition.get("message")))
            self._spawn(self.job_side.acknowledge(tracked))


async def run_live(
    kubeconfig: str | None,
    scenario: Scenario,
    *,
    progress: TextIO | None = None,
    parallelism: int = 32,
    timeout: float = 1800.0,
    controller_pid: int | None = None,
    apiserver_pid: int | None = None,
    keep: bool = False,
    setup_timeout: float = 120.0,
    apiserver_cpu: Callable[[], float | None] | None = None,
) -> Report:
    """Set up, run and (unless `keep`) clean up one live run; the report."""
    from controller.kube.client import make_api_client

    api_client = await make_api_client(kubeconfig, pool_size=parallelism * 2 + 4)
    live = LiveRun(
        api_client,
        scenario,
        progress=progress,
        parallelism=parallelism,
        timeout=timeout,
        controller_pid=controller_pid,
        apiserver_pid=apiserver_pid,
        setup_timeout=setup_timeout,
        apiserver_cpu=apiserver_cpu,
    )
    announce = f"setting up {scenario.total_queues()} ClusterQueues (run {live.run_id})"
    return await staged(live, api_client, progress=progress, keep=keep, announce=announce)
