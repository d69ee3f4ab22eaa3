"""A Ready node's taints as a failure of the TAS Workloads assigned there (Kueue's
`TASReplaceNodeOnNodeTaints`, on by default since Kueue 0.17; `classifyTaints` and
`checkTaintTolerations` in `pkg/controller/tas/node_controller.go`).

Only NoSchedule and NoExecute taints count. A taint is judged against each pod set of the
Workload that has pods assigned to the node, with the tolerations its pods carry (the pod
set's and its flavor's):

- untolerated: some pod set does not tolerate it;
- tolerated for a while: every pod set tolerates it, but some only with a toleration that
  has `tolerationSeconds` (its pods are evicted once those run out);
- tolerated for ever: every pod set tolerates it with a toleration without
  `tolerationSeconds`: the node stays healthy for the Workload.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from enum import Enum

from controller.core.model.flavors import Taint
from controller.core.model.workloads import Toleration

__all__ = ["SCHEDULING_EFFECTS", "TaintHold", "has_scheduling_taints", "taint_hold"]

SCHEDULING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


class TaintHold(Enum):
    """How a node's taints hold a Workload's pods, the worst of its taints."""

    NONE = "none"  # no taint counts, or every one is tolerated for ever
    TEMPORARY = "temporary"  # a taint tolerated only for `tolerationSeconds`
    UNTOLERATED = "untolerated"  # a taint some pod set does not tolerate


def has_scheduling_taints(taints: Iterable[Taint]) -> bool:
    """Whether a taint with a NoSchedule or NoExecute effect is on the node (Kueue's
    `hasSchedulingTaints`): only such a node is judged by its taints."""
    return any(taint.effect in SCHEDULING_EFFECTS for taint in taints)


def _tolerated(tolerations: Iterable[Toleration], taint: Taint) -> bool:
    return any(t.tolerates(taint.key, taint.value, taint.effect) for t in tolerations)


def _judge(taint: Taint, pod_sets: Sequence[Sequence[Toleration]]) -> TaintHold:
    """One taint against every pod set's tolerations (Kueue's `checkTaintTolerations`)."""
    temporary = False
    for tolerations in pod_sets:
        if not _tolerated(tolerations, taint):
            return TaintHold.UNTOLERATED
        if not _tolerated((t for t in tolerations if t.seconds is None), taint):
            temporary = True
    return TaintHold.TEMPORARY if temporary else TaintHold.NONE


def taint_hold(taints: Iterable[Taint], pod_sets: Sequence[Sequence[Toleration]]) -> TaintHold:
    """The worst hold of the node's NoSchedule/NoExecute `taints` on a Workload whose pod
    sets on the node carry `pod_sets` tolerations (one sequence per pod set)."""
    worst = TaintHold.NONE
    for taint in taints:
        if taint.effect not in SCHEDULING_EFFECTS:
            continue
        judged = _judge(taint, pod_sets)
        if judged is TaintHold.UNTOLERATED:
            return judged
        if judged is TaintHold.TEMPORARY:
            worst = judged
    return worst
