"""The integrations retry what the API server refused, per key with backoff, without waiting
for an unrelated event (issue 18): a ValidatingAdmissionPolicy refuses the Job integration's
Workload create, its unsuspend, or the pod integration's ungate until the test removes its
binding; nothing else about the Job or pod changes, yet the step then happens."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.cluster.fixtures import wait_for
from tests.cluster.nodes import RUN_SECONDS, queued_job
from tests.integration.kueue import (
    ControllerProcess,
    Kueue,
    cluster_queue,
    flavor,
    local_queue,
)

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


class Refusal:
    """A ValidatingAdmissionPolicy (and its binding, for one namespace) that denies
    requests matching `rule` for which `refuse` (CEL) holds."""

    def __init__(
        self, api_client: client.ApiClient, namespace: str, rule: dict[str, Any], refuse: str
    ) -> None:
        self.api = client.AdmissionregistrationV1Api(api_client)
        self.name = f"refuse-{uuid.uuid4().hex[:8]}"
        self.api.create_validating_admission_policy(
            {
                "metadata": {"name": self.name},
                "spec": {
                    "failurePolicy": "Fail",
                    "matchConstraints": {"resourceRules": [rule]},
                    "validations": [
                        {"expression": f"!({refuse})", "message": f"refused by test {self.name}"}
                    ],
                },
            }
        )
        self.api.create_validating_admission_policy_binding(
            {
                "metadata": {"name": self.name},
                "spec": {
                    "policyName": self.name,
                    "validationActions": ["Deny"],
                    "matchResources": {
                        "namespaceSelector": {
                            "matchLabels": {"kubernetes.io/metadata.name": namespace}
                        }
                    },
                },
            }
        )

    def wait_active(self, attempt: Any) -> None:
        """Until the API server enforces it: `attempt()` makes a dry-run request it must
        refuse (a new policy reaches the API server's admission through an informer)."""

        def refused() -> bool:
            try:
                attempt()
            except ApiException as exc:
                if self.name in str(exc.body):
                    return True
                raise
            return False

        wait_for(refused, timeout=30, what=f"policy {self.name} enforced")

    def lift(self) -> None:
        for delete in (
            self.api.delete_validating_admission_policy_binding,
            self.api.delete_validating_admission_policy,
        ):
            try:
                delete(self.name)
            except ApiException as exc:
                if exc.status != 404:
                    raise


Refuse = Callable[[str, dict[str, Any], str], tuple[Kueue, Refusal]]


@pytest.fixture
def refuse(api_client: client.ApiClient) -> Iterator[Refuse]:
    """`refuse(namespace, rule, expression)`: a queue in the namespace, and a policy that
    refuses what matches there (lifted at the end of the test)."""
    made: list[Refusal] = []

    def make(namespace: str, rule: dict[str, Any], expression: str) -> tuple[Kueue, Refusal]:
        kueue = Kueue(api_client)
        _queue(kueue, namespace)
        made.append(Refusal(api_client, namespace, rule, expression))
        return kueue, made[-1]

    yield make
    for refusal in made:
        refusal.lift()


def _queue(kueue: Kueue, namespace: str) -> None:
    cq = f"{namespace}-cq"
    kueue.apply(
        flavor(f"{namespace}-rf"),
        cluster_queue(cq, {f"{namespace}-rf": {"cpu": 4}}),
        local_queue(namespace, "lq", cq),
    )


def _refused_then_retried(controller: ControllerProcess, what: str, refusal: Refusal) -> None:
    wait_for(
        lambda: f"reconciling {what} failed" in controller.log() and "retrying" in controller.log(),
        timeout=30,
        what=f"the API server refusing {what}",
    )
    refusal.lift()


def test_a_refused_workload_create_is_retried(
    webhook_controller: ControllerProcess,
    api_client: client.ApiClient,
    namespace: str,
    refuse: Refuse,
) -> None:
    kueue, refusal = refuse(
        namespace,
        {
            "apiGroups": ["kueue.x-k8s.io"],
            "apiVersions": ["*"],
            "operations": ["CREATE"],
            "resources": ["workloads"],
        },
        "true",
    )
    probe = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "probe"},
        "spec": {
            "queueName": "lq",
            "podSets": [
                {"name": "main", "count": 1, "template": {"spec": {"containers": [{"name": "c"}]}}}
            ],
        },
    }
    refusal.wait_active(
        lambda: kueue.custom.create_namespaced_custom_object(
            "kueue.x-k8s.io", "v1beta2", namespace, "workloads", probe, dry_run="All"
        )
    )
    client.BatchV1Api(api_client).create_namespaced_job(namespace, queued_job("create"))
    _refused_then_retried(webhook_controller, f"Job {namespace}/create", refusal)
    wait_for(
        lambda: any(
            w["metadata"]["name"] == kueue.workload_name(namespace, "Job", "create")
            for w in kueue.workloads(namespace)
        ),
        timeout=30,
        what="the Workload created by a retry",
    )


def test_a_refused_unsuspend_is_retried(
    webhook_controller: ControllerProcess,
    api_client: client.ApiClient,
    namespace: str,
    refuse: Refuse,
) -> None:
    _kueue, refusal = refuse(
        namespace,
        {
            "apiGroups": ["batch"],
            "apiVersions": ["v1"],
            "operations": ["UPDATE"],
            "resources": ["jobs"],
        },
        "oldObject.spec.suspend == true && object.spec.suspend == false",
    )
    batch = client.BatchV1Api(api_client)
    probe = queued_job("probe")
    del probe["metadata"]["labels"]  # not queued: only the probe's own suspend flag moves
    probe["spec"]["suspend"] = True
    batch.create_namespaced_job(namespace, probe)
    refusal.wait_active(
        lambda: batch.patch_namespaced_job(
            "probe", namespace, {"spec": {"suspend": False}}, dry_run="All"
        )
    )
    batch.create_namespaced_job(namespace, queued_job("resume"))
    _refused_then_retried(webhook_controller, f"Job {namespace}/resume", refusal)
    wait_for(
        lambda: batch.read_namespaced_job("resume", namespace).spec.suspend is False,
        timeout=30,
        what="the Job unsuspended by a retry",
    )


def test_a_refused_ungate_is_retried(
    webhook_controller: ControllerProcess,
    api_client: client.ApiClient,
    namespace: str,
    refuse: Refuse,
) -> None:
    _kueue, refusal = refuse(
        namespace,
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["pods"]},
        "has(oldObject.spec.schedulingGates) && size(oldObject.spec.schedulingGates) > "
        "(has(object.spec.schedulingGates) ? size(object.spec.schedulingGates) : 0)",
    )
    core = client.CoreV1Api(api_client)
    core.create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": "probe"},
            "spec": {
                "schedulingGates": [{"name": "test/probe"}],
                "containers": [{"name": "c", "image": "busybox"}],
            },
        },
    )
    refusal.wait_active(
        lambda: core.patch_namespaced_pod(
            "probe",
            namespace,
            [{"op": "remove", "path": "/spec/schedulingGates"}],
            dry_run="All",
        )
    )
    core.create_namespaced_pod(
        namespace,
        {
            "metadata": {
                "name": "gated",
                "labels": {QUEUE_LABEL: "lq"},
                "annotations": {RUN_SECONDS: "1"},
            },
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
                ],
            },
        },
    )
    _refused_then_retried(webhook_controller, f"pod {namespace}/gated", refusal)
    wait_for(
        lambda: not core.read_namespaced_pod("gated", namespace).spec.scheduling_gates,
        timeout=30,
        what="the pod ungated by a retry",
    )
