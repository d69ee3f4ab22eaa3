"""Released pods pinned to a failing node, marked Failed before the node counts as failed
(Kueue's TAS node controller: `getWorkloadStatus`, `checkPodsOnNode`, `getPodsToTerminate`
and `markPodsFailed` in `pkg/controller/tas/node_controller.go`).

A pod of an Admitted TAS Workload that the topology ungater released (no
`kueue.x-k8s.io/topology` gate) with the node selector of a node the Workload's assignment
names, and that is still Pending and unbound, is marked Failed (condition
`TerminatedByKueue`, reason `UnschedulableOnAssignedNode`) when that node is:

- not Ready, with `TASReplaceNodeOnPodTermination` (on);
- Ready, with `TASReplaceNodeOnNodeTaints` (on), with a NoSchedule/NoExecute taint that a
  pod set of the Workload with pods there does not tolerate (with
  `TASReplaceNodeOnPodTermination`), or tolerates only for `tolerationSeconds` (whatever
  that gate says).

It does not matter whether the Workload still has pods running there: the node may not
count as failed yet (controller/core/tas/node_failure.py, `verdict`), the pending pod is
failed all the same, so that its job makes a new one. Pods pinned to a node that is gone,
failed (`status.unhealthyNodes`) or replaced are failed by the ungater's stray check.
"""

from __future__ import annotations

from collections.abc import Sequence

from controller.core.model.topology import Node
from controller.core.model.workloads import Toleration
from controller.core.tas.node_failure import NodeFailureGates
from controller.core.tas.node_taints import TaintHold, taint_hold

__all__ = ["CONDITION_REASON", "CONDITION_TYPE", "EVENT_REASON", "termination_cause"]

CONDITION_TYPE = "TerminatedByKueue"
CONDITION_REASON = "UnschedulableOnAssignedNode"
EVENT_REASON = "PodTerminatedByKueue"


def termination_cause(
    node: Node | None,
    gates: NodeFailureGates,
    tolerations: Sequence[Sequence[Toleration]] = (),
) -> str | None:
    """Why the Workload's released, unbound Pending pods pinned to `node` (None: deleted)
    are marked Failed now, or None: they are left to the scheduler. `tolerations`: those of
    each of the Workload's pod sets with pods assigned there (the flavor's included), as
    for `verdict`.

    A deleted node, or one without a Ready condition (or without its
    `lastTransitionTime`), counts as failed at once: Kueue's node controller then fails no
    pod for it (its pods go by the stray check, once the node is in
    `status.unhealthyNodes` or replaced)."""
    if node is None:
        return None
    if not node.ready:
        if node.not_ready_since is None or not gates.on_pod_termination:
            return None
        return f"its node {node.name} is not Ready"
    if not gates.judges_taints(node):
        return None
    hold = taint_hold(node.taints, tolerations)
    if hold is TaintHold.UNTOLERATED and gates.on_pod_termination:
        return f"its node {node.name} has a taint the pod does not tolerate"
    if hold is TaintHold.TEMPORARY:
        return f"its node {node.name} has a taint the pod tolerates only for a while"
    return None
