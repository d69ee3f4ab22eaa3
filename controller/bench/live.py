"""`quotagate bench --live`: the scenario against a running API server and whatever
Kueue-compatible controller runs there (quotagate, or Kueue itself).

Only the Kueue v1beta2 API is used, as Kueue's own performance runner does:

1. Setup: ResourceFlavor `rf`; per ClusterQueue a Namespace of the same name, the
   ClusterQueue (cohort, cpu quota, preemption policy, `namespaceSelector: {}`, its class
   as the label Kueue's generator sets) and a LocalQueue; then wait until the controller
   reports every ClusterQueue Active.
2. Creation: bare Workloads (one pod, `spec.priority`, a cpu request) on Kueue's
   generator schedule, written in parallel.
3. The job side, as Kueue's scheduler-perf runner writes it (controller/bench/kueue_clients.py,
   reproduced from the runner's code): `runtimeMs` after a Workload is admitted it is
   marked `Finished=True` (server-side apply of that condition as
   `kueue-job-controller-Finished`); when it is evicted its quota reservation is cleared
   (server-side apply as `kueue-admission` with force: QuotaReserved=False, no
   `status.admission`), so it competes again.
4. Recording, from two watches as Kueue's runner records (controller/bench/recorder.py):
   every ClusterQueue event (its `status.flavorsUsage`: ClusterQueue usage) and every
   Workload event (time to admission, evictions), each with the time it was observed.
   The ClusterQueue watch starts with the run (its first events are the queues as they
   are then) and, as Kueue's runner, goes on after the last Workload finished until no
   active ClusterQueue reports pending or reserving Workloads (at most
   `SETTLE_TIMEOUT`). Quota over-use is checked by replaying the reservations of the
   Workload watch in its (etcd) order: after every admission, no ClusterQueue above
   nominal + borrowingLimit and no cohort above its total nominal quota.
5. Cleanup (unless `keep`): Workloads, LocalQueues, ClusterQueues, the flavor and the
   namespaces, all found by the run's label.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol, TextIO, TypeVar

from kubernetes.aio import client as aio_client
from kubernetes.aio.client.exceptions import ApiException

from api import workload_status
from api.quantities import Quantity
from api.workload_status import has_quota_reservation, is_evicted, is_finished
from controller.bench import kueue_clients
from controller.bench.preemptions import PreemptionLog
from controller.bench.recorder import CLASS_LABEL, Recorder, cluster_queue_event, workload_event
from controller.bench.report import Job, Progress, Report, Sample, summarize
from controller.bench.scenario import Scenario
from controller.bench.simulate import FLAVOR, RESOURCE, build, lower_bound
from controller.kube.client import (
    API_ERRORS,
    CLUSTER_QUEUES,
    CONNECTION_ERRORS,
    KUEUE_GROUP,
    KUEUE_VERSION,
    WORKLOADS,
    Api,
    Resource,
    is_retryable,
    retrying,
)

__all__ = [
    "LiveError",
    "Staged",
    "follow",
    "process_cpu",
    "run_live",
    "staged",
    "workload_body",
]

log = logging.getLogger(__name__)

R = TypeVar("R", covariant=True)

RUN_LABEL = "quotagate.bench/run"
RUNTIME_LABEL = "kueue.x-k8s.io/performance-scheduler-running-ms"
FIELD_MANAGER = "quotagate-bench"
SETTLE_TIMEOUT = 60.0
"""How long the ClusterQueue watch may go on after the last Workload finished."""


class LiveError(RuntimeError):
    """The run could not be set up or did not finish."""


@dataclass
class _Tracked:
    job: Job
    body: dict[str, Any] | None = None
    seen_at: float | None = None
    reserved: bool = False
    evicted: bool = False
    finished: bool = False
    acking: bool = False
    finish_answered: float | None = None  # when the API server answered our Finished patch
    finish_task: asyncio.Task[None] | None = None


@dataclass
class _Ledger:
    """Reserved quota per ClusterQueue and cohort, replayed in watch order."""

    limits: dict[str, int | None]
    capacity: dict[str, int]
    per_queue: dict[str, int] = field(default_factory=dict)
    per_cohort: dict[str, int] = field(default_factory=dict)
    per_class: dict[str, int] = field(default_factory=dict)
    reserved: int = 0
    integral: float = 0.0
    last_t: float = 0.0
    overuse: int = 0

    def advance(self, t: float) -> None:
        if t > self.last_t:
            self.integral += self.reserved * (t - self.last_t)
            self.last_t = t

    def charge(self, job: Job, sign: int, t: float) -> None:
        self.advance(t)
        amount = sign * job.request
        self.reserved += amount
        q = self.per_queue[job.cluster_queue] = self.per_queue.get(job.cluster_queue, 0) + amount
        c = self.per_cohort[job.cohort] = self.per_cohort.get(job.cohort, 0) + amount
        self.per_class[job.class_name] = self.per_class.get(job.class_name, 0) + amount
        limit = self.limits[job.cluster_queue]
        if sign > 0 and (c > self.capacity[job.cohort] or (limit is not None and q > limit)):
            self.overuse += 1
            log.error(
                "quota over-use: %s admitted with %s at %.0fm in its queue, %.0fm in cohort %s",
                job.key,
                job.cluster_queue,
                q,
                c,
                job.cohort,
            )


def _condition_true(body: dict[str, Any], type_: str) -> bool:
    for condition in (body.get("status") or {}).get("conditions") or ():
        if condition.get("type") == type_:
            return bool(condition.get("status") == "True")
    return False


def _spent(before: float | None, after: float | None) -> float | None:
    """CPU seconds between two readings, or None if either is missing."""
    return None if before is None or after is None else after - before


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def _cpu(milli: int) -> str:
    return str(Quantity(milli))


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
    ) -> None:
        self.custom = aio_client.CustomObjectsApi(api_client)
        self.api = Api(api_client)  # the hot calls: no generated-client overhead
        self.core = aio_client.CoreV1Api(api_client)
        self.scenario = scenario
        self.run_id = run_id or uuid.uuid4().hex[:8]
        self.progress = progress
        # Creation and the job side (completions, eviction acknowledgements) are separate
        # clients in Kueue's runner: a creation backlog must not delay completions.
        self.gate = asyncio.Semaphore(parallelism)
        self.job_gate = asyncio.Semaphore(parallelism)
        self.timeout = timeout
        self.controller_pid = controller_pid
        self.apiserver_pid = apiserver_pid
        self.setup_timeout = setup_timeout
        _, jobs, capacity = build(scenario)
        self.jobs = jobs
        self.schedule = [(job.created, job) for job in jobs]  # arrivals, in order
        self.capacity = capacity
        self.bound = lower_bound(jobs, capacity)
        self.tracked = {job.key: _Tracked(job) for job in jobs}
        limits = {
            name: (None if qs.borrowing_limit is None else qs.nominal + qs.borrowing_limit)
            for name, _, qs in scenario.queues()
        }
        self.ledger = _Ledger(limits, capacity)
        self.nominal_total = sum(capacity.values())
        self.counters = {"created": 0, "admitted": 0, "finished": 0}
        self.preemptions = 0
        self.preemption_log = PreemptionLog()
        # The job side's round trip: Finished patch sent → answered → seen on the watch.
        self.finish_write: list[float] = []
        self.finish_seen: list[float] = []
        self.samples: list[Sample] = []
        self.pending: dict[str, int] = dict.fromkeys(scenario.class_names(), 0)
        self.recorder = Recorder()
        self.cluster_queue_seen = asyncio.Event()  # set on every ClusterQueue event
        self.t0 = 0.0
        self.all_finished = asyncio.Event()
        self.errors: list[str] = []
        self.tasks: set[asyncio.Task[Any]] = set()

    def now(self) -> float:
        return time.monotonic() - self.t0

    def _labels(self) -> dict[str, str]:
        return {RUN_LABEL: self.run_id}

    # -- setup -----------------------------------------------------------------------------

    async def _guarded(self, call: Any) -> Any:
        async with self.gate:
            return await call

    async def setup(self) -> None:
        labels = self._labels()
        await self.custom.create_cluster_custom_object(
            KUEUE_GROUP,
            KUEUE_VERSION,
            "resourceflavors",
            {
                "apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}",
                "kind": "ResourceFlavor",
                "metadata": {"name": f"{FLAVOR}-{self.run_id}", "labels": labels},
                "spec": {},
            },
        )
        creations = []
        for name, cohort, qs in self.scenario.queues():
            quota: dict[str, Any] = {"name": RESOURCE, "nominalQuota": _cpu(qs.nominal)}
            if qs.borrowing_limit is not None:
                quota["borrowingLimit"] = _cpu(qs.borrowing_limit)
            cq = {
                "apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}",
                "kind": "ClusterQueue",
                "metadata": {"name": self._cq(name), "labels": {**labels, CLASS_LABEL: qs.name}},
                "spec": {
                    "cohortName": self._cq(cohort),
                    "namespaceSelector": {},
                    "resourceGroups": [
                        {
                            "coveredResources": [RESOURCE],
                            "flavors": [{"name": f"{FLAVOR}-{self.run_id}", "resources": [quota]}],
                        }
                    ],
                    "preemption": {
                        "reclaimWithinCohort": qs.reclaim_within_cohort,
                        "withinClusterQueue": qs.within_cluster_queue,
                    },
                },
            }
            creations.append(self._create_queue(name, cq))
        await asyncio.gather(*creations)
        await self._wait_active(self.setup_timeout)

    def _cq(self, name: str) -> str:
        """Object names carry the run id, so runs never collide."""
        return f"{name}-{self.run_id}"

    async def _create_queue(self, name: str, cq: dict[str, Any]) -> None:
        ns = self._cq(name)
        labels = self._labels()
        await self._guarded(
            self.core.create_namespace(
                {"metadata": {"name": ns, "labels": labels}}  # type: ignore[arg-type]
            )
        )
        await self._guarded(
            self.custom.create_cluster_custom_object(
                KUEUE_GROUP, KUEUE_VERSION, "clusterqueues", cq
            )
        )
        await self._guarded(
            self.custom.create_namespaced_custom_object(
                KUEUE_GROUP,
                KUEUE_VERSION,
                ns,
                "localqueues",
                {
                    "apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}",
                    "kind": "LocalQueue",
                    "metadata": {"name": ns, "namespace": ns, "labels": labels},
                    "spec": {"clusterQueue": ns},
                },
            )
        )

    async def _wait_active(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        wanted = {self._cq(name) for name, _, _ in self.scenario.queues()}
        while True:
            listing: Any = await self.custom.list_cluster_custom_object(
                KUEUE_GROUP,
                KUEUE_VERSION,
                "clusterqueues",
                label_selector=f"{RUN_LABEL}={self.run_id}",
            )
            active = {
                item["metadata"]["name"]
                for item in listing.get("items") or ()
                if _condition_true(item, "Active")
            }
            if wanted <= active:
                return
            if time.monotonic() > deadline:
                missing = sorted(wanted - active)
                raise LiveError(
                    f"{len(missing)} ClusterQueues not Active after {timeout:.0f}s "
                    f"(e.g. {missing[0]}): is a Kueue-compatible controller running?"
                )
            await asyncio.sleep(0.5)

    # -- the run ---------------------------------------------------------------------------

    async def run(self) -> Report:
        cpu_before = process_cpu(self.controller_pid)
        apiserver_before = process_cpu(self.apiserver_pid)
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
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.all_finished.wait(), timeout=0.5)
            await creator
            cpu = _spent(cpu_before, process_cpu(self.controller_pid))
            apiserver_cpu = _spent(apiserver_before, process_cpu(self.apiserver_pid))
            makespan = max(job.finished_at or 0.0 for job in self.jobs)
            meter.done(makespan, self.counters)
            await self._settle(queues)
        finally:
            for task in (queues, watcher, creator, *self.tasks):
                task.cancel()
            await asyncio.gather(queues, watcher, creator, *self.tasks, return_exceptions=True)
        self.ledger.advance(makespan)
        self._sample(makespan)
        extra: dict[str, Any] = {
            "runner_cpu_s": round(time.process_time() - own_before, 3),
            "finish_write_mean_s": _mean(self.finish_write),
            "finish_seen_mean_s": _mean(self.finish_seen),
            "run_id": self.run_id,
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

    async def _settle(self, queues: asyncio.Future[None]) -> None:
        """As Kueue's runner: go on recording ClusterQueue events until no active queue
        reports pending or reserving Workloads, so their last status counts."""
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while self.recorder.expect_more_events():
            if queues.done():
                queues.result()
                raise LiveError("the ClusterQueue watch ended")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                busy = sorted(
                    name
                    for name, state in self.recorder.cluster_queues.items()
                    if (state.last.pending or state.last.reserving) and state.last.active
                )
                raise LiveError(
                    f"{len(busy)} ClusterQueues (e.g. {busy[0]}) still report pending or "
                    f"reserving Workloads {SETTLE_TIMEOUT:.0f}s after the last Workload "
                    "finished: the controller does not bring their status up to date"
                )
            self.cluster_queue_seen.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.cluster_queue_seen.wait(), timeout=remaining)

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

    async def _create_all(self) -> None:
        for at, job in self.schedule:
            delay = at - self.now()
            if delay > 0:
                await asyncio.sleep(delay)
            await self.gate.acquire()
            self._spawn(self._create(job))

    async def _create(self, job: Job) -> None:
        try:
            ns = self._cq(job.key.split("/", 1)[0])
            body = workload_body(job, ns, self._labels())
            try:
                await retrying(
                    lambda: self.api.request("POST", Api.path(WORKLOADS, None, ns), body)
                )
            except ApiException as exc:
                if exc.status != 409:  # 409: an earlier try got through before its reply was lost
                    raise
            self.counters["created"] += 1
        finally:
            self.gate.release()

    # -- the watch -------------------------------------------------------------------------

    def _key_of(self, body: dict[str, Any]) -> str | None:
        meta = body.get("metadata") or {}
        ns = str(meta.get("namespace") or "")
        suffix = f"-{self.run_id}"
        if not ns.endswith(suffix):
            return None
        return f"{ns[: -len(suffix)]}/{meta.get('name')}"

    async def _watch(self) -> None:
        async for kind, body in follow(self.api, WORKLOADS, f"{RUN_LABEL}={self.run_id}"):
            if kind in ("ADDED", "MODIFIED"):
                self._observe(body)

    async def _watch_cluster_queues(self) -> None:
        """Every ClusterQueue event, to the recorder; the first ones are the queues as
        they are when the run starts (a watch from now lists them first)."""
        async for kind, body in follow(self.api, CLUSTER_QUEUES, f"{RUN_LABEL}={self.run_id}"):
            if kind in ("ADDED", "MODIFIED"):
                self.recorder.record_cluster_queue(cluster_queue_event(body, self.now()))
                self.cluster_queue_seen.set()

    def _observe(self, body: dict[str, Any]) -> None:
        key = self._key_of(body)
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
            self._spawn(self._finish_later(tracked, job.epoch))
        elif not reserved and tracked.reserved:
            tracked.reserved = False
            job.epoch += 1
            self.pending[job.class_name] += 1
            self.ledger.charge(job, -1, t)
        if evicted and tracked.reserved and not tracked.evicted:
            tracked.evicted = True
            if (_reason(body, "Evicted") or "") == "Preempted":
                self.preemptions += 1
                evicted_condition = workload_status.condition(body, "Evicted") or {}
                self.preemption_log.evicted(t, job.key, str(evicted_condition.get("message")))
            self._spawn(self._acknowledge(tracked))

    # -- the job side ----------------------------------------------------------------------

    async def _finish_later(self, tracked: _Tracked, epoch: int) -> None:
        await asyncio.sleep(tracked.job.runtime)
        sent = self.now()
        await self._patch_status(
            tracked,
            lambda wl: kueue_clients.runner_finish(wl, time.time()),
            still=lambda: tracked.job.epoch == epoch and tracked.reserved and not tracked.evicted,
        )
        if not tracked.finished:
            tracked.finish_answered = self.now()
            self.finish_write.append(tracked.finish_answered - sent)

    async def _acknowledge(self, tracked: _Tracked) -> None:
        await self._patch_status(
            tracked,
            lambda wl: kueue_clients.runner_release(wl, time.time()),
            still=lambda: tracked.reserved and not tracked.finished,
        )

    async def _patch_status(self, tracked: _Tracked, make: Any, still: Any) -> None:
        """The job side's status write `make(Workload)`, strict (the last seen
        resourceVersion); on a conflict, read the Workload again and retry while the write
        still applies."""
        for _ in range(20):
            if not still() or tracked.body is None:
                return
            body = tracked.body
            meta = body["metadata"]
            write = make(body)
            try:
                async with self.job_gate:
                    updated: Any = await kueue_clients.send(
                        self.api, WORKLOADS, meta["namespace"], meta["name"], write
                    )
            except API_ERRORS as exc:
                if not is_retryable(exc):
                    raise
                if not isinstance(exc, ApiException) or exc.status != 409:
                    await asyncio.sleep(0.2)  # a dropped connection or a busy server
                    continue
                async with self.job_gate:
                    fresh: Any = await self.api.get_workload(meta["namespace"], meta["name"])
                if _newer(fresh, tracked.body):
                    tracked.body = fresh
                continue
            if _newer(updated, tracked.body):
                tracked.body = updated
            return
        raise LiveError(f"could not update {tracked.job.key}: 20 failed tries in a row")

    # -- cleanup ---------------------------------------------------------------------------

    async def cleanup(self) -> None:
        selector = f"{RUN_LABEL}={self.run_id}"
        names = [self._cq(name) for name, _, _ in self.scenario.queues()]

        async def namespace(ns: str) -> None:
            for plural in ("workloads", "localqueues"):
                with contextlib.suppress(ApiException):
                    await self._guarded(
                        self.custom.delete_collection_namespaced_custom_object(
                            KUEUE_GROUP, KUEUE_VERSION, ns, plural, label_selector=selector
                        )
                    )
            with contextlib.suppress(ApiException):
                await self._guarded(self.core.delete_namespace(ns))

        await asyncio.gather(*(namespace(ns) for ns in names))
        for plural in ("clusterqueues", "resourceflavors"):
            with contextlib.suppress(ApiException):
                await self.custom.delete_collection_cluster_custom_object(
                    KUEUE_GROUP, KUEUE_VERSION, plural, label_selector=selector
                )


def _reason(body: dict[str, Any], type_: str) -> str | None:
    for condition in (body.get("status") or {}).get("conditions") or ():
        if condition.get("type") == type_:
            return str(condition.get("reason") or "")
    return None


def _newer(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    if a is None:
        return False
    if b is None:
        return True
    try:
        return int(a["metadata"]["resourceVersion"]) > int(b["metadata"]["resourceVersion"])
    except (KeyError, ValueError, TypeError):
        return True


async def follow(
    api: Api, resource: Resource, selector: str, version: str = ""
) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """A run's events of `resource`, from `version` on (empty: from now, the existing
    objects first), resumed from the last event seen after a broken connection. An expired
    watch (410 Gone) would lose events: it ends the run."""
    while True:
        try:
            async for kind, body in api.watch(
                resource, label_selector=selector, resource_version=version or None
            ):
                version = (body.get("metadata") or {}).get("resourceVersion") or version
                yield kind, body
        except ApiException as exc:
            if exc.status != 410:
                raise
            raise LiveError(
                f"the {resource.kind} watch expired (410 Gone); the run cannot be recorded exactly"
            ) from exc
        except CONNECTION_ERRORS as exc:  # resume from the last event seen
            log.info("the %s watch broke (%s); resuming", resource.kind, exc or type(exc).__name__)
            await asyncio.sleep(0.2)


def workload_body(job: Job, namespace: str, labels: dict[str, str]) -> dict[str, Any]:
    """The bare Workload of a scenario job, as Kueue's generator writes it: one pod with
    the job's cpu request, `spec.priority`, and its class and runtime as labels."""
    return {
        "apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}",
        "kind": "Workload",
        "metadata": {
            "name": job.key.split("/", 1)[1],
            "namespace": namespace,
            "labels": {
                **labels,
                CLASS_LABEL: job.class_name,
                RUNTIME_LABEL: str(int(job.runtime * 1000)),
            },
        },
        "spec": {
            "queueName": namespace,
            "priority": job.priority,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "c",
                                    "image": "pause",
                                    "resources": {"requests": {RESOURCE: _cpu(job.request)}},
                                }
                            ],
                        }
                    },
                }
            ],
        },
    }


def process_cpu(pid: int | None) -> float | None:
    """User + system CPU seconds of a process (Linux /proc), or None."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stream:
            fields = stream.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


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
    )
    announce = f"setting up {scenario.total_queues()} ClusterQueues (run {live.run_id})"
    return await staged(live, api_client, progress=progress, keep=keep, announce=announce)


class Staged(Protocol[R]):
    run_id: str

    async def setup(self) -> None: ...
    async def run(self) -> R: ...
    async def cleanup(self) -> None: ...


async def staged(
    runner: Staged[R],
    api_client: aio_client.ApiClient,
    *,
    progress: TextIO | None,
    keep: bool,
    announce: str,
) -> R:
    """Set up, run and (unless `keep`) clean up a run, then close its client; the run's
    report. Cleanup is best effort: the run's own error, if any, is the one raised."""
    try:
        if progress is not None:
            progress.write(announce + "\n")
        await runner.setup()
        return await runner.run()
    finally:
        if not keep:
            if progress is not None:
                progress.write(f"cleaning up run {runner.run_id}\n")
            with contextlib.suppress(Exception):
                await runner.cleanup()
        await api_client.close()
