"""controller/core/afs/usage.py: Kueue's arithmetic of a LocalQueue's recent
usage, worked by hand."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from controller.core.afs.usage import (
    AdmissionFairSharing,
    alpha_rate,
    decayed,
    resource_totals,
    weighted_usage,
)

# One tenth of a half-life: 1 − 0.5^0.1, the alpha of Kueue's TestScheduleForAFS
# (sampling 1s, half-life 10s).
TENTH = 0.06696700846319259


def test_alpha_is_the_weight_of_the_newest_sample() -> None:
    assert alpha_rate(10, 10) == 0.5
    assert alpha_rate(20, 10) == 0.75
    assert alpha_rate(1, 10) == pytest.approx(TENTH, abs=1e-15)
    assert alpha_rate(0, 10) == 0.0
    assert alpha_rate(5, 0) == 0.0  # no half-life: nothing is folded in (Kueue)


def test_decay_after_one_half_life_averages_old_and_new() -> None:
    # 8 cpus consumed, 4 cpus in use for one half-life: 8 × 0.5 + 4 × 0.5.
    assert decayed({"cpu": 8.0}, {"cpu": 4.0}, 10, 10) == {"cpu": 6.0}
    # Two half-lives idle: a quarter is left; a resource of either side stays listed.
    assert decayed({"cpu": 8.0}, {"memory": 0.0}, 20, 10) == {"cpu": 2.0, "memory": 0.0}
    # Newly used memory after two half-lives: three quarters of it.
    assert decayed({}, {"memory": 4.0}, 20, 10) == {"memory": 3.0}


def test_usage_weighs_resources_and_divides_by_the_local_queue_weight() -> None:
    # (2 + 1) cpu × 1 + 4 memory × 0.5 = 5, over a weight of 2.
    usage = weighted_usage({"cpu": 2.0, "memory": 4.0}, {"cpu": 1.0}, Fraction(2), {"memory": 0.5})
    assert usage == 2.5
    assert weighted_usage({"cpu": 3.0}, {}, Fraction(1, 2), {}) == 6.0
    assert weighted_usage({}, {}, Fraction(1), {}) == 0.0


def test_a_zero_weight_is_an_infinite_usage_even_when_idle() -> None:
    """Kueue's test 'does not prioritize a zero-weight localqueue': 0/0 must not sort first."""
    assert weighted_usage({}, {}, Fraction(0), {}) == math.inf
    assert weighted_usage({"cpu": 5.0}, {}, Fraction(0), {}) == math.inf


def test_entry_penalty_is_one_samples_share_of_the_requests() -> None:
    settings = AdmissionFairSharing(usage_half_life_seconds=10, usage_sampling_interval_seconds=1)
    penalty = settings.entry_penalty({"cpu": 8.0, "memory": 2.0})
    assert penalty["cpu"] == pytest.approx(8 * TENTH, abs=1e-15)
    assert penalty["memory"] == pytest.approx(2 * TENTH, abs=1e-15)
    # A half-life of one sampling interval: half of it.
    half = AdmissionFairSharing(usage_half_life_seconds=60, usage_sampling_interval_seconds=60)
    assert half.entry_penalty({"cpu": 8.0}) == {"cpu": 4.0}
    assert AdmissionFairSharing().entry_penalty({"cpu": 8.0}) == {"cpu": 0.0}


def test_resource_totals_sum_flavors_in_whole_units() -> None:
    usage = {("on-demand", "cpu"): 1500, ("spot", "cpu"): 500, ("spot", "memory"): 2048000}
    assert resource_totals(usage.items()) == {"cpu": 2.0, "memory": 2048.0}
