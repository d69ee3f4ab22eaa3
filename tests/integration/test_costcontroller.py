"""The reference cost controller against the real API server, under its shipped RBAC."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.cluster.build import bin_dir
from tests.cluster.fixtures import wait_for
from tests.integration.kueue import GROUP, VERSION, Kueue, rbac_refusals, workload

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cost_kubeconfig(
    kubeconfig_path: str, crds_installed: list[str], system_namespace: str, tmp_path_factory
) -> str:  # type: ignore[no-untyped-def]
    """A kubeconfig holding a token of the cost controller's ServiceAccount, bound only to
    config/rbac/costcontroller.yaml."""
    subprocess.run(
        [
            str(bin_dir() / "kubectl"),
            "--kubeconfig",
            kubeconfig_path,
            "apply",
            "-f",
            str(REPO / "config/rbac/costcontroller.yaml"),
        ],
        check=True,
        capture_output=True,
    )
    from kubernetes import config

    admin = config.new_client_from_config(kubeconfig_path)
    token = (
        client.CoreV1Api(admin)
        .create_namespaced_service_account_token(
            "quotagate-cost-controller", system_namespace, {"spec": {"expirationSeconds": 3600}}
        )
        .status.token
    )
    kubeconfig = yaml.safe_load(Path(kubeconfig_path).read_text())
    kubeconfig["users"] = [{"name": "cost", "user": {"token": token}}]
    kubeconfig["contexts"][0]["context"]["user"] = "cost"
    path = tmp_path_factory.mktemp("cost") / "kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig))
    return str(path)


def start(kubeconfig: str, log: Path, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "costcontroller",
            "--kubeconfig",
            kubeconfig,
            "--resync",
            "2",
            *extra,
        ],
        cwd=REPO,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def stop(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(15)
    except subprocess.TimeoutExpired:
        process.kill()


def test_cost_is_base_plus_preempted_evictions_under_least_privilege(
    cost_kubeconfig: str, api_client: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    kueue = Kueue(api_client)
    kueue.apply(workload(namespace, "twice", "lq"), workload(namespace, "other", "lq"))
    kueue.patch_workload_status(
        namespace,
        "twice",
        {
            "schedulingStats": {
                "evictions": [{"reason": "Preempted", "underlyingCause": "", "count": 2}]
            }
        },
    )
    kueue.patch_workload_status(
        namespace,
        "other",
        {
            "schedulingStats": {
                "evictions": [{"reason": "ClusterQueueStopped", "underlyingCause": "", "count": 3}]
            }
        },
    )
    process = start(cost_kubeconfig, tmp_path / "cost.log", "--policy-arg", "base=10")
    try:
        twice = wait_for(
            lambda: kueue.get_workload(namespace, "twice").get("status", {}).get("preemptionCost"),
            what="cost on twice",
        )
        assert twice == "12"
        other = wait_for(
            lambda: kueue.get_workload(namespace, "other").get("status", {}).get("preemptionCost"),
            what="cost on other",
        )
        assert other == "10"
        # A third preemption is noticed from the watch.
        kueue.patch_workload_status(
            namespace,
            "twice",
            {
                "schedulingStats": {
                    "evictions": [{"reason": "Preempted", "underlyingCause": "", "count": 3}]
                }
            },
        )
        wait_for(
            lambda: kueue.get_workload(namespace, "twice")["status"]["preemptionCost"] == "13",
            what="cost 13",
        )
        managers = {
            m["manager"]
            for m in kueue.get_workload(namespace, "twice")["metadata"]["managedFields"]
        }
        assert "quotagate-cost-controller" in managers
    finally:
        stop(process)
    log = (tmp_path / "cost.log").read_text()
    assert not rbac_refusals(log), log[-2000:]

    # The same credentials cannot touch the spec: least privilege, enforced by RBAC.
    from kubernetes import config

    restricted = client.CustomObjectsApi(config.new_client_from_config(cost_kubeconfig))
    with pytest.raises(ApiException) as info:
        restricted.patch_namespaced_custom_object(
            GROUP, VERSION, namespace, "workloads", "twice", {"spec": {"active": False}}
        )
    assert info.value.status == 403
    with pytest.raises(ApiException) as info:
        restricted.delete_namespaced_custom_object(GROUP, VERSION, namespace, "workloads", "twice")
    assert info.value.status == 403


def test_a_policy_that_raises_or_returns_garbage_writes_nothing_and_keeps_running(
    cost_kubeconfig: str, api_client: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    kueue = Kueue(api_client)
    kueue.apply(workload(namespace, "bomb", "lq"), workload(namespace, "junk", "lq"))
    log = tmp_path / "garbage.log"
    process = start(cost_kubeconfig, log, "--policy", "tests.integration.policies.garbage:Garbage")
    try:
        wait_for(
            lambda: "policy raised RuntimeError" in log.read_text(), what="the exception logged"
        )
        wait_for(
            lambda: "expected a Quantity or None" in log.read_text(), what="the garbage logged"
        )
        assert process.poll() is None, "the controller must keep running"
        for name in ("bomb", "junk"):
            assert "preemptionCost" not in (kueue.get_workload(namespace, name).get("status") or {})
        assert f"{namespace}/bomb" in log.read_text()
    finally:
        stop(process)


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        # (priority, earlier Preempted evictions) per victim
        ((5, 2), (5, 0), "b"),  # equal priority: the cheaper (never preempted) goes
        ((1, 5), (5, 0), "a"),  # lower priority goes first, whatever its cost
    ],
    ids=["cheaper-of-equal-priority", "cost-never-overrides-priority"],
)
def test_admission_controller_uses_the_written_costs(
    controller,  # type: ignore[no-untyped-def]
    cost_kubeconfig: str,
    api_client: client.ApiClient,
    namespace: str,
    tmp_path: Path,
    a: tuple[int, int],
    b: tuple[int, int],
    expected: str,
) -> None:
    from tests.integration.kueue import cluster_queue, condition, flavor, local_queue, wait_admitted

    kueue = Kueue(api_client)
    cq = f"{namespace}-cq"
    kueue.apply(
        flavor(f"{namespace}-rf"),
        cluster_queue(
            cq, {f"{namespace}-rf": {"cpu": 4}}, preemption={"withinClusterQueue": "LowerPriority"}
        ),
        local_queue(namespace, "lq", cq),
        workload(namespace, "a", "lq", cpu="2", priority=a[0]),
        workload(namespace, "b", "lq", cpu="2", priority=b[0]),
    )
    for name, (_, evictions) in (("a", a), ("b", b)):
        wait_admitted(kueue, namespace, name)
        kueue.patch_workload_status(
            namespace,
            name,
            {
                "schedulingStats": {
                    "evictions": [
                        {"reason": "Preempted", "underlyingCause": "", "count": evictions}
                    ]
                }
            },
        )
    process = start(cost_kubeconfig, tmp_path / "cost.log")
    try:
        for name, (_, evictions) in (("a", a), ("b", b)):
            wait_for(
                lambda n=name, e=evictions: (
                    kueue.get_workload(namespace, n).get("status", {}).get("preemptionCost")
                    == str(e)
                ),
                what=f"cost of {name}",
            )
        kueue.apply(workload(namespace, "urgent", "lq", cpu="2", priority=100))
        victim = wait_for(
            lambda: next(
                (n for n in ("a", "b") if condition(kueue.get_workload(namespace, n), "Evicted")),
                None,
            ),
            what="a victim",
        )
        assert victim == expected
    finally:
        stop(process)
