"""controller/core/afs/ledger.py: consumed usage with Kueue's decay, entry penalties
pushed, settled and dropped, history seeded once — hand-worked, and a property test that
penalties always net to zero."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.afs.ledger import UsageLedger
from controller.core.model.workloads import WorkloadKey

LQ = "ns/lq"
A, B = WorkloadKey("ns/a"), WorkloadKey("ns/b")
CPU = ("default", "cpu")


def test_seeding_merges_the_written_history_once() -> None:
    ledger = UsageLedger()
    assert ledger.seed(LQ, {"cpu": 8.0})
    assert not ledger.seed(LQ, {"cpu": 3.0})  # our own status write coming back
    entry = ledger.entry(LQ)
    assert entry is not None and entry.consumed == {"cpu": 8.0}


def test_history_seeded_after_a_penalty_is_merged_into_it() -> None:
    """After a restart the first admission can come before the LocalQueue's status is read
    (Kueue's StatusAccounted): the written history is added, not lost."""
    ledger = UsageLedger()
    ledger.reserve(A, LQ, [(CPU, 2000)])
    ledger.push_penalty(LQ, A, {"cpu": 1.0})
    ledger.settle(A, LQ, now=50.0, half_life=10.0)  # first stamp: nothing elapsed
    assert ledger.seed(LQ, {"cpu": 8.0})
    entry = ledger.entry(LQ)
    assert entry is not None and entry.consumed == {"cpu": 9.0}


def test_sampling_folds_admitted_usage_with_the_decay() -> None:
    ledger = UsageLedger()
    ledger.seed(LQ, {"cpu": 8.0})
    ledger.reserve(A, LQ, [(CPU, 4000)])
    entry = ledger.sample(LQ, now=100.0, half_life=10.0)
    # The first sample stamps the time: no time has elapsed, nothing changes.
    assert (entry.consumed, entry.last_update) == ({"cpu": 8.0}, 100.0)
    # One half-life later: 8 × 0.5 + 4 × 0.5.
    entry = ledger.sample(LQ, now=110.0, half_life=10.0)
    assert (entry.consumed, entry.last_update) == ({"cpu": 6.0}, 110.0)
    # Released; two half-lives idle: a quarter of 6.
    ledger.release(A)
    assert ledger.sample(LQ, now=130.0, half_life=10.0).consumed == {"cpu": 1.5}


def test_without_a_half_life_sampling_resets_consumed_usage() -> None:
    ledger = UsageLedger()
    ledger.seed(LQ, {"cpu": 8.0, "memory": 1.0})
    ledger.reserve(A, LQ, [(CPU, 4000)])
    entry = ledger.sample(LQ, now=10.0, half_life=0.0)
    assert entry.consumed == {"cpu": 0.0, "memory": 0.0}  # listed resources stay, at 0


def test_settling_folds_usage_and_moves_the_penalty_into_consumed() -> None:
    ledger = UsageLedger()
    ledger.seed(LQ, {"cpu": 4.0})
    ledger.sample(LQ, now=100.0, half_life=10.0)
    ledger.reserve(A, LQ, [(CPU, 8000)])
    ledger.push_penalty(LQ, A, {"cpu": 0.5})
    entry = ledger.entry(LQ)
    assert entry is not None and entry.penalty == {"cpu": 0.5}
    ledger.settle(A, LQ, now=110.0, half_life=10.0)
    # 4 × 0.5 + 8 × 0.5 folded, plus the 0.5 penalty; none pending afterwards.
    assert (entry.consumed, entry.penalty, entry.last_update) == ({"cpu": 6.5}, {}, 110.0)
    ledger.settle(A, LQ, now=110.0, half_life=10.0)  # seen again: nothing more to move
    assert entry.consumed == {"cpu": 6.5}


def test_a_penalty_is_replaced_not_stacked_and_dropped_exactly() -> None:
    ledger = UsageLedger()
    ledger.push_penalty(LQ, A, {"cpu": 1.0})
    ledger.push_penalty(LQ, A, {"cpu": 2.0})
    ledger.push_penalty(LQ, B, {"cpu": 0.25})
    entry = ledger.entry(LQ)
    assert entry is not None and entry.penalty == {"cpu": 2.25}
    assert ledger.drop_penalty(A) == {"cpu": 2.0}
    assert ledger.drop_penalty(A) is None
    assert entry.penalty == {"cpu": 0.25}
    assert ledger.penalized_local_queue(B) == LQ
    ledger.forget(LQ)  # the LocalQueue is deleted: its history and penalties go
    assert ledger.entry(LQ) is None and ledger.penalized_local_queue(B) is None


def test_a_penalty_pushed_for_another_local_queue_never_settles_there() -> None:
    ledger = UsageLedger()
    ledger.push_penalty("ns/old", A, {"cpu": 1.0})
    ledger.settle(A, LQ, now=0.0, half_life=10.0)
    old, new = ledger.entry("ns/old"), ledger.entry(LQ)
    assert old is not None and old.penalty == {}
    assert new is not None and new.consumed == {}


def test_time_never_runs_backwards() -> None:
    ledger = UsageLedger()
    ledger.seed(LQ, {"cpu": 8.0})
    ledger.sample(LQ, now=100.0, half_life=10.0)
    ledger.reserve(A, LQ, [(CPU, 4000)])
    entry = ledger.sample(LQ, now=90.0, half_life=10.0)  # an earlier clock: no elapsed time
    assert (entry.consumed, entry.last_update) == ({"cpu": 8.0}, 100.0)


def test_admitted_usage_is_kept_per_local_queue_across_flavors() -> None:
    ledger = UsageLedger()
    ledger.reserve(A, LQ, [(("on-demand", "cpu"), 1500), (("spot", "cpu"), 500)])
    ledger.reserve(B, LQ, [(CPU, 1000), (("default", "memory"), 2048)])
    assert ledger.admitted(LQ) == {"cpu": 3.0, "memory": 2.048}
    ledger.reserve(A, LQ, [(CPU, 250)])  # reserved again: replaced
    assert ledger.admitted(LQ) == {"cpu": 1.25, "memory": 2.048}
    ledger.release(B)
    ledger.release(B)
    assert ledger.admitted(LQ) == {"cpu": 0.25}
    ledger.release(A)
    assert ledger.admitted(LQ) == {}


_OPS = st.lists(
    st.tuples(
        st.sampled_from(["push", "drop", "settle", "forget"]),
        st.sampled_from([WorkloadKey(f"ns/w{i}") for i in range(5)]),
        st.sampled_from(["ns/a", "ns/b"]),
        st.floats(0.0, 1e6, allow_nan=False),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(_OPS)
def test_penalties_net_to_zero_once_settled_or_dropped(
    operations: list[tuple[str, WorkloadKey, str, float]],
) -> None:
    """Whatever the order of pushes, drops, settlements and deletions, each LocalQueue's
    pending penalty is exactly the sum of its records, and exactly empty once none is left
    (a ranking heuristic that drifted would leave a LocalQueue penalised forever)."""
    ledger = UsageLedger()
    for op, key, local_queue, amount in operations:
        if op == "push":
            ledger.push_penalty(local_queue, key, {"cpu": amount, "memory": amount / 3})
        elif op == "drop":
            ledger.drop_penalty(key)
        elif op == "settle":
            ledger.settle(key, local_queue, now=amount, half_life=60.0)
        else:
            ledger.forget(local_queue)
        for name, entry in ledger.entries.items():
            expected: dict[str, float] = {}
            for amounts in entry.penalties.values():
                for resource, value in amounts.items():
                    expected[resource] = expected.get(resource, 0.0) + value
            assert entry.penalty == pytest.approx(expected)
            assert all(ledger.penalized_local_queue(k) == name for k in entry.penalties)
    for key in [WorkloadKey(f"ns/w{i}") for i in range(5)]:
        ledger.drop_penalty(key)
    assert all(entry.penalty == {} for entry in ledger.entries.values())
