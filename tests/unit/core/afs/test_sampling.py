"""controller/core/afs/sampling.py: the sampling tick folds each LocalQueue's admitted
usage into its history with Kueue's decay, only where admission fair sharing applies."""

from __future__ import annotations

from dataclasses import replace

import pytest

from api.constants import AdmissionMode, StopPolicy
from controller.core.afs.sampling import fair_local_queues, local_queue_usages, sample
from controller.core.afs.usage import AdmissionFairSharing
from controller.core.model.clusterqueues import LocalQueue
from controller.core.model.workloads import WorkloadKey
from controller.core.scheduler.cycle import run_cycle
from tests.unit.core.builders import add, cluster, cq, wl

USAGE_BASED = AdmissionMode.USAGE_BASED_ADMISSION_FAIR_SHARING
TENTH = 1 - 0.5**0.1  # entry penalty rate: sampling 1s, half-life 10s
FAIR = cq("fair", {"default": {"cpu": "8"}}, admission_mode=USAGE_BASED)


def test_sampling_decays_history_towards_what_is_admitted() -> None:
    state = cluster(FAIR, cq("plain", {"default": {"cpu": "8"}}))
    state.admission_fair_sharing = AdmissionFairSharing(10.0, 1.0)
    state.set_local_queue(LocalQueue("ns", "lq-a", "fair", consumed_status={"cpu": 8.0}))
    add(state, wl("a1", "lq-a", cpu="4"))
    run_cycle(state, 0)
    assert fair_local_queues(state.queues, state.objects) == ["ns/fair", "ns/lq-a"]  # not ns/plain
    [idle, first] = sample(state.queues, state.objects, 100.0)
    # The first sample stamps the time and folds nothing; the penalty is still pending.
    assert (first.local_queue, first.cluster_queue) == ("ns/lq-a", "fair")
    assert (first.consumed, first.last_update) == ({"cpu": 8.0}, 100.0)
    assert first.penalty == pytest.approx({"cpu": 4 * TENTH})
    assert first.usage == pytest.approx(8 + 4 * TENTH)
    assert (idle.local_queue, idle.consumed, idle.usage) == ("ns/fair", {}, 0.0)
    # One half-life later, 4 cpus still admitted: 8 × 0.5 + 4 × 0.5.
    [_, later] = sample(state.queues, state.objects, 110.0)
    assert later.consumed == {"cpu": 6.0} and later.last_update == 110.0
    # Seen back admitted: the penalty moves into consumed.
    state.settle_admission(WorkloadKey("ns/a1"), 110.0)
    [report] = [
        u for u in local_queue_usages(state.queues, state.objects) if u.local_queue == "ns/lq-a"
    ]
    assert report.penalty == {} and report.consumed == pytest.approx({"cpu": 6 + 4 * TENTH})


def test_without_a_half_life_each_sample_starts_over() -> None:
    state = cluster(FAIR)
    state.admission_fair_sharing = AdmissionFairSharing(0.0, 60.0)
    state.set_local_queue(LocalQueue("ns", "lq", "fair", consumed_status={"cpu": 8.0}))
    [_, entry] = sample(state.queues, state.objects, 5.0)
    assert entry.consumed == {"cpu": 0.0}


def test_an_inactive_cluster_queues_local_queues_keep_their_history() -> None:
    state = cluster(FAIR)
    state.admission_fair_sharing = AdmissionFairSharing(10.0, 1.0)
    state.set_local_queue(LocalQueue("ns", "lq", "fair", consumed_status={"cpu": 8.0}))
    sample(state.queues, state.objects, 0.0)
    state.set_cluster_queue(replace(FAIR, stop_policy=StopPolicy.HOLD))
    assert sample(state.queues, state.objects, 100.0) == []
    state.set_cluster_queue(FAIR)
    [_, entry] = sample(state.queues, state.objects, 100.0)  # idle for 10 half-lives
    assert entry.consumed == {"cpu": 8.0 * 0.5**10}


def test_nothing_is_sampled_while_admission_fair_sharing_is_off() -> None:
    state = cluster(FAIR)
    state.set_local_queue(LocalQueue("ns", "lq", "fair", consumed_status={"cpu": 8.0}))
    assert (
        sample(state.queues, state.objects, 10.0) == []
        and local_queue_usages(state.queues, state.objects) == []
    )
