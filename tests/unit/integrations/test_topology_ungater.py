"""The topology ungater's plan (Kueue's greedy `assignGatedPodsToDomains`): gated pods go to
the assignment's domains in order, as many as each still lacks; pods released before count;
finished pods do not. And what an admission with a topology puts into a pod template."""

from __future__ import annotations

import re
from typing import Any

import pytest

from api.constants import (
    POD_SET_LABEL,
    POD_SET_UNCONSTRAINED_TOPOLOGY_ANNOTATION,
    TOPOLOGY_SCHEDULING_GATE,
    WORKLOAD_ANNOTATION,
)
from controller.core.tas.assignment import Assignment
from controller.core.tas.encoding import encode
from controller.integrations.framework.podset_info import from_admission
from controller.integrations.pod_units import ungate_patch
from controller.integrations.topology_ungater import pods_to_fail, ungate_plan

HOST = "kubernetes.io/hostname"
RACK = "rack"


def pod(
    name: str, gated: bool = True, selector: dict[str, str] | None = None, phase: str = "Pending"
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if gated:
        spec["schedulingGates"] = [{"name": TOPOLOGY_SCHEDULING_GATE}]
    if selector:
        spec["nodeSelector"] = selector
    return {
        "metadata": {"name": name, "namespace": "ns", "labels": {POD_SET_LABEL: "main"}},
        "spec": spec,
        "status": {"phase": phase},
    }


def workload(
    *domains: tuple[tuple[str, ...], int], levels: tuple[str, ...] = (HOST,)
) -> dict[str, Any]:
    topology = encode(Assignment(levels, tuple(domains)))
    return {
        "metadata": {"name": "wl", "namespace": "ns"},
        "spec": {"podSets": [{"name": "main", "count": 4, "template": {}}]},
        "status": {
            "admission": {
                "clusterQueue": "cq",
                "podSetAssignments": [
                    {
                        "name": "main",
                        "count": 4,
                        "flavors": {"cpu": "tas"},
                        "topologyAssignment": topology,
                    }
                ],
            }
        },
    }


def names(plan: list[tuple[Any, dict[str, str]]]) -> list[tuple[str, dict[str, str]]]:
    return [(p["metadata"]["name"], selector) for p, selector in plan]


def failed(found: list[tuple[Any, str]]) -> list[tuple[str, str]]:
    return [(p["metadata"]["name"], why) for p, why in found]


def test_gated_pods_fill_the_domains_in_order() -> None:
    plan = ungate_plan(workload((("h1",), 3), (("h2",), 1)), [pod(f"p{i}") for i in range(4)])
    assert names(plan) == [
        ("p0", {HOST: "h1"}),
        ("p1", {HOST: "h1"}),
        ("p2", {HOST: "h1"}),
        ("p3", {HOST: "h2"}),
    ]


def test_released_pods_count_and_finished_ones_do_not() -> None:
    pods = [
        pod("done", gated=False, selector={HOST: "h1"}, phase="Succeeded"),
        pod("running", gated=False, selector={HOST: "h1"}, phase="Running"),
        pod("a"),
        pod("b"),
    ]
    plan = ungate_plan(workload((("h1",), 2), (("h2",), 2)), pods)
    assert names(plan) == [("a", {HOST: "h1"}), ("b", {HOST: "h2"})]


def test_no_pod_is_released_to_a_node_gone_or_not_ready() -> None:
    """The failed node's pods wait gated for its replacement (docs/tas.md)."""
    pods = [pod(f"p{i}") for i in range(3)]
    plan = ungate_plan(workload((("h1",), 2), (("h2",), 1)), pods, lambda name: name != "h1")
    assert names(plan) == [("p0", {HOST: "h2"})]


def test_a_released_pod_left_on_a_replaced_node_is_a_stray_until_bound() -> None:
    """Released to h1, then h1 left the assignment: it will never be placed (Kueue marks
    such pods Failed). Bound, finished or gated pods, and pods of kept nodes, are not."""
    bound = pod("bound", gated=False, selector={HOST: "h1"})
    bound["spec"]["nodeName"] = "h1"
    pods = [
        pod("stray", gated=False, selector={HOST: "h1"}),
        bound,
        pod("done", gated=False, selector={HOST: "h1"}, phase="Failed"),
        pod("kept", gated=False, selector={HOST: "h2"}),
        pod("gated"),
    ]
    strays = pods_to_fail(workload((("h2",), 2), (("h3",), 2)), pods)
    assert failed(strays) == [("stray", "its node h1 is no longer in the topology assignment")]
    assert pods_to_fail(workload((("b1", "r1"), 1), levels=("block", RACK)), pods) == []


def test_a_node_in_unhealthy_nodes_gets_no_pod_and_its_released_pods_are_strays() -> None:
    """Kueue's ungater skips a node `status.unhealthyNodes` lists, Ready or not (a tainted
    node is Ready); a pod released there before, still unbound, is marked Failed (Kueue's
    node controller) so that its job makes a new one, which waits gated."""
    wl = workload((("h1",), 2), (("h2",), 2))
    wl["status"]["unhealthyNodes"] = [{"name": "h1"}]
    plan = ungate_plan(wl, [pod(f"p{i}") for i in range(3)])
    assert names(plan) == [("p0", {HOST: "h2"}), ("p1", {HOST: "h2"})]
    released = pod("left", gated=False, selector={HOST: "h1"})
    kept = pod("kept", gated=False, selector={HOST: "h2"})
    assert failed(pods_to_fail(wl, [released, kept])) == [
        ("left", "its node h1 failed (status.unhealthyNodes)")
    ]


def test_a_released_pod_pinned_to_a_failing_node_of_the_assignment_fails() -> None:
    """Kueue's `getPodsToTerminate`: pending, unbound, released pods pinned to a node of
    the assignment that is not Ready or tainted (`termination` says why), though the node
    has not failed; the cause is asked once per node."""
    asked: list[str] = []

    def termination(node: str) -> str | None:
        asked.append(node)
        return "its node h1 is not Ready" if node == "h1" else None

    bound = pod("bound", gated=False, selector={HOST: "h1"}, phase="Running")
    bound["spec"]["nodeName"] = "h1"
    pods = [
        pod("p1", gated=False, selector={HOST: "h1"}),
        pod("p2", gated=False, selector={HOST: "h1"}),
        pod("fine", gated=False, selector={HOST: "h2"}),
        bound,
        pod("gated"),
    ]
    found = pods_to_fail(workload((("h1",), 3), (("h2",), 1)), pods, termination)
    assert failed(found) == [("p1", "its node h1 is not Ready"), ("p2", "its node h1 is not Ready")]
    assert sorted(asked) == ["h1", "h2"]


def test_multi_level_domains_select_every_level() -> None:
    plan = ungate_plan(workload((("b1", "r1"), 1), levels=("block", RACK)), [pod("a")])
    assert names(plan) == [("a", {"block": "b1", RACK: "r1"})]


def test_the_patch_adds_the_selector_and_removes_the_topology_gate() -> None:
    ops = ungate_patch(pod("a"), {HOST: "h1"}, (), gate=TOPOLOGY_SCHEDULING_GATE)
    assert ops == [
        {"op": "add", "path": "/spec/nodeSelector", "value": {HOST: "h1"}},
        {"op": "test", "path": "/spec/schedulingGates/0/name", "value": TOPOLOGY_SCHEDULING_GATE},
        {"op": "remove", "path": "/spec/schedulingGates/0"},
    ]


def test_an_admission_with_a_topology_gates_the_template_and_names_the_workload() -> None:
    [info] = from_admission(workload((("h1",), 4)), lambda name: None)
    assert info.scheduling_gates == [{"name": TOPOLOGY_SCHEDULING_GATE}]
    assert info.annotations[WORKLOAD_ANNOTATION] == "wl"
    # no topologyRequest on the pod set: placed by a TAS-only queue, marked unconstrained
    assert info.annotations[POD_SET_UNCONSTRAINED_TOPOLOGY_ANNOTATION] == "true"


def test_an_admission_without_a_topology_adds_no_gate_but_names_the_workload() -> None:
    """As Kueue's `getPodSetsInfoFromStatus` with TopologyAwareScheduling on (it always is
    here): every pod set's pods carry the Workload's name, placed by topology or not."""
    body = workload((("h1",), 4))
    del body["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]
    [info] = from_admission(body, lambda name: None)
    assert info.scheduling_gates == []
    assert info.annotations[WORKLOAD_ANNOTATION] == "wl"


class _Core:
    """Records the ungating patches; the pod's new state reaches the ungater only when the
    test delivers its watch event (as a lagging watch would)."""

    def __init__(self) -> None:
        self.released: list[tuple[str, str]] = []

    async def patch_namespaced_pod(
        self, name: str, namespace: str, patch: list[dict[str, Any]], **_: Any
    ) -> None:
        [selector] = [op["value"] for op in patch if op["path"] == "/spec/nodeSelector"]
        self.released.append((name, selector[HOST]))


class _View:
    leading = True
    events = None

    def __init__(self, wl: dict[str, Any], not_ready: frozenset[str] = frozenset()) -> None:
        self.wl = wl
        self.not_ready = not_ready

    def workload(self, key: str) -> dict[str, Any]:
        return self.wl

    def node_usable(self, name: str) -> bool:
        return name not in self.not_ready

    def pinned_pods_termination(self, workload: str, node: str) -> str | None:
        return f"its node {node} is not Ready" if node in self.not_ready else None


def _ungater(wl: dict[str, Any], core: Any, view: _View) -> Any:
    from controller.integrations.topology_ungater import TopologyUngater

    ungater = TopologyUngater.__new__(TopologyUngater)
    ungater.core = core
    ungater.view = view  # type: ignore[assignment]
    ungater.pods, ungater.members, ungater.released, ungater.pinned = {}, {}, {}, {}
    return ungater


def test_pods_released_before_their_watch_event_still_count() -> None:
    """Two nodes of two pods each; two pods released to node a, then two more pods arrive
    before the watch shows the first two released: the new ones go to node b, not a third
    onto node a (which its scheduler could not place)."""
    import asyncio

    wl = workload(((("a",), 2)), ((("b",), 2)))
    wl["status"]["conditions"] = [{"type": "Admitted", "status": "True"}]
    core = _Core()
    ungater = _ungater(wl, core, _View(wl))

    def arrive(p: dict[str, Any]) -> None:
        p["metadata"]["annotations"] = {WORKLOAD_ANNOTATION: "wl"}
        ungater.pods[f"ns/{p['metadata']['name']}"] = p
        ungater.members.setdefault(("ns", "wl"), set()).add(f"ns/{p['metadata']['name']}")

    arrive(pod("p1"))
    arrive(pod("p2"))
    asyncio.run(ungater.reconcile(("ns", "wl")))
    assert core.released == [("p1", "a"), ("p2", "a")]
    arrive(pod("p0"))  # names that sort first, as the Job controller's random ones may
    arrive(pod("p00"))
    asyncio.run(ungater.reconcile(("ns", "wl")))  # p1, p2 still gated in the cache
    assert core.released[2:] == [("p0", "b"), ("p00", "b")]
    # the watch catches up: the cached copies are the truth again
    ungater.on_pod_event(
        "MODIFIED",
        {
            **pod("p1", gated=False, selector={HOST: "a"}),
            "metadata": {
                "name": "p1",
                "namespace": "ns",
                "labels": {POD_SET_LABEL: "main"},
                "annotations": {WORKLOAD_ANNOTATION: "wl"},
            },
        },
    )
    assert "ns/p1" not in ungater.released and "ns/p2" in ungater.released


COMPLETION = "batch.kubernetes.io/job-completion-index"


def indexed(name: str, index: int, **extra: Any) -> dict[str, Any]:
    p = pod(name, **extra)
    p["metadata"]["labels"][COMPLETION] = str(index)
    return p


def test_a_pod_set_with_a_pod_index_label_is_released_by_rank() -> None:
    """Names sorting out of index order (a Job's `-10-` before `-2-`): index i still goes
    to the i-th place of the assignment."""
    wl = workload((("h1",), 2), (("h2",), 2))
    wl["spec"]["podSets"][0]["topologyRequest"] = {"required": RACK, "podIndexLabel": COMPLETION}
    pods = [indexed("j-10", 3), indexed("j-2", 0), indexed("j-3", 1), indexed("j-9", 2)]
    assert names(ungate_plan(wl, pods)) == [
        ("j-2", {HOST: "h1"}),
        ("j-3", {HOST: "h1"}),
        ("j-9", {HOST: "h2"}),
        ("j-10", {HOST: "h2"}),
    ]
    # without the label named in the topology request, the domains fill in name order
    del wl["spec"]["podSets"][0]["topologyRequest"]["podIndexLabel"]
    assert [s[HOST] for _, s in names(ungate_plan(wl, pods))] == ["h1", "h1", "h2", "h2"]
    assert [n for n, _ in names(ungate_plan(wl, pods))] == ["j-10", "j-2", "j-3", "j-9"]


def test_an_offset_annotation_shifts_ranks_and_a_bad_one_releases_nothing() -> None:
    wl = workload((("h1",), 1), (("h2",), 3))
    wl["spec"]["podSets"][0]["topologyRequest"] = {"podIndexLabel": COMPLETION}
    pods = [indexed(f"w{i}", i) for i in (4, 3, 2, 1)]
    for p in pods:
        p["metadata"]["annotations"] = {"kueue.x-k8s.io/pod-index-offset": "1"}
    assert names(ungate_plan(wl, pods))[0] == ("w1", {HOST: "h1"})
    # Kueue reads the first pod's (here, by name); not a number: none of the pods go
    pods[3]["metadata"]["annotations"]["kueue.x-k8s.io/pod-index-offset"] = "one"
    with pytest.raises(
        ValueError, match=re.escape("pod w1: annotation kueue.x-k8s.io/pod-index-offset")
    ):
        ungate_plan(wl, pods)


def test_a_leader_and_its_workers_grouped_share_the_ranks() -> None:
    """A LeaderWorkerSet with a pod set group: the leader (worker index 0) holds rank 0,
    the workers 1..3 ranks 0..2 of their own assignment."""
    leader_topology = encode(Assignment((HOST,), ((("h1",), 1),)))
    worker_topology = encode(Assignment((HOST,), ((("h1",), 1), (("h2",), 2))))
    request = {"required": RACK, "podIndexLabel": WORKER, "podSetGroupName": "g"}
    wl = {
        "metadata": {"name": "wl", "namespace": "ns"},
        "spec": {
            "podSets": [
                {"name": "leader", "count": 1, "template": {}, "topologyRequest": request},
                {"name": "worker", "count": 3, "template": {}, "topologyRequest": request},
            ]
        },
        "status": {
            "admission": {
                "clusterQueue": "cq",
                "podSetAssignments": [
                    {"name": "leader", "count": 1, "topologyAssignment": leader_topology},
                    {"name": "worker", "count": 3, "topologyAssignment": worker_topology},
                ],
            }
        },
    }

    def member(name: str, pod_set: str, index: int) -> dict[str, Any]:
        p = pod(name)
        p["metadata"]["labels"] = {POD_SET_LABEL: pod_set, WORKER: str(index)}
        return p

    pods = [member("a", "worker", 3), member("b", "worker", 1), member("c", "worker", 2)]
    pods.append(member("z", "leader", 0))
    assert sorted(names(ungate_plan(wl, pods))) == [
        ("a", {HOST: "h2"}),
        ("b", {HOST: "h1"}),
        ("c", {HOST: "h2"}),
        ("z", {HOST: "h1"}),
    ]


WORKER = "leaderworkerset.sigs.k8s.io/worker-index"


def test_a_jobsets_pods_rank_by_job_index_then_completion_index() -> None:
    """The pod set's `subGroupIndexLabel` and `subGroupCount` (a replicated Job of 2 Jobs
    of 2 pods): job 0's pods take the first two places, job 1's the next two."""
    wl = workload((("h1",), 1), (("h2",), 2), (("h3",), 1))
    wl["spec"]["podSets"][0]["topologyRequest"] = {
        "required": RACK,
        "podIndexLabel": COMPLETION,
        "subGroupIndexLabel": "jobset.sigs.k8s.io/job-index",
        "subGroupCount": 2,
    }
    pods = []  # named so that the fill by name would reverse them
    for name, job, index in (("a", 1, 1), ("b", 0, 1), ("c", 1, 0), ("d", 0, 0)):
        p = indexed(name, index)
        p["metadata"]["labels"]["jobset.sigs.k8s.io/job-index"] = str(job)
        pods.append(p)
    assert sorted(names(ungate_plan(wl, pods))) == [
        ("a", {HOST: "h3"}),
        ("b", {HOST: "h2"}),
        ("c", {HOST: "h2"}),
        ("d", {HOST: "h1"}),
    ]


class _StatusCore(_Core):
    """Records the status patches; a pod in `gone` answers 404."""

    def __init__(self, gone: frozenset[str] = frozenset()) -> None:
        super().__init__()
        self.statuses: list[tuple[str, dict[str, Any]]] = []
        self.gone = gone

    async def patch_namespaced_pod_status(
        self, name: str, namespace: str, body: dict[str, Any], _content_type: str
    ) -> None:
        from kubernetes.aio.client.exceptions import ApiException

        # a strategic merge: the pod's other conditions (PodScheduled) are kept
        assert _content_type == "application/strategic-merge-patch+json"
        if name in self.gone:
            raise ApiException(status=404)
        self.statuses.append((name, body))


class _Kicks:
    def __init__(self) -> None:
        self.kicked: list[tuple[str, str]] = []

    def kick(self, key: tuple[str, str]) -> None:
        self.kicked.append(key)


def test_pods_pinned_to_a_failing_node_are_marked_failed_as_kueue_marks_them() -> None:
    """Node a turned NotReady after two pods were released to it and before they were
    bound: a node change looks at their Workload, which marks them Failed by a status
    patch of the pod as seen (its resourceVersion) with Kueue's condition, and an Event on
    each pod; a pod gone meanwhile is skipped. No pod is released to node a."""
    import asyncio

    wl = workload(((("a",), 2)), ((("b",), 2)))
    wl["status"]["conditions"] = [{"type": "Admitted", "status": "True"}]
    core = _StatusCore(gone=frozenset({"p2"}))
    view = _View(wl)
    events: list[tuple[str, str, str, str]] = []

    async def record(obj: dict[str, Any], kind: str, reason: str, message: str) -> None:
        events.append((obj["metadata"]["name"], kind, reason, message))

    view.events = record  # type: ignore[assignment]
    ungater = _ungater(wl, core, view)
    ungater._serial = _Kicks()
    pods = [
        pod("p1", gated=False, selector={HOST: "a"}),
        pod("p2", gated=False, selector={HOST: "a"}),
        pod("p3"),
    ]
    for p in pods:
        p["metadata"]["annotations"] = {WORKLOAD_ANNOTATION: "wl"}
        p["metadata"]["resourceVersion"] = "7"
        ungater.on_pod_event("ADDED", p)
    assert ungater._serial.kicked == [("ns", "wl")]  # for the gated one only
    ungater.on_node_event("b")
    assert ungater._serial.kicked == [("ns", "wl")]  # no pod waits for node b
    view.not_ready = frozenset({"a"})
    ungater.on_node_event("a")
    ungater.on_pod_event("MODIFIED", pods[0])  # a pod event finds it too
    assert ungater._serial.kicked == [("ns", "wl")] * 3
    asyncio.run(ungater.reconcile(("ns", "wl")))
    message = "Pod terminated by quotagate: its node a is not Ready"
    [(name, body)] = core.statuses
    assert name == "p1" and body["metadata"] == {"resourceVersion": "7"}
    assert body["status"]["phase"] == "Failed"
    [condition] = body["status"]["conditions"]
    assert {k: v for k, v in condition.items() if k != "lastTransitionTime"} == {
        "type": "TerminatedByKueue",
        "status": "True",
        "reason": "UnschedulableOnAssignedNode",
        "message": message,
    }
    assert events == [("p1", "Normal", "PodTerminatedByKueue", message)]
    assert core.released == [("p3", "b")]  # the gated pod goes to node b only
