"""The local control plane is real: API server ready, core scheduling API on, CRDs served."""

from __future__ import annotations

import time

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.cluster.controlplane import ControlPlane


def test_api_server_is_ready_and_fast_to_start(
    cluster: ControlPlane, api_client: client.ApiClient
) -> None:
    version = client.VersionApi(api_client).get_code()
    assert version.git_version.startswith("v1.36")
    started = getattr(cluster, "start_seconds", None)
    print(
        f"\ncontrol plane (etcd + kube-apiserver) ready in {started:.1f}s, RSS {cluster.rss_mib():.0f} MiB"
    )


def test_core_scheduling_podgroup_api_is_enabled(
    api_client: client.ApiClient, namespace: str
) -> None:
    custom = client.CustomObjectsApi(api_client)
    body = {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "gang"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}},
    }
    created = custom.create_namespaced_custom_object(
        "scheduling.k8s.io", "v1alpha2", namespace, "podgroups", body
    )
    assert created["spec"]["schedulingPolicy"]["gang"]["minCount"] == 2


def test_every_generated_crd_is_established(crds_installed: list[str]) -> None:
    assert sorted(crds_installed) == [
        "admissionchecks.kueue.x-k8s.io",
        "clusterqueues.kueue.x-k8s.io",
        "cohorts.kueue.x-k8s.io",
        "localqueues.kueue.x-k8s.io",
        "provisioningrequestconfigs.kueue.x-k8s.io",
        "resourceflavors.kueue.x-k8s.io",
        "topologies.kueue.x-k8s.io",
        "workloadpriorityclasses.kueue.x-k8s.io",
        "workloads.kueue.x-k8s.io",
    ]


# What the CRDs' schema refuses (a negative quota, as in Kueue, is the validating
# webhook's: tests/integration/test_validation.py).
BAD_INPUT = [
    (
        "ClusterQueue",
        "clusterqueues",
        {
            "metadata": {"name": "nan"},
            "spec": {
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [
                            {"name": "f", "resources": [{"name": "cpu", "nominalQuota": "ten"}]}
                        ],
                    }
                ]
            },
        },
        "nominalQuota",
    ),
    (
        "ClusterQueue",
        "clusterqueues",
        {"metadata": {"name": "enum"}, "spec": {"queueingStrategy": "Random"}},
        "queueingStrategy",
    ),
    (
        "Workload",
        "workloads",
        {
            "metadata": {"name": "negative"},
            "spec": {
                "queueName": "q",
                "podSets": [
                    {"name": "main", "count": -1, "template": {"spec": {"containers": []}}}
                ],
            },
        },
        "count",
    ),
]


@pytest.mark.parametrize(
    ("kind", "plural", "body", "field"), BAD_INPUT, ids=[b[3] for b in BAD_INPUT]
)
def test_server_rejects_bad_input_naming_the_field(
    api_client: client.ApiClient,
    crds_installed: list[str],
    namespace: str,
    kind: str,
    plural: str,
    body: dict,
    field: str,
) -> None:
    custom = client.CustomObjectsApi(api_client)
    body = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": kind, **body}
    with pytest.raises(ApiException) as info:
        if kind == "Workload":
            custom.create_namespaced_custom_object(
                "kueue.x-k8s.io", "v1beta2", namespace, plural, body
            )
        else:
            custom.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", plural, body)
    assert info.value.status == 422
    assert field in info.value.body


def test_server_rejects_a_preemption_cost_that_is_not_a_quantity(
    api_client: client.ApiClient, crds_installed: list[str], namespace: str
) -> None:
    custom = client.CustomObjectsApi(api_client)
    workload = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "cost"},
        "spec": {
            "queueName": "q",
            "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": []}}}],
        },
    }
    custom.create_namespaced_custom_object(
        "kueue.x-k8s.io", "v1beta2", namespace, "workloads", workload
    )
    with pytest.raises(ApiException) as info:
        custom.patch_namespaced_custom_object_status(
            "kueue.x-k8s.io",
            "v1beta2",
            namespace,
            "workloads",
            "cost",
            {"status": {"preemptionCost": "abc"}},
        )
    assert info.value.status == 422
    assert "preemptionCost" in info.value.body
    ok = custom.patch_namespaced_custom_object_status(
        "kueue.x-k8s.io",
        "v1beta2",
        namespace,
        "workloads",
        "cost",
        {"status": {"preemptionCost": "3"}},
    )
    assert ok["status"]["preemptionCost"] == "3"
    time.sleep(0)  # keep the namespace fixture order explicit


def test_helm_is_built_as_helms_release_build_is() -> None:
    """helm's release build stamps its version and the Kubernetes version `helm template`
    assumes without a cluster; without them it believes it renders for v1.20.0 and refuses
    the chart's kubeVersion constraint (issue 17)."""
    from tools.chart import CHART, helm

    version = helm("version", "--template", "{{.Version}}")
    assert version.returncode == 0 and version.stdout.startswith("v3."), version
    rendered = helm("template", "qg", str(CHART))
    assert rendered.returncode == 0, rendered.stderr
    assert "kind: Deployment" in rendered.stdout
