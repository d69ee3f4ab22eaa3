"""controller/integrations/framework/podset_info.py: the admission checks' podSetUpdates
reach the job's pod templates at start, and a conflicting one refuses the start, as
Kueue's `getPodSetsInfoFromStatus`."""

from __future__ import annotations

from typing import Any

import pytest

from controller.integrations.framework.podset_info import (
    FlavorPlacement,
    PodSetInfoError,
    from_admission,
)


def workload(*updates: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "metadata": {"name": "wl"},
        "spec": {"podSets": [{"name": "main", "count": 2}, {"name": "aux", "count": 1}]},
        "status": {
            "admission": {
                "clusterQueue": "cq",
                "podSetAssignments": [
                    {"name": "main", "count": 2, "flavors": {"cpu": "spot"}},
                    {"name": "aux", "count": 1, "flavors": {"cpu": "spot"}},
                ],
            },
            "admissionChecks": [
                {"name": check, "state": "Ready", "podSetUpdates": [update]}
                for check, update in updates
            ],
        },
    }


def placement(name: str) -> FlavorPlacement:
    return FlavorPlacement({"pool": "spot"}, ({"key": "spot", "operator": "Exists"},))


def test_each_checks_updates_reach_their_pod_set() -> None:
    wl = workload(
        (
            "prov",
            {
                "name": "main",
                "labels": {"a": "1"},
                "annotations": {
                    "cluster-autoscaler.kubernetes.io/consume-provisioning-request": "p"
                },
                "nodeSelector": {"zone": "z1"},
                "tolerations": [{"key": "gpu", "operator": "Exists"}],
            },
        ),
        ("budget", {"name": "main", "labels": {"b": "2"}, "nodeSelector": {"pool": "spot"}}),
    )
    main, aux = from_admission(wl, placement)
    assert main.labels == {"a": "1", "b": "2", "kueue.x-k8s.io/podset": "main"}
    assert main.annotations == {
        "cluster-autoscaler.kubernetes.io/consume-provisioning-request": "p",
        "kueue.x-k8s.io/workload": "wl",  # every pod set's, as Kueue's with TAS on
    }
    assert main.node_selector == {"pool": "spot", "zone": "z1"}
    assert main.tolerations == [
        {"key": "spot", "operator": "Exists"},
        {"key": "gpu", "operator": "Exists"},
    ]
    assert aux.node_selector == {"pool": "spot"}
    assert aux.annotations == {"kueue.x-k8s.io/workload": "wl"}


@pytest.mark.parametrize(
    ("update", "what"),
    [
        ({"name": "main", "nodeSelector": {"pool": "on-demand"}}, "nodeSelector"),
        ({"name": "main", "labels": {"kueue.x-k8s.io/podset": "other"}}, "labels"),
    ],
)
def test_a_conflicting_update_refuses_the_start(update: dict[str, Any], what: str) -> None:
    with pytest.raises(PodSetInfoError, match=f"in admission check 'prov'.*conflict for {what}"):
        from_admission(workload(("prov", update)), placement)


def test_a_pod_of_a_group_is_ungated_with_the_checks_updates() -> None:
    from controller.integrations.framework.podset_info import with_check_updates
    from controller.integrations.pod_units import GATE, ungate_patch

    wl = workload(("prov", {"name": "main", "labels": {"a": "1"}, "annotations": {"n": "v"}}))
    info = with_check_updates(wl, "main", {"pool": "spot"}, [])
    pod = {
        "metadata": {"name": "p", "labels": {"x": "y"}},
        "spec": {"schedulingGates": [{"name": GATE}]},
    }
    patch = ungate_patch(pod, info.node_selector, info.tolerations, info.labels, info.annotations)
    assert patch[:3] == [
        {"op": "add", "path": "/metadata/labels/a", "value": "1"},
        {"op": "add", "path": "/metadata/annotations", "value": {"n": "v"}},
        {"op": "add", "path": "/spec/nodeSelector", "value": {"pool": "spot"}},
    ]
    assert patch[-1] == {"op": "remove", "path": "/spec/schedulingGates/0"}
    conflicting = workload(("prov", {"name": "main", "nodeSelector": {"pool": "other"}}))
    with pytest.raises(PodSetInfoError, match="conflict for nodeSelector"):
        with_check_updates(conflicting, "main", {"pool": "spot"}, [])
