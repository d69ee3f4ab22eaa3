"""The controller: API events → `core` state; the admission cycle → API writes.

One `Controller` owns one `ClusterState` and three parts that share a `Context`:
- `WorkloadSync` (sync.py) applies watch events as they arrive and keeps the newest copy
  of every Workload, holding back events while our own write for it is in flight;
- `DecisionWriter` (writers.py) writes the cycle's admissions, evictions and preemptions
  as concurrent, bounded writes;
- `PendingReasons` (pending_reasons.py) writes pending reasons and resolvedPreemptibility
  off the decision path.
The scheduling loop (`schedule_forever`, leader only) runs a cycle of the engine
(controller/core/engine.py, the driver `plan`, the forecast and the simulator use too)
whenever something changed. The cycle never waits on the network.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from controller.config import ControllerConfig
from controller.core.engine import Engine
from controller.core.model.workloads import WorkloadKey
from controller.core.scheduler.node_failures import pinned_pods_termination
from controller.core.state import ClusterState
from controller.integrations.host import Placement
from controller.kube.client import Api
from controller.kube.process import wait_at_most
from controller.kube.retries import retried
from controller.provisioning.pod_sets import FlavorPlacement
from controller.runtime.admission_checks import AdmissionCheckWriter
from controller.runtime.after_admission import AfterAdmissionWriter
from controller.runtime.context import (
    Clock,
    Context,
    EventSink,
    WriteSlots,
    new_state,
    priority_class_of,
)
from controller.runtime.metrics import Metrics
from controller.runtime.pending_reasons import PendingReasons
from controller.runtime.provisioning import ProvisioningController
from controller.runtime.sync import WorkloadSync
from controller.runtime.topology_feed import TopologyFeed
from controller.runtime.writers import DecisionWriter

log = logging.getLogger(__name__)


class Controller:
    """Keeps `core` state current and acts on the cycle's decisions."""

    def __init__(
        self,
        api: Api,
        config: ControllerConfig,
        metrics: Metrics | None = None,
        clock: Clock = time.time,
        events: EventSink | None = None,
    ) -> None:
        self.ctx = Context(
            api=api,
            config=config,
            metrics=metrics or Metrics(),
            clock=clock,
            events=events,
            state=new_state(config),
            writes=WriteSlots(config.write_parallelism, config.write_parallelism_max),
        )
        self.sync = WorkloadSync(self.ctx)
        self.workloads_listed = False  # since the last reset (controller/integrations/host.py)
        self.pending = PendingReasons(self.ctx, self.sync)  # first Workload listener
        unadmitted = self.ctx.metrics.unadmitted
        self.sync.workload_listeners.append(unadmitted.update)
        self.sync.deletion_listeners.append(unadmitted.forget)
        self.writers = DecisionWriter(self.ctx, self.sync, self.pending)
        self.after_admission = AfterAdmissionWriter(self.ctx, self.sync)
        self.admission_checks = AdmissionCheckWriter(self.ctx, self.sync, self.after_admission)
        self.provisioning = ProvisioningController(self.ctx, self.sync, self._pod_placement)
        self.engine = Engine(self.ctx.state)
        self._adapted_at = 0.0  # monotonic time of the last `_adapt_write_slots`
        # The nodes and pods of the TAS view (runtime/topology_feed.py): not in WATCHED
        # (watched with a field selector), so a new state is given what it saw.
        self.topology = TopologyFeed(lambda: self.ctx.state, self.ctx.wake.set)

    # -- what the operator reads; the integrations' view (integrations/host.py) ----------------

    @property
    def state(self) -> ClusterState:
        return self.ctx.state

    @property
    def metrics(self) -> Metrics:
        return self.ctx.metrics

    @property
    def events(self) -> EventSink | None:
        return self.ctx.events

    @property
    def leading(self) -> bool:
        return self.ctx.leading

    @leading.setter
    def leading(self, leading: bool) -> None:
        self.ctx.leading = leading

    @property
    def workload_listeners(self) -> list[Callable[[dict[str, Any]], None]]:
        return self.sync.workload_listeners

    def workload(self, key: str) -> dict[str, Any] | None:
        """The newest copy of a Workload seen (None: not known)."""
        return self.sync.body(key)  # type: ignore[arg-type]

    def node_usable(self, name: str) -> bool:
        node = self.ctx.state.tas.nodes.get(name)
        return node is not None and node.ready

    def pinned_pods_termination(self, workload: str, node: str) -> str | None:
        return pinned_pods_termination(self.ctx.state, WorkloadKey(workload), node)

    def flavor_placement(self, name: str) -> Placement | None:
        """Where the ResourceFlavor places pods: its node labels, and tolerations of its
        taints as a pod spec writes them (None: no such flavor)."""
        found = self.ctx.state.objects.flavors.get(name)
        if found is None:
            return None
        tolerations = []
        for toleration in found.tolerations:
            out = {
                "key": toleration.key,
                "operator": toleration.operator,
                "effect": toleration.effect,
            }
            if toleration.operator != "Exists":
                out["value"] = toleration.value
            tolerations.append({k: v for k, v in out.items() if v})
        return Placement(dict(found.node_labels), tolerations)

    def _pod_placement(self, name: str) -> FlavorPlacement | None:
        found = self.flavor_placement(name)
        if found is None:
            return None
        return FlavorPlacement(dict(found.node_labels), tuple(found.tolerations))

    def priority_of_class(self, name: str) -> int | None:
        cls = self.ctx.state.objects.priority_classes.workload_class(name)
        return cls.value if cls is not None else None

    def namespace_labels(self, name: str) -> Mapping[str, str] | None:
        return self.ctx.state.objects.namespaces.get(name)

    def local_queue_exists(self, namespace: str, name: str) -> bool:
        return f"{namespace}/{name}" in self.ctx.state.objects.local_queues

    def priority_of_pod_class(self, name: str) -> int | None:
        cls = self.ctx.state.objects.priority_classes.pod_class(name)
        return cls.value if cls is not None else None

    @property
    def wait_for_pods_ready(self) -> bool:
        config = self.ctx.config.wait_for_pods_ready
        return config is not None and config.enable

    def pods_ready_started(
        self, workload: Mapping[str, Any], queued_seconds: float, admitted_seconds: float
    ) -> None:
        """Observe Kueue's ready wait-time histograms for a Workload whose pods became ready
        for the first time since its admission (the job side reports it, as in Kueue)."""
        metrics = self.ctx.metrics
        admission = (workload.get("status") or {}).get("admission") or {}
        labels = (
            str(admission.get("clusterQueue") or ""),
            priority_class_of(dict(workload)),
            metrics.role,
        )
        metrics.ready_wait_time.labels(*labels).observe(queued_seconds)
        metrics.admitted_until_ready_wait_time.labels(*labels).observe(admitted_seconds)
        metrics.local_queue.observe_ready(
            workload, labels[1], metrics.role, queued_seconds, admitted_seconds
        )

    def workload_created(self, job_kind: str, job: Mapping[str, Any], workload: object) -> None:
        metrics = self.ctx.metrics
        if isinstance(workload, Mapping):  # the API server's answer to the create
            metrics.workload.observe_created(job_kind, job, workload, metrics.role)

    def scheduling_gate_removed(self, gate: str, workload: Mapping[str, Any], group: bool) -> None:
        metrics = self.ctx.metrics
        metrics.workload.observe_gate_removed(gate, workload, group, self.ctx.clock(), metrics.role)

    def known_keys(self) -> set[str]:
        """Every Workload the controller holds a copy of."""
        return set(self.sync.copies)

    # -- events --------------------------------------------------------------------------------

    def apply_event(self, event_type: str | None, body: dict[str, Any]) -> None:
        """Apply one watch event (type None/ADDED/MODIFIED/DELETED) to the state."""
        self.sync.apply_event(event_type, body)

    def reset(self) -> None:
        """Forget every object: the next LIST rebuilds the state from the API server alone
        (a new leader must not keep admissions it assumed while an earlier term's writes
        were cut off)."""
        self.ctx.state = new_state(self.ctx.config)
        self.engine = Engine(self.ctx.state)
        self.sync.reset()
        self.workloads_listed = False
        self.topology.replay(self.ctx.state)

    async def load(self, resources: Any, attempts: int | None = 10) -> None:
        """Initial state from a full LIST of every watched resource (restart safety: admitted
        usage comes from `status.admission`, so nothing is admitted twice or forgotten),
        each LIST tried `attempts` times (None: until the API server answers).
        With `namespaces` configured, namespaced objects of other namespaces are left out,
        as the watches leave them out."""
        api = self.ctx.api
        managed = set(self.ctx.config.namespaces)
        for resource in resources:
            items = await retried(functools.partial(api.list, resource), attempts=attempts)
            for item in items:
                namespace = (item.get("metadata") or {}).get("namespace")
                if managed and resource.namespaced and namespace not in managed:
                    continue
                self.apply_event(None, item)
        self.workloads_listed = True

    # -- the loop ------------------------------------------------------------------------------

    async def schedule_forever(self) -> None:
        """Run cycles until cancelled (on leadership loss, cancellation stops it at once)."""
        ctx = self.ctx
        interval = ctx.config.cycle_interval_seconds
        self.pending.start()
        try:
            while True:
                # Backoff expiries and the after-admission timers (PodsReady timeout,
                # maximum execution time) need no event, so look at least once a second.
                await wait_at_most(ctx.wake, 1.0)
                ctx.wake.clear()
                self._adapt_write_slots()
                if ctx.writes.waiting > ctx.writes.parallelism:
                    # More than a round of decisions is still waiting for write slots:
                    # decide nothing more until it has gone out (it holds quota the API
                    # server has not seen yet; a cycle for a handful of admissions would
                    # offer every queue's head again for them).
                    ctx.wake.set()
                    await asyncio.sleep(interval)
                    continue
                started = time.perf_counter()
                self.schedule_once()
                # Let a burst of events land before the next cycle, and never give the
                # cycles more than half of the event loop: a long cycle is followed by as
                # long for the watches and the writers, so the state the next cycle
                # decides on is never further behind the API server than that.
                await asyncio.sleep(max(interval, time.perf_counter() - started))
        finally:
            for task in list(ctx.tasks):
                task.cancel()

    def _adapt_write_slots(self) -> None:
        """Once a second, the decision write slots follow the watch (`WriteSlots.adapt`)."""
        now = time.monotonic()
        if now - self._adapted_at < 1.0:
            return
        self._adapted_at = now
        writes = self.ctx.writes
        writes.adapt(self.sync.watch_lag())
        self.ctx.metrics.write_slots.set(writes.parallelism)

    def schedule_once(self) -> None:
        """One admission cycle and the dispatch of its decisions (no waiting)."""
        ctx = self.ctx
        now = ctx.clock()
        if self.engine.state is not ctx.state:  # a new state (a new term): a new engine
            self.engine = Engine(ctx.state)
        started = time.perf_counter()
        # Decisions waiting for a write slot: at most eight rounds of slots (core step 9).
        # A cycle offers every queue's head, so at 1,000 ClusterQueues it costs the same
        # for 4 admissions as for 128: fewer, fuller cycles leave the CPU to the API server.
        limit = max(0, 8 * ctx.writes.parallelism - ctx.writes.waiting)
        result = self.engine.cycle(now, admission_limit=limit)
        elapsed = time.perf_counter() - started
        metrics = ctx.metrics
        metrics.cycle_latency.observe(elapsed)
        outcome = "success" if result.admitted else "inadmissible"
        metrics.admission_attempts.labels(outcome, metrics.role).inc()
        metrics.admission_attempt_duration.labels(outcome, metrics.role).observe(elapsed)
        self.writers.dispatch(result)
        self.after_admission.check(now)
        self.admission_checks.check(now)
        self.provisioning.check(now)
        if result.changed:
            ctx.wake.set()
        self.pending.explain_unqueued(now)
        self.pending.sync_pending_checks(now)


__all__ = ["Controller"]
