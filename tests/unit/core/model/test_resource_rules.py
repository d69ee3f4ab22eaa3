"""controller/core/resource_rules.py: Kueue's `resources` (excludeResourcePrefixes,
transformations with Retain/Replace and multiplyBy, quotaCheckStrategy) as the engine
applies them — the cases of Kueue's documentation, and properties of the arithmetic."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from controller.core.model.resource_rules import (
    QuotaCheckStrategy,
    ResourceRules,
    Strategy,
    Transformation,
)
from controller.core.model.workloads import PodSet
from tests.unit.core.builders import add, cluster, cq, m, settle, wl

GI = 1024**3


def rules(*transformations: Transformation, exclude: tuple[str, ...] = ()) -> ResourceRules:
    return ResourceRules(exclude, transformations)


def test_retain_keeps_the_input_beside_its_outputs() -> None:
    credits = rules(Transformation("cpu", {"cpu_credits": Fraction(1)}))
    assert credits.effective_requests({"cpu": m("1500m"), "memory": m("1Gi")}) == {
        "cpu": m("1500m"),
        "cpu_credits": m("1500m"),
        "memory": m("1Gi"),
    }


def test_replace_turns_device_requests_into_shared_credits() -> None:
    # Kueue's "share quotas across flavors" example: three GPU models, one credit pool.
    credits = rules(
        Transformation("nvidia.com/gpu-a100", {"gpu_credits": Fraction(100)}, Strategy.REPLACE),
        Transformation("nvidia.com/gpu-t4", {"gpu_credits": Fraction(10)}, Strategy.REPLACE),
    )
    pod = {"nvidia.com/gpu-a100": m(2), "nvidia.com/gpu-t4": m(1), "cpu": m(4)}
    assert credits.effective_requests(pod) == {"gpu_credits": m(210), "cpu": m(4)}


def test_outputs_of_mig_profiles_in_bytes_and_units() -> None:
    mig = rules(
        Transformation(
            "nvidia.com/mig-4g.5gb",
            {"example.com/accelerator-memory": Fraction(5 * GI), "example.com/gpc": Fraction(4)},
            Strategy.REPLACE,
        )
    )
    assert mig.effective_requests({"nvidia.com/mig-4g.5gb": m(2)}) == {
        "example.com/accelerator-memory": m(10 * GI),
        "example.com/gpc": m(8),
    }


def test_multiply_by_scales_the_outputs_by_another_request_not_the_retained_input() -> None:
    # Kueue's HAMi example: gpucores per GPU × GPUs = total cores.
    hami = rules(
        Transformation(
            "nvidia.com/gpucores",
            {"nvidia.com/total-gpucores": Fraction(1)},
            Strategy.RETAIN,
            "nvidia.com/gpu",
        )
    )
    pod = {"nvidia.com/gpucores": m(30), "nvidia.com/gpu": m(2)}
    assert hami.effective_requests(pod) == {
        "nvidia.com/gpucores": m(30),
        "nvidia.com/gpu": m(2),
        "nvidia.com/total-gpucores": m(60),
    }
    # Without the multiplier's resource in the pod, the input alone is used.
    assert hami.effective_requests({"nvidia.com/gpucores": m(30)})[
        "nvidia.com/total-gpucores"
    ] == m(30)


def test_negative_outputs_offset_other_outputs_and_never_go_below_zero() -> None:
    allowance = rules(
        Transformation("a", {"credits": Fraction(3)}, Strategy.REPLACE),
        Transformation("b", {"credits": Fraction(-1)}, Strategy.REPLACE),
    )
    assert allowance.effective_requests({"a": m(1), "b": m(2)}) == {"credits": m(1)}
    assert allowance.effective_requests({"a": m(1), "b": m(5)}) == {}
    # An ordinary request of the same name is not reduced by a negative total.
    assert allowance.effective_requests({"b": m(5), "credits": m(2)}) == {"credits": m(2)}


def test_outputs_add_to_a_request_of_the_same_name() -> None:
    both = rules(Transformation("cpu", {"memory": Fraction(GI)}))
    assert both.effective_requests({"cpu": m(2), "memory": m("1Gi")})["memory"] == m(3 * GI)


def test_excluded_prefixes_are_dropped_before_transformations() -> None:
    excluded = rules(
        Transformation("example.com/gpu", {"credits": Fraction(1)}, Strategy.REPLACE),
        exclude=("example.com",),
    )
    assert excluded.effective_requests({"example.com/gpu": m(1), "cpu": m(1)}) == {"cpu": m(1)}


def test_products_round_up_to_the_milli_unit_once() -> None:
    third = rules(Transformation("cpu", {"credits": Fraction(1, 3)}, Strategy.REPLACE))
    # 1m × 1/3 = 0.333…m → 1m; 3 × 1m × 1/3 in one pod set is still per pod.
    assert third.effective_requests({"cpu": 1}) == {"credits": 1}
    assert third.effective_requests({"cpu": 3}) == {"credits": 1}


requests = st.dictionaries(
    st.sampled_from(["cpu", "memory", "a", "b", "example.com/x", "credits"]),
    st.integers(min_value=0, max_value=10**12),
)
factors = st.fractions(min_value=Fraction(-5), max_value=Fraction(50), max_denominator=1000)


@given(requests)
def test_no_rules_change_nothing_but_zero_entries(pod: dict[str, int]) -> None:
    assert ResourceRules().effective_requests(pod) == {k: v for k, v in pod.items() if v}


@given(requests, factors, st.sampled_from(list(Strategy)))
def test_one_transformation_is_the_exact_product_rounded_up(
    pod: dict[str, int], factor: Fraction, strategy: Strategy
) -> None:
    rule = rules(Transformation("a", {"out": factor}, strategy))
    result = rule.effective_requests(pod)
    assert all(isinstance(v, int) and v > 0 for v in result.values())
    if "a" not in pod:
        assert result == {k: v for k, v in pod.items() if v}
        return
    exact = pod["a"] * factor
    expected_out = -((-exact.numerator) // exact.denominator) if exact > 0 else 0
    assert result.get("out", 0) == expected_out
    assert result.get("a", 0) == (pod["a"] if strategy is Strategy.RETAIN else 0)
    for name in pod.keys() - {"a"}:
        assert result.get(name, 0) == pod[name]


@given(requests, factors, factors)
def test_the_order_of_transformations_does_not_matter(
    pod: dict[str, int], first: Fraction, second: Fraction
) -> None:
    one = Transformation("a", {"credits": first}, Strategy.REPLACE)
    two = Transformation("b", {"credits": second}, Strategy.REPLACE, "cpu")
    assert rules(one, two).effective_requests(pod) == rules(two, one).effective_requests(pod)


def test_the_engine_charges_transformed_requests() -> None:
    state = cluster(cq("cq", {"default": {"cpu": "4", "credits": "6"}}))
    state.resource_rules = rules(Transformation("cpu", {"credits": Fraction(2)}))
    add(state, wl("a", cpu="1", count=3), wl("b", cpu="1", count=1))
    settle(state)
    # a takes 3 cpu and 6 credits: b fits the cpu left but not the credits.
    assert set(state.cache.admitted) == {"ns/a"}
    [assignment] = state.cache.records["ns/a"].admission.pod_set_assignments  # type: ignore[union-attr]
    assert assignment.resource_usage == {"cpu": m(3), "credits": m(6)}


def test_block_undeclared_refuses_a_resource_no_queue_covers_and_ignore_undeclared_admits() -> None:
    def run(strategy: QuotaCheckStrategy) -> tuple[set[str], dict[str, int]]:
        state = cluster(cq("cq", {"default": {"cpu": "4"}}))
        state.resource_rules = ResourceRules(quota_check=strategy)
        pod = PodSet("main", 1, {"cpu": m(1), "ephemeral-storage": m("1Gi")})
        add(state, wl("a", pod_sets=[pod]))
        settle(state)
        record = state.cache.records["ns/a"]
        usage = record.admission.pod_set_assignments[0].resource_usage if record.admission else {}
        return set(state.cache.admitted), dict(usage)

    assert run(QuotaCheckStrategy.BLOCK_UNDECLARED) == (set(), {})
    assert run(QuotaCheckStrategy.IGNORE_UNDECLARED) == ({"ns/a"}, {"cpu": m(1)})
