"""The Cohort kind on the real API server (issue 20): the CRD validates what Kueue
validates, a flat explicit Cohort shares quota like an implicit cohort, a three-level tree
shares quota within each level's limits, and a cycle makes the queues inactive."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
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


def _quota(rf: str, nominal: str, parent: str | None = None, **limits: str) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "resourceGroups": [
            {
                "coveredResources": ["cpu"],
                "flavors": [
                    {"name": rf, "resources": [{"name": "cpu", "nominalQuota": nominal, **limits}]}
                ],
            }
        ]
    }
    if parent:
        spec["parentName"] = parent
    return spec


def test_the_crd_rejects_a_limit_that_is_not_a_quantity(kueue: Kueue, namespace: str) -> None:
    """The schema refuses what is no quantity, naming the field; a limit on a root Cohort
    or a negative one is the validating webhook's to refuse, with Kueue's message
    (tests/validation_cases.py, CO-2 and CO-4)."""
    with pytest.raises(ApiException) as caught:
        kueue.apply(cohort(f"{namespace}-bad", _quota("rf", "4", "org", borrowingLimit="lots")))
    assert caught.value.status == 422
    message = json.loads(caught.value.body)["message"]
    assert "borrowingLimit" in message and "should match" in message, message
    # A limit under a parent is accepted, as Kueue's webhook accepts it.
    kueue.apply(cohort(f"{namespace}-good", _quota("rf", "4", "org", lendingLimit="1")))


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


def test_a_three_level_tree_shares_quota_within_each_levels_limits(
    controller: ControllerProcess, kueue: Kueue, namespace: str
) -> None:
    """org (2 cpus of its own) ← dept (may borrow 1 from org) ← team-a (2), team-b (2);
    org ← research ← lab (2). The tree holds 8 cpus; dept may use 5 of them."""
    rf = f"{namespace}-rf"
    org, dept, research = (f"{namespace}-{n}" for n in ("org", "dept", "research"))
    team_a, team_b, lab = (f"{namespace}-{n}" for n in ("team-a", "team-b", "lab"))
    kueue.apply(
        flavor(rf),
        cohort(org, _quota(rf, "2")),
        cohort(dept, _quota(rf, "0", org, borrowingLimit="1")),
        cohort(research, {"parentName": org}),
        cluster_queue(team_a, {rf: {"cpu": 2}}, cohort=dept),
        cluster_queue(team_b, {rf: {"cpu": 2}}, cohort=dept),
        cluster_queue(lab, {rf: {"cpu": 2}}, cohort=research),
        local_queue(namespace, "lq-a", team_a),
        local_queue(namespace, "lq-b", team_b),
        local_queue(namespace, "lq-lab", lab),
        workload(namespace, "wide", "lq-a", cpu="5"),
    )
    wide = wait_admitted(kueue, namespace, "wide")  # team-b's 2 and 1 from org
    assert wide["status"]["admission"]["clusterQueue"] == team_a
    kueue.apply(workload(namespace, "more", "lq-b", cpu="1"))
    reason = wait_pending_reason(kueue, namespace, "more")
    assert reason == (
        f"insufficient quota for cpu in flavor {rf}: requested 1, available 0 (nominal 2, "
        f"reserved 0, borrowable 0); limited by the borrowingLimit of Cohort {dept} "
        "(1 of 1 borrowed)"
    )
    # lab takes what is left of the tree: its own 2 and org's last 1.
    kueue.apply(workload(namespace, "lab-job", "lq-lab", cpu="3"))
    wait_admitted(kueue, namespace, "lab-job")
    kueue.apply(workload(namespace, "lab-more", "lq-lab", cpu="1"))
    assert wait_pending_reason(kueue, namespace, "lab-more").endswith(
        f"limited by the quota of Cohort {org} (8 of 8 in use)"
    )
    for name in (team_a, team_b, lab):
        active = condition(kueue.get_cluster_queue(name), "Active") or {}
        assert active.get("status") == "True", (name, active)
    # A cycle of parents: every queue of the tree is inactive, as in Kueue.
    kueue.custom.patch_cluster_custom_object(
        GROUP, VERSION, "cohorts", org, {"spec": {"parentName": dept}}
    )
    inactive = wait_for(
        lambda: (
            (c := condition(kueue.get_cluster_queue(lab), "Active"))
            and c["status"] == "False"
            and c
        ),
        what="the cycle to make the queues inactive",
    )
    assert inactive["reason"] == "UnsupportedCohort"
    assert "in a tree with a cycle" in inactive["message"]
    kueue.custom.patch_cluster_custom_object(
        GROUP, VERSION, "cohorts", org, {"spec": {"parentName": None}}
    )
    wait_for(
        lambda: (condition(kueue.get_cluster_queue(lab), "Active") or {}).get("status") == "True",
        what="the queues to be active again",
    )


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
