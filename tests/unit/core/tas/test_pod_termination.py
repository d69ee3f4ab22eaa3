"""Released pods pinned to a failing node, marked Failed before the node counts as failed
(Kueue's `getWorkloadStatus`/`checkPodsOnNode`): case by case for each node state and
gate, and, with hypothesis, against `verdict`: wherever Kueue's node controller waits for
the Workload's pods to leave a node (the verdict depends on them), it fails the pods
still pending there."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.model.flavors import Taint
from controller.core.model.topology import Node
from controller.core.model.workloads import Toleration
from controller.core.tas.node_failure import NodeFailureGates, verdict
from controller.core.tas.node_taints import TaintHold, taint_hold
from controller.core.tas.pod_termination import termination_cause
from tests.unit.core.tas.builders import node

DEFAULT = NodeFailureGates()
BROKEN = Taint("example.com/broken", "", "NoSchedule")
READY = node("n", "b", "r", "n", cpu="1")
DOWN = replace(READY, ready=False, not_ready_since=100.0)
TAINTED = replace(READY, taints=(BROKEN,))
TIMED = Toleration("example.com/broken", "Exists", seconds=60)
FOREVER = Toleration("example.com/broken", "Exists")


def test_a_not_ready_node_fails_its_pending_pods_with_pod_termination() -> None:
    assert termination_cause(DOWN, DEFAULT) == "its node n is not Ready"
    # Kueue's node controller waits for NodeFailureDelay without the gate, then fails the
    # node (not its pods).
    assert termination_cause(DOWN, NodeFailureGates(on_pod_termination=False)) is None
    assert termination_cause(DOWN, NodeFailureGates(not_ready_fixed_time=True)) is not None


def test_a_node_failed_at_once_or_ready_and_untainted_fails_no_pod() -> None:
    """Deleted, or without a Ready condition: failed at once, its pods go as strays."""
    assert termination_cause(None, DEFAULT) is None
    assert termination_cause(replace(DOWN, not_ready_since=None), DEFAULT) is None
    assert termination_cause(READY, DEFAULT) is None
    soft = replace(READY, taints=(Taint("example.com/broken", "", "PreferNoSchedule"),))
    assert termination_cause(soft, DEFAULT, [()]) is None


def test_a_ready_tainted_node_by_the_pod_sets_tolerations() -> None:
    untolerated = "its node n has a taint the pod does not tolerate"
    temporary = "its node n has a taint the pod tolerates only for a while"
    assert termination_cause(TAINTED, DEFAULT, [()]) == untolerated
    assert termination_cause(TAINTED, DEFAULT, [(FOREVER,), ()]) == untolerated  # one set
    assert termination_cause(TAINTED, DEFAULT, [(TIMED,)]) == temporary
    assert termination_cause(TAINTED, DEFAULT, [(FOREVER,)]) is None
    # Without TASReplaceNodeOnPodTermination an untolerated taint fails the node at once
    # (not its pods); a temporarily tolerated one still fails the pods.
    no_termination = NodeFailureGates(on_pod_termination=False)
    assert termination_cause(TAINTED, no_termination, [()]) is None
    assert termination_cause(TAINTED, no_termination, [(TIMED,)]) == temporary
    assert termination_cause(TAINTED, NodeFailureGates(node_taints=False), [()]) is None


_KEYS = st.sampled_from(["a", "b"])
_EFFECTS = st.sampled_from(["NoSchedule", "NoExecute", "PreferNoSchedule"])
_TAINTS = st.lists(st.builds(Taint, _KEYS, st.just(""), _EFFECTS), max_size=3).map(tuple)
_TOLERATIONS = st.lists(
    st.builds(
        Toleration,
        _KEYS,
        st.just("Exists"),
        st.just(""),
        st.sampled_from(["", "NoSchedule", "NoExecute"]),
        st.sampled_from([None, 30]),
    ),
    max_size=3,
).map(tuple)


@st.composite
def _nodes(draw: st.DrawFn) -> Node:
    ready = draw(st.booleans())
    since = None if ready else draw(st.sampled_from([None, 0.0, 100.0]))
    return replace(READY, ready=ready, not_ready_since=since, taints=draw(_TAINTS))


@st.composite
def _gates(draw: st.DrawFn) -> NodeFailureGates:
    flags = draw(st.lists(st.booleans(), min_size=4, max_size=4))
    return NodeFailureGates(True, flags[0], flags[1], flags[2], flags[3])


@settings(max_examples=400, deadline=None)
@given(
    _nodes(),
    _gates(),
    st.lists(_TOLERATIONS, min_size=1, max_size=3),
    st.sampled_from([0.0, 1000.0]),
)
def test_pods_are_failed_wherever_the_node_waits_for_them_to_leave(
    found: Node,
    gates: NodeFailureGates,
    tolerations: list[tuple[Toleration, ...]],
    now: float,
) -> None:
    """Kueue's `checkPodsOnNode` both decides on the pods still running there and returns
    the pending ones to fail: whenever the verdict depends on running pods, the pending
    pods are failed. With both gates on, exactly a node not Ready or with a taint not
    tolerated for ever fails them."""
    cause = termination_cause(found, gates, tolerations)
    running = verdict(found, now, True, gates, tolerations)
    gone = verdict(found, now, False, gates, tolerations)
    if running != gone:
        assert cause is not None
    if gates.on_pod_termination and gates.node_taints and found.not_ready_since is not None:
        assert cause is not None
    if found.ready and gates.on_pod_termination and gates.node_taints:
        assert (cause is not None) == (taint_hold(found.taints, tolerations) is not TaintHold.NONE)
    if found.ready and not gates.node_taints:
        assert cause is None
