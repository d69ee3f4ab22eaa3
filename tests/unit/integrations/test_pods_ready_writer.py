"""How the integrations write PodsReady (controller/integrations/workload_writes.py,
`PodsReadyWriter`): the request Kueue's job side sends, once per change, deciding on the
write's answer while the watch still holds the older copy, and the histograms reported
once per start. The API client is a recorder that answers as the API server would (the
e2e tests in tests/e2e/test_pods_ready.py run the same writes against a real one)."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping
from typing import Any

from api.workload_status import rfc3339
from controller.integrations.host import Placement
from controller.integrations.workload_writes import PODS_READY_FIELD_MANAGER, PodsReadyWriter

T0 = 1_700_000_000.0


class RecordingCustomObjects:
    """Records status applies and answers with the object the server would store: the
    applied condition replaces the one of its type, and the resourceVersion moves on."""

    def __init__(self, stored: dict[str, Any]) -> None:
        self.stored = stored
        self.calls: list[dict[str, Any]] = []

    async def patch_namespaced_custom_object_status(
        self, group: str, version: str, namespace: str, plural: str, name: str, body: Any, **kw: Any
    ) -> dict[str, Any]:
        self.calls.append({"args": (group, version, namespace, plural, name), "body": body, **kw})
        answer = copy.deepcopy(self.stored)
        [applied] = body["status"]["conditions"]
        conditions = [c for c in answer["status"]["conditions"] if c["type"] != applied["type"]]
        answer["status"]["conditions"] = [*conditions, applied]
        answer["metadata"]["resourceVersion"] = str(int(answer["metadata"]["resourceVersion"]) + 1)
        self.stored = answer
        return copy.deepcopy(answer)


class View:
    """The controller view, recording the ready wait times it is told about."""

    leading = True
    events = None
    wait_for_pods_ready = True

    def __init__(self) -> None:
        self.started: list[tuple[str, float, float]] = []

    def workload(self, key: str) -> dict[str, Any] | None:
        return None

    def flavor_placement(self, name: str) -> Placement | None:
        return None

    def priority_of_class(self, name: str) -> int | None:
        return None

    def pods_ready_started(
        self, workload: Mapping[str, Any], queued_seconds: float, admitted_seconds: float
    ) -> None:
        self.started.append((workload["metadata"]["name"], queued_seconds, admitted_seconds))


def admitted_workload() -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": "job-a",
            "namespace": "ns",
            "uid": "uid-a",
            "generation": 2,
            "resourceVersion": "10",
            "creationTimestamp": rfc3339(T0),
        },
        "status": {
            "conditions": [
                {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved"},
                {
                    "type": "Admitted",
                    "status": "True",
                    "reason": "Admitted",
                    "lastTransitionTime": rfc3339(T0 + 10),
                },
            ]
        },
    }


def writer(stored: dict[str, Any]) -> tuple[PodsReadyWriter, RecordingCustomObjects, View]:
    api, view = RecordingCustomObjects(stored), View()
    clock = iter(T0 + 30 + i for i in range(100))
    return PodsReadyWriter(api, view, clock=lambda: next(clock)), api, view  # type: ignore[arg-type]


def test_the_write_is_kueues_single_condition_apply() -> None:
    wl = admitted_workload()
    pods_ready, api, view = writer(wl)
    assert asyncio.run(pods_ready.sync("ns/job-a", wl, False))
    [call] = api.calls
    assert call["args"] == ("kueue.x-k8s.io", "v1beta2", "ns", "workloads", "job-a")
    assert call["field_manager"] == PODS_READY_FIELD_MANAGER == "kueue-job-controller-PodsReady"
    assert call["force"] is True
    assert call["_content_type"] == "application/apply-patch+yaml"
    assert call["body"] == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "job-a", "namespace": "ns", "uid": "uid-a"},
        "status": {
            "conditions": [
                {
                    "type": "PodsReady",
                    "status": "False",
                    "reason": "WaitForStart",
                    "message": "Not all pods are ready or succeeded",
                    "lastTransitionTime": rfc3339(T0 + 30),
                    "observedGeneration": 2,
                }
            ]
        },
    }
    assert view.started == []


def test_a_stale_copy_is_not_written_again_and_the_answer_decides() -> None:
    wl = admitted_workload()
    pods_ready, api, view = writer(wl)
    assert asyncio.run(pods_ready.sync("ns/job-a", wl, True))  # Started
    assert view.started == [("job-a", 30.0, 20.0)]
    # The watch has not brought the written Workload yet: same readiness, no write.
    assert not asyncio.run(pods_ready.sync("ns/job-a", wl, True))
    assert len(api.calls) == 1
    # Readiness lost before the watch caught up: decided on the answer (True Started), so
    # it is WaitForRecovery, not WaitForStart.
    assert asyncio.run(pods_ready.sync("ns/job-a", wl, False))
    assert api.calls[-1]["body"]["status"]["conditions"][0]["reason"] == "WaitForRecovery"
    # The watch catches up: the newer copy decides; nothing left to write.
    assert not asyncio.run(pods_ready.sync("ns/job-a", api.stored, False))
    # Ready again: Recovered, and a recovery is not reported as a start.
    assert asyncio.run(pods_ready.sync("ns/job-a", api.stored, True))
    assert api.calls[-1]["body"]["status"]["conditions"][0]["reason"] == "Recovered"
    assert view.started == [("job-a", 30.0, 20.0)]
    assert pods_ready.writes == len(api.calls) == 3


def test_a_forgotten_workload_decides_on_its_copy() -> None:
    wl = admitted_workload()
    pods_ready, api, _ = writer(wl)
    assert asyncio.run(pods_ready.sync("ns/job-a", wl, True))
    assert pods_ready.newest("ns/job-a", wl) == api.stored
    pods_ready.forget("ns/job-a")
    assert pods_ready.newest("ns/job-a", wl) is wl
