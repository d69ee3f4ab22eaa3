"""controller/core/admission_checks.py and the ClusterQueue's checks: which checks a
reservation needs (onFlavors), what a Workload holding quota needs next for each state of
its checks, and when a ClusterQueue with checks is active — Kueue's rules, written from
pkg/workload/admissionchecks.go, the workload controller and pkg/cache/scheduler."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from api.constants import CheckState
from api.workload_status import Admission, PodSetAssignment
from controller.core.admission_checks import (
    RejectChecks,
    RetryChecks,
    SyncChecks,
    check_actions,
    checks_before_reservation,
    checks_by_local_queue,
    checks_message,
    pending_check_syncs,
    required_checks,
    retry_time,
)
from controller.core.model.admission_checks import AdmissionCheck, CheckRule, CheckStatus
from controller.core.model.clusterqueues import ClusterQueue, LocalQueue
from controller.core.model.from_api import convert
from controller.core.model.workloads import Workload
from controller.core.scheduler.cycle import run_cycle
from tests.unit.core.builders import add, cluster, cq, wl

FLAVORS = ("on-demand", "spot", "reserved")


def admission(*flavors: str, queue: str = "cq") -> Admission:
    return Admission(
        queue,
        tuple(
            PodSetAssignment(f"ps{i}", 1, {"cpu": flavor}, {"cpu": 1000})
            for i, flavor in enumerate(flavors)
        ),
    )


def checked(*rules: CheckRule, name: str = "cq") -> ClusterQueue:
    return replace(cq(name, {f: {"cpu": 10} for f in FLAVORS}), admission_checks=rules)


def holding(states: tuple[CheckStatus, ...] = (), *, admitted: bool = False, **kw: Any) -> Workload:
    return replace(
        wl("w", cpu="1"),
        admission=admission("spot"),
        quota_reserved_at=10.0,
        admission_checks=states,
        admitted=admitted,
        **kw,
    )


def state_of(name: str, state: CheckState, **kw: Any) -> CheckStatus:
    return CheckStatus(name, state, **kw)


# -- which checks a reservation needs -------------------------------------------------------


def test_a_check_without_on_flavors_applies_to_every_reservation() -> None:
    rules = (CheckRule("prov"), CheckRule("spot-only", frozenset({"spot"})))
    assert required_checks(rules, admission("on-demand")) == ("prov",)
    assert required_checks(rules, admission("spot")) == ("prov", "spot-only")
    assert required_checks(rules, admission("on-demand", "spot")) == ("prov", "spot-only")


@given(
    rules=st.lists(
        st.tuples(
            st.sampled_from(("a", "b", "c", "d")),
            st.frozensets(st.sampled_from(FLAVORS)),
        ),
        unique_by=lambda r: r[0],
    ),
    assigned=st.lists(st.sampled_from(FLAVORS), min_size=1, max_size=3),
)
def test_a_check_is_needed_iff_its_flavors_meet_the_reservation(
    rules: list[tuple[str, frozenset[str]]], assigned: list[str]
) -> None:
    found = required_checks([CheckRule(n, f) for n, f in rules], admission(*assigned))
    assert list(found) == sorted(found)
    assert set(found) == {n for n, f in rules if not f or f & set(assigned)}


# -- what a Workload holding quota needs next -------------------------------------------------


def test_a_reservation_gets_its_checks_pending_first() -> None:
    queue = checked(CheckRule("prov"), CheckRule("on-demand", frozenset({"on-demand"})))
    [action] = check_actions([holding()], {"cq": queue}, 20.0)
    assert action == SyncChecks(holding().key, "cq", ("prov",))


def test_a_check_no_longer_needed_is_dropped() -> None:
    queue = checked(CheckRule("prov"))
    states = (state_of("prov", CheckState.READY), state_of("old", CheckState.PENDING))
    [action] = check_actions([holding(states)], {"cq": queue}, 20.0)
    assert action == SyncChecks(holding().key, "cq", ("prov",))


def test_all_ready_admits_once() -> None:
    queue = {"cq": checked(CheckRule("a"), CheckRule("b"))}
    ready = (state_of("a", CheckState.READY), state_of("b", CheckState.READY))
    [action] = check_actions([holding(ready)], queue, 20.0)
    assert action == SyncChecks(holding().key, "cq", ("a", "b"))
    assert check_actions([holding(ready, admitted=True)], queue, 20.0) == []
    pending = (state_of("a", CheckState.READY), state_of("b", CheckState.PENDING))
    assert check_actions([holding(pending)], queue, 20.0) == []


def test_retry_evicts_and_waits_for_the_latest_retry_time() -> None:
    queue = {"cq": checked(CheckRule("a"), CheckRule("b"))}
    states = (
        state_of(
            "a",
            CheckState.RETRY,
            message="no capacity",
            last_transition=15.0,
            requeue_after_seconds=60,
        ),
        state_of("b", CheckState.RETRY, last_transition=16.0, requeue_after_seconds=30),
    )
    [action] = check_actions([holding(states, admitted=True)], queue, 20.0)
    assert action == RetryChecks(
        holding().key,
        "cq",
        'Evicted due to AdmissionChecks in Retry state: "a" (no capacity); "b"',
        75.0,
    )
    # A retry time already past: it competes again at once.
    [late] = check_actions([holding(states)], queue, 100.0)
    assert isinstance(late, RetryChecks) and late.requeue_at is None


def test_rejected_deactivates_before_retry() -> None:
    queue = {"cq": checked(CheckRule("a"), CheckRule("b"))}
    states = (
        state_of("a", CheckState.RETRY),
        state_of("b", CheckState.REJECTED, message="over budget"),
    )
    [action] = check_actions([holding(states)], queue, 20.0)
    assert action == RejectChecks(
        holding().key, "cq", 'AdmissionCheck in Rejected state: "b" (over budget)'
    )


def test_nothing_for_the_evicted_the_finished_or_the_unchecked() -> None:
    queue = {"cq": checked(CheckRule("a")), "plain": cq("plain", {"spot": {"cpu": 1}})}
    retry = (state_of("a", CheckState.RETRY),)
    assert check_actions([holding(retry, evicted=True)], queue, 0.0) == []
    assert check_actions([holding(retry, finished=True)], queue, 0.0) == []
    plain = replace(holding(), admission=admission("spot", queue="plain"))
    assert check_actions([plain], queue, 0.0) == []
    pending = replace(wl("p", cpu="1"), admission_checks=retry)
    assert check_actions([pending], queue, 0.0) == []


@given(
    states=st.lists(
        st.tuples(st.sampled_from(("a", "b", "c")), st.sampled_from(list(CheckState))),
        unique_by=lambda s: s[0],
        min_size=1,
    ),
    admitted=st.booleans(),
)
def test_each_mix_of_states_gets_kueues_answer(
    states: list[tuple[str, CheckState]], admitted: bool
) -> None:
    names = tuple(sorted(n for n, _ in states))
    queue = {"cq": checked(*(CheckRule(n) for n in names))}
    workload = holding(tuple(state_of(n, s) for n, s in states), admitted=admitted)
    actions = check_actions([workload], queue, 0.0)
    kinds = {s for _, s in states}
    if CheckState.REJECTED in kinds:
        assert [type(a) for a in actions] == [RejectChecks]
    elif CheckState.RETRY in kinds:
        assert [type(a) for a in actions] == [RetryChecks]
    elif kinds == {CheckState.READY} and not admitted:
        assert actions == [SyncChecks(workload.key, "cq", names)]
    else:
        assert actions == []


def test_retry_time_reads_only_retry_states_with_a_time() -> None:
    assert (
        retry_time(
            [state_of("a", CheckState.PENDING, requeue_after_seconds=5, last_transition=1.0)]
        )
        is None
    )
    assert retry_time([state_of("a", CheckState.RETRY)]) is None
    assert (
        retry_time([state_of("a", CheckState.RETRY, requeue_after_seconds=5, last_transition=1.0)])
        == 6.0
    )


def test_checks_message_is_kueues() -> None:
    one = [state_of("prov", CheckState.REJECTED)]
    assert checks_message(one, CheckState.REJECTED) == 'AdmissionCheck in Rejected state: "prov"'


# -- a ClusterQueue with checks is active only with every check there and Active ------------


SPEC = {
    "namespaceSelector": {},
    "resourceGroups": [
        {
            "coveredResources": ["cpu"],
            "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": "10"}]}],
        }
    ],
    "admissionChecksStrategy": {
        "admissionChecks": [{"name": "prov"}, {"name": "budget", "onFlavors": ["default"]}]
    },
}


def check_object(name: str, active: bool | None) -> dict[str, object]:
    body: dict[str, object] = {
        "kind": "AdmissionCheck",
        "metadata": {"name": name},
        "spec": {"controllerName": "example.com/c"},
    }
    if active is not None:
        body["status"] = {
            "conditions": [
                {
                    "type": "Active",
                    "status": "True" if active else "False",
                    "reason": "R",
                    "message": "",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ]
        }
    return body


def test_the_cluster_queue_turns_active_when_its_checks_do() -> None:
    state = cluster()
    state.apply(convert({"kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": SPEC}))
    state.set_local_queue(LocalQueue("ns", "cq", "cq"))
    add(state, wl("w", cpu="1"))
    state.apply(convert(check_object("prov", active=None)))
    inactive = state.objects.cluster_queue_inactive("cq")
    assert inactive is not None
    assert (inactive.reason, inactive.message) == (
        "AdmissionCheckNotFound",
        "Can't admit new workloads: references missing AdmissionCheck(s): budget, "
        "references inactive AdmissionCheck(s): prov.",
    )
    state.apply(convert(check_object("budget", active=False)))
    inactive = state.objects.cluster_queue_inactive("cq")
    assert inactive is not None and inactive.reason == "AdmissionCheckInactive"
    assert not run_cycle(state, 0).admitted
    state.apply(convert(check_object("prov", active=True)))
    state.apply(convert(check_object("budget", active=True)))
    assert state.objects.cluster_queue_inactive("cq") is None
    [admit] = run_cycle(state, 1).admitted
    assert admit.workload_key == "ns/w"
    state.remove_admission_check("prov")
    inactive = state.objects.cluster_queue_inactive("cq")
    assert inactive is not None and inactive.reason == "AdmissionCheckNotFound"


def test_rules_and_states_are_read_from_the_api() -> None:
    queue = convert({"kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": SPEC})
    assert isinstance(queue, ClusterQueue)
    assert queue.admission_checks == (
        CheckRule("prov"),
        CheckRule("budget", frozenset({"default"})),
    )
    check = convert(check_object("prov", active=True))
    assert check == AdmissionCheck("prov", "example.com/c", active=True)


# -- the after-admission timers start when the checks have passed ------------------------------


def test_pods_ready_and_execution_time_count_from_admission_not_reservation() -> None:
    from controller.core.after_admission import (
        PodsReadyPolicy,
        admitted_at,
        execution_deadline,
        not_ready_deadline,
    )

    policy = PodsReadyPolicy(timeout=60.0)
    waiting = holding((state_of("a", CheckState.PENDING),), maximum_execution_time_seconds=100)
    assert admitted_at(waiting) is None  # reserved at 10, checks pending: no timer runs
    assert not_ready_deadline(waiting, policy) is None
    assert execution_deadline(waiting) is None
    ready = replace(
        waiting,
        admission_checks=(state_of("a", CheckState.READY),),
        admitted=True,
        admitted_at=50.0,
    )
    assert not_ready_deadline(ready, policy) == ("WaitForStart", 110.0)
    assert execution_deadline(ready) == 150.0
    plain = replace(holding(), maximum_execution_time_seconds=100)  # no checks: from reservation
    assert not_ready_deadline(plain, policy) == ("WaitForStart", 70.0)


# -- before the reservation ------------------------------------------------------------------


def test_before_reservation_only_the_checks_covering_every_flavor_apply() -> None:
    queue = checked(
        CheckRule("prov"),
        CheckRule("spot-only", frozenset({"spot"})),
        CheckRule("listed-all", frozenset(FLAVORS)),
        CheckRule("more-than-all", frozenset({*FLAVORS, "elsewhere"})),
    )
    assert checks_before_reservation(queue) == ("listed-all", "more-than-all", "prov")
    assert checks_before_reservation(checked()) == ()


@given(
    rules=st.lists(
        st.tuples(st.sampled_from(("a", "b", "c")), st.frozensets(st.sampled_from(FLAVORS))),
        unique_by=lambda r: r[0],
    ),
    flavors=st.lists(st.sampled_from(FLAVORS), min_size=1, max_size=3),
)
def test_a_check_before_reservation_is_one_every_reservation_would_need(
    rules: list[tuple[str, frozenset[str]]], flavors: list[str]
) -> None:
    """Kueue's reasoning: a check listed before the reservation is one that applies
    whatever flavor the Workload gets, so the reservation's checks include it."""
    queue = checked(*(CheckRule(name, on) for name, on in rules))
    before = set(checks_before_reservation(queue))
    assert before <= set(required_checks(queue.admission_checks, admission(*flavors)))
    everything = set(required_checks(queue.admission_checks, admission(*FLAVORS)))
    single = [set(required_checks(queue.admission_checks, admission(f))) for f in FLAVORS]
    assert before == {n for n in everything if all(n in s for s in single)}


def pending_state(*rules: CheckRule, states: tuple[CheckStatus, ...] = (), **kw: Any) -> Any:
    state = cluster(checked(*rules), flavors=FLAVORS)
    add(state, replace(wl("w", cpu="1"), admission_checks=states, **kw))
    return state


def test_a_pending_workload_gets_the_checks_for_every_flavor() -> None:
    state = pending_state(CheckRule("prov"), CheckRule("spot-only", frozenset({"spot"})))
    assert pending_check_syncs(state) == [SyncChecks("ns/w", "cq", ("prov",))]
    in_step = pending_state(CheckRule("prov"), states=(state_of("prov", CheckState.PENDING),))
    assert pending_check_syncs(in_step) == []
    assert pending_check_syncs(state, skip={"ns/w"}) == []


def test_a_pending_workloads_states_no_longer_wanted_go() -> None:
    """The ClusterQueue lost its checks (or only flavor-scoped ones are left): Kueue's
    sync drops the states, down to none."""
    stale = (state_of("prov", CheckState.READY), state_of("spot-only", CheckState.PENDING))
    state = pending_state(CheckRule("spot-only", frozenset({"spot"})), states=stale)
    assert pending_check_syncs(state) == [SyncChecks("ns/w", "cq", ())]
    without = pending_state(states=stale)
    assert not any(c.admission_checks for c in without.objects.cluster_queues.values())
    assert list(without.index.checked) == ["ns/w"]
    assert pending_check_syncs(without) == [SyncChecks("ns/w", "cq", ())]


def test_no_sync_for_the_inactive_the_queueless_or_the_reserved() -> None:
    assert pending_check_syncs(pending_state(CheckRule("prov"), active=False)) == []
    state = cluster(checked(CheckRule("prov")), flavors=FLAVORS)
    add(state, wl("w", queue="missing", cpu="1"))
    assert pending_check_syncs(state) == []
    state = cluster(checked(CheckRule("prov")), flavors=FLAVORS)
    add(state, holding())
    assert pending_check_syncs(state) == []


def test_without_checks_no_pending_workload_is_looked_at() -> None:
    state = cluster(checked(), flavors=FLAVORS)
    add(state, *(wl(f"w{i}", cpu="1") for i in range(5)))
    assert not state.index.checked
    assert pending_check_syncs(state) == []


def test_failed_checks_before_the_reservation_keep_it_from_competing() -> None:
    """Kueue's scheduler does not nominate a Workload with a Retry or Rejected check
    ("The workload has failed admission checks", PendingEvaluation) until the states
    change; with quota held the same states evict or deactivate it instead."""
    from controller.core.pending import CHECKS_FAILED, unqueued_reason

    for failed in (CheckState.REJECTED, CheckState.RETRY):
        state = pending_state(CheckRule("prov"), states=(state_of("prov", failed),))
        state.apply(convert(check_object("prov", active=True)))
        assert state.objects.cluster_queue_inactive("cq") is None
        assert not run_cycle(state, 0).admitted
        found = unqueued_reason(state, "ns/w")
        assert found is not None
        assert (found.reason, found.message) == ("PendingEvaluation", CHECKS_FAILED)
        add(
            state, replace(wl("w", cpu="1"), admission_checks=(state_of("prov", CheckState.READY),))
        )
        assert unqueued_reason(state, "ns/w") is None
        [admit] = run_cycle(state, 1).admitted
        assert admit.workload_key == "ns/w"
    assert not holding((state_of("prov", CheckState.REJECTED),)).checks_failed


def test_between_queue_changes_only_the_changed_workloads_are_looked_at() -> None:
    state = pending_state(CheckRule("prov"))
    add(state, wl("other", cpu="1"))
    by_queue = checks_by_local_queue(state)
    assert by_queue == {"ns/cq": ("prov",)}
    wanted = [SyncChecks("ns/other", "cq", ("prov",))]
    assert pending_check_syncs(state, (), ["ns/other", "ns/gone"], by_queue) == wanted
    assert pending_check_syncs(state, (), [], by_queue) == []
    without = pending_state(states=(state_of("prov", CheckState.READY),))
    add(without, wl("plain", cpu="1"))
    assert checks_by_local_queue(without) == {"ns/cq": ()}
    gone = [SyncChecks("ns/w", "cq", ())]
    assert pending_check_syncs(without, (), ["ns/w", "ns/plain"]) == gone
    lost = cluster(checked(CheckRule("prov")), flavors=FLAVORS)
    add(lost, wl("w", queue="missing", cpu="1"))
    assert checks_by_local_queue(lost) == {"ns/missing": None}
