"""Quota through a tree of cohorts (controller/core/cache/quota_tree.py) against a from-scratch
rendering of Kueue's resource-node recursion (`pkg/cache/scheduler/resource_node.go`):
random trees, quotas, limits and usage, with the structure changed mid-stream."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from hypothesis import given, settings
from hypothesis import strategies as st

from api.constants import ReclaimWithinCohortPolicy, WithinClusterQueuePolicy
from controller.core.cache.quota_tree import QuotaTree
from controller.core.model.clusterqueues import (
    FlavorQuotas,
    PreemptionPolicy,
    ResourceGroup,
    ResourceQuota,
)
from controller.core.model.cohorts import Cohort
from controller.core.pending import why_pending
from controller.core.scheduler.cycle import run_cycle
from controller.core.state import ClusterState
from tests.unit.core.builders import add, admitted_keys, cluster, cq, settle, wl

FR = ("default", "cpu")
COHORTS = ("a", "b", "c")
QUEUES = ("q1", "q2", "q3", "q4", "q5")


@dataclass
class Model:
    """The whole structure, evaluated from scratch as Kueue does."""

    parent: dict[str, str | None] = field(default_factory=dict)  # explicit cohorts
    cohort_quota: dict[str, ResourceQuota] = field(default_factory=dict)
    cohort_of: dict[str, str | None] = field(default_factory=dict)
    quota: dict[str, ResourceQuota] = field(default_factory=dict)
    usage: dict[str, int] = field(default_factory=dict)

    def effective_parent(self, cohort: str) -> str | None:
        declared = self.parent.get(cohort)
        if declared is None:
            return None
        seen, current = {cohort}, declared
        while current is not None and current not in seen:
            seen.add(current)
            current = self.parent.get(current)
        return None if current == cohort else declared

    def root(self, q: str) -> str:
        node = self.cohort_of.get(q)
        if node is None:
            return f"queue {q}"
        seen = {node}
        while (up := self.effective_parent(node)) is not None and up not in seen:
            seen.add(up)
            node = up
        return node

    def cohorts(self) -> set[str]:
        named = {c for c in self.cohort_of.values() if c} | set(self.parent)
        return named | {p for c in named if (p := self.effective_parent(c))}

    def subtree(self, cohort: str) -> int:
        total = self.cohort_quota.get(cohort, ResourceQuota(0)).nominal
        for q, c in self.cohort_of.items():
            if c == cohort:
                total += self.quota[q].nominal - self.local_q(q)
        for child in self.cohorts():
            if self.effective_parent(child) == cohort:
                total += self.subtree(child) - self.local_c(child)
        return total

    def used(self, cohort: str) -> int:
        total = 0
        for q, c in self.cohort_of.items():
            if c == cohort:
                total += max(0, self.usage.get(q, 0) - self.local_q(q))
        for child in self.cohorts():
            if self.effective_parent(child) == cohort:
                total += max(0, self.used(child) - self.local_c(child))
        return total

    def local_q(self, q: str) -> int:
        limit = self.quota[q].lending_limit
        return 0 if limit is None else max(0, self.quota[q].nominal - limit)

    def local_c(self, cohort: str) -> int:
        if self.effective_parent(cohort) is None:
            return 0
        limit = self.cohort_quota.get(cohort, ResourceQuota(0)).lending_limit
        return 0 if limit is None else max(0, self.subtree(cohort) - limit)

    def available_c(self, cohort: str) -> int:
        parent = self.effective_parent(cohort)
        if parent is None:
            return self.subtree(cohort) - self.used(cohort)
        from_parent = self.available_c(parent)
        limit = self.cohort_quota.get(cohort, ResourceQuota(0)).borrowing_limit
        local, used = self.local_c(cohort), self.used(cohort)
        if limit is not None:
            stored = self.subtree(cohort) - local
            from_parent = min(from_parent, stored - max(0, used - local) + limit)
        return max(0, local - used) + from_parent

    def available(self, q: str) -> int:
        quota, used, cohort = self.quota[q], self.usage.get(q, 0), self.cohort_of[q]
        if cohort is None:
            return max(0, quota.nominal - used)
        local = self.local_q(q)
        from_parent = self.available_c(cohort)
        if quota.borrowing_limit is not None:
            from_parent = min(
                from_parent, quota.nominal - local - max(0, used - local) + quota.borrowing_limit
            )
        return max(0, max(0, local - used) + from_parent)

    def potential_c(self, cohort: str) -> int:
        parent = self.effective_parent(cohort)
        if parent is None:
            return self.subtree(cohort)
        most = self.local_c(cohort) + self.potential_c(parent)
        limit = self.cohort_quota.get(cohort, ResourceQuota(0)).borrowing_limit
        return most if limit is None else min(most, self.subtree(cohort) + limit)

    def potential(self, q: str) -> int:
        quota, cohort = self.quota[q], self.cohort_of[q]
        if cohort is None:
            return quota.nominal
        most = self.local_q(q) + self.potential_c(cohort)
        if quota.borrowing_limit is not None:
            most = min(most, quota.nominal + quota.borrowing_limit)
        return most


limits = st.none() | st.integers(0, 12)
quotas = st.builds(ResourceQuota, st.integers(0, 12), limits, limits)
ops = st.one_of(
    st.tuples(st.just("cq"), st.sampled_from(QUEUES), st.none() | st.sampled_from(COHORTS), quotas),
    st.tuples(
        st.just("cohort"), st.sampled_from(COHORTS), st.none() | st.sampled_from(COHORTS), quotas
    ),
    st.tuples(st.just("uncohort"), st.sampled_from(COHORTS)),
    st.tuples(st.just("use"), st.sampled_from(QUEUES), st.integers(-6, 8)),
    st.tuples(st.just("use"), st.sampled_from(QUEUES), st.integers(-12, 12)),
)


@settings(max_examples=600, deadline=None)
@given(st.lists(ops, min_size=1, max_size=30))
def test_the_tree_answers_as_kueues_recursion_computed_from_scratch(
    steps: list[tuple[object, ...]],
) -> None:
    tree, model = QuotaTree(), Model()
    for step in steps:
        kind = step[0]
        if kind == "cq":
            _, q, cohort, quota = step
            assert isinstance(q, str) and isinstance(quota, ResourceQuota)
            tree.set_cluster_queue(q, cohort, {FR: quota})  # type: ignore[arg-type]
            model.cohort_of[q], model.quota[q] = cohort, quota  # type: ignore[assignment]
        elif kind == "cohort":
            _, name, parent, quota = step
            assert isinstance(name, str) and isinstance(quota, ResourceQuota)
            tree.set_cohort(name, parent, {FR: quota})  # type: ignore[arg-type]
            model.parent[name], model.cohort_quota[name] = parent, quota  # type: ignore[assignment]
        elif kind == "uncohort":
            name = step[1]
            assert isinstance(name, str)
            tree.remove_cohort(name)
            model.parent.pop(name, None)
            model.cohort_quota.pop(name, None)
        else:
            _, q, amount = step
            assert isinstance(q, str) and isinstance(amount, int)
            if q not in model.quota:
                continue
            amount = max(amount, -model.usage.get(q, 0))  # never below zero
            tree.add_usage(q, {FR: amount})
            model.usage[q] = model.usage.get(q, 0) + amount
        for q in model.quota:
            assert tree.available(q, FR) == model.available(q), (q, step)
            assert tree.potential_available(q, FR) == model.potential(q), (q, step)
            assert tree.fits(q, {FR: model.available(q)})
            # The borrowers index: the queues of its tree above their nominal quota.
            expected = {
                other
                for other in model.quota
                if model.root(other) == model.root(q)
                and model.usage.get(other, 0) > model.quota[other].nominal
            }
            assert tree.borrowers(q, frozenset({FR})) == expected, (q, step)


def test_a_three_level_tree_lends_and_borrows_within_each_levels_limits() -> None:
    """org (nominal 10) ← dept (lendingLimit 2, borrowingLimit 3) ← team-a (nominal 4),
    team-b (nominal 4); research ← org too, with a queue of 6."""
    tree = QuotaTree()
    tree.set_cohort("org", None, {FR: ResourceQuota(10)})
    tree.set_cohort("dept", "org", {FR: ResourceQuota(0, borrowing_limit=3, lending_limit=2)})
    tree.set_cohort("research", "org", {})
    tree.set_cluster_queue("team-a", "dept", {FR: ResourceQuota(4)})
    tree.set_cluster_queue("team-b", "dept", {FR: ResourceQuota(4)})
    tree.set_cluster_queue("lab", "research", {FR: ResourceQuota(6)})
    # dept's subtree is 8, of which it lends 2: 6 stay local; it may borrow 3 from org.
    assert tree.available("team-a", FR) == 8 + 3
    assert tree.members("dept") == {"team-a", "team-b", "lab"}  # the whole tree
    tree.add_usage("team-a", {FR: 11})
    assert tree.available("team-b", FR) == 0  # dept used its 8 and its borrowing limit
    # org's subtree: its own 10, lab's 6 and the 2 dept lends; dept uses 11 − 6 = 5 of it
    # (the 2 it lends and the 3 it borrows).
    assert tree.available("lab", FR) == 10 + 6 + 2 - 5
    tree.remove_usage("team-a", {FR: 11})
    tree.add_usage("lab", {FR: 17})
    assert tree.available("lab", FR) == 1
    assert tree.available("team-a", FR) == 6 + 1  # its local 6, and what is left in org


def _org() -> ClusterState:
    """org (own 10) ← dept (borrowingLimit 3, lendingLimit 2) ← team-a (4), team-b (4);
    org ← research ← lab (6)."""
    state = cluster(
        cq("team-a", {"default": {"cpu": 4}}, cohort="dept"),
        cq("team-b", {"default": {"cpu": 4}}, cohort="dept"),
        cq("lab", {"default": {"cpu": 6}}, cohort="research"),
    )
    own = cq("x", {"default": {"cpu": 10}}).resource_groups
    limits = (
        ResourceGroup(
            ("cpu",),
            (FlavorQuotas("default", {"cpu": ResourceQuota(0, 3000, 2000)}),),
        ),
    )
    state.set_cohort(Cohort("org", None, own))
    state.set_cohort(Cohort("dept", "org", limits))
    state.set_cohort(Cohort("research", "org"))
    return state


def test_a_refusal_names_the_level_of_the_tree_that_limits_it() -> None:
    state = _org()
    add(state, wl("small", "team-b", cpu=2))
    settle(state)
    # dept keeps 6 of its 8 (4 left), and may take from org what it lends (2) plus 3.
    add(state, wl("wide", "team-a", cpu=10))
    settle(state)
    assert why_pending(state, "ns/wide") == (
        "insufficient quota for cpu in flavor default: requested 10, available 9 "
        "(nominal 4, reserved 0, borrowable 5); limited by the borrowingLimit of Cohort dept "
        "(0 of 3 borrowed)"
    )
    state.remove_workload("ns/wide")
    add(state, wl("used", "team-a", cpu=6))
    settle(state)
    assert admitted_keys(state) == {"ns/small", "ns/used"}  # dept holds 8: 2 of them in org
    add(state, wl("big-lab", "lab", cpu=17))
    settle(state)
    assert why_pending(state, "ns/big-lab") == (
        "insufficient quota for cpu in flavor default: requested 17, available 16 "
        "(nominal 6, reserved 0, borrowable 10); limited by the quota of Cohort org "
        "(2 of 18 in use)"
    )


def test_flat_cohorts_keep_kueues_message() -> None:
    state = cluster(
        cq("a", {"default": {"cpu": 4}}, cohort="pool"),
        cq("b", {"default": {"cpu": 4}}, cohort="pool"),
    )
    add(state, wl("wide", "a", cpu=9))
    settle(state)
    assert why_pending(state, "ns/wide").endswith("can ever be available (nominal 4)")
    assert not state.cache.quota.hierarchical("a")


def test_a_subtree_cut_loose_keeps_its_borrowers_known() -> None:
    """dept ← org; team (in dept) borrows. dept's parent goes: dept is a root of its own,
    and team is still known as a borrower there (preemption looks it up)."""
    tree = QuotaTree()
    tree.set_cluster_queue("team", "dept", {FR: ResourceQuota(2)})
    tree.set_cluster_queue("other", "dept", {FR: ResourceQuota(4)})
    tree.set_cluster_queue("lab", "org", {FR: ResourceQuota(4)})
    tree.set_cohort("dept", "org", {})
    tree.add_usage("team", {FR: 5})
    assert tree.borrowers("lab", frozenset({FR})) == {"team"}
    tree.set_cohort("dept", None, {})
    assert tree.borrowers("other", frozenset({FR})) == {"team"}
    assert tree.borrowers("lab", frozenset({FR})) == set()
    assert tree.available("other", FR) == 1 and tree.available("lab", FR) == 4


def test_a_subtree_within_its_quota_is_not_reclaimed_from() -> None:
    """R ← C (2 of its own) ← q (0); R ← D ← x (2), y (0); R ← outside (0). y borrows x's
    2 cpus inside D, which keeps within its own quota; outside uses C's 2. q's 2 cpus fit in
    C: it reclaims from outside (priority 5), never from y (priority -10), as Kueue's
    hierarchical reclaim prunes subtrees within their quota."""
    policy = PreemptionPolicy(reclaim_within_cohort=ReclaimWithinCohortPolicy.ANY)
    state = cluster(
        cq("q", {"default": {"cpu": 0}}, cohort="c", preemption=policy),
        cq("x", {"default": {"cpu": 2}}, cohort="d"),
        cq("y", {"default": {"cpu": 0}}, cohort="d"),
        cq("outside", {"default": {"cpu": 0}}, cohort="r"),
    )
    state.set_cohort(Cohort("r"))
    state.set_cohort(Cohort("c", "r", cq("z", {"default": {"cpu": 2}}).resource_groups))
    state.set_cohort(Cohort("d", "r"))
    add(state, wl("in-y", "y", cpu=2, priority=-10), wl("out", "outside", cpu=2, priority=5))
    settle(state)
    assert admitted_keys(state) == {"ns/in-y", "ns/out"}
    add(state, wl("in", "q", cpu=2, created=1.0))
    [preempt] = run_cycle(state, 2.0).preempting
    assert [(v.workload_key, v.reason) for v in preempt.victims] == [
        ("ns/out", "InCohortReclamation")
    ]


def test_a_workload_leaving_for_nobody_is_waited_for_not_doubled() -> None:
    """Flat too: a Workload evicted by someone else and still holding quota is the first
    candidate (Kueue's evicted-first order) — the preemptor waits for it instead of
    evicting another; once a preemptor waits for it, no other preemptor counts on it."""
    policy = PreemptionPolicy(within_cluster_queue=WithinClusterQueuePolicy.LOWER_PRIORITY)
    state = cluster(cq("cq", {"default": {"cpu": 2}}, preemption=policy))
    add(state, wl("leaving", cpu=1, priority=5), wl("staying", cpu=1, priority=0))
    settle(state)
    record = state.cache.records["ns/leaving"]
    state.upsert_workload(replace(record.workload, admission=record.admission, evicted=True))
    assert state.cache.records["ns/leaving"].evicting
    add(state, wl("first", cpu=1, priority=10, created=1.0))
    [preempt] = run_cycle(state, 2.0).preempting
    assert [v.workload_key for v in preempt.victims] == ["ns/leaving"]
    add(state, wl("second", cpu=1, priority=10, created=2.0))
    [preempt] = run_cycle(state, 3.0).preempting
    assert [v.workload_key for v in preempt.victims] == ["ns/staying"]
