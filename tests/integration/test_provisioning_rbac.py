"""The ProvisioningRequest check under the chart's RBAC: the controller runs from this
checkout with nothing but the token of the chart's controller ServiceAccount (real helm
install), and drives a ProvisioningRequest through a failure, the retry's eviction (the
first request and its PodTemplate deleted), a second attempt and the provisioned
capacity, to the admission. Every call the check makes (watch the AdmissionChecks, the
configs and the requests; patch the check's Active condition; create and delete requests
and PodTemplates; patch the Workload's check state; record Events) goes through the
chart's ClusterRole, so a verb the chart lacks is refused and fails this test. Its own
module: no controller with the test's credentials runs beside it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubernetes import client

from tests.cluster.fixtures import install_crds, wait_for
from tests.integration.chart_service_account import chart_controller
from tests.integration.kueue import Kueue, condition, rbac_refusals
from tests.integration.test_admission_checks import checks_of, wait_reserved_with_checks
from tests.integration.test_provisioning_request import (
    get_request,
    gpu_workload,
    provisioner_says,
    setup,
)


def test_the_provisioning_request_check_needs_no_more_than_the_charts_rbac(
    kubeconfig_path: str,
    crds_installed: list[str],
    system_namespace: str,
    api_client: client.ApiClient,
    namespace: str,
    tmp_path: Path,
) -> None:
    install_crds(api_client, Path(__file__).parent / "crds")
    kueue = Kueue(api_client)
    check = setup(kueue, namespace)
    kueue.apply(gpu_workload(namespace, "r"))
    release = f"qp{namespace[-6:]}"
    with chart_controller(
        kubeconfig_path, system_namespace, api_client, release, tmp_path
    ) as chart:
        process = chart.start(tmp_path, "chart-provisioning")
        try:
            _drive(kueue, namespace, check, api_client)
            refused = rbac_refusals(process.log())
            assert not refused, "\n".join(refused)[-2000:]
        finally:
            process.stop()


def _drive(kueue: Kueue, namespace: str, check: str, api_client: client.ApiClient) -> None:
    active = wait_for(
        lambda: condition(
            kueue.custom.get_cluster_custom_object(
                "kueue.x-k8s.io", "v1beta2", "admissionchecks", check
            ),
            "Active",
        ),
        what="the check Active (its status patched)",
        timeout=60,
    )
    assert active["status"] == "True"
    wait_reserved_with_checks(kueue, namespace, "r")
    first = f"r-{check}-1"
    wait_for(lambda: get_request(kueue, namespace, first), what="the first request created")
    provisioner_says(kueue, namespace, first, "Failed", "out of GPUs")

    _until(kueue, namespace, "Evicted", "r evicted for a retry (its check state patched)")
    wait_for(lambda: get_request(kueue, namespace, first) is None, what="the request deleted")
    core = client.CoreV1Api(api_client)
    templates = core.list_namespaced_pod_template(namespace).items
    assert not [t.metadata.name for t in templates if first in t.metadata.name]
    kueue.acknowledge_eviction(namespace, "r")
    second = f"r-{check}-2"
    wait_for(lambda: get_request(kueue, namespace, second), what="the second request created")
    provisioner_says(kueue, namespace, second, "Provisioned", "capacity is there")

    wl = _until(kueue, namespace, "Admitted", "r admitted")
    assert checks_of(wl)[check]["state"] == "Ready"
    events = core.list_namespaced_event(namespace, field_selector="involvedObject.name=r").items
    assert "ProvisioningRequestCreated" in {e.reason for e in events}


def _until(kueue: Kueue, namespace: str, type_: str, what: str) -> dict[str, Any]:
    """Workload r once its condition `type_` is True."""

    def true() -> dict[str, Any] | None:
        wl = kueue.get_workload(namespace, "r")
        return wl if (condition(wl, type_) or {}).get("status") == "True" else None

    found: dict[str, Any] = wait_for(true, what=what)
    return found
