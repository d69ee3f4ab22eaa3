"""Cost policies, policy loading and the write decision (costcontroller/)."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from api.quantities import Quantity
from costcontroller.policy import (
    EvictionCountPolicy,
    PolicyLoadError,
    TimeSinceReservedPolicy,
    load_policy,
)
from costcontroller.reconcile import decide

MAX = Quantity.parse("1000")


def body(
    evictions: list[dict[str, Any]] | None = None, cost: Any = None, reserved_at: str | None = None
) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if evictions is not None:
        status["schedulingStats"] = {"evictions": evictions}
    if cost is not None:
        status["preemptionCost"] = cost
    if reserved_at is not None:
        status["admission"] = {
            "clusterQueue": "cq",
            "podSetAssignments": [{"name": "main", "count": 1, "flavors": {"cpu": "f"}}],
        }
        status["conditions"] = [
            {
                "type": "QuotaReserved",
                "status": "True",
                "reason": "QuotaReserved",
                "message": "m",
                "lastTransitionTime": reserved_at,
            }
        ]
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "ns"},
        "spec": {
            "queueName": "q",
            "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": []}}}],
        },
        "status": status,
    }


def clock() -> float:
    return 1_000_000.0


def test_eviction_count_counts_only_preempted() -> None:
    policy = EvictionCountPolicy(base="10")
    decision = decide(
        body(
            [
                {"reason": "Preempted", "underlyingCause": "", "count": 2},
                {"reason": "PodsReadyTimeout", "underlyingCause": "", "count": 5},
            ]
        ),
        policy,
        clock,
        MAX,
    )
    assert decision.patch == {"status": {"preemptionCost": "12"}}
    assert decide(body(), EvictionCountPolicy(), clock, MAX).patch == {
        "status": {"preemptionCost": "0"}
    }


def test_write_only_when_the_value_changes() -> None:
    assert (
        decide(
            body([{"reason": "Preempted", "underlyingCause": "", "count": 1}], cost="1"),
            EvictionCountPolicy(),
            clock,
            MAX,
        ).patch
        is None
    )
    # Equal quantities in another spelling are equal: no write.
    assert (
        decide(
            body([{"reason": "Preempted", "underlyingCause": "", "count": 1}], cost="1000m"),
            EvictionCountPolicy(),
            clock,
            MAX,
        ).patch
        is None
    )
    assert decide(body([], cost="3"), EvictionCountPolicy(), clock, MAX).patch == {
        "status": {"preemptionCost": "0"}
    }


def test_time_since_reserved_grows_and_caps() -> None:
    policy = TimeSinceReservedPolicy(per_seconds=60, cap=5)
    started = "1970-01-12T13:46:40Z"  # epoch second 1,000,000
    assert decide(body(reserved_at=started), policy, lambda: 1_000_000.0 + 150, MAX).patch == {
        "status": {"preemptionCost": "2"}
    }
    assert decide(body(reserved_at=started), policy, lambda: 1_000_000.0 + 10_000, MAX).patch == {
        "status": {"preemptionCost": "5"}
    }
    assert decide(body(), policy, clock, MAX).patch is None  # pending: left unset


class Raises:
    def cost(self, workload: Any, clock: Any) -> Quantity | None:
        raise RuntimeError("boom")


class Returns:
    def __init__(self, value: Any) -> None:
        self.value = value

    def cost(self, workload: Any, clock: Any) -> Any:
        return self.value


@pytest.mark.parametrize(
    ("policy", "kind"),
    [
        (Raises(), "exception"),
        (Returns(float("nan")), "not_finite"),
        (Returns(float("inf")), "not_finite"),
        (Returns(-1), "out_of_range"),
        (Returns(Quantity.parse("1001")), "out_of_range"),
        (Returns("7"), "wrong_type"),
        (Returns(object()), "wrong_type"),
    ],
)
def test_bad_policy_results_are_refused_and_never_written(policy: Any, kind: str) -> None:
    decision = decide(body(), policy, clock, MAX)
    assert decision.patch is None
    assert decision.error_kind == kind
    assert "ns/w" in (decision.error or "")


def test_numbers_from_a_policy_are_accepted_as_quantities() -> None:
    assert decide(body(), Returns(3), clock, MAX).patch == {"status": {"preemptionCost": "3"}}
    assert decide(body(), Returns(2.5), clock, MAX).patch == {"status": {"preemptionCost": "2500m"}}
    assert decide(body(), Returns(None), clock, MAX).patch is None


def test_load_policy_by_name_import_path_and_errors() -> None:
    assert isinstance(load_policy("eviction-count", {"base": "3"}), EvictionCountPolicy)
    assert isinstance(load_policy("time-since-reserved"), TimeSinceReservedPolicy)
    module = types.ModuleType("custom_policies_for_test")
    module.Flat = type(
        "Flat",
        (),
        {
            "__init__": lambda self, value="4": setattr(self, "v", value),
            "cost": lambda self, w, c: Quantity.parse(self.v),
        },
    )  # type: ignore[attr-defined]
    sys.modules["custom_policies_for_test"] = module
    try:
        loaded = load_policy("custom_policies_for_test:Flat", {"value": "9"})
        assert decide(body(), loaded, clock, MAX).patch == {"status": {"preemptionCost": "9"}}
    finally:
        del sys.modules["custom_policies_for_test"]
    with pytest.raises(PolicyLoadError, match="cannot import"):
        load_policy("no_such_module_xyz:P")
    with pytest.raises(PolicyLoadError, match="not a built-in"):
        load_policy("nonsense")
    with pytest.raises(PolicyLoadError, match="cannot construct"):
        load_policy("eviction-count", {"bogus": "1"})
