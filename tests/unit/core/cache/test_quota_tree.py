"""Quota arithmetic (controller/core/cache/quota_tree.py)."""

from __future__ import annotations

from controller.core.cache.quota_tree import QuotaTree
from controller.core.model.clusterqueues import ResourceQuota

FR = ("f", "cpu")


def q(
    nominal: int, borrow: int | None = None, lend: int | None = None
) -> dict[tuple[str, str], ResourceQuota]:
    return {FR: ResourceQuota(nominal, borrow, lend)}


def test_queue_without_cohort_has_only_nominal() -> None:
    tree = QuotaTree()
    tree.set_cluster_queue("a", None, q(10, borrow=5))
    tree.add_usage("a", {FR: 4})
    assert tree.available("a", FR) == 6
    assert tree.potential_available("a", FR) == 10


def test_borrowing_limit_applies_to_usage_already_borrowed() -> None:
    tree = QuotaTree()
    tree.set_cluster_queue("a", "co", q(2, borrow=1))
    tree.set_cluster_queue("b", "co", q(10))
    tree.add_usage("a", {FR: 2})
    assert tree.available("a", FR) == 1
    tree.add_usage("a", {FR: 1})
    assert tree.available("a", FR) == 0
    assert tree.potential_available("a", FR) == 3


def test_lending_limit_keeps_private_quota_out_of_the_pool() -> None:
    tree = QuotaTree()
    tree.set_cluster_queue("lender", "co", q(10, lend=3))
    tree.set_cluster_queue("b", "co", q(0))
    assert tree.cohort_pool("co", FR) == 3
    assert tree.available("b", FR) == 3
    assert tree.available("lender", FR) == 10
    tree.add_usage("lender", {FR: 8})  # 7 private + 1 from the pool
    assert tree.cohort_usage("co", FR) == 1
    assert tree.available("b", FR) == 2


def test_usage_bubbles_only_beyond_nominal_share_and_returns_to_zero() -> None:
    tree = QuotaTree()
    tree.set_cluster_queue("a", "co", q(4))
    tree.set_cluster_queue("b", "co", q(4))
    tree.add_usage("a", {FR: 6})
    assert tree.available("b", FR) == 2
    assert tree.borrowing("a", FR)
    tree.remove_usage("a", {FR: 6})
    assert tree.usage_of("a") == {}
    assert tree.cohort_usage("co", FR) == 0


def test_spec_update_and_removal_adjust_cohort_totals() -> None:
    tree = QuotaTree()
    tree.set_cluster_queue("a", "co", q(4))
    tree.set_cluster_queue("b", "co", q(4))
    tree.add_usage("b", {FR: 3})
    tree.set_cluster_queue("a", "co", q(8))
    assert tree.cohort_pool("co", FR) == 12
    tree.set_cluster_queue("a", "other", q(8))
    assert tree.cohort_pool("co", FR) == 4
    assert tree.members("co") == {"b"}
    tree.remove_cluster_queue("b")
    assert tree.members("co") == frozenset()
    assert tree.usage("b", FR) == 3  # still held until released
    tree.remove_usage("b", {FR: 3})
    assert tree.usage_of("b") == {}


def test_simulate_restores_exactly() -> None:
    tree = QuotaTree()
    tree.set_cluster_queue("a", "co", q(4))
    tree.set_cluster_queue("b", "co", q(4))
    tree.add_usage("a", {FR: 7})
    with tree.simulate({"a": {FR: 5}}):
        assert tree.available("b", FR) == 6
        assert tree.fits("b", {FR: 6})
    assert tree.available("b", FR) == 1
    assert tree.cohort_usage("co", FR) == 7
