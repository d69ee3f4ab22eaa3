"""controller/core/fairsharing/tournament.py: the order of a cycle's heads under fair sharing (Kueue's
fairSharingIterator and entryComparer; the comparator's rules follow Kueue's
TestEntryComparerLess)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction

from controller.core.fairsharing.settings import FairSharing
from controller.core.fairsharing.shares import shares_of
from controller.core.fairsharing.tournament import fair_order
from controller.core.model.clusterqueues import ClusterQueue, FlavorResource
from controller.core.model.cohorts import Cohort
from controller.core.scheduler.cycle import run_cycle
from controller.core.state import ClusterState
from tests.unit.core.builders import add, cluster, cq, group, m, settle, wl

CPU = ("default", "cpu")


@dataclass(frozen=True)
class H:
    """A head as the tournament sees it."""

    key: str
    cluster_queue: str
    cpu: str = "1"
    priority: int = 0
    queue_order_time: float = 0.0
    flavor: str = "default"
    extra: Mapping[FlavorResource, int] = field(default_factory=dict)

    @property
    def request(self) -> Mapping[FlavorResource, int]:
        return {(self.flavor, "cpu"): m(self.cpu), **self.extra}


def order(state: ClusterState, *heads: H) -> list[str]:
    return [
        h.key
        for h in fair_order(
            state.cache.quota, shares_of(state.objects, state.cache.quota), heads, lambda h: h.key
        )
    ]


def flat(*queues: ClusterQueue) -> ClusterState:
    state = cluster(*queues)
    state.fair_sharing = FairSharing()
    return state


def use(state: ClusterState, queue: str, cpu: str, flavor: str = "default") -> None:
    state.cache.quota.add_usage(queue, {(flavor, "cpu"): m(cpu)})


def test_the_queue_with_the_lower_share_goes_first() -> None:
    """a already borrows 2, b nothing: b's head goes first although a's is older and of
    higher priority (shares come before priority and age)."""
    state = flat(
        cq("a", {"default": {"cpu": "2"}}, cohort="c"),
        cq("b", {"default": {"cpu": "2"}}, cohort="c"),
    )
    use(state, "a", "4")
    heads = (
        H("a-head", "a", priority=9, queue_order_time=0.0),
        H("b-head", "b", cpu="2", queue_order_time=5.0),
    )
    assert order(state, *heads) == ["b-head", "a-head"]


def test_a_weight_lowers_the_share() -> None:
    """Both borrow the same after admission; b weighs 3: its share is a third of a's."""
    a = cq("a", {"default": {"cpu": "2"}}, cohort="c")
    b = replace(cq("b", {"default": {"cpu": "2"}}, cohort="c"), fair_weight=Fraction(3))
    state = flat(a, b, cq("lender", {"default": {"cpu": "8"}}, cohort="c"))
    heads = (H("a-head", "a", cpu="3"), H("b-head", "b", cpu="3", queue_order_time=9.0))
    assert order(state, *heads) == ["b-head", "a-head"]


def test_equal_shares_fall_to_priority_then_age() -> None:
    state = flat(*(cq(n, {"default": {"cpu": "4"}}, cohort="c") for n in ("a", "b", "c")))
    assert order(
        state,
        H("old-low", "a", queue_order_time=0.0, priority=0),
        H("new-high", "b", queue_order_time=9.0, priority=5),
        H("old-high", "c", queue_order_time=1.0, priority=5),
    ) == ["old-high", "new-high", "old-low"]


def test_not_borrowing_on_the_requested_flavor_comes_before_a_lower_share() -> None:
    """Kueue's FairSharingPrioritizeNonBorrowing: a borrows heavily on spot but asks for
    on-demand, where it stays within nominal; b has no share yet but would borrow on
    on-demand. a's head goes first although its share is higher."""
    quotas = group({"on-demand": {"cpu": "2"}, "spot": {"cpu": "2"}})
    state = flat(
        cq("a", groups=[quotas], cohort="c"),
        cq("b", groups=[quotas], cohort="c"),
        cq("lender", groups=[group({"on-demand": {"cpu": "6"}, "spot": {"cpu": "6"}})], cohort="c"),
    )
    state.set_flavor(replace(state.objects.flavors["default"], name="on-demand"))
    use(state, "a", "6", "spot")
    heads = (
        H("a-head", "a", cpu="1", flavor="on-demand"),
        H("b-head", "b", cpu="3", flavor="on-demand"),
    )
    shares = shares_of(state.objects, state.cache.quota)
    assert (
        shares.queue("a", {("on-demand", "cpu"): m("1")}).key()
        > shares.queue("b", {("on-demand", "cpu"): m("3")}).key()
    )
    assert order(state, *heads) == ["a-head", "b-head"]


def test_a_tree_is_judged_level_by_level() -> None:
    """root ← (x: x1, x2) and (y: y1). At the root, x would borrow once either of its
    heads is in while y stays within its subtree, so y1's head goes first although both
    of x's are older; within x, x2's head goes before x1's, older, because x1 already
    borrows from x2 and x2 would not."""
    state = flat(
        cq("x1", {"default": {"cpu": "2"}}, cohort="x"),
        cq("x2", {"default": {"cpu": "2"}}, cohort="x"),
        cq("y1", {"default": {"cpu": "2"}}, cohort="y"),
    )
    state.set_cohort(Cohort("x", "root"))
    state.set_cohort(Cohort("y", "root"))
    state.set_cohort(Cohort("root", None, (group({"default": {"cpu": "10"}}),)))
    use(state, "x1", "4")
    heads = (
        H("x1-head", "x1", cpu="1", queue_order_time=0.0),
        H("x2-head", "x2", cpu="1", queue_order_time=1.0),
        H("y1-head", "y1", cpu="2", queue_order_time=2.0),
    )
    assert order(state, *heads) == ["y1-head", "x2-head", "x1-head"]


def test_each_step_sees_the_heads_admitted_before_it() -> None:
    """The order is judged afresh after each head: once the caller admits a's head, a
    borrows and b's head (whose queue would then borrow less) goes before c's."""
    state = flat(*(cq(n, {"default": {"cpu": "2"}}, cohort="co") for n in ("a", "b", "c")))
    heads = [
        H("a-head", "a", cpu="3", queue_order_time=0.0),
        H("b-head", "b", cpu="2", queue_order_time=2.0),
        H("c-head", "c", cpu="3", queue_order_time=1.0),
    ]
    out = []
    for head in fair_order(
        state.cache.quota, shares_of(state.objects, state.cache.quota), heads, lambda h: h.key
    ):
        out.append(head.key)
        use(state, head.cluster_queue, head.cpu)  # admitted
    assert out == ["b-head", "a-head", "c-head"]


def test_queues_without_a_cohort_come_first_in_the_classical_order() -> None:
    state = flat(
        cq("alone", {"default": {"cpu": "2"}}), cq("in", {"default": {"cpu": "2"}}, cohort="c")
    )
    assert order(state, H("in-head", "in"), H("alone-head", "alone")) == ["alone-head", "in-head"]


def test_the_cycle_admits_the_lower_share_when_capacity_is_short() -> None:
    """Two queues want the last 2 cpus of the cohort by borrowing; without fair sharing the
    older head wins, with it the queue that borrows less."""
    for fair, winner in ((False, "ns/a-next"), (True, "ns/b-next")):
        state = cluster(*(cq(n, {"default": {"cpu": "3"}}, cohort="co") for n in ("a", "b", "c")))
        state.fair_sharing = FairSharing() if fair else None
        add(state, wl("a-1", "a", cpu=5))
        add(state, wl("b-1", "b", cpu=2))
        settle(state)
        add(state, wl("a-next", "a", cpu=2, created=1.0), wl("b-next", "b", cpu=2, created=2.0))
        admitted = [a.workload_key for a in run_cycle(state, 3.0).admitted]
        assert admitted == [winner], (fair, admitted)
