"""Properties of the node holds of nominated topology-aware preemptors
(controller/core/tas/holds.py), over random sequences on the cluster of
test_topology_preemption: TAS Workloads of random sizes, priorities and levels arrive;
leaving victims finish terminating one at a time; admitted Workloads finish; now and then
a host is cordoned; a cycle runs after each change; with or without fair sharing, in one
ClusterQueue or two of a cohort reclaiming from each other.

Judged from scratch after every step, from the admissions and the nominations' plans:
- no node is over-used now (what every Workload holding quota takes, the leaving victims
  included), nor once every victim has gone and every nominee is admitted where its plan
  says (what the Workloads not leaving take, plus every plan);
- no eviction is wasted: a nomination ends with its preemptor admitted (in the domain its
  victims were chosen in, when their search chose one), when no host was cordoned since
  it was nominated; a preemptor whose nomination is dropped is allowed only when a host
  was cordoned since."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from api.constants import ReclaimWithinCohortPolicy
from controller.core.fairsharing.settings import FairSharing
from controller.core.model.topology import TopologyRequest
from controller.core.model.workloads import PodSet
from controller.core.scheduler.cycle import run_cycle
from controller.core.state import ClusterState
from controller.core.tas.encoding import decode
from tests.unit.core.builders import add, cluster, cq, wl
from tests.unit.core.scheduler.test_topology_preemption import HOSTS, LOWER, TAS, nodes
from tests.unit.core.tas.builders import BLOCK, HOST, RACK, node

CAPACITY = 4000  # milli-cpus per host

arrive = st.tuples(
    st.just("arrive"),
    st.integers(1, 8),  # pods, 1 cpu each
    st.integers(0, 5),  # priority
    st.sampled_from(
        [("required", HOST), ("required", RACK), ("required", BLOCK), ("preferred", RACK)]
    ),
    st.booleans(),  # in the other ClusterQueue (when there are two)
)
gone = st.tuples(st.just("victim gone"), st.integers(0, 100))
step_st = st.one_of(
    arrive,
    gone,
    arrive,
    st.tuples(st.just("finish"), st.integers(0, 100)),
    gone,
    st.tuples(st.just("cordon"), st.integers(0, len(HOSTS) - 1)),
)


def _per_host(assignments: Mapping[str, Mapping[str, Any]] | None) -> dict[str, int]:
    out: dict[str, int] = {}
    for encoded in (assignments or {}).values():
        for values, count in decode(encoded).domains:
            out[values[-1]] = out.get(values[-1], 0) + count * 1000
    return out


def _admitted_per_host(state: ClusterState, key: str) -> dict[str, int]:
    admission = state.cache.records[key].workload.admission
    assert admission is not None
    return _per_host(
        {
            psa.name: psa.topology_assignment
            for psa in admission.pod_set_assignments
            if psa.topology_assignment is not None
        }
    )


def _check_nodes(state: ClusterState) -> None:
    now: dict[str, int] = {}
    after: dict[str, int] = {}
    for key, record in state.cache.records.items():
        if not record.holds_quota:
            continue
        for host, cpu in _admitted_per_host(state, key).items():
            now[host] = now.get(host, 0) + cpu
            if not record.evicting:
                after[host] = after.get(host, 0) + cpu
    for key in state.holds.nominated:
        for host, cpu in _per_host(state.holds.nominated[key].topology).items():
            after[host] = after.get(host, 0) + cpu
    assert all(cpu <= CAPACITY for cpu in now.values()), now
    assert all(cpu <= CAPACITY for cpu in after.values()), after


_H = ("required", HOST)
_R = ("required", RACK)
_SMALL = [
    ("arrive", 1, 0, _H, False),
    ("arrive", 1, 0, _H, False),
    ("arrive", 2, 0, _H, False),
    ("arrive", 3, 0, _H, False),
]


@settings(max_examples=600, deadline=None)
@given(
    st.sampled_from([20, 64]),
    st.lists(step_st, min_size=10, max_size=50),
    st.booleans(),
    st.booleans(),
)
# A victim gone and admitted again (room freed by a finished Workload) while another is
# still leaving: the preemptor waits for the other one, and gets its plan.
@example(
    20,
    [
        *_SMALL,
        *[("arrive", 7, 0, _R, False), ("arrive", 8, 1, _R, False), ("victim gone", 0)],
        *[("arrive", 1, 0, _H, False), ("finish", 0), ("arrive", 1, 2, _H, False)],
    ],
    False,
    False,
)
@example(
    20,
    [
        *_SMALL,
        *[("arrive", 7, 0, _R, False), ("victim gone", 0), ("arrive", 8, 1, _R, False)],
        *[("victim gone", 0), ("finish", 2), ("victim gone", 0)],
    ],
    False,
    False,
)
def test_holds_never_over_use_the_nodes_and_no_eviction_is_wasted(
    nominal: int, steps: list[tuple[Any, ...]], fair: bool, cohort: bool
) -> None:
    if cohort:  # two queues sharing the nominal quota, reclaiming from each other
        policy = replace(LOWER, reclaim_within_cohort=ReclaimWithinCohortPolicy.ANY)
        half = str(nominal // 2)
        queues = [
            cq(name, {"tas": {"cpu": half}}, preemption=policy, cohort="all")
            for name in ("cq", "other")
        ]
    else:
        queues = [cq("cq", {"tas": {"cpu": str(nominal)}}, preemption=LOWER)]
    state = nodes(cluster(*queues, flavors=[TAS]))
    if fair:  # the fair-sharing search: victims kept only when the pods then fit
        state.fair_sharing = FairSharing()
    # nominee → the domain its victims were chosen in (if one), the cordons then
    plans: dict[str, tuple[tuple[str, ...] | None, int]] = {}
    cordons = 0
    made = 0
    for step in steps:
        kind = step[0]
        if kind == "arrive":
            _, pods, priority, (how, level), other = step
            request = TopologyRequest(**{how: level})
            pod_set = PodSet("main", pods, {"cpu": 1000}, topology=request)
            made += 1
            queue = "other" if cohort and other else "cq"
            workload = wl(f"w{made}", queue, pod_sets=[pod_set], created=made)
            add(state, replace(workload, priority=priority))
        elif kind == "victim gone":
            leaving = sorted(
                k for k, r in state.cache.records.items() if r.holds_quota and r.evicting
            )
            if leaving:
                state.release(leaving[step[1] % len(leaving)])
        elif kind == "finish":
            running = sorted(
                k for k, r in state.cache.records.items() if r.holds_quota and not r.evicting
            )
            if running:
                state.release(running[step[1] % len(running)], requeue=False)
        else:
            host = HOSTS[step[1]]
            b, r, _ = host.split("-")
            state.set_node(
                node(
                    host,
                    b,
                    r,
                    host,
                    labels={"pool": "tas"},
                    unschedulable=True,
                    cpu="4",
                    pods="110",
                )
            )
            cordons += 1
        _check_nodes(state)
        for preempt in run_cycle(state, 0).preempting:  # each change, then a cycle
            event("preempted")
            nomination = state.holds.nominated[preempt.preemptor_key]
            assert nomination.topology is not None  # every TAS nominee has a plan
            domain = nomination.domain[1] if nomination.domain is not None else None
            plans[preempt.preemptor_key] = (domain, cordons)
        _check_nodes(state)
        for key in [k for k in plans if k not in state.holds.nominated]:
            domain, cordons_then = plans.pop(key)
            if cordons_then != cordons:
                event("nodes changed while nominated")
                continue
            assert key in state.cache.admitted, f"{key}: its victims were evicted for nothing"
            event("nominee admitted")
            if domain is not None:
                hosts = _admitted_per_host(state, key)
                paths = [(*h.split("-")[:2], h)[: len(domain)] for h in hosts]
                assert all(path == domain for path in paths), (domain, hosts)
                event("nominee admitted in the domain its victims were chosen in")
