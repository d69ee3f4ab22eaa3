"""Kueue's Configuration file read as it is (controller/kueue_config.py): the files Kueue
ships and documents (reproduced in tests/unit/data/kueue_configuration), Kueue's defaults,
the fields reported as not implemented, and what makes a file invalid."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.config import ConfigError, ControllerConfig, configure_state, load_config
from controller.config_report import job_management, not_implemented
from controller.core.model.resource_rules import QuotaCheckStrategy, Strategy
from controller.core.state import ClusterState

DATA = Path(__file__).parent / "data" / "kueue_configuration"
HEAD = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"}


@pytest.fixture(autouse=True)
def _no_service_account(monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside a pod Kueue's namespace defaults to kueue-system."""
    from controller import kueue_config

    monkeypatch.setattr(kueue_config, "SERVICE_ACCOUNT_NAMESPACE", Path("/nonexistent/ns"))


def load(
    tmp_path: Path, data: dict[str, Any], overrides: dict[str, Any] | None = None
) -> ControllerConfig:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({**HEAD, **data}))
    return load_config(path, overrides)


def fields(config: ControllerConfig) -> list[str]:
    return [field for field, _ in not_implemented(config)]


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("*.yaml")))
def test_every_file_kueue_ships_and_documents_is_read(name: str) -> None:
    config = load_config(DATA / name)
    assert config.kueue_format
    assert all(why for _, why in not_implemented(config))


def test_kueues_manager_configuration_with_kueues_defaults() -> None:
    config = load_config(DATA / "controller_manager_config.yaml")
    assert config.metrics_port == 8443
    assert config.health_port == 8081
    assert config.webhook.enabled and config.webhook.port == 9443
    assert config.webhook.cert_dir == "/tmp/k8s-webhook-server/serving-certs"
    certs = config.webhook.internal_cert_management
    assert (certs.enabled, certs.service_name, certs.secret_name) == (
        True,
        "kueue-webhook-service",
        "kueue-webhook-server-cert",
    )
    leader = config.leader_election
    assert (leader.enabled, leader.lease_name, leader.lease_namespace) == (
        True,
        "c1f6bfd2.kueue.x-k8s.io",
        "kueue-system",
    )
    # Kueue 0.19 on: waitForPodsReady is on by default, with a 30 minute timeout.
    assert config.wait_for_pods_ready is not None and config.wait_for_pods_ready.timeout == 1800
    assert config.manage_jobs_without_queue_name is False
    management = job_management(config)
    assert not management.namespace_matches("kube-system", None)
    assert not management.namespace_matches("kueue-system", None)
    assert management.namespace_matches("team-a", None)
    assert fields(config) == [
        "controller.groupKindConcurrency",
        "clientConnection.qps",
        "clientConnection.burst",
        "integrations.frameworks[4]",
        "integrations.frameworks[6]",
    ]


def test_the_manager_file_with_its_examples_on() -> None:
    config = load_config(DATA / "controller_manager_config_all_examples.yaml")
    pods_ready = config.wait_for_pods_ready
    assert pods_ready is not None
    assert (pods_ready.timeout, pods_ready.recovery_timeout) == (300, 180)
    assert config.manage_jobs_without_queue_name is True
    assert config.webhook.internal_cert_management.enabled is False
    assert config.fair_sharing is not None and config.admission_fair_sharing is not None
    assert config.admission_fair_sharing.usage_half_life_time == 168 * 3600
    [mig] = config.resources.core().transformations
    assert mig.strategy is Strategy.REPLACE
    assert mig.outputs["example.com/accelerator-memory"] == 5 * 1024**3
    assert fields(config) == [
        "clientConnection.qps",
        "clientConnection.burst",
        "pprofBindAddress",
        "objectRetentionPolicies.workloads.afterFinished",
        "objectRetentionPolicies.workloads.afterDeactivatedByKueue",
        "integrations.externalFrameworks[0]",
    ]


def test_documented_examples_take_effect() -> None:
    installation = load_config(DATA / "installation.yaml")
    assert installation.manage_jobs_without_queue_name is True
    assert installation.wait_for_pods_ready is not None
    assert installation.wait_for_pods_ready.timeout == 600
    opt_in = job_management(load_config(DATA / "opt_in_namespace_management.yaml"))
    assert opt_in.manage_jobs_without_queue_name
    assert opt_in.namespace_matches("a", {"managed-by-kueue": "true"})
    assert not opt_in.namespace_matches("b", {})
    hami = load_config(DATA / "using_hami.yaml").resources.core()
    assert [t.multiply_by for t in hami.transformations] == ["nvidia.com/gpu"] * 2
    assert hami.effective_requests({"nvidia.com/gpucores": 30_000, "nvidia.com/gpu": 2_000}) == {
        "nvidia.com/gpu": 2_000,
        "nvidia.com/total-gpucores": 60_000,
    }
    credits = load_config(DATA / "share_quotas_across_flavors.yaml").resources.core()
    assert credits.effective_requests({"nvidia.com/gpu-v100": 1000}) == {"gpu_credits": 40_000}


def test_exclusions_and_the_quota_check_strategy(tmp_path: Path) -> None:
    excluded = load(tmp_path, {"resources": {"excludeResourcePrefixes": ["example.com"]}})
    assert excluded.resources.core().effective_requests({"example.com/x": 1, "cpu": 1}) == {
        "cpu": 1
    }
    ignore = load(tmp_path, {"resources": {"quotaCheckStrategy": "IgnoreUndeclared"}})
    assert ignore.resources.core().quota_check is QuotaCheckStrategy.IGNORE_UNDECLARED
    gated = load(
        tmp_path,
        {
            "resources": {"quotaCheckStrategy": "IgnoreUndeclared"},
            "featureGates": {"QuotaCheckStrategy": False},
        },
    )
    assert gated.resources.core().quota_check is QuotaCheckStrategy.BLOCK_UNDECLARED
    assert any("featureGates.QuotaCheckStrategy" in note for note in gated.notes)


def test_feature_gates(tmp_path: Path) -> None:
    off = load(tmp_path, {"featureGates": {"DisableWaitForPodsReady": True, "MultiKueue": True}})
    assert off.wait_for_pods_ready is None
    assert fields(off) == ["featureGates.MultiKueue"]


def test_the_priority_boost_and_visibility_gates_and_the_visibility_server(
    tmp_path: Path,
) -> None:
    """Kueue's PriorityBoost (off by default) and VisibilityOnDemand (on) take effect from
    a Kueue file, and `visibilityServer` says where the visibility API listens."""
    default = load(tmp_path, {})
    assert not default.gate("PriorityBoost") and default.gate("VisibilityOnDemand")
    assert default.visibility.port == 8082
    config = load(
        tmp_path,
        {
            "featureGates": {"PriorityBoost": True, "VisibilityOnDemand": False},
            "visibilityServer": {"bindAddress": "127.0.0.1", "bindPort": 9082},
        },
        {"visibility.enabled": True},
    )
    assert config.gate("PriorityBoost") and not config.gate("VisibilityOnDemand")
    assert not config.serves_visibility()
    assert (config.visibility.address, config.visibility.port) == ("127.0.0.1", 9082)
    assert fields(config) == []


def test_the_failed_node_gates_of_topology_aware_scheduling_reach_the_engine(
    tmp_path: Path,
) -> None:
    """Kueue's five failed-node gates (docs/tas.md), Kueue's defaults when not set; none
    is reported as not implemented."""
    from controller.config import configure_state
    from controller.core.state import ClusterState
    from controller.core.tas.node_failure import NodeFailureGates

    default = configure_state(load(tmp_path, {}), ClusterState())
    assert default.failed_nodes.gates == NodeFailureGates(True, True, True, False, True)
    config = load(
        tmp_path,
        {
            "featureGates": {
                "TASFailedNodeReplacementFailFast": False,
                "TASReplaceNodeDueToNotReadyOverFixedTime": True,
                "TASReplaceNodeOnNodeTaints": False,
            }
        },
    )
    assert fields(config) == []
    gates = configure_state(config, ClusterState()).failed_nodes.gates
    assert gates == NodeFailureGates(True, False, True, True, False)


def test_quotagates_own_settings_go_under_their_own_key(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        {
            "internalCertManagement": {"enable": False},
            "quotagate": {"writeParallelism": 4, "webhook": {"certDir": None}},
        },
    )
    assert config.write_parallelism == 4
    assert config.webhook.cert_dir is None
    with pytest.raises(ConfigError, match=r"quotagate\.metricsPort: the file sets it with Kueue's"):
        load(tmp_path, {"metrics": {"bindAddress": ":9000"}, "quotagate": {"metricsPort": 1}})


def test_overrides_replacing_a_field_of_the_file_are_noted(tmp_path: Path) -> None:
    config = load(tmp_path, {"metrics": {"bindAddress": ":9000"}}, {"metricsPort": 7000})
    assert config.metrics_port == 7000
    assert any("metricsPort" in note and "7000" in note for note in config.notes)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"webhook": {"prot": 1}}, 'webhook.prot: unknown field "prot"'),
        ({"metadata": {"name": "config"}}, 'metadata: unknown field "metadata"'),
        ({"manageJobsWithoutQueueName": "yes"}, "manageJobsWithoutQueueName: expected true"),
        ({"waitForPodsReady": {"timeout": "ten minutes"}}, "waitForPodsReady.timeout: expected"),
        ({"featureGates": {"NoSuchGate": True}}, "featureGates.NoSuchGate: unrecognized"),
        (
            {"featureGates": {"ManagedJobsNamespaceSelectorAlwaysRespected": False}},
            "locked to True",
        ),
        (
            {"resources": {"quotaCheckStrategy": "Sometimes"}},
            'resources.quotaCheckStrategy: Unsupported value: "Sometimes"',
        ),
        (
            {
                "resources": {
                    "quotaCheckStrategy": "IgnoreUndeclared",
                    "excludeResourcePrefixes": ["x"],
                }
            },
            "excludeResourcePrefixes is not allowed when quotaCheckStrategy is IgnoreUndeclared",
        ),
        (
            {"resources": {"transformations": [{"input": "a"}, {"input": "a"}]}},
            "transformations[1].input: Duplicate value",
        ),
        (
            {"resources": {"transformations": [{"input": "a", "strategy": "Keep"}]}},
            "resources.transformations.0.strategy",
        ),
        (
            {"managedJobsNamespaceSelector": {"matchLabels": {}}},
            "managedJobsNamespaceSelector: should not match the 'kube-system' namespace",
        ),
        ({"leaderElection": {"resourceLock": "configmaps"}}, "only leases are supported"),
        ({"fairSharing": {"preemptionStrategies": []}}, "fairSharing.preemptionStrategies"),
        (
            {"apiVersion": "config.kueue.x-k8s.io/v1beta1"},
            "apiVersion: 'config.kueue.x-k8s.io/v1beta1'",
        ),
    ],
)
def test_an_invalid_file_names_the_field(
    tmp_path: Path, data: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        load(tmp_path, data)
    assert message in str(raised.value)


def test_quotagates_own_format_still_reads_and_reports_integrations(tmp_path: Path) -> None:
    path = tmp_path / "own.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "integrations": {"frameworks": ["batch/job", "ray.io/rayservice"]},
                "resources": {"transformations": [{"input": "cpu", "outputs": {"credits": 1}}]},
                "manageJobsWithoutQueueName": True,
            }
        )
    )
    config = load_config(path)
    assert not config.kueue_format
    assert config.manage_jobs_without_queue_name
    assert fields(config) == ["integrations.frameworks[1]"]
    # quotagate's format: the controller's own namespace is the Lease's.
    assert not job_management(config).namespace_matches("quotagate-system", None)


def test_config_check_prints_how_the_file_is_read(capsys: pytest.CaptureFixture[str]) -> None:
    from controller.cli import main

    assert main(["config", "check", str(DATA / "controller_manager_config.yaml")]) == 0
    out = capsys.readouterr().out
    assert "Format:  Kueue's Configuration (config.kueue.x-k8s.io/v1beta2)" in out
    assert "Valid:   yes" in out
    assert "Not implemented (5;" in out
    assert "  controller.groupKindConcurrency: per-kind reconcile concurrency" in out
    assert (
        "  integrations.frameworks[4]: ray.io/rayservice: quotagate has no such integration" in out
    )
    assert "waitForPodsReady: on with a 30m timeout, Kueue's default" in out
    settings = yaml.safe_load(out.split("Settings (quotagate's format, defaults filled in):\n")[1])
    assert settings["metricsPort"] == 8443
    assert settings["leaderElection"]["leaseName"] == "c1f6bfd2.kueue.x-k8s.io"


def test_config_check_of_an_invalid_file_exits_2_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from controller.cli import main

    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({**HEAD, "resources": {"transformation": []}}))
    assert main(["config", "check", str(path)]) == 2
    captured = capsys.readouterr()
    assert "Valid:   no" in captured.out
    assert 'resources.transformation: unknown field "transformation"' in captured.err


PLAN_OBJECTS = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: gpus}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, gpu_credits]
    flavors: [{name: default, resources: [{name: cpu, nominalQuota: "8"}, {name: gpu_credits, nominalQuota: "100"}]}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: main, namespace: ml}
spec: {clusterQueue: gpus}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: train, namespace: ml, creationTimestamp: "2026-01-01T00:00:00Z"}
spec:
  queueName: main
  podSets:
  - name: main
    count: 2
    template:
      spec:
        containers:
        - name: c
          resources: {requests: {cpu: "1", nvidia.com/gpu-v100: "1", ephemeral-storage: 1Gi}}
"""


@pytest.mark.parametrize(
    ("resources", "admitted"),
    [
        # No rules: the GPU and the ephemeral storage are undeclared, BlockUndeclared refuses.
        ({}, False),
        # The GPU becomes credits (2 pods × 40 ≤ 100) and the storage is not counted.
        (
            {
                "excludeResourcePrefixes": ["ephemeral-storage"],
                "transformations": [
                    {
                        "input": "nvidia.com/gpu-v100",
                        "strategy": "Replace",
                        "outputs": {"gpu_credits": 40},
                    }
                ],
            },
            True,
        ),
    ],
)
def test_plan_applies_the_files_resources(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    resources: dict[str, Any],
    admitted: bool,
) -> None:
    from controller.cli import main

    objects = tmp_path / "objects.yaml"
    objects.write_text(PLAN_OBJECTS)
    config = tmp_path / "kueue.yaml"
    config.write_text(
        yaml.safe_dump(
            {**HEAD, "internalCertManagement": {"enable": False}, "resources": resources}
        )
    )
    assert main(["plan", "-f", str(objects), "--config", str(config), "-o", "json"]) == 0
    import json

    result = json.loads(capsys.readouterr().out)
    assert bool(result["admitted"]) is admitted
    if not admitted:
        assert (
            "resource nvidia.com/gpu-v100 unavailable in ClusterQueue gpus"
            in (result["pending"][0]["reason"])
        )


def test_the_topology_placement_gates_reach_the_engine(tmp_path: Path) -> None:
    """TASBalancedPlacement (off by default) and TASMultiLayerTopology (on) are read from a
    Kueue file and set on the engine's node views."""
    default = load(tmp_path, {})
    assert not default.gate("TASBalancedPlacement") and default.gate("TASMultiLayerTopology")
    config = load(
        tmp_path,
        {"featureGates": {"TASBalancedPlacement": True, "TASMultiLayerTopology": False}},
    )
    assert fields(config) == []
    state = configure_state(config, ClusterState())
    assert state.tas.balanced_placement and not state.tas.multi_layer


def test_short_workload_names_is_reported_not_implemented(tmp_path: Path) -> None:
    """Workload names are Kueue's long ones (workload_names.py); its gate for 63-character
    names is not implemented, and a file setting it is told so."""
    config = load(tmp_path, {"featureGates": {"ShortWorkloadNames": True}})
    assert ("featureGates.ShortWorkloadNames", "quotagate has no such feature gate") in (
        not_implemented(config)
    )
