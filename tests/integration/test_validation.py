"""Refuse what Kueue refuses, on the real API server: every case of tests/validation_cases.py
is created (or created, reserved, then updated) through kube-apiserver with quotagate's
CRDs installed and its validating webhook registered by `quotagate run
--webhook-manage-config`, and is refused with the field and Kueue's message, by the CRD
(422 Invalid) or by the webhook (403 Forbidden); what Kueue accepts is accepted. The
webhook is not asked about a Workload's status."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.cluster.controlplane import free_port
from tests.cluster.fixtures import wait_for
from tests.integration.kueue import ControllerProcess, delete_webhook_configurations
from tests.unit.api.test_validation import reserved
from tests.validation_cases import CASES, NAMESPACE, Case, cq

pytestmark = pytest.mark.integration

PLURALS = {
    "ResourceFlavor": "resourceflavors",
    "ClusterQueue": "clusterqueues",
    "Cohort": "cohorts",
    "LocalQueue": "localqueues",
    "Workload": "workloads",
    "Topology": "topologies",
    "AdmissionCheck": "admissionchecks",
    "ProvisioningRequestConfig": "provisioningrequestconfigs",
}
GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"


class Objects:
    """Create, read, replace and delete one object of a case, with strict field validation
    (kubectl's default)."""

    def __init__(self, api_client: client.ApiClient) -> None:
        self.api = client.CustomObjectsApi(api_client)

    def _where(self, obj: dict[str, Any]) -> tuple[str | None, str]:
        return obj["metadata"].get("namespace"), PLURALS[obj["kind"]]

    def create(self, obj: dict[str, Any]) -> Any:
        namespace, plural = self._where(obj)
        if namespace:
            return self.api.create_namespaced_custom_object(
                GROUP, VERSION, namespace, plural, obj, field_validation="Strict"
            )
        return self.api.create_cluster_custom_object(
            GROUP, VERSION, plural, obj, field_validation="Strict"
        )

    def get(self, obj: dict[str, Any]) -> Any:
        namespace, plural = self._where(obj)
        name = obj["metadata"]["name"]
        if namespace:
            return self.api.get_namespaced_custom_object(GROUP, VERSION, namespace, plural, name)
        return self.api.get_cluster_custom_object(GROUP, VERSION, plural, name)

    def replace(self, obj: dict[str, Any]) -> Any:
        namespace, plural = self._where(obj)
        name = obj["metadata"]["name"]
        if namespace:
            return self.api.replace_namespaced_custom_object(
                GROUP, VERSION, namespace, plural, name, obj, field_validation="Strict"
            )
        return self.api.replace_cluster_custom_object(
            GROUP, VERSION, plural, name, obj, field_validation="Strict"
        )

    def reserve(self, obj: dict[str, Any]) -> None:
        """Give a Workload a quota reservation through the status subresource."""
        namespace, plural = self._where(obj)
        self.api.patch_namespaced_custom_object_status(
            GROUP,
            VERSION,
            namespace,
            plural,
            obj["metadata"]["name"],
            {"status": reserved(obj)["status"]},
        )

    def delete(self, obj: dict[str, Any]) -> None:
        namespace, plural = self._where(obj)
        name = obj["metadata"]["name"]
        try:
            if namespace:
                self.api.delete_namespaced_custom_object(GROUP, VERSION, namespace, plural, name)
            else:
                self.api.delete_cluster_custom_object(GROUP, VERSION, plural, name)
        except ApiException as exc:
            if exc.status != 404:
                raise


@pytest.fixture(scope="module")
def objects(api_client: client.ApiClient) -> Objects:
    return Objects(api_client)


@pytest.fixture(scope="module")
def webhook(
    kubeconfig_path: str,
    crds_installed: list[str],
    system_namespace: str,
    api_client: client.ApiClient,
    objects: Objects,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ControllerProcess]:
    """`quotagate run` serving and registering its webhooks (managing a namespace of its
    own, so it leaves the cases' objects alone), until the webhook answers."""
    core = client.CoreV1Api(api_client)
    for name in (NAMESPACE, "validation-controller"):
        try:
            core.create_namespace({"metadata": {"name": name}})
        except ApiException as exc:
            if exc.status != 409:
                raise
    process = ControllerProcess(
        kubeconfig_path,
        tmp_path_factory.mktemp("validation"),
        "validation",
        "validation-webhook",
        [
            "--webhook-address",
            f"127.0.0.1:{free_port()}",
            "--webhook-manage-config",
            "--namespace",
            "validation-controller",
        ],
    ).start()
    probe = named(
        cq(
            resourceGroups=[
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {"name": "f", "resources": [{"name": "cpu", "nominalQuota": "-1"}]}
                    ],
                }
            ]
        ),
        "probe",
    )
    try:
        wait_for(lambda: refused_by_webhook(objects, probe), timeout=60, what="the webhook")
        yield process
    finally:
        process.stop()
        delete_webhook_configurations(api_client)
        print("\n".join(process.log().splitlines()[-10:]))


def named(obj: dict[str, Any], name: str) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"]["name"] = name
    return out


def refused_by_webhook(objects: Objects, probe: dict[str, Any]) -> bool:
    try:
        objects.create(probe)
    except ApiException as exc:
        return exc.status == 403 and "denied the request" in message_of(exc)
    objects.delete(probe)
    return False


def message_of(exc: ApiException) -> str:
    try:
        return str(json.loads(exc.body).get("message", exc.body))
    except (TypeError, ValueError):
        return str(exc.body)


def attempt(objects: Objects, case: Case, name: str) -> ApiException | None:
    """Create the case's object (an update: create `old`, reserve it, replace it); the
    refusal, or None."""
    obj = named(case.obj, name)
    try:
        if case.old is not None:
            old = named(case.old, name)
            objects.create(old)
            if case.reserved:
                objects.reserve(old)
            obj["metadata"]["resourceVersion"] = objects.get(old)["metadata"]["resourceVersion"]
            objects.replace(obj)
        else:
            objects.create(obj)
    except ApiException as exc:
        return exc
    finally:
        objects.delete(obj)
    return None


@pytest.mark.parametrize("index", range(len(CASES)), ids=[f"{c.rule} {c.name}" for c in CASES])
def test_kueue_rules_on_the_api_server(
    webhook: ControllerProcess, objects: Objects, index: int
) -> None:
    case = CASES[index]
    refusal = attempt(objects, case, f"validation-{index}")
    if case.accepted:
        assert refusal is None, message_of(refusal) if refusal else ""
        return
    assert refusal is not None, f"{case.rule} accepted"
    message = message_of(refusal)
    if case.by == "webhook":
        assert refusal.status == 403, message
        assert (
            f'admission webhook "{PLURALS[case.kind]}.validate.quotagate.kueue.x-k8s.io" denied the request'
            in message
        )
    else:
        assert refusal.status in (400, 422), message  # 400: strict decoding of an unknown field
    for error in case.errors:
        assert error in message, f"{error!r} not in {message!r}"
    if "detail" in case.extra:
        assert message.endswith(case.extra["detail"]), message


def test_the_status_path_is_not_sent_to_the_webhook(
    webhook: ControllerProcess, objects: Objects
) -> None:
    """A status write that Kueue's webhook would refuse (a usage that is not a multiple of
    the assignment's count) is not refused: the webhook is on the main resource only."""
    from tests.validation_cases import wl

    obj = named(wl(), "validation-status")
    objects.create(obj)
    try:
        status = reserved(obj)["status"]
        status["admission"]["podSetAssignments"][0].update(count=2, resourceUsage={"cpu": "3m"})
        objects.api.patch_namespaced_custom_object_status(
            GROUP, VERSION, NAMESPACE, "workloads", "validation-status", {"status": status}
        )
        usage = objects.get(obj)["status"]["admission"]["podSetAssignments"][0]["resourceUsage"]
        assert usage == {"cpu": "3m"}
    finally:
        objects.delete(obj)
    log = Path(webhook.log_path).read_text(errors="replace")
    assert "Traceback" not in log
