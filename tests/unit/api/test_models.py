"""API models (api/): manifests round-trip, quantities are exact, bad input names the field."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from api import (
    ClusterQueue,
    Cohort,
    InvalidObjectError,
    LocalQueue,
    ResourceFlavor,
    Workload,
    WorkloadPriorityClass,
    load_object,
)
from api.clusterqueue import ClusterQueueSpec
from api.constants import (
    DisruptionMode,
    FlavorFungibilityPolicy,
    Preemptibility,
    PreemptibilitySource,
    QueueingStrategy,
    ReclaimWithinCohortPolicy,
    StopPolicy,
    WorkloadConditionType,
)
from api.podtemplate import PodTemplateSpec
from api.quantities import Quantity
from api.validation import validate
from api.workload import PodSet, ResolvedPreemptibility, WorkloadSpec, WorkloadStatus
from tests.unit.api.manifests import ALL, sample

MODEL_BY_KIND = {
    "ResourceFlavor": ResourceFlavor,
    "ClusterQueue": ClusterQueue,
    "Cohort": Cohort,
    "LocalQueue": LocalQueue,
    "WorkloadPriorityClass": WorkloadPriorityClass,
    "Workload": Workload,
}


@pytest.mark.parametrize("kind", sorted(ALL))
def test_server_form_manifest_round_trips(kind: str) -> None:
    obj = load_object(sample(kind))
    assert type(obj) is MODEL_BY_KIND[kind]
    assert obj.to_dict() == ALL[kind]


@pytest.mark.parametrize("kind", sorted(ALL))
def test_round_trip_is_stable(kind: str) -> None:
    once = load_object(sample(kind)).to_dict()
    assert load_object(once).to_dict() == once


def test_user_manifest_round_trips_without_defaults_when_asked() -> None:
    manifest: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "cluster-queue"},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {
                            "name": "default-flavor",
                            "resources": [{"name": "cpu", "nominalQuota": 9}],
                        }
                    ],
                }
            ],
        },
    }
    cq = load_object(manifest)
    expected = {**manifest}
    expected["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "9"
    assert cq.to_dict(exclude_unset=True) == expected
    # Without exclude_unset the defaults are written out, as the API server would.
    spec = cq.to_dict()["spec"]
    assert spec["queueingStrategy"] == "BestEffortFIFO"
    assert spec["stopPolicy"] == "None"
    assert spec["preemption"] == {"reclaimWithinCohort": "Never", "withinClusterQueue": "Never"}
    assert spec["flavorFungibility"] == {
        "whenCanBorrow": "MayStopSearch",
        "whenCanPreempt": "TryNextFlavor",
    }


def test_fields_are_typed_in_python() -> None:
    cq = load_object(sample("ClusterQueue"))
    assert isinstance(cq, ClusterQueue)
    assert cq.spec.queueing_strategy is QueueingStrategy.STRICT_FIFO
    assert cq.spec.preemption.reclaim_within_cohort is ReclaimWithinCohortPolicy.ANY
    assert cq.spec.flavor_fungibility.when_can_borrow is FlavorFungibilityPolicy.TRY_NEXT_FLAVOR
    quota = cq.spec.resource_groups[0].flavors[0].resources[1]  # type: ignore[index]
    assert quota.nominal_quota == Quantity.parse("36Gi")
    assert quota.lending_limit is not None and quota.lending_limit.milli == 4 * 2**30 * 1000

    wl = load_object(sample("Workload"))
    assert isinstance(wl, Workload)
    assert wl.spec.disruption_mode is DisruptionMode.POD
    assert wl.spec.preemptibility is Preemptibility.PREEMPTIBLE
    assert wl.status is not None
    assert wl.status.preemption_cost == Quantity.parse(7)
    admitted = wl.status.condition(WorkloadConditionType.ADMITTED)
    assert admitted is not None
    assert admitted.last_transition_time == datetime(2026, 3, 1, 10, 0, 1, tzinfo=UTC)
    container = wl.spec.pod_sets[0].template.spec.containers[0]  # type: ignore[union-attr,index]
    assert container.resources is not None and container.resources.requests is not None
    assert container.resources.requests["cpu"].milli == 1500
    # Kueue's fields quotagate does not implement are typed too (and reported).
    request = wl.spec.pod_sets[0].topology_request
    assert request is not None and request.preferred == "cloud.provider.com/rack"
    assert wl.spec.pod_sets[0].model_extra == {}


def test_quantities_serialize_canonically_and_accept_numbers() -> None:
    manifest = sample("Workload")
    manifest["status"]["preemptionCost"] = 12
    manifest["status"]["admission"]["podSetAssignments"][0]["resourceUsage"] = {
        "cpu": "1000m",
        "memory": "1.5Gi",
        "example.com/x": 0.5,
    }
    status = load_object(manifest).to_dict()["status"]
    assert status["preemptionCost"] == "12"
    assert status["admission"]["podSetAssignments"][0]["resourceUsage"] == {
        "cpu": "1",
        "memory": "1536Mi",
        "example.com/x": "500m",
    }


def test_defaults() -> None:
    spec = WorkloadSpec(pod_sets=[PodSet(template=PodTemplateSpec())])
    assert spec.pod_sets[0].name == "main"
    assert spec.pod_sets[0].count == 1
    assert spec.active is True
    assert spec.disruption_mode is DisruptionMode.POD_GROUP
    assert ClusterQueueSpec().queueing_strategy is QueueingStrategy.BEST_EFFORT_FIFO
    assert (
        LocalQueue.model_validate(
            {"kind": "LocalQueue", "spec": {"clusterQueue": "cq"}}
        ).spec.stop_policy
        is StopPolicy.NONE
    )


def test_models_built_in_python_dump_to_kubernetes_json() -> None:
    wl = Workload(
        metadata={"name": "w", "namespace": "ns"},  # type: ignore[arg-type]
        spec=WorkloadSpec(queue_name="lq", pod_sets=[PodSet(template=PodTemplateSpec(), count=2)]),
        status=WorkloadStatus(
            preemption_cost=Quantity.parse("2k"),
            resolved_preemptibility=ResolvedPreemptibility(
                value=Preemptibility.NON_PREEMPTIBLE, source=PreemptibilitySource.OWNER_LABEL
            ),
        ),
    )
    assert wl.to_dict(exclude_unset=True) == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "ns"},
        "spec": {"queueName": "lq", "podSets": [{"template": {}, "count": 2}]},
        "status": {
            "preemptionCost": "2k",
            "resolvedPreemptibility": {"value": "non-preemptible", "source": "ownerLabel"},
        },
    }


def _problems(manifest: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(InvalidObjectError) as info:
        load_object(manifest)
    return dict(info.value.problems)


def test_invalid_input_names_kind_object_and_every_field() -> None:
    manifest = sample("Workload")
    manifest["spec"]["podSets"][0]["count"] = -1
    manifest["spec"]["preemptibility"] = "sometimes"
    manifest["status"]["preemptionCost"] = "abc"
    with pytest.raises(InvalidObjectError) as info:
        load_object(manifest)
    err = info.value
    assert err.kind == "Workload" and err.name == "team-a/job-sample-job-3c2f4"
    problems = dict(err.problems)
    assert set(problems) == {
        "spec.podSets[0].count",
        "spec.preemptibility",
        "status.preemptionCost",
    }
    assert "greater than or equal to 0" in problems["spec.podSets[0].count"]
    assert "'abc'" in problems["status.preemptionCost"]
    assert "spec.podSets[0].count: " in str(err)


@pytest.mark.parametrize(
    ("kind", "path", "value", "field"),
    [
        (
            "ClusterQueue",
            ("spec", "resourceGroups", 0, "flavors", 0, "resources", 0, "nominalQuota"),
            "-1",
            "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota",
        ),
        (
            "ClusterQueue",
            ("spec", "resourceGroups", 0, "flavors", 0, "resources", 0, "nominalQuota"),
            -3,
            "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota",
        ),
        ("ClusterQueue", ("spec", "queueingStrategy"), "Fastest", "spec.queueingStrategy"),
        (
            "ClusterQueue",
            ("spec", "preemption", "withinClusterQueue"),
            "Always",
            "spec.preemption.withinClusterQueue",
        ),
        ("ClusterQueue", ("spec", "cohortName"), "Not_A_Name", "spec.cohortName"),
        ("LocalQueue", ("spec", "stopPolicy"), "Pause", "spec.stopPolicy"),
        ("Workload", ("spec", "podSets", 0, "minCount"), 0, "spec.podSets[0].minCount"),
        (
            "Workload",
            ("spec", "maximumExecutionTimeSeconds"),
            0,
            "spec.maximumExecutionTimeSeconds",
        ),
        ("Workload", ("spec", "disruptionMode"), "Node", "spec.disruptionMode"),
        ("Workload", ("spec", "priority"), 2**31, "spec.priority"),
        ("Workload", ("status", "preemptionCost"), "-5", "status.preemptionCost"),
        (
            "Workload",
            ("status", "resolvedPreemptibility", "source"),
            "guess",
            "status.resolvedPreemptibility.source",
        ),
        ("WorkloadPriorityClass", ("value",), "high", "value"),
    ],
)
def test_invalid_field_is_reported(
    kind: str, path: tuple[Any, ...], value: Any, field: str
) -> None:
    manifest = sample(kind)
    target = manifest
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    assert field in _problems(manifest)


def test_missing_required_field() -> None:
    manifest = sample("Workload")
    del manifest["spec"]["podSets"][0]["template"]
    assert _problems(manifest) == {"spec.podSets[0].template": "Field required"}


def test_kueue_optional_fields_are_optional() -> None:
    """Kueue's schema requires neither a LocalQueue's clusterQueue nor a Workload's podSets
    (the controller reports such objects); the models read them too."""
    queue = sample("LocalQueue")
    del queue["spec"]["clusterQueue"]
    assert load_object(queue).to_dict()["spec"].get("clusterQueue") is None
    workload = sample("Workload")
    del workload["spec"]["podSets"]
    assert load_object(workload).to_dict(exclude_unset=True)["spec"].get("podSets") is None


def test_wrong_api_version_or_kind() -> None:
    assert "apiVersion" in _problems({**sample("Workload"), "apiVersion": "kueue.x-k8s.io/v1beta1"})
    assert "kind" in _problems({**sample("Workload"), "kind": "Job"})
    with pytest.raises(ValidationError, match="kind must be 'Workload'"):
        Workload.model_validate({**sample("Workload"), "kind": "ClusterQueue"})


def test_cohort_limits_need_a_parent_as_kueues_webhook_says() -> None:
    manifest = sample("Cohort")
    del manifest["spec"]["parentName"]
    assert {str(error.path): error.detail for error in validate(manifest)} == {
        "spec.resourceGroups[0].flavors[0].resources[0].lendingLimit": (
            "must be nil when parent is empty"
        ),
        "spec.resourceGroups[0].flavors[0].resources[1].borrowingLimit": (
            "must be nil when parent is empty"
        ),
    }
    for group in manifest["spec"]["resourceGroups"]:
        for flavor in group["flavors"]:
            for quota in flavor["resources"]:
                quota.pop("lendingLimit", None)
                quota.pop("borrowingLimit", None)
    assert validate(manifest) == []
    cohort = load_object(manifest)
    assert isinstance(cohort, Cohort) and cohort.spec.parent_name is None
    assert cohort.spec.resource_groups is not None
    assert str(cohort.spec.resource_groups[0].flavors[0].resources[1].nominal_quota) == "32Gi"
