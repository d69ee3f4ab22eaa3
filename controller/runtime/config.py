"""The controller's configuration file (`quotagate run --config FILE`).

Every option has a documented default, so an empty file (or none) is a valid
configuration. Unknown keys are errors: a typo must not be silently ignored.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from controller.kube.leader import LeaderElection


class ConfigError(ValueError):
    """An invalid configuration; the message names the offending key."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class RequeueBackoff(_Section):
    """Backoff before an evicted Workload competes again: base · 2^(evictions−1), capped."""

    base_seconds: float = Field(1.0, alias="baseSeconds", ge=0, description="first delay")
    max_seconds: float = Field(300.0, alias="maxSeconds", ge=0, description="cap on the delay")


class Preemptibility(_Section):
    """How a Workload's preemptibility is resolved when nothing more specific says."""

    priority_threshold: int | None = Field(
        None,
        alias="priorityThreshold",
        description="if set, priority < threshold ⇒ preemptible, else non-preemptible "
        "(KAI uses 100); unset keeps Kueue's behaviour: everything is preemptible",
    )


class WaitForPodsReady(_Section):
    """Kueue's `waitForPodsReady`. With `enable`, the Job and pod integrations keep every
    managed Workload's `PodsReady` condition (docs/after-admission.md)."""

    enable: bool = Field(
        False, description="keep the Workloads' PodsReady condition (Kueue's waitForPodsReady)"
    )


class InternalCertManagement(_Section):
    """The controller generates, stores and rotates the webhook's certificates itself, as
    Kueue's internalCertManagement does (controller/runtime/certs.py)."""

    enabled: bool = Field(
        False, description="manage the webhook's CA and serving certificate (the chart's default)"
    )
    secret_name: str = Field(
        "quotagate-webhook-cert",
        alias="secretName",
        min_length=1,
        description="Secret that stores them, in the leader-election namespace",
    )
    service_name: str = Field(
        "quotagate-webhook",
        alias="serviceName",
        min_length=1,
        description="the webhook's Service: the certificate names <service>.<namespace>.svc",
    )
    configuration_name: str = Field(
        "quotagate",
        alias="configurationName",
        min_length=1,
        description="MutatingWebhookConfiguration whose caBundle is kept in step",
    )
    validity_seconds: int = Field(
        365 * 86400,
        alias="validitySeconds",
        ge=60,
        description="lifetime of a new CA and certificate",
    )
    rotate_before_seconds: int = Field(
        30 * 86400,
        alias="rotateBeforeSeconds",
        ge=1,
        description="renew when less than this is left",
    )

    @model_validator(mode="after")
    def _rotates_before_expiry(self) -> InternalCertManagement:
        if self.rotate_before_seconds >= self.validity_seconds:
            raise ValueError("rotateBeforeSeconds must be less than validitySeconds")
        return self


class Webhook(_Section):
    """The mutating webhook that gates queue-labelled pods and suspends queue-labelled Jobs."""

    enabled: bool = Field(False, description="serve the webhook (the chart turns it on)")
    address: str = Field("0.0.0.0", description="address to listen on")
    port: int = Field(9443, ge=1, le=65535)
    cert_dir: str | None = Field(
        None,
        alias="certDir",
        description="directory with tls.crt/tls.key (and ca.crt): mounted from cert-manager's or "
        "your Secret, or written by internalCertManagement; reloaded when they change. "
        "Unset = a self-signed certificate for local runs",
    )
    internal_cert_management: InternalCertManagement = Field(
        default_factory=lambda: InternalCertManagement(), alias="internalCertManagement"
    )

    @model_validator(mode="after")
    def _managed_certs_need_a_directory(self) -> Webhook:
        if self.internal_cert_management.enabled and not self.cert_dir:
            raise ValueError(
                "internalCertManagement needs certDir: where to write the certificates"
            )
        return self

    manage_configuration: bool = Field(
        False,
        alias="manageConfiguration",
        description="create/update the MutatingWebhookConfiguration `quotagate` with a url: clientConfig "
        "(local runs); in a cluster the chart ships it",
    )
    url_host: str | None = Field(
        None,
        alias="urlHost",
        description="host the API server reaches the webhook at (default: address)",
    )


class ControllerConfig(_Section):
    """Top-level configuration of `quotagate run`."""

    namespaces: list[str] = Field(
        default_factory=list, description="namespaces to manage; empty = all namespaces"
    )
    requeue_backoff: RequeueBackoff = Field(
        default_factory=lambda: RequeueBackoff(), alias="requeueBackoff"
    )
    preemptibility: Preemptibility = Field(default_factory=Preemptibility)
    wait_for_pods_ready: WaitForPodsReady = Field(
        default_factory=lambda: WaitForPodsReady(), alias="waitForPodsReady"
    )
    leader_election: LeaderElection = Field(
        default_factory=lambda: LeaderElection(), alias="leaderElection"
    )
    webhook: Webhook = Field(default_factory=lambda: Webhook())
    metrics_port: int = Field(8080, alias="metricsPort", ge=0, le=65535, description="0 = off")
    health_port: int = Field(
        8081,
        alias="healthPort",
        ge=0,
        le=65535,
        description="port of /healthz and /readyz for the kubelet's probes; 0 = off",
    )
    write_parallelism: int = Field(
        16, alias="writeParallelism", ge=1, le=256, description="concurrent API writes"
    )
    event_qps: float = Field(
        50.0,
        alias="eventQPS",
        gt=0,
        description="Events recorded per second at most, beyond a burst (kubelet's eventRecordQPS); "
        "Events over the limit are dropped and counted in quotagate_events_dropped_total",
    )
    event_burst: int = Field(100, alias="eventBurst", ge=1, description="Events allowed in a burst")
    pending_reason_delay_seconds: float = Field(
        1.0,
        alias="pendingReasonDelaySeconds",
        ge=0,
        description="how long a refused Workload waits before its pending reason is written; "
        "one admitted meanwhile gets none, and the reasons of that time coalesce into the latest",
    )
    cycle_interval_seconds: float = Field(
        0.02,
        alias="cycleIntervalSeconds",
        gt=0,
        description="pause after each admission cycle, so a burst of events is decided in one cycle",
    )


def load_config(path: Path | None, overrides: dict[str, Any] | None = None) -> ControllerConfig:
    """Read and validate a YAML config file; `overrides` (from flags) win over the file."""
    data: dict[str, Any] = {}
    if path is not None:
        try:
            loaded = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"{path}: cannot read configuration: {exc}") from exc
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(
                f"{path}: the configuration must be a mapping, not {type(loaded).__name__}"
            )
        data = loaded or {}
    for dotted, value in (overrides or {}).items():
        _set_dotted(data, dotted, value)
    try:
        return ControllerConfig.model_validate(data)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            key = ".".join(str(part) for part in error["loc"]) or "<root>"
            problems.append(f"{key}: {error['msg']}")
        source = str(path) if path is not None else "configuration"
        raise ConfigError(f"{source}: invalid configuration: " + "; ".join(problems)) from exc


def _set_dotted(data: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    node = data
    for part in parents:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"{dotted}: {part} is not a section")
        node = child
    node[leaf] = value
