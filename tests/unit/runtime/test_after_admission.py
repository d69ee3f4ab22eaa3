"""The after-admission writers (controller/runtime/after_admission.py) against a recording
API: what a PodsReadyTimeout eviction and a deactivation write, their metrics, and that a
Workload with a write in flight gets no second one. The real API server is in
tests/integration/test_after_admission.py."""

from __future__ import annotations

import asyncio
from typing import Any

from api import workload_status
from controller.config import ControllerConfig, WaitForPodsReady
from controller.core.after_admission import Deactivate
from controller.runtime.after_admission import pods_ready_policy
from controller.runtime.controller import Controller
from tests.unit.runtime.workloads import RecordingApi, admitted_status, workload_body

ADMITTED_AT = 1000.0  # admitted_status's admission time


class DeactivatingApi(RecordingApi):
    def __init__(self) -> None:
        super().__init__()
        self.deactivated: list[tuple[str, str, str | None]] = []

    async def deactivate_workload(
        self, namespace: str, name: str, uid: str | None = None
    ) -> dict[str, Any]:
        self.deactivated.append((namespace, name, uid))
        body = workload_body(name, self.patches[-1][2] if self.patches else {}, rv="999")
        body["spec"]["active"] = False
        return body


def _controller(api: RecordingApi, **pods_ready: Any) -> Controller:
    config = ControllerConfig.model_validate({"waitForPodsReady": {"timeout": "60s", **pods_ready}})
    return Controller(api, config, clock=lambda: ADMITTED_AT + 60)  # type: ignore[arg-type]


def test_policy_from_configuration() -> None:
    assert pods_ready_policy(None) is None
    assert pods_ready_policy(WaitForPodsReady(enable=False)) is None
    policy = pods_ready_policy(WaitForPodsReady.model_validate({"timeout": "2m"}))
    assert policy is not None and (policy.timeout, policy.recovery_timeout) == (120.0, 120.0)
    off = pods_ready_policy(WaitForPodsReady.model_validate({"recoveryTimeout": "0s"}))
    assert off is not None and off.recovery_timeout is None


def test_timeout_eviction_carries_the_requeue_state_and_counts_the_metric() -> None:
    api = RecordingApi()
    controller = _controller(api, requeuingStrategy={"backoffBaseSeconds": 10})
    controller.after_admission.jitter = lambda: 0.0
    controller.apply_event("ADDED", workload_body("w", admitted_status()))

    async def run() -> None:
        assert controller.after_admission.check(ADMITTED_AT + 60) == 1
        assert controller.after_admission.check(ADMITTED_AT + 60) == 0  # at most once a second
        await asyncio.gather(*controller.ctx.tasks)

    asyncio.run(run())
    [(_, _, status)] = api.patches
    evicted = workload_status.condition({"status": status}, "Evicted")
    assert evicted is not None and evicted["reason"] == "PodsReadyTimeout"
    assert status["requeueState"] == {"count": 1, "requeueAt": "1970-01-01T00:17:50Z"}
    labels = {
        "cluster_queue": "cq",
        "reason": "PodsReadyTimeout",
        "underlying_cause": "WaitForStart",
        "priority_class": "",
        "replica_role": "standalone",
    }
    registry = controller.metrics.registry
    assert registry.get_sample_value("kueue_evicted_workloads_total", labels) == 1
    assert registry.get_sample_value("kueue_evicted_workloads_once_total", labels) == 1
    assert controller.state.cache.admitted["ns/w"].evicting
    assert not controller.after_admission.in_flight


def test_a_finished_workload_is_not_looked_at() -> None:
    """Past its PodsReady timeout, and Requeued=False (Deactivated) while active, a finished
    Workload gets no write: the check walks only the unfinished (`state.index.live`), as Kueue's
    workload controller returns early on a finished one."""
    api = RecordingApi()
    controller = _controller(api)
    status = admitted_status(finished=True)
    requeued = {
        "type": "Requeued",
        "status": "False",
        "reason": "Deactivated",
        "message": "The workload is deactivated",
        "lastTransitionTime": "2026-11-23T00:00:00Z",
    }
    status = {**status, "conditions": [*status["conditions"], requeued]}
    controller.apply_event("ADDED", workload_body("w", status))
    assert controller.after_admission.check(ADMITTED_AT + 3600) == 0
    assert not api.patches


def test_deactivation_marks_then_sets_active_false_then_the_cycle_evicts() -> None:
    api = DeactivatingApi()
    controller = _controller(api)
    controller.apply_event("ADDED", workload_body("w", admitted_status()))
    action = Deactivate("ns/w", "RequeuingLimitExceeded", "exceeding the maximum number")

    asyncio.run(controller.after_admission.write_deactivation(action, ADMITTED_AT + 60))

    [(_, _, status)] = api.patches
    target = workload_status.condition({"status": status}, "DeactivationTarget")
    assert target is not None and target["reason"] == "RequeuingLimitExceeded"
    assert api.deactivated == [("ns", "w", "uid-w")]
    (evict,) = controller.state.take_evictions()
    assert (evict.reason, evict.underlying_cause) == ("Deactivated", "RequeuingLimitExceeded")
    assert evict.message == "The workload is deactivated due to exceeding the maximum number"


def test_a_namespace_scoped_controller_loads_only_its_namespaces() -> None:
    class Listing(RecordingApi):
        async def list(self, resource: Any) -> list[dict[str, Any]]:
            mine = workload_body("mine")
            other = workload_body("other")
            other["metadata"]["namespace"] = "elsewhere"
            return [mine, other]

    from controller.kube.client import WORKLOADS

    controller = Controller(Listing(), ControllerConfig(namespaces=["ns"]))  # type: ignore[arg-type]
    asyncio.run(controller.load([WORKLOADS]))
    assert set(controller.state.cache.workloads) == {"ns/mine"}
