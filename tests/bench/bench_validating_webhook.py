"""What the validating webhook adds to a ClusterQueue create and a Workload create.

    .venv/bin/python -m tests.bench.bench_validating_webhook [--requests 200] [--rounds 4]

Starts a local control plane (etcd + kube-apiserver, tests/cluster) with quotagate's CRDs
and `quotagate run --webhook-address ... --webhook-manage-config` (managing a namespace of
its own, so that only its webhook takes part). Then, per round, creates `--requests`
ClusterQueues and as many Workloads one at a time (the latency a user or a job side sees)
with the ValidatingWebhookConfiguration registered and without it (the order alternates
between rounds), deleting them again between runs. Prints per round and kind the median,
p95 and mean create latency with and without the webhook and their difference, then the
medians over all rounds; the time the webhook spends deciding (`review_response`, in this
process) for the same two objects; and what the controller's own check of Kueue's rules
costs per Workload event (the spec's rules are reused while `metadata.generation` stays,
so a status change costs only the status rules) beside the whole conversion of the event.
Figures, not assertions; the pytest function only checks that the two objects are allowed
and a broken one refused.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from controller.runtime.validating_webhook import review_response

NAMESPACE = "webhook-bench"

CLUSTER_QUEUE: dict[str, Any] = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "ClusterQueue",
    "metadata": {"name": "bench"},
    "spec": {
        "cohortName": "bench",
        "namespaceSelector": {},
        "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [
                    {
                        "name": "default",
                        "resources": [
                            {"name": "cpu", "nominalQuota": "10", "lendingLimit": "5"},
                            {"name": "memory", "nominalQuota": "64Gi"},
                        ],
                    }
                ],
            }
        ],
    },
}

WORKLOAD: dict[str, Any] = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "Workload",
    "metadata": {"name": "bench", "namespace": NAMESPACE},
    "spec": {
        "queueName": "bench",
        "priority": 100,
        "priorityClassRef": {
            "group": "kueue.x-k8s.io",
            "kind": "WorkloadPriorityClass",
            "name": "high",
        },
        "podSets": [
            {
                "name": "main",
                "count": 4,
                "template": {
                    "metadata": {"labels": {"app": "bench"}},
                    "spec": {
                        "containers": [
                            {
                                "name": "c",
                                "image": "busybox",
                                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                            }
                        ],
                        "tolerations": [{"key": "spot", "operator": "Exists"}],
                    },
                },
            }
        ],
    },
}


def _review(obj: dict[str, Any]) -> dict[str, Any]:
    return {"request": {"uid": "u", "operation": "CREATE", "object": obj}}


def decision_seconds(obj: dict[str, Any], times: int = 2000) -> float:
    """The mean time `review_response` takes for one create of `obj`."""
    review = _review(obj)
    started = time.perf_counter()
    for _ in range(times):
        review_response(review)
    return (time.perf_counter() - started) / times


def controller_event_costs(times: int = 5000) -> dict[str, float]:
    """Seconds per Workload event in the controller (`from_api.convert`, spec unchanged),
    and the part of it and of a new spec that is Kueue's rules."""
    from api.validation.workload import validate_workload, validate_workload_spec
    from controller.core.model import from_api

    body = copy.deepcopy(WORKLOAD)
    body["metadata"].update(uid="u", generation=1, creationTimestamp="2026-01-01T00:00:00Z")
    body["status"] = {
        "conditions": [
            {
                "type": t,
                "status": "True",
                "reason": t,
                "message": "x",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
            for t in ("QuotaReserved", "Admitted")
        ],
        "admission": {
            "clusterQueue": "bench",
            "podSetAssignments": [
                {
                    "name": "main",
                    "count": 4,
                    "flavors": {"cpu": "default", "memory": "default"},
                    "resourceUsage": {"cpu": "4", "memory": "4Gi"},
                }
            ],
        },
    }
    converted = from_api.convert(body)
    assert isinstance(converted, from_api.Workload)
    costs = {}
    for label, call in (
        (
            "convert, spec unchanged",
            lambda: from_api.convert(
                body, pod_sets=converted.pod_sets, spec_errors=converted.spec_errors
            ),
        ),
        ("rules, spec unchanged", lambda: validate_workload(body, spec_errors=())),
        ("rules of a new spec", lambda: validate_workload_spec(body)),
    ):
        started = time.process_time()
        for _ in range(times):
            call()
        costs[label] = (time.process_time() - started) / times
    return costs


def _latencies(
    create: Callable[[dict[str, Any]], None],
    template: dict[str, Any],
    prefix: str,
    requests: int,
    delete: Callable[[dict[str, Any]], None],
) -> list[float]:
    objects = []
    for i in range(requests):
        obj = copy.deepcopy(template)
        obj["metadata"]["name"] = f"{prefix}-{i}"
        objects.append(obj)
    seconds = []
    for obj in objects:
        started = time.perf_counter()
        create(obj)
        seconds.append(time.perf_counter() - started)
    for obj in objects:
        delete(obj)
    return seconds


def _summary(seconds: list[float]) -> tuple[float, float, float]:
    ordered = sorted(seconds)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return statistics.median(ordered) * 1000, p95 * 1000, statistics.fmean(ordered) * 1000


def measure(kubeconfig: str, log_dir: Path, requests: int, rounds: int) -> None:
    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException

    from tests.cluster.controlplane import free_port
    from tests.cluster.fixtures import install_crds, wait_for
    from tests.integration.kueue import ControllerProcess

    api_client = config.new_client_from_config(kubeconfig)
    install_crds(api_client)
    core = client.CoreV1Api(api_client)
    for name in (NAMESPACE, "quotagate-system", "webhook-bench-controller"):
        try:
            core.create_namespace({"metadata": {"name": name}})
        except ApiException as exc:
            if exc.status != 409:
                raise
    custom = client.CustomObjectsApi(api_client)
    admission = client.AdmissionregistrationV1Api(api_client)
    group, version = "kueue.x-k8s.io", "v1beta2"

    def create(obj: dict[str, Any]) -> None:
        if obj["kind"] == "Workload":
            custom.create_namespaced_custom_object(group, version, NAMESPACE, "workloads", obj)
        else:
            custom.create_cluster_custom_object(group, version, "clusterqueues", obj)

    def delete(obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        if obj["kind"] == "Workload":
            custom.delete_namespaced_custom_object(group, version, NAMESPACE, "workloads", name)
        else:
            custom.delete_cluster_custom_object(group, version, "clusterqueues", name)

    process = ControllerProcess(
        kubeconfig,
        log_dir,
        "webhook-bench",
        "webhook-bench",
        [
            "--webhook-address",
            f"127.0.0.1:{free_port()}",
            "--webhook-manage-config",
            "--namespace",
            "webhook-bench-controller",
            "--log-level",
            "warning",
        ],
    ).start()
    try:
        registered = wait_for(
            lambda: _registered(admission), timeout=60, what="the ValidatingWebhookConfiguration"
        )
        saved = client.ApiClient().sanitize_for_serialization(registered)
        saved["metadata"] = {"name": saved["metadata"]["name"]}
        broken = copy.deepcopy(CLUSTER_QUEUE)
        broken["metadata"]["name"] = "refused"
        broken["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "-1"
        wait_for(lambda: _refused(create, broken, delete), timeout=60, what="the webhook")
        print(
            f"{requests} creates of each kind per run, one at a time; {rounds} rounds", flush=True
        )
        results: dict[tuple[str, bool], list[float]] = {}
        for round_ in range(rounds):
            order = [True, False] if round_ % 2 == 0 else [False, True]
            for with_webhook in order:
                if with_webhook and not _registered(admission):
                    admission.create_validating_webhook_configuration(saved)
                    wait_for(
                        lambda: _refused(create, broken, delete), timeout=60, what="the webhook"
                    )
                if not with_webhook and _registered(admission):
                    admission.delete_validating_webhook_configuration(saved["metadata"]["name"])
                    wait_for(
                        lambda: not _refused(create, broken, delete), timeout=60, what="no webhook"
                    )
                for kind, template in (("ClusterQueue", CLUSTER_QUEUE), ("Workload", WORKLOAD)):
                    seconds = _latencies(
                        create, template, f"r{round_}-{with_webhook:d}", requests, delete
                    )
                    results.setdefault((kind, with_webhook), []).extend(seconds)
                    median, p95, mean = _summary(seconds)
                    label = "with webhook   " if with_webhook else "without webhook"
                    print(
                        f"round {round_ + 1}  {kind:12s} {label}  median {median:5.2f} ms  "
                        f"p95 {p95:5.2f} ms  mean {mean:5.2f} ms",
                        flush=True,
                    )
        for kind in ("ClusterQueue", "Workload"):
            with_median = _summary(results[(kind, True)])[0]
            without_median = _summary(results[(kind, False)])[0]
            with_p95, without_p95 = (
                _summary(results[(kind, True)])[1],
                _summary(results[(kind, False)])[1],
            )
            print(
                f"all rounds  {kind:12s}  median {with_median:5.2f} ms with the webhook, "
                f"{without_median:5.2f} ms without (+{with_median - without_median:4.2f} ms); "
                f"p95 {with_p95:5.2f} / {without_p95:5.2f} ms"
            )
    finally:
        process.stop()
        for delete_config in (
            admission.delete_validating_webhook_configuration,
            admission.delete_mutating_webhook_configuration,
        ):
            with contextlib.suppress(ApiException):
                delete_config("quotagate")
        api_client.close()


def _registered(admission: Any) -> Any:
    from kubernetes.client.exceptions import ApiException

    try:
        return admission.read_validating_webhook_configuration("quotagate")
    except ApiException:
        return None


def _refused(
    create: Callable[[dict[str, Any]], None],
    obj: dict[str, Any],
    delete: Callable[[dict[str, Any]], None],
) -> bool:
    from kubernetes.client.exceptions import ApiException

    try:
        create(obj)
    except ApiException as exc:
        return exc.status == 403
    delete(obj)
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args(argv)
    for kind, obj in (("ClusterQueue", CLUSTER_QUEUE), ("Workload", WORKLOAD)):
        print(f"review_response, {kind} create: {decision_seconds(obj) * 1e6:6.1f} µs", flush=True)
    for label, seconds in controller_event_costs().items():
        print(f"controller, per Workload event: {label} {seconds * 1e6:6.1f} µs", flush=True)
    import tempfile

    from tests.cluster.controlplane import ControlPlane

    plane = ControlPlane().start()
    try:
        with tempfile.TemporaryDirectory(prefix="webhook-bench-") as log_dir:
            measure(str(plane.kubeconfig), Path(log_dir), args.requests, args.rounds)
    finally:
        plane.stop()
    return 0


def test_the_measured_objects_are_allowed_and_a_broken_one_refused() -> None:
    for obj in (CLUSTER_QUEUE, WORKLOAD):
        assert review_response(_review(obj))["response"]["allowed"] is True
    broken = copy.deepcopy(WORKLOAD)
    broken["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"][
        "pods"
    ] = "1"
    response = review_response(_review(broken))["response"]
    assert response["allowed"] is False and response["status"]["code"] == 403
    assert set(controller_event_costs(times=3)) == {
        "convert, spec unchanged",
        "rules, spec unchanged",
        "rules of a new spec",
    }


if __name__ == "__main__":
    sys.exit(main())
