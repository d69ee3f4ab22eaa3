"""controller/core/model/unsupported.py: every Kueue field quotagate does not implement yet is
found with its path (admission checks are implemented; a MultiKueue check is reported)."""

from __future__ import annotations

from typing import Any

import pytest

from controller.core.model.clusterqueues import LocalQueue
from controller.core.model.from_api import convert
from controller.core.model.unsupported import unsupported_fields
from controller.core.pending import why_pending
from controller.core.scheduler.cycle import run_cycle
from tests.unit.core.builders import add, cluster, wl

POD_SET = {"name": "main", "count": 2, "template": {"spec": {"containers": []}}}


@pytest.mark.parametrize(
    ("obj", "paths"),
    [
        (
            {
                "kind": "ClusterQueue",
                "spec": {"admissionChecksStrategy": {"admissionChecks": [{"name": "prov"}]}},
            },
            [],
        ),
        (
            {"kind": "AdmissionCheck", "spec": {"controllerName": "kueue.x-k8s.io/multikueue"}},
            ["spec.controllerName"],
        ),
        (
            {
                "kind": "AdmissionCheck",
                "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request"},
            },
            [],
        ),
        (
            {
                "kind": "Workload",
                "spec": {
                    "maximumExecutionTimeSeconds": 60,  # implemented: not reported (nor minCount)
                    "podSets": [
                        POD_SET,
                        {
                            **POD_SET,
                            "name": "b",
                            "minCount": 1,
                            "topologyRequest": {  # implemented: multi-layer slices
                                "required": "rack",
                                "podsetSliceRequiredTopologyConstraints": [
                                    {"topology": "rack", "size": 4},
                                    {"topology": "host", "size": 2},
                                ],
                            },
                        },
                    ],
                    "preemptionGates": [{"name": "g"}],
                },
                "status": {"reclaimablePods": [{"name": "main", "count": 1}]},
            },
            [
                "spec.preemptionGates",
                "status.reclaimablePods",
            ],
        ),
        ({"kind": "ResourceFlavor", "spec": {"topologyName": "t", "nodeLabels": {"a": "b"}}}, []),
        ({"kind": "Workload", "spec": {"podSets": [POD_SET], "preemptionGates": []}}, []),
        (
            {"kind": "ClusterQueue", "spec": {"admissionChecksStrategy": {"admissionChecks": []}}},
            [],
        ),
    ],
)
def test_each_unimplemented_field_is_found(obj: dict[str, Any], paths: list[str]) -> None:
    found = unsupported_fields(obj)
    assert [path for path, _ in found] == paths
    assert all("not implemented by quotagate yet" in message for _, message in found)


@pytest.mark.parametrize("kind", ["ClusterQueue", "Cohort"])
def test_a_fair_sharing_weight_is_reported_only_while_fair_sharing_is_off(kind: str) -> None:
    """Kueue ignores `spec.fairSharing` silently when its configuration has no fairSharing
    section; quotagate says so on the object, and says nothing once fair sharing is on."""
    obj = {"kind": kind, "spec": {"fairSharing": {"weight": "2"}}}
    [(path, message)] = unsupported_fields(obj)
    assert path == "spec.fairSharing"
    assert "fair sharing is off in the controller configuration" in message
    assert "the weight has no effect" in message
    assert unsupported_fields(obj, fair_sharing=True) == []


@pytest.mark.parametrize(
    ("kind", "spec", "what"),
    [
        (
            "ClusterQueue",
            {"admissionScope": {"admissionMode": "UsageBasedAdmissionFairSharing"}},
            "the admission mode",
        ),
        ("LocalQueue", {"clusterQueue": "cq", "fairSharing": {"weight": "2"}}, "the weight"),
    ],
)
def test_admission_fair_sharing_fields_are_reported_only_while_it_is_off(
    kind: str, spec: dict[str, Any], what: str
) -> None:
    """Kueue ignores an admission scope and a LocalQueue weight without an
    admissionFairSharing section; quotagate says so, and nothing once it is on."""
    obj = {"kind": kind, "spec": spec}
    [(path, message)] = unsupported_fields(obj)
    assert path == ("spec.admissionScope" if kind == "ClusterQueue" else "spec.fairSharing")
    assert message.startswith(
        "admission fair sharing is off in the controller configuration (no "
        f"admissionFairSharing section): {what} has no effect"
    )
    assert unsupported_fields(obj, admission_fair_sharing=True) == []
    # A ClusterQueue's fairSharing (cohort fair sharing) is another section's business.
    assert unsupported_fields(obj, fair_sharing=True) == [(path, message)]


def test_a_cluster_queue_with_a_missing_admission_check_admits_nothing() -> None:
    spec = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu"],
                "flavors": [
                    {"name": "default", "resources": [{"name": "cpu", "nominalQuota": "10"}]}
                ],
            }
        ],
        "admissionChecksStrategy": {"admissionChecks": [{"name": "prov"}, {"name": "multikueue"}]},
    }
    state = cluster()
    state.apply(convert({"kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": spec}))
    state.set_local_queue(LocalQueue("ns", "cq", "cq"))
    add(state, wl("w", cpu="1"))
    assert not run_cycle(state, 0).admitted
    inactive = state.objects.cluster_queue_inactive("cq")
    assert inactive is not None and inactive.reason == "AdmissionCheckNotFound"
    assert inactive.message == (
        "Can't admit new workloads: references missing AdmissionCheck(s): multikueue,prov."
    )
    assert "multikueue,prov" in why_pending(state, "ns/w")
