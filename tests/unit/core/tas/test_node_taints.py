"""A Ready node's taints as Kueue's TASReplaceNodeOnNodeTaints judges them for a Workload
(`classifyTaints` in Kueue's node controller): only NoSchedule and NoExecute count; a taint
one pod set does not tolerate is untolerated; one every pod set tolerates, but some only
for `tolerationSeconds`, holds them for a while; tolerated for ever, not at all. Checked
case by case and, with hypothesis, against the definition."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from controller.core.model.flavors import Taint
from controller.core.model.workloads import Toleration
from controller.core.tas.node_taints import TaintHold, has_scheduling_taints, taint_hold

BROKEN = Taint("example.com/broken", "true", "NoExecute")
FOREVER = Toleration("example.com/broken", "Exists", "", "NoExecute")
FOR_A_WHILE = Toleration("example.com/broken", "Exists", "", "NoExecute", seconds=300)


def test_only_noschedule_and_noexecute_taints_count() -> None:
    soft = Taint("example.com/broken", "true", "PreferNoSchedule")
    assert not has_scheduling_taints([soft])
    assert has_scheduling_taints([soft, Taint("k", "", "NoSchedule")])
    assert taint_hold([soft], [()]) is TaintHold.NONE


def test_untolerated_by_one_pod_set_is_untolerated() -> None:
    assert taint_hold([BROKEN], [()]) is TaintHold.UNTOLERATED
    assert taint_hold([BROKEN], [(FOREVER,), ()]) is TaintHold.UNTOLERATED
    # A toleration of another effect, key or value does not tolerate it.
    other_effect = Toleration("example.com/broken", "Exists", "", "NoSchedule")
    other_value = Toleration("example.com/broken", "Equal", "false", "")
    assert taint_hold([BROKEN], [(other_effect, other_value)]) is TaintHold.UNTOLERATED


def test_tolerated_for_a_while_by_one_pod_set_holds_for_a_while() -> None:
    assert taint_hold([BROKEN], [(FOR_A_WHILE,)]) is TaintHold.TEMPORARY
    assert taint_hold([BROKEN], [(FOREVER,), (FOR_A_WHILE,)]) is TaintHold.TEMPORARY
    # A toleration for ever beside the timed one makes it permanent for that pod set.
    assert taint_hold([BROKEN], [(FOR_A_WHILE, FOREVER)]) is TaintHold.NONE


def test_the_worst_taint_decides_and_tolerated_for_ever_is_healthy() -> None:
    cordon = Taint("example.com/maintenance", "", "NoSchedule")
    everything = Toleration("", "Exists")
    assert taint_hold([BROKEN, cordon], [(everything,)]) is TaintHold.NONE
    assert taint_hold([BROKEN, cordon], [(FOR_A_WHILE,)]) is TaintHold.UNTOLERATED
    assert taint_hold(
        [cordon, BROKEN], [(FOR_A_WHILE, Toleration("example.com/maintenance", "Exists"))]
    ) is (TaintHold.TEMPORARY)
    assert taint_hold([], [()]) is TaintHold.NONE


_KEYS = st.sampled_from(["a", "b"])
_EFFECTS = st.sampled_from(["NoSchedule", "NoExecute", "PreferNoSchedule"])
_taints = st.lists(st.builds(Taint, _KEYS, st.sampled_from(["", "x"]), _EFFECTS), max_size=3)
_tolerations = st.builds(
    Toleration,
    st.sampled_from(["", "a", "b"]),
    st.sampled_from(["Equal", "Exists"]),
    st.sampled_from(["", "x"]),
    st.sampled_from(["", "NoSchedule", "NoExecute"]),
    st.sampled_from([None, 0, 60]),
).filter(lambda t: t.key or t.operator == "Exists")  # the API server's validation
_pod_sets = st.lists(st.lists(_tolerations, max_size=3).map(tuple), min_size=1, max_size=3)


@given(_taints, _pod_sets)
def test_the_hold_is_the_definitions(
    taints: list[Taint], pod_sets: list[tuple[Toleration, ...]]
) -> None:
    def tolerated(tolerations: tuple[Toleration, ...], taint: Taint) -> bool:
        return any(t.tolerates(taint.key, taint.value, taint.effect) for t in tolerations)

    counted = [t for t in taints if t.effect in ("NoSchedule", "NoExecute")]
    if any(not tolerated(ps, t) for t in counted for ps in pod_sets):
        expected = TaintHold.UNTOLERATED
    elif any(
        not tolerated(tuple(x for x in ps if x.seconds is None), t)
        for t in counted
        for ps in pod_sets
    ):
        expected = TaintHold.TEMPORARY
    else:
        expected = TaintHold.NONE
    assert taint_hold(taints, pod_sets) is expected


@given(_taints, _pod_sets, _tolerations)
def test_a_toleration_more_never_makes_it_worse(
    taints: list[Taint], pod_sets: list[tuple[Toleration, ...]], more: Toleration
) -> None:
    order = [TaintHold.NONE, TaintHold.TEMPORARY, TaintHold.UNTOLERATED]
    before = taint_hold(taints, pod_sets)
    after = taint_hold(taints, [(*pod_sets[0], more), *pod_sets[1:]])
    assert order.index(after) <= order.index(before)
