"""Kueue's priority boost (the `kueue.x-k8s.io/priority-boost` annotation, PriorityBoost
gate): parsed as Go's ParseInt(…, 10, 32), added to the priority the engine orders and
preempts by when the gate is on, ignored when it is off, and a bad value counted as 0
(Kueue's EffectivePriority). Preemption cost still breaks ties between equal effective
priorities only (docs/priority-boost.md)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from api.constants import WithinClusterQueuePolicy
from controller.core.model.clusterqueues import PreemptionPolicy
from controller.core.model.priorities import parse_priority_boost
from controller.core.model.workloads import Workload
from controller.core.queue.visibility import pending_in_cluster_queue
from controller.core.scheduler.cycle import run_cycle
from controller.core.state import ClusterState
from tests.unit.core.builders import add, cluster, cq, wl

WITHIN = PreemptionPolicy(within_cluster_queue=WithinClusterQueuePolicy.LOWER_PRIORITY)


@pytest.mark.parametrize(
    ("text", "value"), [(None, 0), ("0", 0), ("100", 100), ("-5", -5), ("+7", 7)]
)
def test_parse(text: str | None, value: int) -> None:
    assert parse_priority_boost(text) == value


@pytest.mark.parametrize("text", ["", " 1", "1_000", "1.5", "x", "2147483648", "-2147483649"])
def test_parse_refuses_what_go_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="signed"):
        parse_priority_boost(text)


def boosted(workload: Workload, boost: str) -> Workload:
    return replace(workload, priority_boost=boost)


def queue_order(state: ClusterState) -> list[str]:
    return [item.name for item in pending_in_cluster_queue(state, "cq") or []]


def full_queue(gate: bool) -> ClusterState:
    state = cluster(cq("cq", {"default": {"cpu": "1"}}, preemption=WITHIN))
    state.priority_boost = gate
    return state


def test_the_boost_reorders_the_queue_only_with_the_gate_on() -> None:
    for gate, expected in ((True, ["low", "mid"]), (False, ["mid", "low"])):
        state = add(
            full_queue(gate),
            wl("filler", priority=1000, cpu=1),
            wl("mid", priority=50, created=1.0, cpu=1),
            boosted(wl("low", priority=10, created=2.0, cpu=1), "100"),
        )
        run_cycle(state, 0)
        assert queue_order(state) == expected
        # The API's priority is the base one, as Kueue's visibility API reports.
        priorities = {i.name: i.priority for i in pending_in_cluster_queue(state, "cq") or []}
        assert priorities == {"mid": 50, "low": 10}


def test_a_bad_value_counts_as_zero() -> None:
    state = add(
        full_queue(True),
        wl("filler", priority=1000, cpu=1),
        wl("mid", priority=50, created=1.0, cpu=1),
        boosted(wl("low", priority=10, created=2.0, cpu=1), "lots"),
    )
    run_cycle(state, 0)
    assert queue_order(state) == ["mid", "low"]


def test_a_boosted_preemptor_preempts_and_a_boosted_victim_is_spared() -> None:
    # Kueue's "boosting a low-priority pending workload preempts the running workload".
    state = add(full_queue(True), wl("running", priority=100, cpu=1))
    run_cycle(state, 0)
    add(state, boosted(wl("boosted", priority=50, created=1.0, cpu=1), "100"))
    [preemption] = run_cycle(state, 1).preempting
    assert [v.workload_key for v in preemption.victims] == ["ns/running"]

    # A running Workload boosted above the preemptor is no candidate.
    state = add(full_queue(True), boosted(wl("running", priority=10, cpu=1), "100"))
    run_cycle(state, 0)
    add(state, wl("urgent", priority=50, created=1.0, cpu=1))
    assert run_cycle(state, 1).preempting == ()


def test_changing_the_annotation_reorders_a_pending_workload() -> None:
    state = add(
        full_queue(True),
        wl("filler", priority=1000, cpu=1),
        wl("mid", priority=50, created=1.0, cpu=1),
        wl("low", priority=10, created=2.0, cpu=1),
    )
    run_cycle(state, 0)
    assert queue_order(state) == ["mid", "low"]
    add(state, boosted(wl("low", priority=10, created=2.0, cpu=1), "41"))
    assert queue_order(state) == ["low", "mid"]


def test_the_validating_webhook_refuses_a_bad_value_with_the_gate_on() -> None:
    from controller.runtime.validating_webhook import review_response

    def review(value: str) -> dict[str, object]:
        obj = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {
                "name": "w",
                "namespace": "ns",
                "annotations": {"kueue.x-k8s.io/priority-boost": value},
            },
            "spec": {
                "queueName": "lq",
                "podSets": [
                    {
                        "name": "main",
                        "count": 1,
                        "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}},
                    }
                ],
            },
        }
        return {"request": {"uid": "u", "operation": "CREATE", "object": obj}}

    assert review_response(review("x"))["response"]["allowed"]  # gate off: ignored
    refused = review_response(review("x"), priority_boost=True)["response"]
    assert not refused["allowed"]
    assert refused["status"]["message"] == (
        'metadata.annotations[kueue.x-k8s.io/priority-boost]: Invalid value: "x": '
        "must be a valid signed integer"
    )
    empty = review_response(review(""), priority_boost=True)["response"]["status"]["message"]
    assert 'use "0" explicitly, empty string is not allowed' in empty
    assert review_response(review("-3"), priority_boost=True)["response"]["allowed"]
