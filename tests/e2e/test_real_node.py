"""The chart on a real node (issue 44): quotagate's image, built from Debian's and PyPI's
packages (image/), runs under a real kubelet with containerd and runc
(tests/cluster/kubelet.py) beside the fake nodes.

The chart is installed with the built image, two controller replicas and the cost
controller, all placed on the real node. What the kubelet proves and a process on this
host could not: the image starts as its non-root user with a read-only root filesystem;
the probes are the kubelet's; each pod reaches the API server through the `kubernetes`
Service with nothing but the ServiceAccount token the kubelet mounted; the API server
calls the webhook through the Service's EndpointSlice, which lists only Ready pods; the
replicas elect a leader; a deleted leader ends on SIGTERM with 0, the other takes over and
the Deployment's new pod becomes Ready. A Job from config/samples/ (its image busybox from
Debian's package) is queued, admitted, and its pods really run on the real node.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from image.build import Built
from tests.cluster.fixtures import wait_for
from tests.cluster.kubelet import TOLERATION, RealNode
from tests.integration.kueue import (
    Kueue,
    cluster_queue,
    condition,
    flavor,
    local_queue,
    rbac_refusals,
)
from tools.chart import CHART, helm

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "config" / "samples"


@pytest.fixture(scope="module")
def release(
    real_node: RealNode,
    quotagate_image: Built,
    kubeconfig_path: str,
    api_client: client.ApiClient,
    crds_installed: list[str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, str]]:
    """The chart installed with the built image, two controller replicas, every pod on the
    real node; returned once both Deployments are available."""
    name, namespace = f"qg{uuid.uuid4().hex[:6]}", f"qgs-{uuid.uuid4().hex[:6]}"
    repository, tag = quotagate_image.name.rsplit(":", 1)
    placement = {"nodeSelector": real_node.node_selector, "tolerations": [TOLERATION]}
    values = tmp_path_factory.mktemp("chart") / "values.yaml"
    values.write_text(
        yaml.safe_dump(
            {
                "image": {"repository": repository, "tag": tag},
                "controller": {"replicas": 2, **placement},
                "costController": placement,
            }
        )
    )
    installed = helm(
        "install",
        name,
        str(CHART),
        "--namespace",
        namespace,
        "--create-namespace",
        "--skip-crds",  # the session installed the same CRDs already
        "--values",
        str(values),
        kubeconfig=kubeconfig_path,
    )
    assert installed.returncode == 0, installed.stderr
    fullname = f"{name}-quotagate"
    apps = client.AppsV1Api(api_client)
    try:
        for deployment, replicas in (
            (f"{fullname}-controller", 2),
            (f"{fullname}-cost-controller", 1),
        ):
            try:
                wait_for(
                    lambda d=deployment, r=replicas: (
                        apps.read_namespaced_deployment(d, namespace).status.available_replicas == r
                    ),
                    timeout=120,
                    what=f"Deployment {deployment} available on the real node",
                )
            except TimeoutError as exc:
                raise AssertionError(
                    f"{exc}\n{_pods_report(api_client, namespace, real_node)}"
                ) from None
        yield {"name": name, "namespace": namespace, "fullname": fullname}
    finally:
        helm("uninstall", name, "--namespace", namespace, kubeconfig=kubeconfig_path)
        client.CoreV1Api(api_client).delete_namespace(namespace)


def _pods(api_client: client.ApiClient, namespace: str, component: str) -> list[Any]:
    return (
        client.CoreV1Api(api_client)
        .list_namespaced_pod(namespace, label_selector=f"app.kubernetes.io/component={component}")
        .items
    )


def _ready(pod: Any) -> bool:
    conditions = {c.type: c.status for c in pod.status.conditions or []}
    return pod.status.phase == "Running" and conditions.get("Ready") == "True"


def _pods_report(api_client: client.ApiClient, namespace: str, node: RealNode) -> str:
    """What the pods of `namespace` are doing and what their containers wrote (for failures)."""
    report = []
    for pod in client.CoreV1Api(api_client).list_namespaced_pod(namespace).items:
        statuses = [
            (s.name, s.ready, s.restart_count, s.state.to_dict())
            for s in pod.status.container_statuses or []
        ]
        report.append(f"{pod.metadata.name} {pod.status.phase} on {pod.spec.node_name}: {statuses}")
        for container in pod.spec.containers:
            log = node.container_log(namespace, pod.metadata.name, container.name)
            report.append("  " + "\n  ".join(log.splitlines()[-15:]))
    return "\n".join(report)


def _holder(api_client: client.ApiClient, namespace: str) -> str:
    lease = client.CoordinationV1Api(api_client).read_namespaced_lease(
        "quotagate-controller", namespace
    )
    return str(lease.spec.holder_identity or "")


def _leader_pod(api_client: client.ApiClient, namespace: str) -> str:
    """The controller pod holding the Lease (its identity starts with the pod's name)."""
    holder = _holder(api_client, namespace)
    names = [p.metadata.name for p in _pods(api_client, namespace, "controller")]
    leaders = [name for name in names if holder.startswith(name)]
    return leaders[0] if len(leaders) == 1 else ""


def _queue_for_the_real_node(kueue: Kueue, namespace: str, node: RealNode) -> None:
    """A flavor of the real node (its hostname and taint), a ClusterQueue with room for the
    sample Job, and the LocalQueue `main` the sample names."""
    name = f"{namespace}-real"
    kueue.apply(
        flavor(name, node_labels=node.node_selector, tolerations=[TOLERATION]),
        cluster_queue(name, {name: {"cpu": 4, "memory": "16Gi"}}),
        local_queue(namespace, "main", name),
    )


def _sample_priorities(api_client: client.ApiClient) -> None:
    """config/samples/01-priorities.yaml (the sample Job names `low`)."""
    custom = client.CustomObjectsApi(api_client)
    for document in yaml.safe_load_all((SAMPLES / "01-priorities.yaml").read_text()):
        try:
            custom.create_cluster_custom_object(
                "kueue.x-k8s.io", "v1beta2", "workloadpriorityclasses", document
            )
        except ApiException as exc:
            if exc.status != 409:
                raise


def test_the_controller_runs_as_the_images_non_root_user_ready_through_the_kubelets_probes(
    release: dict[str, str],
    api_client: client.ApiClient,
    real_node: RealNode,
    quotagate_image: Built,
) -> None:
    namespace = release["namespace"]
    pods = _pods(api_client, namespace, "controller") + _pods(
        api_client, namespace, "cost-controller"
    )
    assert len(pods) == 3
    for pod in pods:
        assert pod.spec.node_name == real_node.name
        assert _ready(pod), _pods_report(api_client, namespace, real_node)
        [status] = pod.status.container_statuses
        # The image the kubelet ran is the one built (its ID: the config's digest).
        assert status.image_id == quotagate_image.image_id, (status.image_id, quotagate_image)
        assert status.restart_count == 0
        # runAsNonRoot: the kubelet started it only because the image's user is 65532; and
        # on a read-only root filesystem (the image's bytecode is compiled in).
        assert pod.spec.security_context.run_as_non_root is True
        assert pod.spec.containers[0].security_context.read_only_root_filesystem is True
        # Its own address on the node's pod network (and so its own ports).
        assert pod.status.pod_ip.startswith(f"10.88.{real_node.network.index}.")
    # Leader election across the two replicas: one holds the Lease.
    leader = wait_for(lambda: _leader_pod(api_client, namespace), timeout=60, what="a leader")
    assert leader in {p.metadata.name for p in pods}
    # Internal certificate management, from inside the pod: the Secret holds a CA, and the
    # webhook configuration has it as its bundle and names the chart's Service.
    fullname = release["fullname"]
    secret = client.CoreV1Api(api_client).read_namespaced_secret(
        f"{fullname}-webhook-cert", namespace
    )
    ca = base64.b64decode(secret.data["ca.crt"])
    admission = client.AdmissionregistrationV1Api(api_client)
    for config in (
        admission.read_mutating_webhook_configuration(fullname),
        admission.read_validating_webhook_configuration(fullname),
    ):
        for hook in config.webhooks:
            assert base64.b64decode(hook.client_config.ca_bundle) == ca
            assert hook.client_config.service.name == f"{fullname}-webhook"


def test_a_sample_job_is_admitted_through_the_webhook_and_its_pods_run_on_the_real_node(
    release: dict[str, str], api_client: client.ApiClient, real_node: RealNode, namespace: str
) -> None:
    kueue = Kueue(api_client)
    # Kueue's kinds go through the validating webhook (Service, TLS): a broken ClusterQueue
    # is refused with Kueue's message.
    broken = cluster_queue(f"{namespace}-broken", {f"{namespace}-rf": {"cpu": 4}})
    broken["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["lendingLimit"] = "1"
    with pytest.raises(ApiException) as refused:
        _create_through_webhook(lambda: kueue.apply(broken))
    assert refused.value.status == 403
    assert (
        'lendingLimit: Invalid value: "1": must be nil when cohort is empty'
        in (json.loads(refused.value.body)["message"])
    )
    _sample_priorities(api_client)
    _queue_for_the_real_node(kueue, namespace, real_node)
    # config/samples/10-job.yaml as it is, but for its image (no registry here: busybox from
    # Debian's package) and its 20 s of sleep (2 s: the node's 2 CPUs run one pod at a time).
    job = yaml.safe_load((SAMPLES / "10-job.yaml").read_text())
    job["metadata"]["namespace"] = namespace
    [container] = job["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["sleep", "20"]
    assert real_node.busybox is not None
    container["image"] = real_node.busybox.name
    container["command"] = ["sleep", "2"]
    batch = client.BatchV1Api(api_client)
    created = _create_through_webhook(lambda: batch.create_namespaced_job(namespace, job))
    assert created.spec.suspend is True  # the webhook, reached through its Service
    name = job["metadata"]["name"]
    core = client.CoreV1Api(api_client)
    try:
        wait_for(
            lambda: (batch.read_namespaced_job(name, namespace).status.succeeded or 0) == 3,
            timeout=120,
            what="the sample Job admitted, its 3 pods run on the real node",
        )
    except TimeoutError as exc:
        raise AssertionError(
            f"{exc}\n{yaml.safe_dump([w.get('status') for w in kueue.workloads(namespace)])}\n"
            f"{_pods_report(api_client, namespace, real_node)}\n"
            f"{_pods_report(api_client, release['namespace'], real_node)}"
        ) from None
    pods = core.list_namespaced_pod(namespace, label_selector=f"job-name={name}").items
    assert len(pods) == 3
    for pod in pods:
        assert pod.spec.node_name == real_node.name
        [status] = pod.status.container_statuses
        assert status.state.terminated.exit_code == 0
        assert status.image == real_node.busybox.name or status.image.endswith(
            real_node.busybox.name
        )
    workload = wait_for(
        lambda: next((w for w in kueue.workloads(namespace) if condition(w, "Finished")), None),
        timeout=60,
        what="the Job's Workload Finished",
    )
    assert condition(workload, "Finished")["status"] == "True"
    # The cost controller, from its pod with its own ServiceAccount, costed it.
    wait_for(
        lambda: (
            "preemptionCost"
            in (kueue.get_workload(namespace, workload["metadata"]["name"]).get("status") or {})
        ),
        timeout=60,
        what="status.preemptionCost written by the cost controller",
    )
    for pod in _pods(api_client, release["namespace"], "controller") + _pods(
        api_client, release["namespace"], "cost-controller"
    ):
        log = real_node.container_log(
            release["namespace"], pod.metadata.name, pod.spec.containers[0].name
        )
        assert not rbac_refusals(log), rbac_refusals(log)[:5]


def test_a_queued_pod_is_gated_admitted_and_run_on_the_real_node(
    release: dict[str, str], api_client: client.ApiClient, real_node: RealNode, namespace: str
) -> None:
    kueue = Kueue(api_client)
    _queue_for_the_real_node(kueue, namespace, real_node)
    assert real_node.busybox is not None
    core = client.CoreV1Api(api_client)
    pod = _create_through_webhook(
        lambda: core.create_namespaced_pod(
            namespace,
            {
                "metadata": {"name": "p", "labels": {"kueue.x-k8s.io/queue-name": "main"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "c",
                            "image": real_node.busybox.name,
                            "command": ["sh", "-c", "echo ran on $(hostname)"],
                            "resources": {"requests": {"cpu": "100m"}},
                        }
                    ],
                },
            },
        )
    )
    assert [g.name for g in pod.spec.scheduling_gates or []] == [
        "kueue.x-k8s.io/admission",
        "kueue.x-k8s.io/topology",
    ]
    done = wait_for(
        lambda: (p := core.read_namespaced_pod("p", namespace)).status.phase == "Succeeded" and p,
        timeout=90,
        what="the pod admitted, ungated and run on the real node",
    )
    assert done.spec.node_name == real_node.name
    assert "ran on p" in real_node.container_log(namespace, "p", "c")


def test_a_deleted_leader_ends_cleanly_the_other_replica_takes_over_and_a_new_pod_is_ready(
    release: dict[str, str], api_client: client.ApiClient, real_node: RealNode
) -> None:
    namespace = release["namespace"]
    core = client.CoreV1Api(api_client)
    leader = wait_for(lambda: _leader_pod(api_client, namespace), timeout=60, what="a leader")
    stream = watch.Watch()
    exit_codes: list[int] = []
    core.delete_namespaced_pod(leader, namespace)  # the kubelet ends it: SIGTERM, grace period
    for event in stream.stream(
        core.list_namespaced_pod,
        namespace,
        field_selector=f"metadata.name={leader}",
        timeout_seconds=60,
    ):
        for status in event["object"].status.container_statuses or []:
            if status.state.terminated is not None:
                exit_codes.append(status.state.terminated.exit_code)
        if event["type"] == "DELETED":
            stream.stop()
    assert exit_codes and exit_codes[-1] == 0, exit_codes
    # Another replica holds the Lease: the standby, or the Deployment's new pod if it asked
    # first; at once when the leader gave it up on its way out, else once its 15 s expire.
    new_leader = wait_for(
        lambda: (holder := _leader_pod(api_client, namespace)) and holder != leader and holder,
        timeout=40,
        what=f"another replica holding the Lease after {leader} ended "
        f"(holder: {_holder(api_client, namespace)!r})",
    )
    assert new_leader != leader
    wait_for(
        lambda: sum(_ready(p) for p in _pods(api_client, namespace, "controller")) == 2,
        timeout=90,
        what="a new controller pod Ready on the real node",
    )
    for pod in _pods(api_client, namespace, "controller"):
        assert pod.spec.node_name == real_node.name


def _create_through_webhook(create: Any) -> Any:
    """Create; while the API server has not yet seen the injected caBundle (its webhook
    configuration cache), it answers 500 "failed calling webhook": try again."""
    result: list[Any] = []

    def attempt() -> bool:
        try:
            result.append(create())
        except ApiException as exc:
            if exc.status == 500 and "failed calling webhook" in str(exc.body):
                return False
            raise
        return True

    wait_for(attempt, timeout=30, what="the webhook reachable through its Service")
    return result[0]
