"""API objects → engine objects (controller/core/model/from_api.py)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from api.constants import (
    AdmissionMode,
    BorrowWithinCohortPolicy,
    FlavorFungibilityPolicy,
    QueueingStrategy,
    ReclaimWithinCohortPolicy,
    WithinClusterQueuePolicy,
)
from controller.core.model.clusterqueues import (
    ClusterQueue,
    LocalQueue,
    PreemptionPolicy,
    ResourceQuota,
)
from controller.core.model.cohorts import Cohort
from controller.core.model.from_api import InvalidObject, Namespace, convert, stand_in
from controller.core.model.priorities import PriorityClass
from controller.core.model.workloads import Workload

USAGE = "UsageBasedAdmissionFairSharing"

CQ: dict[str, Any] = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "ClusterQueue",
    "metadata": {"name": "cq"},
    "spec": {
        "cohortName": "co",
        "queueingStrategy": "StrictFIFO",
        "namespaceSelector": {
            "matchExpressions": [{"key": "team", "operator": "In", "values": ["a"]}]
        },
        "flavorFungibility": {"whenCanBorrow": "TryNextFlavor"},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [
                    {
                        "name": "f",
                        "resources": [
                            {
                                "name": "cpu",
                                "nominalQuota": "10",
                                "borrowingLimit": "2",
                                "lendingLimit": 4,
                            },
                            {"name": "memory", "nominalQuota": "1Gi"},
                        ],
                    }
                ],
            }
        ],
    },
}


def workload(**status: Any) -> dict[str, Any]:
    return {
        "kind": "Workload",
        "metadata": {
            "name": "w",
            "namespace": "ns",
            "uid": "u",
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {
            "queueName": "lq",
            "priorityClassRef": {
                "group": "scheduling.k8s.io",
                "kind": "PriorityClass",
                "name": "high",
            },
            "podSets": [
                {
                    "name": "main",
                    "count": 3,
                    "template": {
                        "spec": {
                            "containers": [{"resources": {"limits": {"cpu": "500m"}}}],
                            "nodeSelector": {"zone": "a"},
                            "tolerations": [{"key": "spot", "operator": "Exists"}],
                        }
                    },
                }
            ],
        },
        "status": status,
    }


def test_cluster_queue() -> None:
    cq = convert(CQ)
    assert isinstance(cq, ClusterQueue)
    assert cq.cohort == "co"
    assert cq.queueing_strategy is QueueingStrategy.STRICT_FIFO
    assert cq.flavor_fungibility.when_can_borrow is FlavorFungibilityPolicy.TRY_NEXT_FLAVOR
    quotas = dict(cq.quotas())
    assert quotas[("f", "cpu")].nominal == 10_000
    assert quotas[("f", "cpu")].borrowing_limit == 2_000
    assert quotas[("f", "cpu")].lending_limit == 4_000
    assert quotas[("f", "memory")].nominal == (1 << 30) * 1000
    assert cq.namespace_selector is not None and cq.namespace_selector.matches({"team": "a"})


def test_absent_namespace_selector_is_none_and_empty_is_all() -> None:
    spec = {**CQ["spec"]}
    del spec["namespaceSelector"]
    cq = convert({**CQ, "spec": spec})
    assert isinstance(cq, ClusterQueue) and cq.namespace_selector is None
    cq = convert({**CQ, "spec": {**spec, "namespaceSelector": {}}})
    assert isinstance(cq, ClusterQueue) and cq.namespace_selector is not None
    assert cq.namespace_selector.matches({})


def test_pending_workload() -> None:
    w = convert(workload())
    assert isinstance(w, Workload)
    assert w.key == "ns/w" and w.uid == "u"
    assert w.pod_sets[0].requests == {"cpu": 500}
    assert w.pod_sets[0].count == 3
    assert w.pod_sets[0].node_selector == {"zone": "a"}
    assert w.priority_class is not None and w.priority_class.name == "high"
    assert w.admission is None and w.creation_timestamp == 1767225600.0


def test_admitted_workload_usage_from_status() -> None:
    w = convert(
        workload(
            admission={
                "clusterQueue": "cq",
                "podSetAssignments": [{"name": "main", "count": 3, "flavors": {"cpu": "f"}}],
            },
            conditions=[
                {"type": "QuotaReserved", "status": "True"},
                {"type": "Evicted", "status": "True"},
            ],
            preemptionCost="2",
        )
    )
    assert isinstance(w, Workload) and w.admission is not None
    assert w.admission.usage() == {("f", "cpu"): 1500}
    assert w.evicted and w.preemption_cost == 2000


def test_what_the_tas_node_failure_handling_reads_of_a_workload() -> None:
    """`status.unhealthyNodes`, `tolerationSeconds`, and the tolerations an admission
    check's `podSetUpdates` add."""
    body = workload(
        unhealthyNodes=[{"name": "n1"}],
        admissionChecks=[
            {
                "name": "prov",
                "state": "Ready",
                "podSetUpdates": [
                    {"name": "main", "tolerations": [{"key": "k", "operator": "Exists"}]},
                    {"name": "other", "labels": {"a": "b"}},
                ],
            }
        ],
    )
    body["spec"]["podSets"][0]["template"]["spec"]["tolerations"] = [
        {"key": "spot", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}
    ]
    w = convert(body)
    assert isinstance(w, Workload)
    assert w.unhealthy_nodes == ("n1",)
    [toleration] = w.pod_sets[0].tolerations
    assert toleration.seconds == 30
    [check] = w.admission_checks
    [(name, (added,))] = check.pod_set_tolerations
    assert name == "main" and (added.key, added.operator, added.seconds) == ("k", "Exists", None)


def test_problems_name_every_field() -> None:
    bad = workload()
    bad["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] = (
        "x"
    )
    bad["spec"]["podSets"][0]["count"] = "three"
    del bad["spec"]["queueName"]
    with pytest.raises(InvalidObject) as raised:
        convert(bad)
    fields = [field for field, _ in raised.value.problems]
    assert fields == [
        "spec.podSets[0].template.spec.containers[0].resources.limits.cpu",
        "spec.podSets[0].count",
        "spec.queueName",
    ]


def test_quota_not_a_quantity() -> None:
    spec = {
        **CQ["spec"],
        "resourceGroups": [
            {
                "coveredResources": ["cpu"],
                "flavors": [
                    {
                        "name": "f",
                        "resources": [{"name": "cpu", "nominalQuota": "ten", "lendingLimit": "1"}],
                    }
                ],
            }
        ],
    }
    with pytest.raises(InvalidObject) as raised:
        convert({**CQ, "spec": spec})
    assert [f for f, _ in raised.value.problems] == [
        "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"
    ]


def test_kueue_rules_mark_the_object_invalid_with_kueues_message() -> None:
    """A ClusterQueue that converts but breaks Kueue's rules (stored before the validating
    webhook, or while it was down) is kept with what is wrong, as the webhook says it: the
    engine makes it inactive rather than admit by a spec its owner did not mean."""
    spec = {
        **CQ["spec"],
        "cohortName": "c",
        "resourceGroups": [
            {
                "coveredResources": ["cpu"],
                "flavors": [
                    {
                        "name": "f",
                        "resources": [{"name": "cpu", "nominalQuota": "1", "lendingLimit": "2"}],
                    }
                ],
            }
        ],
    }
    cq = convert({**CQ, "spec": spec})
    assert isinstance(cq, ClusterQueue)
    assert cq.invalid == (
        'spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: Invalid value: "2": '
        "must be less than or equal to the nominalQuota"
    )
    assert convert(CQ).invalid is None  # type: ignore[union-attr]


def test_a_cohort_may_lend_more_than_its_own_nominal_quota() -> None:
    """Kueue's Cohort lendingLimit caps what its whole subtree lends, not its own quota: a
    Cohort lending more than its nominal quota is valid (Kueue's cohort webhook does not
    check it) and converts with the limit as written."""
    cohort = convert(
        {
            "kind": "Cohort",
            "metadata": {"name": "child"},
            "spec": {
                "parentName": "root",
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [
                            {
                                "name": "f",
                                "resources": [
                                    {"name": "cpu", "nominalQuota": "1", "lendingLimit": "5"}
                                ],
                            }
                        ],
                    }
                ],
            },
        }
    )
    assert isinstance(cohort, Cohort) and cohort.invalid is None
    assert cohort.quotas()[("f", "cpu")] == ResourceQuota(1000, None, 5000)


def test_unknown_kind_and_other_kinds() -> None:
    with pytest.raises(InvalidObject, match="unsupported kind"):
        convert({"kind": "Gadget", "metadata": {"name": "g"}})
    assert convert(
        {"kind": "Namespace", "metadata": {"name": "n", "labels": {"a": "b"}}}
    ) == Namespace("n", {"a": "b"})
    pc = convert(
        {"kind": "PriorityClass", "metadata": {"name": "p"}, "value": 5, "globalDefault": True}
    )
    assert pc == PriorityClass("p", 5, "PreemptLowerPriority", True)


def test_pydantic_like_models_are_dumped() -> None:
    class Model:
        def model_dump(self, **_: Any) -> dict[str, Any]:
            return {
                "kind": "ResourceFlavor",
                "metadata": {"name": "f"},
                "spec": {"nodeLabels": {"a": "b"}},
            }

    flavor = convert(Model())
    assert getattr(flavor, "node_labels", None) == {"a": "b"}


def test_preemption_policies_become_enums_and_unknown_values_are_refused_by_name() -> None:
    spec = {
        **CQ["spec"],
        "preemption": {
            "withinClusterQueue": "LowerOrNewerEqualPriority",
            "reclaimWithinCohort": "Any",
            "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 5},
        },
    }
    cq = convert({**CQ, "spec": spec})
    assert isinstance(cq, ClusterQueue)
    assert cq.preemption == PreemptionPolicy(
        ReclaimWithinCohortPolicy.ANY,
        WithinClusterQueuePolicy.LOWER_OR_NEWER_EQUAL_PRIORITY,
        BorrowWithinCohortPolicy.LOWER_PRIORITY,
        5,
    )
    assert convert(CQ).preemption == PreemptionPolicy()  # absent: Never, as in Kueue

    spec["preemption"] = {
        "withinClusterQueue": "lowerpriority",
        "reclaimWithinCohort": "Always",
        "borrowWithinCohort": {"policy": ""},
    }
    with pytest.raises(InvalidObject) as raised:
        convert({**CQ, "spec": spec})
    assert raised.value.problems == [
        ("spec.preemption.reclaimWithinCohort", "unsupported value 'Always'"),
        ("spec.preemption.withinClusterQueue", "unsupported value 'lowerpriority'"),
        ("spec.preemption.borrowWithinCohort.policy", "unsupported value ''"),
    ]


def test_after_admission_fields_and_conditions() -> None:
    body = workload(
        admission={
            "clusterQueue": "cq",
            "podSetAssignments": [{"name": "main", "count": 3, "flavors": {"cpu": "f"}}],
        },
        accumulatedPastExecutionTimeSeconds=40,
        requeueState={"count": 2, "requeueAt": "1970-01-01T00:01:40Z"},
        conditions=[
            {
                "type": "QuotaReserved",
                "status": "True",
                "lastTransitionTime": "1970-01-01T00:00:10Z",
            },
            {
                "type": "PodsReady",
                "status": "False",
                "reason": "WaitForRecovery",
                "message": "pod p failed",
                "lastTransitionTime": "1970-01-01T00:00:50Z",
            },
            {"type": "Evicted", "status": "False", "reason": "QuotaReserved"},
            {"type": "Requeued", "status": "True", "reason": "BackoffFinished"},
            {"type": "DeactivationTarget", "status": "True", "reason": "RequeuingLimitExceeded"},
        ],
    )
    body["spec"]["maximumExecutionTimeSeconds"] = 600
    w = convert(body)
    assert isinstance(w, Workload)
    assert w.maximum_execution_time_seconds == 600
    assert w.accumulated_past_execution_time_seconds == 40
    assert w.quota_reserved_at == 10.0
    assert w.pods_ready is not None and not w.pods_ready.status
    assert (w.pods_ready.reason, w.pods_ready.message) == ("WaitForRecovery", "pod p failed")
    assert w.pods_ready.last_transition == 50.0
    assert w.eviction is None  # only Evicted=True counts
    assert w.requeued is not None and w.requeued.status and w.requeued.reason == "BackoffFinished"
    assert w.deactivation_target is not None
    assert w.deactivation_target.reason == "RequeuingLimitExceeded"
    assert (w.requeue_count, w.requeue_at) == (2, 100.0)


def test_after_admission_fields_of_the_wrong_type_are_problems() -> None:
    body = workload(accumulatedPastExecutionTimeSeconds="long")
    body["spec"]["maximumExecutionTimeSeconds"] = "soon"
    with pytest.raises(InvalidObject) as raised:
        convert(body)
    text = str(raised.value)
    assert "spec.maximumExecutionTimeSeconds" in text
    assert "status.accumulatedPastExecutionTimeSeconds" in text


def test_admission_scope_and_local_queue_weight_and_history() -> None:
    cq = convert({**CQ, "spec": {**CQ["spec"], "admissionScope": {"admissionMode": USAGE}}})
    assert isinstance(cq, ClusterQueue) and cq.admission_mode is AdmissionMode(USAGE)
    plain = convert(CQ)
    assert isinstance(plain, ClusterQueue) and plain.admission_mode is None
    lq = convert(
        {
            "kind": "LocalQueue",
            "metadata": {"name": "lq", "namespace": "ns"},
            "spec": {"clusterQueue": "cq", "fairSharing": {"weight": "1500m"}},
            "status": {
                "fairSharing": {
                    "weightedShare": 0,
                    "admissionFairSharingStatus": {
                        "consumedResources": {"cpu": "2500m", "memory": "1Ki", "gpu": 3},
                        "lastUpdate": "2026-01-01T00:00:00Z",
                    },
                }
            },
        }
    )
    assert isinstance(lq, LocalQueue)
    assert lq.fair_weight == Fraction(3, 2)
    assert lq.consumed_status == {"cpu": 2.5, "memory": 1024.0, "gpu": 3.0}
    bare = convert(
        {"kind": "LocalQueue", "metadata": {"name": "lq"}, "spec": {"clusterQueue": "c"}}
    )
    assert isinstance(bare, LocalQueue)
    assert (bare.fair_weight, bare.consumed_status) == (Fraction(1), None)


def test_admission_fair_sharing_fields_are_refused_by_name() -> None:
    with pytest.raises(InvalidObject) as raised:
        convert({**CQ, "spec": {**CQ["spec"], "admissionScope": {"admissionMode": "Sometimes"}}})
    assert raised.value.problems == [
        ("spec.admissionScope.admissionMode", "unsupported value 'Sometimes'")
    ]
    with pytest.raises(InvalidObject) as raised:
        convert({**CQ, "spec": {**CQ["spec"], "admissionScope": {}}})
    assert raised.value.problems == [
        ("spec.admissionScope.admissionMode", "required in an admissionScope")
    ]
    with pytest.raises(InvalidObject) as raised:
        convert(
            {
                "kind": "LocalQueue",
                "metadata": {"name": "lq"},
                "spec": {"clusterQueue": "c", "fairSharing": {"weight": "-1"}},
                "status": {
                    "fairSharing": {
                        "admissionFairSharingStatus": {
                            "consumedResources": {"cpu": "lots", "memory": "-1"}
                        }
                    }
                },
            }
        )
    problems = dict(raised.value.problems)
    assert problems["spec.fairSharing.weight"] == "must not be negative, got '-1'"
    path = "status.fairSharing.admissionFairSharingStatus.consumedResources"
    assert "invalid quantity 'lots'" in problems[f"{path}[cpu]"]
    assert problems[f"{path}[memory]"] == "must not be negative, got '-1'"


def test_pod_level_resources_and_admission_gates_are_read() -> None:
    """A pod set's own `spec.resources` counts (Kubernetes' PodLevelResources: such pods were
    admitted with no usage), and the admission-gated-by annotation holds the Workload."""
    body = workload()
    body["metadata"]["annotations"] = {"kueue.x-k8s.io/admission-gated-by": " example.com/a "}
    body["spec"]["priority"] = 1
    body["spec"]["podSets"][0]["template"]["spec"]["resources"] = {
        "requests": {"cpu": "2"},
        "limits": {"memory": "1Gi"},
    }
    converted = convert(body)
    assert isinstance(converted, Workload)
    assert dict(converted.pod_sets[0].requests) == {"cpu": 2000, "memory": 2**30 * 1000}
    assert converted.admission_gated_by == "example.com/a"
    assert converted.held_back and converted.invalid is None


def test_an_unreadable_queue_stands_in_inactive_with_what_is_wrong() -> None:
    """What the controller keeps for a queue, flavor or Cohort it cannot convert (stored
    before the strict CRDs): not the previous version, a stand-in that admits nothing."""
    bad = {
        **CQ,
        "spec": {
            **CQ["spec"],
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {"name": "f", "resources": [{"name": "cpu", "nominalQuota": "-1"}]}
                    ],
                }
            ],
        },
    }
    with pytest.raises(InvalidObject):
        convert(bad)
    stand_in_cq = stand_in(bad, "nominalQuota: must not be negative")
    assert stand_in_cq == ClusterQueue(
        "cq", cohort="co", invalid="nominalQuota: must not be negative"
    )
    lq = stand_in(
        {"kind": "LocalQueue", "metadata": {"name": "q", "namespace": "ns"}, "spec": 3}, "x"
    )
    assert lq is None  # not an object spec: nothing to stand in for
    assert stand_in({"kind": "Workload", "metadata": {"name": "w"}, "spec": {}}, "x") is None


def test_a_workload_on_hold_is_read_from_its_quota_reserved_reason() -> None:
    """Kueue's `IsOnHold`: QuotaReserved=False with reason OnHold, and only that."""

    def reserved(status: str, reason: str) -> dict[str, Any]:
        return {"conditions": [{"type": "QuotaReserved", "status": status, "reason": reason}]}

    held = convert(workload(**reserved("False", "OnHold")))
    waiting = convert(workload(**reserved("False", "WaitingForQuota")))
    assert isinstance(held, Workload) and held.on_hold
    assert isinstance(waiting, Workload) and not waiting.on_hold
    assert not convert(workload()).on_hold  # type: ignore[union-attr]
