"""The topology ungater (Kueue's `pkg/controller/tas/topology_ungater.go`): the pods of an
admitted TAS pod set are created held by the `kueue.x-k8s.io/topology` scheduling gate;
each is released with the node selector of one domain of its pod set's
`topologyAssignment` (the domain's values at the assignment's levels), so the scheduler
places it there. Which pod goes where is `controller.core.tas.ranks`' decision (Kueue's):
by the pod's rank (its pod index label) when the pod set has one, consecutive ranks in
one domain; else the domains in the assignment's order, counting the pods already released
into each.

Pods are found by their `kueue.x-k8s.io/workload` annotation and `kueue.x-k8s.io/podset`
label (both put on the template at admission: framework/podset_info.py).

It also does the pod part of Kueue's TAS node controller: a released pod still Pending and
unbound whose node is replaced, failed (`status.unhealthyNodes`), not Ready or tainted
against the pod (controller/core/tas/pod_termination.py) is marked Failed
(`TerminatedByKueue`), so that its job makes a new one (`pods_to_fail`). A change of such a
node, or an event of such a pod, has its Workload looked at.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from kubernetes.aio import client as aio_client
from kubernetes.aio.client.exceptions import ApiException

from api.constants import (
    HOSTNAME_LABEL,
    POD_INDEX_OFFSET_ANNOTATION,
    POD_SET_LABEL,
    TOPOLOGY_SCHEDULING_GATE,
    WORKLOAD_ANNOTATION,
)
from controller.core.tas.encoding import decode
from controller.core.tas.pod_termination import CONDITION_REASON, CONDITION_TYPE, EVENT_REASON
from controller.core.tas.ranks import (
    PodFacts,
    RankLabels,
    RankRange,
    parse_offset,
    rank_ranges,
    releases,
)
from controller.core.tas.snapshot import DomainID
from controller.integrations.host import ControllerView
from controller.integrations.pod_units import ungate_patch
from controller.integrations.pods import ungate_pod
from controller.integrations.serial import SerialReconciler
from controller.kube.client import STRATEGIC_MERGE_PATCH

__all__ = ["TopologyUngater", "pods_to_fail", "ungate_plan"]

log = logging.getLogger(__name__)

_TERMINAL = frozenset({"Succeeded", "Failed"})
Key = tuple[str, str]  # (namespace, Workload name)


def _admission_and_unhealthy_nodes(
    workload: Mapping[str, Any],
) -> tuple[Mapping[str, Any], set[str]]:
    """The Workload's `status.admission` ({} without one) and the nodes its
    `status.unhealthyNodes` lists (failed, their replacement awaited)."""
    status = workload.get("status") or {}
    unhealthy = {str(n.get("name")) for n in status.get("unhealthyNodes") or ()}
    return status.get("admission") or {}, unhealthy


def _gated(pod: Mapping[str, Any]) -> bool:
    gates = (pod.get("spec") or {}).get("schedulingGates") or ()
    return any(g.get("name") == TOPOLOGY_SCHEDULING_GATE for g in gates)


def _rank_labels(pod_set: Mapping[str, Any]) -> RankLabels | None:
    """Where the pod set's pods carry their rank: its `topologyRequest.podIndexLabel` (and
    `subGroupIndexLabel`, `subGroupCount`), which its integration writes."""
    request = pod_set.get("topologyRequest") or {}
    if request.get("podIndexLabel") is None:
        return None
    count = request.get("subGroupCount")
    return RankLabels(
        str(request["podIndexLabel"]),
        None if request.get("subGroupIndexLabel") is None else str(request["subGroupIndexLabel"]),
        None if count is None else int(count),
    )


def _pod_name(pod: Mapping[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("name"))


def _offset(pods: Sequence[Mapping[str, Any]]) -> int:
    """The pod set's `kueue.x-k8s.io/pod-index-offset`, read from its first pod (Kueue
    assumes every pod carries the same); ValueError naming the pod when not a number."""
    if not pods:
        return 0
    value = ((pods[0].get("metadata") or {}).get("annotations") or {}).get(
        POD_INDEX_OFFSET_ANNOTATION
    )
    if value is None:
        return 0
    try:
        return parse_offset(str(value))
    except ValueError as exc:
        raise ValueError(
            f"pod {_pod_name(pods[0])}: annotation {POD_INDEX_OFFSET_ANNOTATION}: {exc}"
        ) from exc


def ungate_plan(
    workload: Mapping[str, Any],
    pods: Iterable[Mapping[str, Any]],
    node_usable: Callable[[str], bool] = lambda _: True,
) -> list[tuple[Mapping[str, Any], dict[str, str]]]:
    """The gated pods to release now and each one's node selector, per pod set with a
    `topologyAssignment` (`controller.core.tas.ranks.releases`): by rank when the pod set
    names a pod index label and its pods' ranks are usable (the pod of rank r to the
    domain of the r-th place), else its domains in order, each given as many gated pods as
    it still lacks. Finished pods do not count (they are replaced). A domain that is a node
    (`kubernetes.io/hostname` the last level) gets none while the Workload's
    `status.unhealthyNodes` lists it (as Kueue's ungater holds them) or `node_usable` says
    it is gone or not Ready: its pods wait gated for the replacement (docs/tas.md, Node
    failures). ValueError when a pod's `kueue.x-k8s.io/pod-index-offset` is not a number
    (Kueue then releases none of the Workload's pods)."""
    by_pod_set: dict[str, list[Mapping[str, Any]]] = {}
    for pod in pods:
        if (pod.get("status") or {}).get("phase") in _TERMINAL:
            continue
        name = ((pod.get("metadata") or {}).get("labels") or {}).get(POD_SET_LABEL)
        if name is not None:
            by_pod_set.setdefault(str(name), []).append(pod)
    admission, unhealthy = _admission_and_unhealthy_nodes(workload)
    spec_pod_sets = {
        str(ps.get("name")): ps for ps in (workload.get("spec") or {}).get("podSets") or ()
    }
    assignments = list(admission.get("podSetAssignments") or ())
    counts = {
        str(psa.get("name")): int(
            psa["count"]
            if psa.get("count") is not None
            else spec_pod_sets.get(str(psa.get("name")), {}).get("count", 1)
        )
        for psa in assignments
    }
    ranges = rank_ranges(
        [
            (
                name,
                counts[name],
                ((spec_pod_sets.get(name) or {}).get("topologyRequest") or {}).get(
                    "podSetGroupName"
                ),
            )
            for name in (str(psa.get("name")) for psa in assignments)
        ]
    )
    plan: list[tuple[Mapping[str, Any], dict[str, str]]] = []
    for psa in assignments:
        topology = psa.get("topologyAssignment")
        if not topology:
            continue
        name = str(psa.get("name"))
        assignment = decode(topology)
        members = sorted(by_pod_set.get(name, []), key=_pod_name)
        offset = _offset(members)
        ranks = ranges.get(name, RankRange(0, 0))
        facts = [_facts(pod, assignment.levels) for pod in members]
        by_node = bool(assignment.levels) and assignment.levels[-1] == HOSTNAME_LABEL

        def usable(values: DomainID, by_node: bool = by_node) -> bool:
            return not by_node or (values[-1] not in unhealthy and node_usable(values[-1]))

        release = releases(
            assignment,
            facts,
            _rank_labels(spec_pod_sets.get(name) or {}),
            counts[name],
            RankRange(ranks.offset + offset, ranks.bound + offset),
            usable,
        )
        if release.fallback is not None:
            log.debug(
                "pod set %s: ranks not used (%s); domains filled in order", name, release.fallback
            )
        for position, values in release.pods:
            plan.append((members[position], dict(zip(assignment.levels, values, strict=True))))
    return plan


def _facts(pod: Mapping[str, Any], levels: Sequence[str]) -> PodFacts:
    selector = (pod.get("spec") or {}).get("nodeSelector") or {}
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return PodFacts(
        {str(k): str(v) for k, v in labels.items()},
        _gated(pod),
        tuple(str(selector.get(level, "")) for level in levels),
    )


def _pinned(pod: Mapping[str, Any]) -> str | None:
    """The node a released pod is pinned to by its node selector while it is still waiting
    for one (Pending, unbound, not being deleted), else None."""
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    if (
        _gated(pod)
        or spec.get("nodeName")
        or meta.get("deletionTimestamp")
        or (pod.get("status") or {}).get("phase") in _TERMINAL
    ):
        return None
    selected = (spec.get("nodeSelector") or {}).get(HOSTNAME_LABEL)
    return None if selected is None else str(selected)


def pods_to_fail(
    workload: Mapping[str, Any],
    pods: Iterable[Mapping[str, Any]],
    termination: Callable[[str], str | None] = lambda _: None,
) -> list[tuple[Mapping[str, Any], str]]:
    """The released pods to mark Failed, each with why (Kueue's node controller marks them
    Failed, so that their job makes new ones): not bound, not finished, not being deleted,
    their node selector naming
    - a node their pod set's assignment no longer holds (a failed node replaced), or one
      `status.unhealthyNodes` lists (failed, its replacement awaited): strays no
      scheduler will place;
    - a node of the assignment for which `termination` gives a cause: not Ready, or with a
      taint the pods do not tolerate, before the node counts as failed
      (controller/core/tas/pod_termination.py)."""
    admission, unhealthy = _admission_and_unhealthy_nodes(workload)
    nodes: dict[str, set[str]] = {}
    for psa in admission.get("podSetAssignments") or ():
        topology = psa.get("topologyAssignment")
        if topology:
            assignment = decode(topology)
            if assignment.levels and assignment.levels[-1] == HOSTNAME_LABEL:
                nodes[str(psa.get("name"))] = {values[-1] for values, _ in assignment.domains}
    causes: dict[str, str | None] = {}
    out = []
    for pod in pods:
        held = nodes.get(str(((pod.get("metadata") or {}).get("labels") or {}).get(POD_SET_LABEL)))
        selected = _pinned(pod)
        if held is None or selected is None:
            continue
        if selected not in held:
            out.append((pod, f"its node {selected} is no longer in the topology assignment"))
        elif selected in unhealthy:
            out.append((pod, f"its node {selected} failed (status.unhealthyNodes)"))
        else:
            if selected not in causes:
                causes[selected] = termination(selected)
            cause = causes[selected]
            if cause is not None:
                out.append((pod, cause))
    return out


def _terminated_by_kueue(now: str, message: str) -> dict[str, Any]:
    """The status that marks a pod Failed, as Kueue's node controller writes it."""
    return {
        "status": {
            "phase": "Failed",
            "conditions": [
                {
                    "type": CONDITION_TYPE,
                    "status": "True",
                    "reason": CONDITION_REASON,
                    "message": message,
                    "lastTransitionTime": now,
                }
            ],
        }
    }


def _admitted_by_tas(workload: Mapping[str, Any]) -> bool:
    """Quota reserved (Kueue: admitted) with at least one topology assignment."""
    status = workload.get("status") or {}
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or ()}
    admission = status.get("admission") or {}
    return conditions.get("Admitted") == "True" and any(
        psa.get("topologyAssignment") for psa in admission.get("podSetAssignments") or ()
    )


class TopologyUngater:
    """Releases the topology gate of admitted TAS Workloads' pods."""

    def __init__(self, api_client: aio_client.ApiClient, view: ControllerView) -> None:
        self.core = aio_client.CoreV1Api(api_client)
        self.view = view
        self.pods: dict[str, dict[str, Any]] = {}  # pod key → pod
        self.members: dict[Key, set[str]] = {}  # Workload → pod keys
        # Pods this process released whose release the watch has not shown yet → the
        # node selector they got. Until it does, the cached copy still shows them gated,
        # and a plan made from it would give their domains' places to other pods too (a
        # domain over-filled: one pod more than its nodes hold, unschedulable); Kueue's
        # ungater keeps the same expectations.
        self.released: dict[str, dict[str, str]] = {}
        # Released pods still waiting for their node (`_pinned`): node → pod keys, so
        # that a node turning NotReady or tainted has their Workloads looked at.
        self.pinned: dict[str, set[str]] = {}
        self._serial: SerialReconciler[Key] = SerialReconciler(
            self.reconcile,
            lambda: view.leading,
            lambda key: f"the topology of Workload {key[0]}/{key[1]}",
            log,
        )

    def on_pod_event(self, event_type: str | None, pod: dict[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        workload = (meta.get("annotations") or {}).get(WORKLOAD_ANNOTATION)
        owner = (str(meta.get("namespace")), str(workload)) if workload else None
        old = self.pods.pop(key, None)
        if event_type == "DELETED" or not _gated(pod):
            self.released.pop(key, None)
        if old is not None:
            old_meta = old.get("metadata") or {}
            old_owner = (old_meta.get("annotations") or {}).get(WORKLOAD_ANNOTATION)
            if old_owner:
                self.members.get((str(old_meta.get("namespace")), old_owner), set()).discard(key)
            old_node = _pinned(old)
            if old_node is not None:
                self.pinned.get(old_node, set()).discard(key)
        if event_type == "DELETED" or owner is None:
            return
        self.pods[key] = pod
        self.members.setdefault(owner, set()).add(key)
        node = _pinned(pod)
        if node is not None:
            self.pinned.setdefault(node, set()).add(key)
        if _gated(pod) or (
            node is not None and self.view.pinned_pods_termination(f"{owner[0]}/{owner[1]}", node)
        ):
            self._serial.kick(owner)

    def on_node_event(self, name: str) -> None:
        """Node `name` changed (Ready, taints): the Workloads with released pods waiting
        for it are looked at (Kueue's node controller reconciles the node)."""
        owners = set()
        for key in self.pinned.get(name, ()):
            meta = (self.pods.get(key) or {}).get("metadata") or {}
            workload = (meta.get("annotations") or {}).get(WORKLOAD_ANNOTATION)
            if workload:
                owners.add((str(meta.get("namespace")), str(workload)))
        for owner in sorted(owners):
            self._serial.kick(owner)

    def known_keys(self) -> set[str]:
        return set(self.pods)

    def on_workload_event(self, workload: dict[str, Any]) -> None:
        if _admitted_by_tas(workload):
            meta = workload.get("metadata") or {}
            self._serial.kick((str(meta.get("namespace")), str(meta.get("name"))))

    def resync(self) -> None:
        for key in list(self.members):
            self._serial.kick(key)

    def stop_leading(self) -> None:
        """The term ended: cancel the ungating in progress (`SerialReconciler.cancel_all`)."""
        self._serial.cancel_all()
        self.released.clear()

    def _seen(self, key: str) -> Mapping[str, Any]:
        """The cached pod, or, when this process released it and the watch has not shown
        that yet, the pod as released: without the gate, with the node selector given."""
        pod = self.pods[key]
        selector = self.released.get(key)
        if selector is None or not _gated(pod):
            return pod
        spec = dict(pod.get("spec") or {})
        spec["schedulingGates"] = [
            g
            for g in spec.get("schedulingGates") or ()
            if g.get("name") != TOPOLOGY_SCHEDULING_GATE
        ]
        spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **selector}
        return {**pod, "spec": spec}

    async def reconcile(self, key: Key) -> None:
        workload = self.view.workload(f"{key[0]}/{key[1]}")
        if workload is None or not _admitted_by_tas(workload):
            return
        pods = [self._seen(k) for k in self.members.get(key, ()) if k in self.pods]
        cause = functools.partial(self.view.pinned_pods_termination, f"{key[0]}/{key[1]}")
        for pod, why in pods_to_fail(workload, pods, cause):
            await self._mark_failed(pod, f"Pod terminated by quotagate: {why}")
        try:
            plan = ungate_plan(workload, pods, self.view.node_usable)
        except ValueError as exc:  # Kueue's ungater fails the same way, releasing none
            log.error("Workload %s/%s: its pods stay gated: %s", key[0], key[1], exc)
            return
        for pod, selector in plan:
            patch = ungate_patch(pod, selector, (), gate=TOPOLOGY_SCHEDULING_GATE)
            if patch and await ungate_pod(self.core, pod, patch):
                meta = pod.get("metadata") or {}
                self.released[f"{meta.get('namespace')}/{meta.get('name')}"] = selector

    async def _mark_failed(self, pod: Mapping[str, Any], message: str) -> None:
        """Phase Failed with the `TerminatedByKueue` condition (a status patch, as Kueue's
        `markPodsFailed`), and its Event on the pod."""
        meta = pod.get("metadata") or {}
        log.info("pod %s/%s marked Failed: %s", meta.get("namespace"), meta.get("name"), message)
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        patch = _terminated_by_kueue(now, message)
        # Only the pod as seen (Kueue's strict patch): one bound meanwhile is left (409).
        if meta.get("resourceVersion"):
            patch["metadata"] = {"resourceVersion": meta["resourceVersion"]}
        try:
            await self.core.patch_namespaced_pod_status(
                str(meta.get("name")),
                str(meta.get("namespace")),
                patch,
                _content_type=STRATEGIC_MERGE_PATCH,  # conditions merged by type
            )
        except ApiException as exc:
            if exc.status != 404:  # gone meanwhile: nothing to mark
                raise
            return
        if self.view.events:
            await self.view.events(dict(pod), "Normal", EVENT_REASON, message)
