"""Watch events applied to the controller's state (controller/runtime/sync.py): a status-only
change of a Workload keeps the pod sets converted from the same spec; a new spec, a new
object or an invalid copy never do; while our write is in flight, events wait, and only
those newer than the write's answer are applied afterwards."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from controller.config import ControllerConfig
from controller.core.model.workloads import WorkloadKey
from controller.core.scheduler.cycle import run_cycle
from controller.kube.client import WORKLOADS, Api
from controller.kube.informer import Informer
from controller.runtime.controller import Controller
from tests.unit.runtime.workloads import (
    admitted_status,
    fair_queue_objects,
    leading_controller,
    workload_body,
)


def _body(rv: str, generation: int | None, cpu: str = "1", uid: str = "u1") -> dict[str, Any]:
    return workload_body("w", rv=rv, generation=generation, cpu=cpu, uid=uid, count=2)


def _status_change(body: dict[str, Any], rv: str) -> dict[str, Any]:
    changed = copy.deepcopy(body)
    changed["metadata"]["resourceVersion"] = rv
    changed["status"] = {"conditions": [{"type": "Finished", "status": "False"}]}
    return changed


W = WorkloadKey("ns/w")


def _controller() -> Controller:
    return Controller(None, ControllerConfig())  # type: ignore[arg-type]


def test_a_status_change_keeps_the_pod_sets_of_the_same_spec() -> None:
    controller = _controller()
    controller.apply_event("ADDED", _body("1", 1))
    before = controller.state.cache.workloads["ns/w"].pod_sets
    controller.apply_event("MODIFIED", _status_change(_body("1", 1), "2"))
    after = controller.state.cache.workloads["ns/w"]
    assert after.pod_sets is before  # not converted again
    assert after.pod_sets[0].requests["cpu"] == 1000 and after.pod_sets[0].count == 2


def test_a_new_generation_uid_or_missing_generation_converts_again() -> None:
    controller = _controller()
    controller.apply_event("ADDED", _body("1", 1))
    first = controller.state.cache.workloads["ns/w"].pod_sets

    controller.apply_event("MODIFIED", _body("2", 2, cpu="3"))  # the spec changed
    second = controller.state.cache.workloads["ns/w"].pod_sets
    assert second is not first and second[0].requests["cpu"] == 3000

    controller.apply_event("MODIFIED", _body("3", 2, cpu="3", uid="u2"))  # recreated
    assert controller.state.cache.workloads["ns/w"].pod_sets is not second

    no_generation = _controller()
    no_generation.apply_event("ADDED", _body("1", None))
    kept = no_generation.state.cache.workloads["ns/w"].pod_sets
    no_generation.apply_event("MODIFIED", _status_change(_body("1", None), "2"))
    assert no_generation.state.cache.workloads["ns/w"].pod_sets is not kept


def test_an_invalid_copy_is_never_the_source_of_reused_pod_sets() -> None:
    """A spec the controller refused stays refused through later status-only changes:
    the state's pod sets come from an older spec and must not stand in for it."""
    controller = _controller()
    controller.apply_event("ADDED", _body("1", 1))
    invalid = _body("2", 2, cpu="lots")
    controller.apply_event("MODIFIED", invalid)
    assert "ns/w" in controller.sync.problems
    controller.apply_event("MODIFIED", _status_change(invalid, "3"))
    assert "cpu" in controller.sync.problems["ns/w"] and "lots" in controller.sync.problems["ns/w"]
    assert controller.state.cache.workloads["ns/w"].pod_sets[0].requests["cpu"] == 1000


def test_kueues_spec_rules_are_checked_once_per_generation() -> None:
    """A spec breaking one of Kueue's rules stays invalid through status-only changes
    without the rules being run on it again; a new generation is checked afresh."""
    controller = _controller()
    broken = _body("1", 1)
    broken["spec"]["priorityClassRef"] = {
        "group": "kueue.x-k8s.io",
        "kind": "WorkloadPriorityClass",
        "name": "high",
    }
    controller.apply_event("ADDED", broken)
    first = controller.state.cache.workloads["ns/w"]
    assert first.invalid is not None and "priority should not be nil" in first.invalid
    controller.apply_event("MODIFIED", _status_change(broken, "2"))
    after = controller.state.cache.workloads["ns/w"]
    assert after.spec_errors is first.spec_errors  # not checked again
    assert after.invalid == first.invalid

    fixed = _body("3", 2)
    fixed["spec"]["priorityClassRef"] = broken["spec"]["priorityClassRef"]
    fixed["spec"]["priority"] = 100
    controller.apply_event("MODIFIED", fixed)
    assert controller.state.cache.workloads["ns/w"].invalid is None
    assert controller.state.cache.workloads["ns/w"].spec_errors == ()


def test_events_wait_while_a_write_is_in_flight_and_stale_ones_drop_out() -> None:
    controller = _controller()
    controller.apply_event("ADDED", _body("1", 1))
    controller.sync.begin_write(W)
    # The informer delivers an old copy (no reservation) and a newer one meanwhile.
    controller.apply_event("MODIFIED", _status_change(_body("1", 1), "2"))
    assert controller.sync.copies[W].rv == 1  # held back, not applied
    ours = workload_body("w", admitted_status(), rv="5", uid="u1", count=2)
    controller.sync.end_write(W, ours)
    assert controller.sync.copies[W].rv == 5  # rv 2 is older than our write's answer
    assert controller.state.cache.admitted[W].cluster_queue == "cq"
    controller.apply_event("MODIFIED", workload_body("w", rv="4", uid="u1", count=2))
    assert controller.state.cache.admitted[W].cluster_queue == "cq"  # an old copy undoes nothing


def test_a_deleted_workload_is_forgotten_everywhere() -> None:
    controller = _controller()
    controller.apply_event("ADDED", _body("1", 1))
    controller.pending.written[W] = "insufficient quota"
    controller.apply_event("DELETED", _body("1", 1))
    assert W not in controller.sync.copies and W not in controller.state.cache.records
    assert W not in controller.pending.written


def test_a_workload_seen_admitted_settles_its_entry_penalty() -> None:
    """Admission fair sharing: the cycle's admission pushes an entry penalty on lq; the
    write's answer (Admitted=True) settles it into lq's consumed usage at that time. A copy
    that arrives admitted (a restart's LIST) is no transition: nothing to settle."""
    config = ControllerConfig.model_validate(
        {"admissionFairSharing": {"usageHalfLifeTime": "10s", "usageSamplingInterval": "1s"}}
    )
    controller = Controller(None, config, clock=lambda: 500.0)  # type: ignore[arg-type]
    for obj in (
        *fair_queue_objects(),
        {
            "kind": "LocalQueue",
            "metadata": {"name": "lq", "namespace": "ns"},
            "spec": {"clusterQueue": "cq"},
        },
    ):
        controller.apply_event("ADDED", obj)
    controller.apply_event("ADDED", workload_body("w", rv="1", uid="u1"))
    [admit] = run_cycle(controller.state, 400.0).admitted
    ledger = controller.state.queues.usage_ledger
    assert ledger.penalized_local_queue(admit.workload_key) == "ns/lq"
    controller.sync.begin_write(W)
    controller.sync.end_write(W, workload_body("w", admitted_status(), rv="2", uid="u1"))
    entry = ledger.entry("ns/lq")
    assert entry is not None and entry.penalty == {} and entry.last_update == 500.0
    assert entry.consumed == {"cpu": pytest.approx(1 - 0.5**0.1)}

    restarted = Controller(None, config, clock=lambda: 600.0)  # type: ignore[arg-type]
    restarted.apply_event("ADDED", workload_body("w", admitted_status(), rv="2", uid="u1"))
    assert restarted.state.queues.usage_ledger.entry("ns/lq") is None


@pytest.mark.parametrize(("copy_rv", "gone"), [("5", True), ("9", False)])
def test_a_workload_missing_from_a_relist_is_deleted_unless_seen_after_it(
    copy_rv: str, gone: bool
) -> None:
    """A Workload deleted while the watch was broken is missing from the re-list (at
    resourceVersion 7): it is deleted, its quota freed (it was kept, holding its quota, until
    the next term). A copy newer than the list (made again after it) is kept."""
    controller = leading_controller(None)
    controller.apply_event(None, workload_body("w", admitted_status(), rv=copy_rv))
    assert "ns/w" in controller.state.cache.admitted
    informer = Informer(None, WORKLOADS, controller)  # type: ignore[arg-type]

    async def request(method: str, path: str, **_: Any) -> dict[str, Any]:
        assert (method, path) == ("GET", Api.path(WORKLOADS, None))
        return {"metadata": {"resourceVersion": "7"}, "items": []}

    informer.api.request = request  # type: ignore[method-assign]
    asyncio.run(informer._relist(None))
    assert ("ns/w" in controller.state.cache.admitted) is not gone
    assert (W in controller.sync.copies) is not gone
