"""Writes decided against the controller's copy of the Workload: an eviction leaves one that
finished while the write waited alone (no request); pending reasons wait out a short delay
and coalesce."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from api import workload_status
from controller.core.decisions import Evict, Inadmissible
from controller.runtime.config import ControllerConfig
from controller.runtime.controller import Controller


class RecordingApi:
    """Stands in for `Api` in a unit test: records status applies, answers them with the
    applied object."""

    def __init__(self) -> None:
        self.patches: list[tuple[str, str, dict[str, Any]]] = []

    async def apply_workload_status(self, body: dict[str, Any]) -> dict[str, Any]:
        meta = body["metadata"]
        self.patches.append((meta["namespace"], meta["name"], body["status"]))
        return _workload(meta["name"], body["status"])


def _workload(name: str, status: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": "1", "uid": name},
        "spec": {
            "queueName": "lq",
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]
                        }
                    },
                }
            ],
        },
        "status": status,
    }


def _admitted_status(finished: bool) -> dict[str, Any]:
    admission = {
        "clusterQueue": "cq",
        "podSetAssignments": [
            {"name": "main", "flavors": {"cpu": "rf"}, "resourceUsage": {"cpu": "1"}, "count": 1}
        ],
    }
    status = workload_status.admit({}, admission, 1000.0)
    if finished:
        conditions = [
            *status["conditions"],
            {
                "type": "Finished",
                "status": "True",
                "reason": "Succeeded",
                "message": "done",
                "lastTransitionTime": "2026-11-23T00:00:00Z",
            },
        ]
        status = {**status, "conditions": conditions}
    return status


@pytest.mark.parametrize("finished", [True, False])
def test_eviction_skips_a_workload_that_finished_before_the_write(finished: bool) -> None:
    api = RecordingApi()
    controller = Controller(api, ControllerConfig())  # type: ignore[arg-type]
    controller.apply_event("ADDED", _workload("w", _admitted_status(finished)))
    evict = Evict("ns/w", "cq", "Preempted", "preempted to make room")

    asyncio.run(controller._write_eviction(evict))

    registry = controller.metrics.registry

    def timed(phase: str) -> float | None:
        labels = {"write": "evict", "phase": phase}
        return registry.get_sample_value("quotagate_api_write_duration_seconds_count", labels)

    if finished:
        assert api.patches == []
        assert timed("request") is None  # nothing sent, nothing timed
    else:
        [(namespace, name, status)] = api.patches
        assert (namespace, name) == ("ns", "w")
        assert workload_status.is_evicted({"status": status})
        assert timed("wait") == 1 and timed("request") == 1


def test_pending_reasons_wait_out_the_delay_and_coalesce() -> None:
    config = ControllerConfig.model_validate({"pendingReasonDelaySeconds": 0.05})
    controller = Controller(RecordingApi(), config)  # type: ignore[arg-type]

    async def scenario() -> None:
        controller._want_pending(Inadmissible("ns/w", "cq", "available 0"))
        controller._want_pending(Inadmissible("ns/w", "cq", "available 1"))
        assert len(controller.status_queue) == 0  # not yet: it may be admitted meanwhile
        await asyncio.sleep(0.1)
        assert len(controller.status_queue) == 1
        assert controller.wanted_reason["ns/w"].reason == "available 1"

    asyncio.run(scenario())
