"""The Cohort kind on the real API server (issue 20, first step): the CRD validates what
Kueue validates, a flat explicit Cohort shares quota like an implicit cohort, and a Cohort
shape the flat quota model cannot compute is reported and admits nothing."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.cluster.build import bin_dir
from tests.cluster.fixtures import wait_for
from tests.integration.kueue import (
    GROUP,
    VERSION,
    ControllerProcess,
    Kueue,
    cluster_queue,
    condition,
    flavor,
    local_queue,
    wait_admitted,
    wait_pending_reason,
    workload,
)


def cohort(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Cohort",
        "metadata": {"name": name},
        "spec": spec,
    }


def _limited(rf: str, parent: str | None, **limit: str) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "resourceGroups": [
            {
                "coveredResources": ["cpu"],
                "flavors": [
                    {"name": rf, "resources": [{"name": "cpu", "nominalQuota": "4", **limit}]}
                ],
            }
        ]
    }
    if parent:
        spec["parentName"] = parent
    return spec


@pytest.mark.parametrize(
    ("parent", "limit", "field", "message"),
    [
        (
            None,
            {"lendingLimit": "1"},
            "spec.resourceGroups",
            "borrowingLimit and lendingLimit must be nil when parentName is empty",
        ),
        ("org", {"lendingLimit": "-1"}, "lendingLimit", "should match"),
        ("org", {"borrowingLimit": "lots"}, "borrowingLimit", "should match"),
    ],
)
def test_the_crd_rejects_a_bad_limit_naming_the_field(
    kueue: Kueue,
    namespace: str,
    parent: str | None,
    limit: dict[str, str],
    field: str,
    message: str,
) -> None:
    with pytest.raises(ApiException) as caught:
        kueue.apply(cohort(f"{namespace}-bad", _limited("rf", parent, **limit)))
    assert caught.value.status == 422
    body = json.loads(caught.value.body)
    assert field in body["message"] and message in body["message"], body["message"]
    # The same limit under a parent is accepted, as Kueue's webhook accepts it.
    kueue.apply(cohort(f"{namespace}-good", _limited("rf", "org", lendingLimit="1")))


def test_kubectl_get_cohorts_shows_kueues_columns(
    kueue: Kueue, namespace: str, kubeconfig_path: str
) -> None:
    kueue.apply(cohort(f"{namespace}-co", {}))
    out = subprocess.run(
        [str(bin_dir() / "kubectl"), "--kubeconfig", kubeconfig_path, "get", "co"],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "AGE"]
    assert f"{namespace}-co" in [line.split()[0] for line in lines[1:]]


def test_a_flat_explicit_cohort_lets_its_cluster_queues_borrow(
    controller: ControllerProcess, kueue: Kueue, namespace: str
) -> None:
    rf, pool = f"{namespace}-rf", f"{namespace}-pool"
    kueue.apply(
        flavor(rf),
        cohort(pool, {}),
        cluster_queue(f"{namespace}-a", {rf: {"cpu": 2}}, cohort=pool),
        cluster_queue(f"{namespace}-b", {rf: {"cpu": 2}}, cohort=pool),
        local_queue(namespace, "lq-a", f"{namespace}-a"),
        local_queue(namespace, "lq-b", f"{namespace}-b"),
        workload(namespace, "borrows", "lq-a", cpu="3"),
    )
    admitted = wait_admitted(kueue, namespace, "borrows")
    assert admitted["status"]["admission"]["clusterQueue"] == f"{namespace}-a"
    # b lends its unused quota and keeps the rest: 1 cpu is left in the cohort.
    kueue.apply(workload(namespace, "too-big", "lq-b", cpu="2"))
    assert "insufficient quota" in wait_pending_reason(kueue, namespace, "too-big")
    active = condition(kueue.get_cluster_queue(f"{namespace}-a"), "Active") or {}
    assert active.get("status") == "True"
    stored = kueue.custom.get_cluster_custom_object(GROUP, VERSION, "cohorts", pool)
    assert condition(stored, "UnsupportedFields") is None


def _warning(api_client: client.ApiClient, name: str) -> Any:
    selector = f"involvedObject.kind=Cohort,involvedObject.name={name}"
    events = (
        client.CoreV1Api(api_client).list_event_for_all_namespaces(field_selector=selector).items
    )
    return next(
        (e for e in events if e.type == "Warning" and e.reason == "UnsupportedFields"), None
    )


def test_a_cohort_tree_is_reported_and_admits_nothing(
    controller: ControllerProcess, kueue: Kueue, namespace: str, api_client: client.ApiClient
) -> None:
    rf, team, org = f"{namespace}-rf", f"{namespace}-team", f"{namespace}-org"
    cq = f"{namespace}-cq"
    kueue.apply(
        flavor(rf),
        cohort(team, {"parentName": org}),
        cluster_queue(cq, {rf: {"cpu": 4}}, cohort=team),
        local_queue(namespace, "lq", cq),
        workload(namespace, "waits", "lq", cpu="1"),
    )
    active = wait_for(
        lambda: condition(kueue.get_cluster_queue(cq), "Active"),
        what="the ClusterQueue's Active condition",
    )
    assert (active["status"], active["reason"]) == ("False", "UnsupportedCohort")
    assert f"Cohort {team} has spec.parentName {org}" in active["message"]
    reported = wait_for(
        lambda: condition(
            kueue.custom.get_cluster_custom_object(GROUP, VERSION, "cohorts", team),
            "UnsupportedFields",
        ),
        what="the Cohort's UnsupportedFields condition",
    )
    assert (reported["status"], reported["reason"]) == ("True", "NotImplemented")
    assert reported["message"].startswith("spec.parentName: hierarchical cohorts")
    event = wait_for(lambda: _warning(api_client, team), what="a Warning Event on the Cohort")
    assert "spec.parentName" in event.message
    reason = wait_pending_reason(kueue, namespace, "waits")
    assert reason.startswith(f"ClusterQueue {cq} is inactive: Cohort {team} has spec.parentName")
    assert "admission" not in kueue.get_workload(namespace, "waits").get("status", {})
    # Removing the parent makes the cohort flat: the Workload is admitted.
    kueue.custom.patch_cluster_custom_object(
        GROUP, VERSION, "cohorts", team, {"spec": {"parentName": None}}
    )
    wait_admitted(kueue, namespace, "waits")
    cleared = wait_for(
        lambda: (
            condition(
                kueue.custom.get_cluster_custom_object(GROUP, VERSION, "cohorts", team),
                "UnsupportedFields",
            )
            is None
        ),
        what="the UnsupportedFields condition to go",
    )
    assert cleared


def test_a_cohort_deleted_and_created_again_is_reported_again(
    controller: ControllerProcess, kueue: Kueue, namespace: str
) -> None:
    name = f"{namespace}-again"

    def reported() -> dict[str, Any] | None:
        try:
            stored = kueue.custom.get_cluster_custom_object(GROUP, VERSION, "cohorts", name)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return condition(stored, "UnsupportedFields")

    kueue.apply(cohort(name, {"fairSharing": {"weight": "2"}}))
    first = wait_for(reported, what="the first UnsupportedFields condition")
    assert first["message"].startswith("spec.fairSharing: ")
    kueue.delete_cluster_scoped("cohorts", name)
    wait_for(lambda: reported() is None, what="the Cohort to go")
    kueue.apply(cohort(name, {"fairSharing": {"weight": "2"}}))
    again = wait_for(reported, what="the UnsupportedFields condition on the new Cohort")
    assert again["message"] == first["message"]
