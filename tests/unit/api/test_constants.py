"""api/constants.py: the names shared with Kueue and Kubernetes."""

from __future__ import annotations

from enum import StrEnum

import pytest

from api import MODELS, constants
from api.constants import (
    ADMISSION_GATE,
    API_VERSION,
    GROUP,
    MANAGED_POD_FINALIZER,
    POD_GROUP_NAME_LABEL,
    POD_GROUP_TOTAL_COUNT_ANNOTATION,
    PREEMPTIBILITY_LABEL,
    PRIORITY_CLASS_LABEL,
    QUEUE_NAME_LABEL,
    RESOURCE_IN_USE_FINALIZER,
    VERSION,
    DisruptionMode,
    Kind,
    Preemptibility,
    PreemptibilitySource,
    PreemptionReason,
    WorkloadConditionType,
)

ENUMS = [
    value
    for value in vars(constants).values()
    if isinstance(value, type) and issubclass(value, StrEnum) and value is not StrEnum
]


def test_group_and_version() -> None:
    assert (GROUP, VERSION, API_VERSION) == ("kueue.x-k8s.io", "v1beta2", "kueue.x-k8s.io/v1beta2")


def test_labels_annotations_gate_finalizers() -> None:
    assert QUEUE_NAME_LABEL == "kueue.x-k8s.io/queue-name"
    assert POD_GROUP_NAME_LABEL == "kueue.x-k8s.io/pod-group-name"
    assert PRIORITY_CLASS_LABEL == "kueue.x-k8s.io/priority-class"
    assert PREEMPTIBILITY_LABEL == "kai.scheduler/preemptibility"
    assert POD_GROUP_TOTAL_COUNT_ANNOTATION == "kueue.x-k8s.io/pod-group-total-count"
    assert ADMISSION_GATE == "kueue.x-k8s.io/admission"
    assert RESOURCE_IN_USE_FINALIZER == "kueue.x-k8s.io/resource-in-use"
    assert MANAGED_POD_FINALIZER == "kueue.x-k8s.io/managed"


def test_closed_value_sets() -> None:
    assert list(Preemptibility) == ["preemptible", "non-preemptible", "semi-preemptible"]
    assert list(PreemptibilitySource) == [
        "spec",
        "ownerLabel",
        "podLabel",
        "priorityThreshold",
        "default",
    ]
    assert list(DisruptionMode) == ["PodGroup", "Pod"]
    assert set(WorkloadConditionType) == {
        "QuotaReserved",
        "Admitted",
        "Evicted",
        "Preempted",
        "Requeued",
        "Finished",
        "PodsReady",
    }
    assert set(PreemptionReason) >= {
        "InClusterQueue",
        "InCohortReclamation",
        "InCohortReclaimWhileBorrowing",
    }


@pytest.mark.parametrize("enum", ENUMS, ids=lambda e: e.__name__)
def test_enum_values_are_unique_and_str(enum: type[StrEnum]) -> None:
    values = [member.value for member in enum]
    assert len(values) == len(set(values))
    assert all(isinstance(value, str) and value for value in values)


def test_every_kind_has_a_model() -> None:
    assert set(MODELS) == set(Kind)
    for kind, model in MODELS.items():
        assert model.model_fields["kind"].default == kind
