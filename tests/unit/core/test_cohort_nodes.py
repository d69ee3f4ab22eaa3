"""Explicit Cohort objects on the flat quota model (controller/core/cohort_nodes.py): a flat
Cohort is its implicit cohort; a tree or a Cohort's own quota is reported and its
ClusterQueues admit nothing."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.cohort_nodes import Cohort, parent_cycle, unsupported_cohort
from controller.core.cycle import run_cycle
from controller.core.from_api import apply, convert
from controller.core.pending import UNSUPPORTED_COHORT, cluster_queue_inactive, why_pending
from controller.core.state import ClusterState
from controller.core.unsupported import unsupported_fields
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
        assert cluster_queue_inactive(explicit, queue) is None
    # Never over the cohort's 8 cpus, whichever way it is declared.
    assert usage(explicit, "a") + usage(explicit, "b") <= 8_000


def test_a_flat_cohort_lets_its_members_borrow() -> None:
    state = _pair()
    apply(state, convert(_cohort_object("pool", {})))
    add(state, wl("big", "a", cpu=7))
    admitted = run_cycle(state, 0).admitted
    assert [(a.workload_key, a.borrowing) for a in admitted] == [("ns/big", True)]
    assert usage(state, "a") == 7_000


SHAPES = [
    pytest.param(
        "pool",
        [("pool", {"parentName": "org"})],
        "Cohort pool has spec.parentName org",
        id="parent",
    ),
    pytest.param(
        "pool",
        [("team", {"parentName": "pool"})],
        "Cohort team has spec.parentName pool",
        id="child",
    ),
    pytest.param(
        "pool",
        [
            (
                "pool",
                {
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu"],
                            "flavors": [
                                {
                                    "name": "default",
                                    "resources": [{"name": "cpu", "nominalQuota": 8}],
                                }
                            ],
                        }
                    ]
                },
            )
        ],
        "Cohort pool has spec.resourceGroups",
        id="own-quota",
    ),
    pytest.param(
        "pool",
        [("pool", {"parentName": "org"}), ("org", {"parentName": "pool"})],
        "a cycle (pool -> org -> pool)",
        id="cycle",
    ),
]


@pytest.mark.parametrize(("cohort", "objects", "named"), SHAPES)
def test_an_unsupported_cohort_shape_is_never_admitted_into(
    cohort: str, objects: list[tuple[str, dict[str, Any]]], named: str
) -> None:
    state = _pair(cohort)
    for name, spec in objects:
        apply(state, convert(_cohort_object(name, spec)))
    add(state, wl("fits", "a", cpu=1))
    assert settle(state)[0].admitted == ()
    assert admitted_keys(state) == set()
    for queue in ("a", "b"):
        inactive = cluster_queue_inactive(state, queue)
        assert inactive is not None and inactive.reason == UNSUPPORTED_COHORT
        assert named in inactive.message
    assert named in why_pending(state, "ns/fits")
    # Each of those Cohorts reports what it holds that quotagate does not compute.
    fields = {
        f for name, spec in objects for f, _ in unsupported_fields(_cohort_object(name, spec))
    }
    assert fields & {"spec.parentName", "spec.resourceGroups"}
    # Once the Cohort objects are gone the cohort is implicit and flat again.
    for name, _ in objects:
        state.remove_cohort(name)
    assert [a.workload_key for a in run_cycle(state, 1).admitted] == ["ns/fits"]


def test_other_cohorts_are_not_affected() -> None:
    state = cluster(
        cq("a", {"default": {"cpu": 4}}, cohort="pool"),
        cq("c", {"default": {"cpu": 4}}, cohort="elsewhere"),
    )
    state.set_cohort(Cohort("pool", parent="org"))
    add(state, wl("in-a", "a", cpu=1), wl("in-c", "c", cpu=1))
    settle(state)
    assert admitted_keys(state) == {"ns/in-c"}


def test_a_fair_sharing_weight_is_reported_and_changes_nothing() -> None:
    obj = _cohort_object("pool", {"fairSharing": {"weight": "3"}})
    assert [f for f, _ in unsupported_fields(obj)] == ["spec.fairSharing"]
    state = _pair()
    apply(state, convert(obj))
    assert cluster_queue_inactive(state, "a") is None
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
    obj = convert(_cohort_object("pool", {"parentName": "org", "resourceGroups": [{}]}))
    assert obj == Cohort("pool", parent="org", has_quota=True)
    assert convert(_cohort_object("pool", {})) == Cohort("pool")


NAMES = ("p", "q", "r", "s")


@settings(max_examples=80, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(NAMES),
        st.tuples(st.one_of(st.none(), st.sampled_from((*NAMES, "absent"))), st.booleans()),
        max_size=4,
    ),
    st.lists(
        st.tuples(st.sampled_from(NAMES), st.sampled_from("ab"), st.integers(1, 5)),
        max_size=10,
    ),
)
def test_random_cohort_objects_never_admit_into_what_the_flat_model_cannot_compute(
    objects: dict[str, tuple[str | None, bool]], requests: list[tuple[str, str, int]]
) -> None:
    queues = [cq(f"{c}-{m}", {"default": {"cpu": 3}}, cohort=c) for c in NAMES for m in "ab"]
    state = cluster(*queues)
    for name, (parent, has_quota) in objects.items():
        state.set_cohort(Cohort(name, parent, has_quota))
    for i, (c, m, cpu) in enumerate(requests):
        add(state, wl(f"w{i}", f"{c}-{m}", created=float(i), cpu=cpu))
    settle(state)
    for c in NAMES:
        flat = unsupported_cohort(state.cohorts, c) is None
        members = (f"{c}-a", f"{c}-b")
        used = [usage(state, q) for q in members]
        assert sum(used) <= 6_000  # the cohort's pool is never over-committed
        if not flat:
            assert used == [0, 0]
            assert all(cluster_queue_inactive(state, q) is not None for q in members)
        else:
            assert all(cluster_queue_inactive(state, q) is None for q in members)
            has_parent = objects.get(c, (None, False))[0] is not None
            is_parent = any(p == c for p, _ in objects.values())
            assert not has_parent and not is_parent and not objects.get(c, (None, False))[1]
