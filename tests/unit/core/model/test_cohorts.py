"""Explicit Cohort objects (controller/core/model/cohorts.py): a flat Cohort is its implicit
cohort; a parent and a Cohort's own quota are computed through the tree; a cycle of
parents makes the ClusterQueues inactive."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.cache.objects import UNSUPPORTED_COHORT
from controller.core.model.clusterqueues import ResourceQuota
from controller.core.model.cohorts import Cohort, parent_cycle, unsupported_cohort
from controller.core.model.from_api import convert
from controller.core.model.unsupported import unsupported_fields
from controller.core.pending import why_pending
from controller.core.scheduler.cycle import run_cycle
from controller.core.state import ClusterState
from tests.unit.core.builders import add, admitted_keys, cluster, cq, settle, usage, wl


def _pair(cohort: str = "pool") -> ClusterState:
    return cluster(
        cq("a", {"default": {"cpu": 4}}, cohort=cohort),
        cq("b", {"default": {"cpu": 4}}, cohort=cohort),
    )


def _cohort_object(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Cohort",
        "metadata": {"name": name},
        "spec": spec,
    }


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b"]), st.integers(min_value=1, max_value=6)),
        min_size=1,
        max_size=8,
    )
)
def test_a_flat_explicit_cohort_admits_exactly_as_the_implicit_one(
    requests: list[tuple[str, int]],
) -> None:
    implicit, explicit = _pair(), _pair()
    explicit.set_cohort(Cohort("pool"))
    for state in (implicit, explicit):
        for i, (queue, cpu) in enumerate(requests):
            add(state, wl(f"w{i}", queue, created=float(i), cpu=cpu))
        settle(state)
    assert admitted_keys(explicit) == admitted_keys(implicit)
    for queue in ("a", "b"):
        assert usage(explicit, queue) == usage(implicit, queue)
        assert explicit.objects.cluster_queue_inactive(queue) is None
    # Never over the cohort's 8 cpus, whichever way it is declared.
    assert usage(explicit, "a") + usage(explicit, "b") <= 8_000


def test_a_flat_cohort_lets_its_members_borrow() -> None:
    state = _pair()
    state.apply(convert(_cohort_object("pool", {})))
    add(state, wl("big", "a", cpu=7))
    admitted = run_cycle(state, 0).admitted
    assert [(a.workload_key, a.borrowing) for a in admitted] == [("ns/big", True)]
    assert usage(state, "a") == 7_000


OWN_QUOTA = {
    "resourceGroups": [
        {
            "coveredResources": ["cpu"],
            "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": 8}]}],
        }
    ]
}


def test_a_cohorts_own_quota_is_lent_to_its_queues() -> None:
    state = _pair()
    state.apply(convert(_cohort_object("pool", OWN_QUOTA)))
    assert unsupported_fields(_cohort_object("pool", OWN_QUOTA)) == []
    add(state, wl("big", "a", cpu=15))  # 4 of its own, 4 of b's, 7 of the Cohort's 8
    assert [(a.workload_key, a.borrowing) for a in run_cycle(state, 0).admitted] == [
        ("ns/big", True)
    ]
    add(state, wl("more", "b", cpu=2))
    settle(state, 1.0)
    assert admitted_keys(state) == {"ns/big"}  # 1 cpu left in the whole tree
    state.remove_cohort("pool")  # the Cohort's quota goes: the tree is over-committed
    assert state.objects.cluster_queue_inactive("a") is None


def test_queues_under_a_parent_borrow_through_it() -> None:
    """pool (a, b) ← org (c): a borrows c's unused quota through org."""
    state = cluster(
        cq("a", {"default": {"cpu": 4}}, cohort="pool"),
        cq("b", {"default": {"cpu": 4}}, cohort="pool"),
        cq("c", {"default": {"cpu": 4}}, cohort="org"),
    )
    state.apply(convert(_cohort_object("pool", {"parentName": "org"})))
    add(state, wl("big", "a", cpu=12))
    assert [a.workload_key for a in run_cycle(state, 0).admitted] == ["ns/big"]
    assert usage(state, "a") == 12_000
    add(state, wl("c-own", "c", cpu=1))
    settle(state, 1.0)
    assert "ns/c-own" not in admitted_keys(state)  # c lent everything; reclaim would preempt


def test_a_cycle_of_parents_makes_the_queues_inactive_and_names_it() -> None:
    state = _pair()
    state.apply(convert(_cohort_object("pool", {"parentName": "org"})))
    state.apply(convert(_cohort_object("org", {"parentName": "pool"})))
    add(state, wl("fits", "a", cpu=1))
    assert settle(state)[0].admitted == ()
    for queue in ("a", "b"):
        inactive = state.objects.cluster_queue_inactive(queue)
        assert inactive is not None and inactive.reason == UNSUPPORTED_COHORT
        assert inactive.message == (
            f"ClusterQueue {queue} is inactive: Cohort pool is in a tree with a cycle "
            "(pool -> org -> pool)"
        )
    assert "a cycle (pool -> org -> pool)" in why_pending(state, "ns/fits")
    state.remove_cohort("org")
    assert [a.workload_key for a in run_cycle(state, 1).admitted] == ["ns/fits"]


def test_other_cohorts_are_not_affected_by_a_cycle() -> None:
    state = cluster(
        cq("a", {"default": {"cpu": 4}}, cohort="pool"),
        cq("c", {"default": {"cpu": 4}}, cohort="elsewhere"),
    )
    state.set_cohort(Cohort("pool", parent="pool"))
    add(state, wl("in-a", "a", cpu=1), wl("in-c", "c", cpu=1))
    settle(state)
    assert admitted_keys(state) == {"ns/in-c"}


def test_a_fair_sharing_weight_is_reported_and_changes_nothing() -> None:
    obj = _cohort_object("pool", {"fairSharing": {"weight": "3"}})
    assert [f for f, _ in unsupported_fields(obj)] == ["spec.fairSharing"]
    state = _pair()
    state.apply(convert(obj))
    assert state.objects.cluster_queue_inactive("a") is None
    add(state, wl("big", "a", cpu=7))
    assert [a.workload_key for a in run_cycle(state, 0).admitted] == ["ns/big"]


def test_a_flat_cohort_reports_nothing() -> None:
    assert unsupported_fields(_cohort_object("pool", {})) == []
    assert unsupported_cohort({"pool": Cohort("pool")}, "pool") is None
    assert unsupported_cohort({}, "pool") is None


def test_parent_cycle() -> None:
    cohorts = {
        "a": Cohort("a", parent="b"),
        "b": Cohort("b", parent="c"),
        "c": Cohort("c", parent="b"),
        "root": Cohort("root"),
        "leaf": Cohort("leaf", parent="missing"),
    }
    assert parent_cycle(cohorts, "a") == ("b", "c", "b")
    assert parent_cycle(cohorts, "root") is None
    assert parent_cycle(cohorts, "leaf") is None
    assert parent_cycle(cohorts, "self") is None
    assert parent_cycle({"s": Cohort("s", parent="s")}, "s") == ("s", "s")


def test_convert_reads_a_cohort() -> None:
    obj = convert(_cohort_object("pool", {"parentName": "org", **OWN_QUOTA}))
    assert isinstance(obj, Cohort) and (obj.name, obj.parent) == ("pool", "org")
    assert obj.quotas() == {("default", "cpu"): ResourceQuota(8000)}
    assert convert(_cohort_object("pool", {})) == Cohort("pool")


NAMES = ("p", "q", "r", "s")


@settings(max_examples=80, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(NAMES),
        st.tuples(st.one_of(st.none(), st.sampled_from((*NAMES, "absent"))), st.integers(0, 4)),
        max_size=4,
    ),
    st.lists(
        st.tuples(st.sampled_from(NAMES), st.sampled_from("ab"), st.integers(1, 5)),
        max_size=10,
    ),
)
def test_random_cohort_trees_never_over_commit_and_a_cycle_admits_nothing(
    objects: dict[str, tuple[str | None, int]], requests: list[tuple[str, str, int]]
) -> None:
    queues = [cq(f"{c}-{m}", {"default": {"cpu": 3}}, cohort=c) for c in NAMES for m in "ab"]
    state = cluster(*queues)
    for name, (parent, own) in objects.items():
        groups = cq("x", {"default": {"cpu": own}}).resource_groups if own else ()
        state.set_cohort(Cohort(name, parent, groups))
    for i, (c, m, cpu) in enumerate(requests):
        add(state, wl(f"w{i}", f"{c}-{m}", created=float(i), cpu=cpu))
    settle(state)
    total_quota = 3_000 * 2 * len(NAMES) + 1_000 * sum(own for _, own in objects.values())
    assert sum(usage(state, q.name) for q in queues) <= total_quota
    fr = ("default", "cpu")
    for c in NAMES:  # no tree takes more than its root holds
        if state.cache.quota.is_root(c):
            assert state.cache.quota.cohort_usage(c, fr) <= state.cache.quota.cohort_pool(c, fr)
    for c in NAMES:
        members = (f"{c}-a", f"{c}-b")
        if unsupported_cohort(state.objects.cohorts, c) is not None:
            assert [usage(state, q) for q in members] == [0, 0]
            assert all(state.objects.cluster_queue_inactive(q) is not None for q in members)
        else:
            assert all(state.objects.cluster_queue_inactive(q) is None for q in members)
