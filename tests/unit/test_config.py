"""The controller configuration file: defaults, validation, errors that name the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.config import ConfigError, ControllerConfig, load_config


def test_no_file_means_documented_defaults() -> None:
    config = load_config(None)
    assert config == ControllerConfig()
    assert config.namespaces == []
    assert config.preemptibility.priority_threshold is None  # Kueue behaviour by default
    assert config.leader_election.enabled
    assert config.wait_for_pods_ready is None  # off unless configured


def test_file_values_and_flag_overrides(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        "namespaces: [team-a, team-b]\n"
        "preemptibility: {priorityThreshold: 100}\n"
        "leaderElection: {leaseName: qg, leaseNamespace: ops}\n"
        "writeParallelism: 8\n"
    )
    config = load_config(path, {"metricsPort": 0, "leaderElection.enabled": False})
    assert config.namespaces == ["team-a", "team-b"]
    assert config.preemptibility.priority_threshold == 100
    assert config.leader_election.lease_name == "qg"
    assert not config.leader_election.enabled
    assert config.metrics_port == 0
    assert config.write_parallelism == 8


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("writeParallelism: 0\n", "writeParallelism"),
        ("metricsPort: 70000\n", "metricsPort"),
        ("requeueBackof: {}\n", "requeueBackof"),
        ("leaderElection: {leaseDurationSeconds: 5, renewDeadlineSeconds: 10}\n", "leaderElection"),
        ("preemptibility: {priorityThreshold: high}\n", "preemptibility.priorityThreshold"),
        ("waitForPodsReady: {timeout: soon}\n", "waitForPodsReady.timeout"),
        ("waitForPodsReady: {timeout: -5s}\n", "waitForPodsReady.timeout"),
        ("waitForPodsReady: {timeout: 0s}\n", "waitForPodsReady"),
        ("waitForPodsReady: {recoveryTimeout: 1x}\n", "waitForPodsReady.recoveryTimeout"),
        ("waitForPodsReady: {blockAdmision: true}\n", "waitForPodsReady.blockAdmision"),
        (
            "waitForPodsReady: {requeuingStrategy: {timestamp: Admission}}\n",
            "waitForPodsReady.requeuingStrategy.timestamp",
        ),
        (
            "waitForPodsReady: {requeuingStrategy: {backoffLimitCount: -1}}\n",
            "waitForPodsReady.requeuingStrategy.backoffLimitCount",
        ),
        (
            "waitForPodsReady: {requeuingStrategy: {backoffBaseSeconds: -1}}\n",
            "waitForPodsReady.requeuingStrategy.backoffBaseSeconds",
        ),
        (
            "waitForPodsReady: {requeuingStrategy: {backoffMaxSeconds: -1}}\n",
            "waitForPodsReady.requeuingStrategy.backoffMaxSeconds",
        ),
        ("requeueBackoff: {baseSeconds: 1}\n", "requeueBackoff was removed"),
    ],
)
def test_invalid_config_names_the_offending_key(tmp_path: Path, text: str, key: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_config(path)


def test_wait_for_pods_ready_has_kueues_defaults_and_formats(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("waitForPodsReady: {}\n")
    section = load_config(path).wait_for_pods_ready
    assert section is not None and section.enable  # a configured section is on (v1beta2)
    assert section.timeout == 1800.0
    assert section.recovery_timeout is None  # = timeout
    assert not section.block_admission
    strategy = section.requeuing_strategy
    assert strategy.timestamp == "Eviction"
    assert strategy.backoff_limit_count is None
    assert (strategy.backoff_base_seconds, strategy.backoff_max_seconds) == (60, 3600)
    path.write_text(
        "waitForPodsReady:\n"
        "  timeout: 1h30m\n"
        "  recoveryTimeout: 2.5s\n"
        "  blockAdmission: true\n"
        "  requeuingStrategy: {timestamp: Creation, backoffLimitCount: 0}\n"
    )
    section = load_config(path).wait_for_pods_ready
    assert section is not None
    assert (section.timeout, section.recovery_timeout) == (5400.0, 2.5)
    assert section.block_admission
    assert section.requeuing_strategy.timestamp == "Creation"
    assert section.requeuing_strategy.backoff_limit_count == 0
    path.write_text("waitForPodsReady: {enable: false, timeout: 90}\n")
    section = load_config(path).wait_for_pods_ready
    assert section is not None and not section.enable and section.timeout == 90.0


def test_unreadable_or_non_mapping_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")
    path = tmp_path / "list.yaml"
    path.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="must be a mapping"):
        load_config(path)


def test_every_configuration_key_is_documented() -> None:
    """`quotagate run --help` points to docs/configuration.md: it must cover every key."""
    import typing
    from pathlib import Path

    from pydantic import BaseModel

    from controller.config import ControllerConfig

    text = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()

    def keys(model: type[BaseModel], prefix: str = "") -> list[str]:
        out = []
        for name, field in model.model_fields.items():
            key = prefix + (field.alias or name)
            annotation = field.annotation
            # An optional section (`Section | None`) is documented key by key too.
            models = [a for a in typing.get_args(annotation) if isinstance(a, type)]
            if len(models) == 2 and type(None) in models:
                annotation = next(a for a in models if a is not type(None))
            if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                out += keys(annotation, key + ".")
            else:
                out.append(key)
        return out

    missing = [key for key in keys(ControllerConfig) if f"| `{key}` |" not in text]
    assert not missing, f"docs/configuration.md lacks {missing}"
