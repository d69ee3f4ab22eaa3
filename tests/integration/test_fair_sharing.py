"""Fair sharing on the real API server (issue 20): `quotagate run` with the configuration's
`fairSharing`, a three-level tree of Cohorts with weights, the shares written to the
ClusterQueues' and Cohorts' `status.fairSharing` and exported as Kueue's gauges,
admission by share, and reclamation that takes from the largest share."""

from __future__ import annotations

import contextlib
import io
import json
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest

from controller.kubectl.plugin import main as plugin_main
from tests.cluster.fixtures import wait_for
from tests.integration.conftest import StartConfigured
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
    workload,
)
from tests.integration.test_cohorts import _quota, cohort


@pytest.fixture
def fair_controller(configured_controller: StartConfigured) -> Callable[[str], ControllerProcess]:
    """`quotagate run --config` with `fairSharing: {}`, managing only the test's namespace."""
    return lambda namespace: configured_controller({"fairSharing": {}}, namespace)


def weighted_share(kueue: Kueue, plural: str, name: str) -> int | None:
    stored = kueue.custom.get_cluster_custom_object(GROUP, VERSION, plural, name)
    share = (stored.get("status") or {}).get("fairSharing") or {}
    value = share.get("weightedShare")
    return None if value is None else int(value)


def gauges(port: int, metric: str) -> dict[str, float]:
    """`kueue_<metric>` samples by their first label's value."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(f"kueue_{metric}{{"):
            labels, value = line[len(metric) + 7 :].rsplit("} ", 1)
            first = labels.split(",")[0].split("=", 1)[1].strip('"')
            out[first] = float(value)
    return out


def whatif(kubeconfig: str, namespace: str, queue: str, requests: str) -> dict[str, Any]:
    """`kubectl quotagate whatif … -o json` against the real API server."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = plugin_main(
            [
                "whatif",
                "-n",
                namespace,
                "--queue",
                queue,
                "--requests",
                requests,
                "-o",
                "json",
                "--kubeconfig",
                kubeconfig,
            ]
        )
    assert code == 0, out.getvalue()
    answer: dict[str, Any] = json.loads(out.getvalue())
    return answer


def test_a_tree_shares_by_weight_and_reclaims_from_the_largest_share(
    fair_controller: Any, kueue: Kueue, namespace: str, kubeconfig_path: str
) -> None:
    """org ← dept-x (x1, x2: 2 cpus each) and org ← dept-y (y1: 4 cpus); 8 cpus in all.

    x1 takes 7 (its 2, x2's 2 and 3 of y1's through org): x1's share is 5 borrowed of the
    8 dept-x could get, 625 per mille; dept-x's, 3 of 8, 375; y1 and dept-y borrow nothing.
    Then y1 asks for its 4 (1 is free): a reclamation within its nominal quota takes from
    the largest share, x1, its first candidate (lower priority)."""
    process = fair_controller(namespace)
    rf = f"{namespace}-rf"
    org, dept_x, dept_y = (f"{namespace}-{n}" for n in ("org", "dept-x", "dept-y"))
    x1, x2, y1 = (f"{namespace}-{n}" for n in ("x1", "x2", "y1"))
    reclaim = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}
    queues = []
    for name, nominal, parent in ((x1, 2, dept_x), (x2, 2, dept_x), (y1, 4, dept_y)):
        queue = cluster_queue(name, {rf: {"cpu": nominal}}, cohort=parent)
        queue["spec"]["preemption"] = reclaim
        queue["spec"]["fairSharing"] = {"weight": "1"}
        queues.append(queue)
    kueue.apply(
        flavor(rf),
        cohort(org, {}),
        cohort(dept_x, {"parentName": org, "fairSharing": {"weight": "1"}}),
        cohort(dept_y, _quota(rf, "0", org)),
        *queues,
        local_queue(namespace, "lq-x1", x1),
        local_queue(namespace, "lq-y1", y1),
        # x1-big's priority puts x1-more first among x1's candidates whatever their
        # reservation times (whole seconds, often equal).
        workload(namespace, "x1-big", "lq-x1", cpu="4", priority=1),
    )
    wait_admitted(kueue, namespace, "x1-big")
    kueue.apply(workload(namespace, "x1-more", "lq-x1", cpu="3"))
    wait_admitted(kueue, namespace, "x1-more")

    wait_for(
        lambda: weighted_share(kueue, "clusterqueues", x1) == 625,
        what="x1's weighted share in its status",
    )
    assert weighted_share(kueue, "clusterqueues", x2) == 0
    assert weighted_share(kueue, "clusterqueues", y1) == 0
    wait_for(lambda: weighted_share(kueue, "cohorts", dept_x) == 375, what="dept-x's share")
    assert weighted_share(kueue, "cohorts", dept_y) == 0
    assert weighted_share(kueue, "cohorts", org) == 0  # a root's share is 0
    stored_dept_x = kueue.custom.get_cluster_custom_object(GROUP, VERSION, "cohorts", dept_x)
    assert condition(stored_dept_x, "UnsupportedFields") is None  # the weight is used
    assert gauges(process.metrics_port, "cluster_queue_weighted_share")[x1] == 625.0
    assert gauges(process.metrics_port, "cohort_weighted_share")[dept_x] == 375.0

    # The kubectl plugin decides as the controller does: it sees the shares in the status.
    answer = whatif(kubeconfig_path, namespace, "lq-y1", "cpu=4")
    assert answer["decision"] == "preempt", answer
    assert answer["victims"] == [
        {
            "workload": f"{namespace}/x1-more",
            "clusterQueue": x1,
            "reason": "InCohortReclamation",
            "pods": 1,
        }
    ]
    assert answer["engineSettings"].startswith("fair sharing on")

    kueue.apply(workload(namespace, "y1-own", "lq-y1", cpu="4"))
    evicted = wait_for(
        lambda: (
            (c := condition(kueue.get_workload(namespace, "x1-more"), "Preempted"))
            and c["status"] == "True"
            and c
        ),
        what="x1-more preempted",
    )
    assert evicted["reason"] == "InCohortReclamation"
    assert f"preemptee path: /{org}/{dept_x}/{x1}" in evicted["message"]
    assert condition(kueue.get_workload(namespace, "x1-big"), "Preempted") is None
    kueue.acknowledge_eviction(namespace, "x1-more")
    wait_admitted(kueue, namespace, "y1-own")
    # x1 now uses 4 of the tree's 8: it borrows 2, dept-x nothing (4 of its 4).
    wait_for(lambda: weighted_share(kueue, "clusterqueues", x1) == 250, what="x1's new share")
    wait_for(lambda: weighted_share(kueue, "cohorts", dept_x) == 0, what="dept-x's new share")


def test_without_fair_sharing_a_weight_is_reported_and_no_share_is_written(
    controller: ControllerProcess, kueue: Kueue, namespace: str
) -> None:
    """The module's controller runs without `fairSharing`: a weight is reported as having
    no effect, and `status.fairSharing` stays unset, as Kueue leaves it."""
    rf, name = f"{namespace}-rf", f"{namespace}-weighted"
    queue = cluster_queue(name, {rf: {"cpu": 1}})
    queue["spec"]["fairSharing"] = {"weight": "2"}
    kueue.apply(flavor(rf), queue)
    found = wait_for(
        lambda: condition(kueue.get_cluster_queue(name), "UnsupportedFields"),
        what="the UnsupportedFields condition",
    )
    assert "fair sharing is off in the controller configuration" in found["message"]
    assert (kueue.get_cluster_queue(name).get("status") or {}).get("fairSharing") is None
