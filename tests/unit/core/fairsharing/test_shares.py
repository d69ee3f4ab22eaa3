"""controller/core/fairsharing/shares.py: dominant resource shares as Kueue computes them.

The first cases are those of Kueue's `pkg/cache/scheduler/fair_sharing_test.go`
(TestDominantResourceShare), each named after it, with Kueue's expected rounded weighted
share and dominant resource for every node; then comparison and rounding edges."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from fractions import Fraction

import pytest

from controller.core.fairsharing.shares import (
    MAX_WEIGHTED_SHARE,
    NEGATIVE,
    Share,
    compare,
    shares_of,
)
from controller.core.model.clusterqueues import ClusterQueue, FlavorResource
from controller.core.model.cohorts import Cohort
from controller.core.state import ClusterState
from tests.unit.core.builders import cluster, cq, group, m

GPU = "example.com/gpu"


@dataclass(frozen=True)
class Node:
    name: str
    cohort: bool
    value: int
    resource: str
    borrowing: bool


def weighted(queue: ClusterQueue, weight: str) -> ClusterQueue:
    return replace(queue, fair_weight=Fraction(weight))


def shares_in(
    state: ClusterState, request: Mapping[FlavorResource, int] | None = None
) -> set[Node]:
    """Every node's (rounded weighted share, dominant resource, borrowing), with `request`
    added to each node's usage as Kueue's test does."""
    shares = shares_of(state.objects, state.cache.quota)
    out: set[Node] = set()
    for name in state.objects.cluster_queues:
        share = shares.queue(name, request)
        out.add(Node(name, False, share.weighted_share(), share.resource, share.borrowing))
    cohorts = {
        c
        for q in state.objects.cluster_queues.values()
        if q.cohort
        for c in state.cache.quota.path(q.name)
    }
    for name in cohorts:  # Kueue adds the request to cohorts too: no case needs it off a root
        share = shares.cohort(name)
        out.add(Node(name, True, share.weighted_share(), share.resource, share.borrowing))
    return out


def use(state: ClusterState, queue: str, **by_flavor_resource: str) -> None:
    """Charge usage to a queue: keyword `flavor__resource` (gpu stands for example.com/gpu)."""
    for key, value in by_flavor_resource.items():
        flavor, resource = key.split("__")
        state.cache.quota.add_usage(
            queue, {(flavor, GPU if resource == "gpu" else resource): m(value)}
        )


def lending_pair(cpu: str | None, gpu: str, lend_cpu: str | None, lend_gpu: str) -> ClusterState:
    quotas: dict[str, str] = {GPU: gpu}
    lending: dict[str, str] = {GPU: lend_gpu}
    if cpu is not None and lend_cpu is not None:
        quotas = {"cpu": cpu, **quotas}
        lending = {"cpu": lend_cpu, **lending}
    return cluster(
        cq("cq", {"default": quotas}, cohort="test-cohort"),
        cq("lending-cq", {"default": lending}, cohort="test-cohort"),
    )


def test_no_cohort() -> None:
    state = cluster(cq("cq", {"default": {"cpu": "2000", GPU: "5"}}))
    use(state, "cq", default__cpu="1", default__gpu="2")
    assert shares_in(state) == {Node("cq", False, 0, "", False)}


def test_usage_below_nominal() -> None:
    state = lending_pair("2", "5", "8", "5")
    use(state, "cq", default__cpu="1", default__gpu="2")
    assert shares_in(state) == {
        Node("cq", False, 0, "", False),
        Node("lending-cq", False, 0, "", False),
        Node("test-cohort", True, 0, "", False),
    }


def test_usage_above_nominal() -> None:
    state = lending_pair("2", "5", "8", "5")
    use(state, "cq", default__cpu="3", default__gpu="7")
    assert shares_in(state) == {
        Node("cq", False, 200, GPU, True),  # (7-5)*1000/10
        Node("lending-cq", False, 0, "", False),
        Node("test-cohort", True, 0, "", False),
    }


def test_usage_slightly_above_nominal_in_a_cohort_with_large_quotas() -> None:
    state = cluster(
        cq("cq", {"default": {GPU: "500"}}, cohort="test-cohort"),
        weighted(cq("lending-cq", {"default": {GPU: "1000"}}, cohort="test-cohort"), "300"),
    )
    use(state, "cq", default__gpu="501")
    assert Node("cq", False, 1, GPU, True) in shares_in(state)  # 1000/1500, rounded up


def test_usage_way_above_nominal_in_a_cohort_with_large_quotas_and_weights() -> None:
    state = cluster(
        weighted(cq("cq", {"default": {GPU: "500"}}, cohort="test-cohort"), "300"),
        weighted(cq("lending-cq", {"default": {GPU: "1000"}}, cohort="test-cohort"), "300"),
    )
    use(state, "cq", default__gpu="800")
    assert Node("cq", False, 1, GPU, True) in shares_in(state)  # 300000/1500/300


def test_one_resource_above_nominal() -> None:
    state = lending_pair("2", "5", "8", "5")
    use(state, "cq", default__cpu="3", default__gpu="3")
    assert Node("cq", False, 100, "cpu", True) in shares_in(state)  # (3-2)*1000/10


def test_usage_with_workload_above_nominal() -> None:
    state = lending_pair("2", "5", "8", "5")
    use(state, "cq", default__cpu="1", default__gpu="2")
    request = {("default", "cpu"): m("4"), ("default", GPU): m("4")}
    assert shares_in(state, request) == {
        Node("cq", False, 300, "cpu", True),  # (1+4-2)*1000/10
        Node("lending-cq", False, 0, "", False),
        Node("test-cohort", True, 0, "", False),
    }


def test_a_resource_with_zero_lendable() -> None:
    state = cluster(
        cq("cq", {"default": {"cpu": "2", GPU: ("2", None, "0")}}, cohort="test-cohort"),
        cq("lending-cq", {"default": {"cpu": "8", GPU: ("64", None, "0")}}, cohort="test-cohort"),
    )
    use(state, "cq", default__cpu="1", default__gpu="1")
    request = {("default", "cpu"): m("4"), ("default", GPU): m("4")}
    # gpu borrows 3 but nothing of it can be lent: only cpu counts, (1+4-2)*1000/10
    assert Node("cq", False, 300, "cpu", True) in shares_in(state, request)


def test_multiple_flavors() -> None:
    state = cluster(
        cq("cq", groups=[group({"on-demand": {"cpu": "20"}, "spot": {"cpu": "80"}})], cohort="tc"),
        cq("lending-cq", {"default": {"cpu": "100"}}, cohort="tc"),
        flavors=("default", "on-demand", "spot"),
    )
    use(state, "cq", **{"on-demand__cpu": "15", "spot__cpu": "5"})
    request = {("on-demand", "cpu"): m("10")}
    assert shares_in(state, request) == {
        Node("cq", False, 25, "cpu", True),  # (15+10-20)*1000/200, spot under nominal
        Node("lending-cq", False, 0, "", False),
        Node("tc", True, 0, "", False),
    }


@pytest.mark.parametrize(
    ("weight", "value"),
    [("2", 100), ("0.5", 400), ("0", MAX_WEIGHTED_SHARE)],
    ids=[
        "above nominal with integer weight",
        "above nominal with decimal weight",
        "above nominal with zero weight",
    ],
)
def test_above_nominal_with_a_weight(weight: str, value: int) -> None:
    lend = "10" if weight == "0" else "5"
    state = cluster(
        weighted(cq("cq", {"default": {GPU: "5"}}, cohort="test-cohort"), weight),
        cq("lending-cq", {"default": {GPU: lend}}, cohort="test-cohort"),
    )
    use(state, "cq", default__gpu="7")
    assert Node("cq", False, value, GPU, True) in shares_in(state)


def tree(child_quota: str, child_weight: str, root_quota: str, limit: str | None) -> ClusterState:
    state = cluster(cq("cq", {"default": {GPU: child_quota}}, cohort="child-cohort"))
    own = group({"default": {GPU: ("0", limit, None)}}) if limit is not None else None
    state.set_cohort(Cohort("child-cohort", "root", (own,) if own else (), Fraction(child_weight)))
    state.set_cohort(Cohort("root", None, (group({"default": {GPU: root_quota}}),)))
    return state


def test_cohort_has_resource_share() -> None:
    state = tree("5", "2", "45", None)
    use(state, "cq", default__gpu="10")
    assert shares_in(state) == {
        Node("cq", False, 100, GPU, True),  # 5/50 × 1000
        Node("child-cohort", True, 50, GPU, True),  # 5/50 × 1000 / 2
        Node("root", True, 0, "", False),
    }


def test_resource_share_defined_for_resources_only_available_at_the_root_cohort() -> None:
    state = tree("0", "2", "50", None)
    use(state, "cq", default__gpu="10")
    assert shares_in(state) == {
        Node("cq", False, 200, GPU, True),  # 10/50 × 1000
        Node("child-cohort", True, 100, GPU, True),  # 10/50 × 1000 / 2
        Node("root", True, 0, "", False),
    }


def test_resource_share_affected_by_borrowing_limit() -> None:
    """From the queue's side the cohort can lend 10 (child-cohort's borrowingLimit), from
    child-cohort's side 50: different shares for the same 10 borrowed."""
    state = tree("0", "1", "50", "10")
    use(state, "cq", default__gpu="10")
    assert shares_in(state) == {
        Node("cq", False, 1000, GPU, True),
        Node("child-cohort", True, 200, GPU, True),
        Node("root", True, 0, "", False),
    }


def test_borrowing_against_an_exabyte_scale_quota() -> None:
    """Kueue saturates 1E cpu to MaxInt64 and its ratio rounds up to 1; the exact ratio,
    10^6/10^21, rounds up to 1 as well."""
    state = cluster(
        cq("cq", {"default": {"cpu": "0"}}, cohort="test-cohort"),
        cq("lending-cq", {"default": {"cpu": "1E"}}, cohort="test-cohort"),
    )
    use(state, "cq", default__cpu="1")
    assert Node("cq", False, 1, "cpu", True) in shares_in(state)


def test_compare_follows_kueue() -> None:
    """Kueue's CompareDRS: weighted share, except that a zero-weight node that borrows is
    above everyone else, and two of them compare by unweighted share."""
    low = Share(Fraction(1), Fraction(100), "cpu", frozenset({("f", "cpu")}))
    high = Share(Fraction(1, 2), Fraction(100), "cpu", frozenset({("f", "cpu")}))
    zero_small = Share(Fraction(0), Fraction(10), "cpu", frozenset({("f", "cpu")}))
    zero_big = Share(Fraction(0), Fraction(20), "cpu", frozenset({("f", "cpu")}))
    zero_idle = Share(Fraction(0), Fraction(0))
    assert compare(low, high) == -1 and compare(high, low) == 1
    assert compare(high, zero_small) == -1
    assert compare(zero_small, zero_big) == -1
    assert (
        compare(zero_idle, low) == -1 and compare(zero_idle, Share(Fraction(1), Fraction(0))) == 0
    )
    assert compare(NEGATIVE, zero_idle) == -1
    assert zero_small.infinite and not zero_idle.infinite
    assert math.isnan(zero_small.metric()) and zero_small.metric_cohort() == math.inf
    assert high.weighted_share() == 200 and high.metric() == 200.0


def test_a_share_is_exact_where_float64_would_round() -> None:
    """1/3 borrowed of the lendable, ×1000 = 333.33…: rounded up to 334 from the exact
    value; two shares that differ in the 17th digit still compare as different."""
    state = lending_pair(None, "0", None, "3")
    use(state, "cq", default__gpu="1")
    share = shares_of(state.objects, state.cache.quota).queue("cq")
    assert share.ratio == Fraction(1000, 3) and share.weighted_share() == 334
    a = Share(Fraction(1), Fraction(10**17 + 1, 10**17), "cpu", frozenset({("f", "cpu")}))
    b = Share(Fraction(1), Fraction(1), "cpu", frozenset({("f", "cpu")}))
    assert float(a.ratio) == float(b.ratio) and compare(a, b) == 1
