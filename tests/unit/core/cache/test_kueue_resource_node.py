"""Quota through a tree of Cohorts (controller/core/cache/quota_tree.py, `QuotaTree`) as Kueue's
cache computes it: cases of Kueue's `pkg/cache/scheduler` tests on its resource nodes
(`resource_node.go`) — TestCohortLendable (resource_node_test.go), TestAvailable
(resource_test.go), TestCohortCycles and TestDeleteCohortUpdatesAncestorSubtreeQuota
(cache_test.go), and the quota and usage parts of TestSnapshot,
TestSnapshotAddRemoveWorkload and TestSnapshotAddRemoveWorkloadWithLendingLimit
(snapshot_test.go). One test per Kueue case, named after it; each states what Kueue's
test expects.

Kueue's quantities are milli-units for cpu and plain units (bytes, devices) for other
resources; the tree counts every resource in milli-units, so Kueue's 15 GPUs are 15000
here and its 1Gi is m("1Gi"). Kueue's SubtreeQuota is `subtree_quota` / `cohort_pool`
for a Cohort, its Usage `usage` for a ClusterQueue and `cohort_usage` for a Cohort (an
absent entry is 0), its `available` of a ClusterQueue (clamped at 0 by
ClusterQueueSnapshot.Available) `available`, its `potentialAvailable` of a ClusterQueue
`potential_available` and of a Cohort `cohort_potential_available`."""

from __future__ import annotations

from collections.abc import Mapping

from controller.core.cache.quota_tree import QuotaTree
from controller.core.model.clusterqueues import FlavorResource, ResourceQuota
from tests.unit.core.builders import m, quota

Quotas = dict[FlavorResource, ResourceQuota]
Amounts = dict[FlavorResource, int]

RED: FlavorResource = ("red", "cpu")
BLUE: FlavorResource = ("blue", "cpu")
ARM: FlavorResource = ("arm", "cpu")
X86: FlavorResource = ("x86", "cpu")
MIPS: FlavorResource = ("mips", "cpu")
CPU: FlavorResource = ("default", "cpu")
GPU: FlavorResource = ("default", "example.com/gpu")


def red(nominal: str, borrow: str | None = None, lend: str | None = None) -> Quotas:
    """Kueue's `MakeFlavorQuotas("red").Resource("cpu", nominal, borrow, lend)`."""
    return {RED: quota(nominal, borrow, lend)}


# -- TestCohortLendable (resource_node_test.go) ---------------------------------------------


def test_cohort_lendable() -> None:
    """TestCohortLendable: cq1 (cpu 8, lendingLimit 8; example.com/gpu 3, lendingLimit 3)
    and cq2 (cpu 2, lendingLimit 2) in test-cohort. Kueue's calculateLendable of the cohort
    (per resource, the sum over flavors of its potentialAvailable) is cpu 10 and gpu 3."""
    tree = QuotaTree()
    tree.set_cluster_queue(
        "cq1", "test-cohort", {CPU: quota("8", lend="8"), GPU: quota("3", lend="3")}
    )
    tree.set_cluster_queue("cq2", "test-cohort", {CPU: quota("2", lend="2")})
    assert tree.cohort_potential_available("test-cohort", CPU) == m("10")
    assert tree.cohort_potential_available("test-cohort", GPU) == m("3")


# -- TestAvailable (resource_test.go) --------------------------------------------------------


def check_available(
    tree: QuotaTree,
    usage: Mapping[str, Amounts],
    want_available: Mapping[str, Amounts],
    want_potential: Mapping[str, Amounts],
) -> None:
    """Kueue's TestAvailable in three steps, for every queue and (flavor, resource) it has
    quota of: before any usage available equals potentialAvailable; with `usage` added
    they are `want_available` and `want_potential`; with it removed again, available
    equals potentialAvailable once more."""

    def got(read: str) -> dict[str, Amounts]:
        out: dict[str, Amounts] = {}
        for name in want_potential:
            frs = tree.queue_quotas(name)
            if read == "available":
                out[name] = {fr: tree.available(name, fr) for fr in frs}
            else:
                out[name] = {fr: tree.potential_available(name, fr) for fr in frs}
        return out

    assert got("available") == want_potential
    assert got("potential") == want_potential
    for name, amounts in usage.items():
        tree.add_usage(name, amounts)
    assert got("available") == want_available
    assert got("potential") == want_potential
    for name, amounts in usage.items():
        tree.remove_usage(name, amounts)
    assert got("available") == want_potential
    assert got("potential") == want_potential


def test_available_base_cqs() -> None:
    """TestAvailable "base cqs": cq1 (red 0) and cq2 (red 5, blue 10), no cohort. With cq1
    using 1 red (beyond its quota) and cq2 2.5 red and 1 blue: available cq1 red 0, cq2
    red 2.5 and blue 9; potentially available cq1 red 0, cq2 red 5 and blue 10."""
    tree = QuotaTree()
    tree.set_cluster_queue("cq1", None, red("0"))
    tree.set_cluster_queue("cq2", None, {RED: quota("5"), BLUE: quota("10")})
    check_available(
        tree,
        usage={"cq1": {RED: 1000}, "cq2": {RED: 2500, BLUE: 1000}},
        want_available={"cq1": {RED: 0}, "cq2": {RED: 2500, BLUE: 9000}},
        want_potential={"cq1": {RED: 0}, "cq2": {RED: 5000, BLUE: 10000}},
    )


def test_available_cqs_with_cohort() -> None:
    """TestAvailable "cqs with cohort": cq1 (red 10) and cq2 (red 10, lendingLimit 9) in
    cohort, which has red 10 of its own. With cq1 using 1 and cq2 0.5: available cq1 28,
    cq2 28.5; potentially available cq1 29 (30 less cq2's 1 kept back), cq2 30."""
    tree = QuotaTree()
    tree.set_cluster_queue("cq1", "cohort", red("10"))
    tree.set_cluster_queue("cq2", "cohort", red("10", lend="9"))
    tree.set_cohort("cohort", None, red("10"))
    check_available(
        tree,
        usage={"cq1": {RED: 1000}, "cq2": {RED: 500}},
        want_available={"cq1": {RED: 28000}, "cq2": {RED: 28500}},
        want_potential={"cq1": {RED: 29000}, "cq2": {RED: 30000}},
    )


def test_available_cq_borrows_from_cohort() -> None:
    """TestAvailable "cq borrows from cohort": cq1 (red 10) in cohort (red 10). With cq1
    using 11: available 9, potentially available 20."""
    tree = QuotaTree()
    tree.set_cluster_queue("cq1", "cohort", red("10"))
    tree.set_cohort("cohort", None, red("10"))
    check_available(
        tree,
        usage={"cq1": {RED: 11000}},
        want_available={"cq1": {RED: 9000}},
        want_potential={"cq1": {RED: 20000}},
    )


def test_available_cq_oversubscription_spills_into_cohort() -> None:
    """TestAvailable "cq oversubscription spills into cohort": cq1 (red 10) and cq2 (red
    10, borrowingLimit 0, lendingLimit 0) in cohort (red 10). cq1 uses 31, more than the
    20 the cohort holds: available cq1 0 and cq2 0 too (cq1's excess reaches cq2's
    available, to prevent over-admission in the tree); potentially available cq1 20,
    cq2 10."""
    tree = QuotaTree()
    tree.set_cluster_queue("cq1", "cohort", red("10"))
    tree.set_cluster_queue("cq2", "cohort", red("10", borrow="0", lend="0"))
    tree.set_cohort("cohort", None, red("10"))
    check_available(
        tree,
        usage={"cq1": {RED: 31000}},
        want_available={"cq1": {RED: 0}, "cq2": {RED: 0}},
        want_potential={"cq1": {RED: 20000}, "cq2": {RED: 10000}},
    )


def test_available_lending_and_borrowing_limits_respected() -> None:
    """TestAvailable "lending and borrowing limits respected": cohort (red 10) with cq1
    (red 10), cq2 (red 10, borrowingLimit 2) and cq3 (red 10, lendingLimit 5): 40 in all.
    Potentially available: cq1 35 (cq3 keeps 5), cq2 12 (its borrowing limit), cq3 40.
    With cq1 using 20, cq2 10 and cq3 6: available cq1 4, cq2 2 (borrowing limit), cq3 4."""
    tree = QuotaTree()
    tree.set_cluster_queue("cq1", "cohort", red("10"))
    tree.set_cluster_queue("cq2", "cohort", red("10", borrow="2"))
    tree.set_cluster_queue("cq3", "cohort", red("10", lend="5"))
    tree.set_cohort("cohort", None, red("10"))
    check_available(
        tree,
        usage={"cq1": {RED: 20000}, "cq2": {RED: 10000}, "cq3": {RED: 6000}},
        want_available={"cq1": {RED: 4000}, "cq2": {RED: 2000}, "cq3": {RED: 4000}},
        want_potential={"cq1": {RED: 35000}, "cq2": {RED: 12000}, "cq3": {RED: 40000}},
    )


def test_available_hierarchical_cohort() -> None:
    """TestAvailable "hierarchical cohort": root ← left (red 10) ← cq1 (red 10); root ←
    right (red 10) ← cq2 (red 10, lendingLimit 0). Potentially available: cq1 30 (nothing
    from cq2), cq2 40. With cq1 using 10 and cq2 5: available cq1 20, cq2 25."""
    tree = QuotaTree()
    tree.set_cluster_queue("cq1", "left", red("10"))
    tree.set_cluster_queue("cq2", "right", red("10", lend="0"))
    tree.set_cohort("root", None, {})
    tree.set_cohort("left", "root", red("10"))
    tree.set_cohort("right", "root", red("10"))
    check_available(
        tree,
        usage={"cq1": {RED: 10000}, "cq2": {RED: 5000}},
        want_available={"cq1": {RED: 20000}, "cq2": {RED: 25000}},
        want_potential={"cq1": {RED: 30000}, "cq2": {RED: 40000}},
    )


def test_available_hierarchical_cohort_respects_borrowing_limit() -> None:
    """TestAvailable "hierarchical cohort respects borrowing limit": root ← left (red 10,
    borrowingLimit 5) ← left-cq1 (red 10), left-cq2 (red 10, borrowingLimit 5); root ←
    right (red 10) ← right-cq (red 10). No usage: available and potentially available
    left-cq1 35 (left's 30 and 5 more from root), left-cq2 15, right-cq 50."""
    tree = QuotaTree()
    tree.set_cluster_queue("left-cq1", "left", red("10"))
    tree.set_cluster_queue("left-cq2", "left", red("10", borrow="5"))
    tree.set_cluster_queue("right-cq", "right", red("10"))
    tree.set_cohort("root", None, {})
    tree.set_cohort("left", "root", red("10", borrow="5"))
    tree.set_cohort("right", "root", red("10"))
    want = {"left-cq1": {RED: 35000}, "left-cq2": {RED: 15000}, "right-cq": {RED: 50000}}
    check_available(tree, usage={}, want_available=want, want_potential=want)


def test_available_hierarchical_cohort_respects_lending_limit() -> None:
    """TestAvailable "hierarchical cohort respects lending limit": root ← root-cq (red 0);
    root ← left (red 0, lendingLimit 5) ← left-cq1 (red 10, lendingLimit 5), left-cq2 (red
    10); root ← right (red 0) ← right-cq (red 0). No usage: available and potentially
    available left-cq1 20, left-cq2 15 (only 5 of left-cq1's), right-cq 5 and root-cq 5
    (left lends 5 to root)."""
    tree = QuotaTree()
    tree.set_cluster_queue("left-cq1", "left", red("10", lend="5"))
    tree.set_cluster_queue("left-cq2", "left", red("10"))
    tree.set_cluster_queue("right-cq", "right", red("0"))
    tree.set_cluster_queue("root-cq", "root", red("0"))
    tree.set_cohort("root", None, {})
    tree.set_cohort("left", "root", red("0", lend="5"))
    tree.set_cohort("right", "root", red("0"))
    want = {
        "left-cq1": {RED: 20000},
        "left-cq2": {RED: 15000},
        "right-cq": {RED: 5000},
        "root-cq": {RED: 5000},
    }
    check_available(tree, usage={}, want_available=want, want_potential=want)


# -- TestCohortCycles (cache_test.go) --------------------------------------------------------


def test_cohort_cycles_clusterqueue_leaving_cohort_with_cycle_successfully_updates_new_cohort() -> (
    None
):
    """TestCohortCycles "clusterqueue leaving cohort with cycle successfully updates new
    cohort": cycle (its own parent), cohort (arm cpu 10); cq (arm cpu 5) is put in cycle
    (Kueue refuses it) and then moved to cohort: cohort's own quota is arm 10, its
    SubtreeQuota arm 15, its usage empty."""
    tree = QuotaTree()
    tree.set_cohort("cycle", "cycle", {})
    tree.set_cohort("cohort", None, {ARM: quota("10")})
    tree.set_cluster_queue("cq", "cycle", {ARM: quota("5")})
    tree.set_cluster_queue("cq", "cohort", {ARM: quota("5")})
    assert tree.cohort_quota("cohort", ARM) == ResourceQuota(m("10"))
    assert tree.subtree_quota("cohort") == {ARM: m("15")}
    assert tree.cohort_usage("cohort", ARM) == 0


def test_cohort_cycles_clusterqueue_joining_cohort_with_cycle_successfully_updates_old_cohort() -> (
    None
):
    """TestCohortCycles "clusterqueue joining cohort with cycle successfully updates old
    cohort": cycle (its own parent), cohort (arm cpu 10) holding cq (arm cpu 5): cohort's
    SubtreeQuota is arm 15. cq then moves to cycle (Kueue refuses it): cohort's
    SubtreeQuota is arm 10 again, its own quota still arm 10, its usage empty."""
    tree = QuotaTree()
    tree.set_cohort("cycle", "cycle", {})
    tree.set_cohort("cohort", None, {ARM: quota("10")})
    tree.set_cluster_queue("cq", "cohort", {ARM: quota("5")})
    assert tree.cohort_quota("cohort", ARM) == ResourceQuota(m("10"))
    assert tree.subtree_quota("cohort") == {ARM: m("15")}
    assert tree.cohort_usage("cohort", ARM) == 0
    tree.set_cluster_queue("cq", "cycle", {ARM: quota("5")})
    assert tree.cohort_quota("cohort", ARM) == ResourceQuota(m("10"))
    assert tree.subtree_quota("cohort") == {ARM: m("10")}
    assert tree.cohort_usage("cohort", ARM) == 0


def test_cohort_cycles_cohort_switching_cohorts_updates_both_cohort_trees() -> None:
    """TestCohortCycles "cohort switching cohorts updates both cohort trees": root1 and
    root2 (no quota); cohort (arm cpu 10) under root1: root1's SubtreeQuota is arm 10,
    root2's empty. cohort moves under root2: root1's is empty, root2's arm 10."""
    tree = QuotaTree()
    tree.set_cohort("root1", None, {})
    tree.set_cohort("root2", None, {})
    tree.set_cohort("cohort", "root1", {ARM: quota("10")})
    assert tree.subtree_quota("root1") == {ARM: m("10")}
    assert tree.subtree_quota("root2") == {}
    tree.set_cohort("cohort", "root2", {ARM: quota("10")})
    assert tree.subtree_quota("root1") == {}
    assert tree.subtree_quota("root2") == {ARM: m("10")}
    for root in ("root1", "root2"):
        assert tree.cohort_usage(root, ARM) == 0


def test_cohort_cycles_cohort_leaving_cohort_with_cycle_successfully_updates_new_cohort() -> None:
    """TestCohortCycles "cohort leaving cohort with cycle successfully updates new cohort":
    cycle-root (its own parent), root; cohort (arm cpu 10) is put under cycle-root (Kueue
    refuses it), then under root: root's SubtreeQuota is arm 10, its usage empty."""
    tree = QuotaTree()
    tree.set_cohort("cycle-root", "cycle-root", {})
    tree.set_cohort("root", None, {})
    tree.set_cohort("cohort", "cycle-root", {ARM: quota("10")})
    tree.set_cohort("cohort", "root", {ARM: quota("10")})
    assert tree.subtree_quota("root") == {ARM: m("10")}
    assert tree.cohort_usage("root", ARM) == 0


def test_cohort_cycles_cohort_joining_cohort_with_cycle_successfully_updates_old_cohort() -> None:
    """TestCohortCycles "cohort joining cohort with cycle successfully updates old cohort":
    cycle-root (its own parent), root; cohort (arm cpu 10) under root: root's SubtreeQuota
    is arm 10. cohort moves under cycle-root (Kueue refuses it): root's is empty."""
    tree = QuotaTree()
    tree.set_cohort("cycle-root", "cycle-root", {})
    tree.set_cohort("root", None, {})
    tree.set_cohort("cohort", "root", {ARM: quota("10")})
    assert tree.subtree_quota("root") == {ARM: m("10")}
    tree.set_cohort("cohort", "cycle-root", {ARM: quota("10")})
    assert tree.subtree_quota("root") == {}
    assert tree.cohort_usage("root", ARM) == 0


# -- TestDeleteCohortUpdatesAncestorSubtreeQuota (cache_test.go) -----------------------------


def test_delete_cohort_deleting_child_cohort_updates_parent_subtree_quota() -> None:
    """TestDeleteCohortUpdatesAncestorSubtreeQuota "deleting child cohort updates parent
    SubtreeQuota": root (cpu 10) ← child (cpu 5): root's SubtreeQuota is 15; once child is
    deleted, 10."""
    tree = QuotaTree()
    tree.set_cohort("root", None, {CPU: quota("10")})
    tree.set_cohort("child", "root", {CPU: quota("5")})
    assert tree.subtree_quota("root") == {CPU: m("15")}
    tree.remove_cohort("child")
    assert tree.subtree_quota("root") == {CPU: m("10")}


def test_delete_cohort_deleting_grandchild_cohort_updates_all_ancestors_subtree_quota() -> None:
    """TestDeleteCohortUpdatesAncestorSubtreeQuota "deleting grandchild cohort updates all
    ancestors SubtreeQuota": root (cpu 10) ← mid (cpu 5) ← leaf (cpu 3): mid's SubtreeQuota
    is 8 and root's 18; once leaf is deleted, mid's is 5 and root's 15."""
    tree = QuotaTree()
    tree.set_cohort("root", None, {CPU: quota("10")})
    tree.set_cohort("mid", "root", {CPU: quota("5")})
    tree.set_cohort("leaf", "mid", {CPU: quota("3")})
    assert tree.subtree_quota("mid") == {CPU: m("8")}
    assert tree.subtree_quota("root") == {CPU: m("18")}
    tree.remove_cohort("leaf")
    assert tree.subtree_quota("mid") == {CPU: m("5")}
    assert tree.subtree_quota("root") == {CPU: m("15")}


def test_delete_cohort_deleting_cohort_with_children_updates_parent_subtree_quota() -> None:
    """TestDeleteCohortUpdatesAncestorSubtreeQuota "deleting cohort with children updates
    parent SubtreeQuota": root (cpu 10) ← mid (cpu 5) ← cq (cpu 7): root's SubtreeQuota is
    22; once mid is deleted (cq still names it), 10."""
    tree = QuotaTree()
    tree.set_cohort("root", None, {CPU: quota("10")})
    tree.set_cohort("mid", "root", {CPU: quota("5")})
    tree.set_cluster_queue("cq", "mid", {CPU: quota("7")})
    assert tree.subtree_quota("root") == {CPU: m("22")}
    tree.remove_cohort("mid")
    assert tree.subtree_quota("root") == {CPU: m("10")}


# -- TestSnapshot (snapshot_test.go): quota and usage of the cohorts --------------------------

DEMAND: FlavorResource = ("demand", "cpu")
SPOT: FlavorResource = ("spot", "cpu")


def test_snapshot_cohort() -> None:
    """TestSnapshot "cohort": a (demand 100, spot 200) and b (spot 100; default gpu 50) in
    borrowing, c (default cpu 100) alone. a uses 10 demand, b 10 spot and 15 gpus: the
    cohort's SubtreeQuota is demand 100, spot 300, gpu 50 and its usage demand 10, spot
    10, gpu 15; c's SubtreeQuota is its 100 cpus, its usage empty."""
    tree = QuotaTree()
    tree.set_cluster_queue("a", "borrowing", {DEMAND: quota("100"), SPOT: quota("200")})
    tree.set_cluster_queue("b", "borrowing", {SPOT: quota("100"), GPU: quota("50")})
    tree.set_cluster_queue("c", None, {CPU: quota("100")})
    tree.add_usage("a", {DEMAND: m("10")})
    tree.add_usage("b", {SPOT: m("5"), GPU: m("10")})
    tree.add_usage("b", {SPOT: m("5"), GPU: m("5")})
    assert tree.subtree_quota("borrowing") == {
        DEMAND: m("100"),
        SPOT: m("300"),
        GPU: m("50"),
    }
    assert {fr: tree.cohort_usage("borrowing", fr) for fr in (DEMAND, SPOT, GPU)} == {
        DEMAND: m("10"),
        SPOT: m("10"),
        GPU: m("15"),
    }
    assert tree.usage_of("a") == {DEMAND: m("10")}
    assert tree.usage_of("b") == {SPOT: m("10"), GPU: m("15")}
    assert tree.usage_of("c") == {}
    assert tree.potential_available("c", CPU) == m("100")


def test_snapshot_lending_limit_with_2_cluster_queues_and_2_flavors() -> None:
    """TestSnapshot "lendingLimit with 2 clusterQueues and 2 flavors(whenCanBorrow:
    MayStopSearch)": a and b in lending, each arm 10 (lendingLimit 5) and x86 20
    (lendingLimit 10). a uses 15 arm and 10 x86: the cohort's SubtreeQuota is arm 10 and
    x86 20 (what the two lend), its usage arm 10 (a's arm beyond its 5 kept back) and
    nothing of x86 (within a's 10 kept back)."""
    tree = QuotaTree()
    for name in ("a", "b"):
        tree.set_cluster_queue(
            name, "lending", {ARM: quota("10", lend="5"), X86: quota("20", lend="10")}
        )
    tree.add_usage("a", {ARM: m("10")})
    tree.add_usage("a", {ARM: m("5")})
    tree.add_usage("a", {X86: m("10")})
    assert tree.subtree_quota("lending") == {ARM: m("10"), X86: m("20")}
    assert tree.cohort_usage("lending", ARM) == m("10")
    assert tree.cohort_usage("lending", X86) == 0
    assert tree.usage_of("a") == {ARM: m("15"), X86: m("10")}
    assert tree.usage_of("b") == {}


def test_snapshot_cohort_provides_resources() -> None:
    """TestSnapshot "cohort provides resources": cohort (arm 10, x86 20; mips 42) holding
    cq (arm 7, lendingLimit 3; x86 5). The cohort's own quota is arm 10, x86 20, mips 42
    (no limits); its SubtreeQuota arm 13, x86 25, mips 42."""
    tree = QuotaTree()
    tree.set_cluster_queue("cq", "cohort", {ARM: quota("7", lend="3"), X86: quota("5")})
    tree.set_cohort("cohort", None, {ARM: quota("10"), X86: quota("20"), MIPS: quota("42")})
    assert tree.cohort_quota("cohort", ARM) == ResourceQuota(m("10"))
    assert tree.cohort_quota("cohort", X86) == ResourceQuota(m("20"))
    assert tree.cohort_quota("cohort", MIPS) == ResourceQuota(m("42"))
    assert tree.subtree_quota("cohort") == {ARM: m("13"), X86: m("25"), MIPS: m("42")}


# -- TestSnapshotAddRemoveWorkload (snapshot_test.go) -----------------------------------------

ALPHA: FlavorResource = ("alpha", "memory")
BETA: FlavorResource = ("beta", "memory")
FLAT_WORKLOADS: dict[str, tuple[str, Amounts]] = {
    "c1-cpu": ("c1", {CPU: m("1")}),
    "c1-memory-alpha": ("c1", {ALPHA: m("1Gi")}),
    "c1-memory-beta": ("c1", {BETA: m("1Gi")}),
    "c2-cpu-1": ("c2", {CPU: m("1")}),
    "c2-cpu-2": ("c2", {CPU: m("1")}),
}


def flat_snapshot(remove: list[str], add: list[str]) -> QuotaTree:
    """Kueue's fixture: c1 (cpu 6; memory 6Gi in alpha and in beta) and c2 (cpu 6) in
    cohort, with all of FLAT_WORKLOADS reserved; then `remove` and `add` them in order."""
    tree = QuotaTree()
    tree.set_cluster_queue(
        "c1", "cohort", {CPU: quota("6"), ALPHA: quota("6Gi"), BETA: quota("6Gi")}
    )
    tree.set_cluster_queue("c2", "cohort", {CPU: quota("6")})
    return replay(tree, FLAT_WORKLOADS, remove, add)


def replay(
    tree: QuotaTree, workloads: dict[str, tuple[str, Amounts]], remove: list[str], add: list[str]
) -> QuotaTree:
    """`tree` with every one of `workloads` reserved, then `remove` and `add` them in order."""
    for queue, usage in workloads.values():
        tree.add_usage(queue, usage)
    for name in remove:
        tree.remove_usage(*workloads[name])
    for name in add:
        tree.add_usage(*workloads[name])
    return tree


def check_flat(tree: QuotaTree, cohort: Amounts, c1: Amounts, c2: Amounts) -> None:
    """The cohort's usage and the queues' (zeros included) are these; the SubtreeQuotas
    are the fixture's (cohort: cpu 12, alpha 6Gi, beta 6Gi)."""
    frs = (CPU, ALPHA, BETA)
    assert {fr: tree.cohort_usage("cohort", fr) for fr in frs} == cohort
    assert {fr: tree.usage("c1", fr) for fr in frs} == c1
    assert tree.usage("c2", CPU) == c2[CPU]
    assert tree.subtree_quota("cohort") == {CPU: m("12"), ALPHA: m("6Gi"), BETA: m("6Gi")}


def test_snapshot_add_remove_workload_no_op_remove_add() -> None:
    """TestSnapshotAddRemoveWorkload "no-op remove add": removing and adding back c1-cpu
    and c2-cpu-1 leaves the initial snapshot: cohort usage cpu 3, alpha 1Gi, beta 1Gi;
    c1 cpu 1, alpha 1Gi, beta 1Gi; c2 cpu 2."""
    tree = flat_snapshot(["c1-cpu", "c2-cpu-1"], ["c1-cpu", "c2-cpu-1"])
    check_flat(
        tree,
        cohort={CPU: m("3"), ALPHA: m("1Gi"), BETA: m("1Gi")},
        c1={CPU: m("1"), ALPHA: m("1Gi"), BETA: m("1Gi")},
        c2={CPU: m("2")},
    )


def test_snapshot_add_remove_workload_remove_all() -> None:
    """TestSnapshotAddRemoveWorkload "remove all": every usage, the cohort's included, is
    0."""
    tree = flat_snapshot(list(FLAT_WORKLOADS), [])
    check_flat(
        tree,
        cohort={CPU: 0, ALPHA: 0, BETA: 0},
        c1={CPU: 0, ALPHA: 0, BETA: 0},
        c2={CPU: 0},
    )


def test_snapshot_add_remove_workload_remove_c1_cpu() -> None:
    """TestSnapshotAddRemoveWorkload "remove c1-cpu": cohort usage cpu 2, alpha 1Gi, beta
    1Gi; c1 cpu 0, alpha 1Gi, beta 1Gi; c2 cpu 2."""
    tree = flat_snapshot(["c1-cpu"], [])
    check_flat(
        tree,
        cohort={CPU: m("2"), ALPHA: m("1Gi"), BETA: m("1Gi")},
        c1={CPU: 0, ALPHA: m("1Gi"), BETA: m("1Gi")},
        c2={CPU: m("2")},
    )


def test_snapshot_add_remove_workload_remove_c1_memory_alpha() -> None:
    """TestSnapshotAddRemoveWorkload "remove c1-memory-alpha": cohort usage cpu 3, alpha 0,
    beta 1Gi; c1 cpu 1, alpha 0, beta 1Gi; c2 cpu 2."""
    tree = flat_snapshot(["c1-memory-alpha"], [])
    check_flat(
        tree,
        cohort={CPU: m("3"), ALPHA: 0, BETA: m("1Gi")},
        c1={CPU: m("1"), ALPHA: 0, BETA: m("1Gi")},
        c2={CPU: m("2")},
    )


# -- TestSnapshotAddRemoveWorkloadWithLendingLimit (snapshot_test.go) ------------------------

LEND_WORKLOADS: dict[str, tuple[str, Amounts]] = {
    "lend-a-1": ("lend-a", {CPU: m("1")}),
    "lend-a-2": ("lend-a", {CPU: m("9")}),
    "lend-a-3": ("lend-a", {CPU: m("6")}),
    "lend-b-1": ("lend-b", {CPU: m("4")}),
}


def lend_snapshot(remove: list[str], add: list[str]) -> QuotaTree:
    """Kueue's fixture: lend-a (cpu 10, lendingLimit 4: 6 kept back) and lend-b (cpu 10,
    lendingLimit 6: 4 kept back) in lend, with all of LEND_WORKLOADS reserved (lend-a 16,
    lend-b 4); then `remove` and `add` them in order."""
    tree = QuotaTree()
    tree.set_cluster_queue("lend-a", "lend", {CPU: quota("10", lend="4")})
    tree.set_cluster_queue("lend-b", "lend", {CPU: quota("10", lend="6")})
    return replay(tree, LEND_WORKLOADS, remove, add)


def check_lend(tree: QuotaTree, cohort: int, lend_a: int, lend_b: int) -> None:
    """Usage of the cohort and of the queues; the cohort's SubtreeQuota stays the 10 the
    queues lend, theirs their nominal 10."""
    assert tree.cohort_usage("lend", CPU) == cohort
    assert tree.usage("lend-a", CPU) == lend_a
    assert tree.usage("lend-b", CPU) == lend_b
    assert tree.subtree_quota("lend") == {CPU: m("10")}
    assert tree.quota("lend-a", CPU).nominal == tree.quota("lend-b", CPU).nominal == m("10")


def test_snapshot_with_lending_limit_remove_all_then_add_all() -> None:
    """TestSnapshotAddRemoveWorkloadWithLendingLimit "remove all then add all": the initial
    snapshot again: lend-a uses 16, lend-b 4, the cohort 10 (lend-a's 16 beyond the 6 it
    keeps back; lend-b's 4 are within its 4)."""
    tree = lend_snapshot(list(LEND_WORKLOADS), list(LEND_WORKLOADS))
    check_lend(tree, cohort=m("10"), lend_a=m("16"), lend_b=m("4"))


def test_snapshot_with_lending_limit_remove_all() -> None:
    """TestSnapshotAddRemoveWorkloadWithLendingLimit "remove all": every usage is 0."""
    tree = lend_snapshot(list(LEND_WORKLOADS), [])
    check_lend(tree, cohort=0, lend_a=0, lend_b=0)


def test_snapshot_with_lending_limit_remove_workload_but_still_using_quota_over_guaranteed_quota() -> (
    None
):
    """TestSnapshotAddRemoveWorkloadWithLendingLimit "remove workload, but still using quota
    over GuaranteedQuota": without lend-a-2 (9), lend-a uses 7 and the cohort 1; lend-b
    4."""
    tree = lend_snapshot(["lend-a-2"], [])
    check_lend(tree, cohort=m("1"), lend_a=m("7"), lend_b=m("4"))


def test_snapshot_with_lending_limit_remove_wokload_using_same_quota_as_guaranteed_quota() -> None:
    """TestSnapshotAddRemoveWorkloadWithLendingLimit "remove wokload, using same quota as
    GuaranteedQuota": without lend-a-1 and lend-a-2, lend-a uses 6 (all kept back) and the
    cohort 0; lend-b 4."""
    tree = lend_snapshot(["lend-a-1", "lend-a-2"], [])
    check_lend(tree, cohort=0, lend_a=m("6"), lend_b=m("4"))


def test_snapshot_with_lending_limit_remove_workload_using_less_quota_than_guaranteed_quota() -> (
    None
):
    """TestSnapshotAddRemoveWorkloadWithLendingLimit "remove workload, using less quota than
    GuaranteedQuota": without lend-a-2 and lend-a-3, lend-a uses 1 and the cohort 0;
    lend-b 4."""
    tree = lend_snapshot(["lend-a-2", "lend-a-3"], [])
    check_lend(tree, cohort=0, lend_a=m("1"), lend_b=m("4"))


def test_snapshot_with_lending_limit_remove_all_then_add_workload_using_less_quota_than_guaranteed_quota() -> (
    None
):
    """TestSnapshotAddRemoveWorkloadWithLendingLimit "remove all then add workload, using
    less quota than GuaranteedQuota": only lend-a-1 back: lend-a uses 1, the cohort 0,
    lend-b 0."""
    tree = lend_snapshot(list(LEND_WORKLOADS), ["lend-a-1"])
    check_lend(tree, cohort=0, lend_a=m("1"), lend_b=0)


def test_snapshot_with_lending_limit_remove_all_then_add_workload_using_same_quota_as_guaranteed_quota() -> (
    None
):
    """TestSnapshotAddRemoveWorkloadWithLendingLimit "remove all then add workload, using
    same quota as GuaranteedQuota": only lend-a-3 (6) back: lend-a uses 6, the cohort 0,
    lend-b 0."""
    tree = lend_snapshot(list(LEND_WORKLOADS), ["lend-a-3"])
    check_lend(tree, cohort=0, lend_a=m("6"), lend_b=0)


def test_snapshot_with_lending_limit_remove_all_then_add_workload_using_quota_over_guaranteed_quota() -> (
    None
):
    """TestSnapshotAddRemoveWorkloadWithLendingLimit "remove all then add workload, using
    quota over GuaranteedQuota": only lend-a-2 (9) back: lend-a uses 9, the cohort 3 (beyond
    the 6 kept back), lend-b 0."""
    tree = lend_snapshot(list(LEND_WORKLOADS), ["lend-a-2"])
    check_lend(tree, cohort=m("3"), lend_a=m("9"), lend_b=0)


def test_a_cohort_lends_its_subtree_not_only_its_own_quota() -> None:
    """Kueue's localQuota of a Cohort is `max(0, SubtreeQuota - lendingLimit)`: the limit
    caps what its whole subtree lends, so a lendingLimit above the Cohort's own nominal
    quota (which its webhook allows) is a real limit. left (red 1, lendingLimit 8) holds cq1
    (red 10): its subtree has 11, it keeps 3 and lends 8; right's cq2 (red 0) may use 8."""
    tree = QuotaTree()
    tree.set_cohort("root", None, {})
    tree.set_cohort("left", "root", red("1", lend="8"))
    tree.set_cohort("right", "root", {})
    tree.set_cluster_queue("cq1", "left", red("10"))
    tree.set_cluster_queue("cq2", "right", red("0"))
    assert tree.cohort_pool("left", RED) == m("11")
    assert tree.potential_available("cq2", RED) == m("8")
    assert tree.potential_available("cq1", RED) == m("11")
