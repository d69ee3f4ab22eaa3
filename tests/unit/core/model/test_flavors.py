"""Flavor matching (controller/core/model/flavors.py)."""

from __future__ import annotations

from controller.core.model.flavors import ResourceFlavor, Taint, mismatch_reason
from controller.core.model.selectors import Requirement
from controller.core.model.workloads import PodSet, Toleration

SPOT = ResourceFlavor(
    "spot",
    {"tier": "spot", "zone": "a"},
    (Taint("spot", "true", "NoSchedule"), Taint("soft", "", "PreferNoSchedule")),
)


def pod_set(**kwargs: object) -> PodSet:
    return PodSet("main", 1, {"cpu": 1000}, **kwargs)  # type: ignore[arg-type]


def test_untolerated_taint() -> None:
    assert (
        mismatch_reason(SPOT, pod_set()) == "flavor spot has untolerated taint spot=true:NoSchedule"
    )
    assert (
        mismatch_reason(SPOT, pod_set(tolerations=(Toleration("spot", "Equal", "true"),))) is None
    )
    assert mismatch_reason(SPOT, pod_set(tolerations=(Toleration(operator="Exists"),))) is None
    assert (
        mismatch_reason(SPOT, pod_set(tolerations=(Toleration("spot", "Equal", "no"),))) is not None
    )


def test_flavor_tolerations_count() -> None:
    flavor = ResourceFlavor(
        "f", node_taints=(Taint("x"),), tolerations=(Toleration("x", "Exists"),)
    )
    assert mismatch_reason(flavor, pod_set()) is None


def test_node_selector_only_on_flavor_keys() -> None:
    assert (
        mismatch_reason(
            SPOT, pod_set(node_selector={"gpu": "yes"}, tolerations=(Toleration("spot", "Exists"),))
        )
        is None
    )
    reason = mismatch_reason(
        SPOT, pod_set(node_selector={"zone": "b"}, tolerations=(Toleration("spot", "Exists"),))
    )
    assert reason is not None and "zone=b" in reason


def test_affinity_terms_are_ored() -> None:
    tol = (Toleration("spot", "Exists"),)
    terms = ((Requirement("zone", "In", ("b",)),), (Requirement("tier", "In", ("spot",)),))
    assert mismatch_reason(SPOT, pod_set(affinity_terms=terms, tolerations=tol)) is None
    terms = ((Requirement("zone", "NotIn", ("a",)),),)
    assert mismatch_reason(SPOT, pod_set(affinity_terms=terms, tolerations=tol)) is not None
