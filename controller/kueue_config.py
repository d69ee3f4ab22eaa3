"""Kueue's own configuration file, read as it is (`apiVersion: config.kueue.x-k8s.io/v1beta2`,
`kind: Configuration`: the file every Kueue installation has, e.g. Kueue's
`config/components/manager/controller_manager_config.yaml`).

The file is checked against Kueue's schema as Kueue's strict decoder does: a key Kueue does
not know, or a value of the wrong type, makes it invalid (a `ConfigError` naming the field).
Every field quotagate implements is translated to its setting in quotagate's own format
(docs/configuration.md), with Kueue's defaults where the file says nothing; every valid field
it does not implement is kept in a list (`not_implemented`: the field and why) that
`quotagate run` logs once at start and exports as a metric, and `quotagate config check`
prints. quotagate's own settings that Kueue has no field for go under the top-level key
`quotagate:` (a name Kueue does not use), in quotagate's format.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.config_sections import default_namespace_selector
from controller.core.tas.node_failure import NodeFailureGates
from controller.kueue_config_schema import (
    FEATURE_GATES,
    LOCKED_GATES,
    KueueConfigInvalid,
    check,
    not_implemented,
)

__all__ = [
    "API_VERSION",
    "EXTENSIONS_KEY",
    "KueueConfigInvalid",
    "Translation",
    "is_kueue_configuration",
    "translate",
]

API_VERSION = "config.kueue.x-k8s.io/v1beta2"
GROUP = "config.kueue.x-k8s.io"
EXTENSIONS_KEY = "quotagate"
"""The top-level key of a Kueue file that holds quotagate's own settings."""

DEFAULT_NAMESPACE = "kueue-system"
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


@dataclass
class Translation:
    """A Kueue file read: quotagate's settings (its own format), the fields it does not
    implement (field, why), and how some implemented fields are read (notes)."""

    settings: dict[str, Any] = field(default_factory=dict)
    explicit: set[str] = field(default_factory=set)
    not_implemented: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def set(self, key: str, value: Any, from_file: bool) -> None:
        node = self.settings
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
        if from_file:
            self.explicit.add(key)

    def take(self, key: str, section: Mapping[str, Any], field: str, default: Any) -> None:
        """Set `key` from the section's `field`, Kueue's `default` when it is unset or empty."""
        given = section.get(field)
        self.set(key, given or default, bool(given))


def is_kueue_configuration(data: Mapping[str, Any]) -> bool:
    """Whether a loaded file is Kueue's Configuration (by apiVersion or kind)."""
    api_version = str(data.get("apiVersion") or "")
    return api_version.startswith(f"{GROUP}/") or data.get("kind") == "Configuration"


def _port(address: str, path: str) -> int:
    """A bind address's port (":8443", "0.0.0.0:8443"); "0" or "" = off."""
    if address in ("", "0"):
        return 0
    _, _, port = address.rpartition(":")
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise KueueConfigInvalid(f"{path}: expected host:port or 0, not {address!r}")
    return int(port)


def _whole_seconds(seconds: float) -> int:
    return max(1, math.ceil(seconds))


def own_namespace_default() -> str:
    """Kueue's default `namespace`: the ServiceAccount's, else kueue-system."""
    try:
        found = SERVICE_ACCOUNT_NAMESPACE.read_text().strip()
    except OSError:
        found = ""
    return found or DEFAULT_NAMESPACE


def translate(
    data: Mapping[str, Any], default_namespace: Callable[[], str] = own_namespace_default
) -> Translation:
    """Read a Kueue Configuration; KueueConfigInvalid names the first invalid field."""
    if data.get("apiVersion") != API_VERSION:
        raise KueueConfigInvalid(
            f"apiVersion: {data.get('apiVersion')!r} is not read; quotagate reads Kueue's "
            f"{API_VERSION} Configuration"
        )
    if data.get("kind") != "Configuration":
        raise KueueConfigInvalid(f"kind: expected Configuration, not {data.get('kind')!r}")
    file, leaves = check({k: v for k, v in data.items() if k != EXTENSIONS_KEY})
    out = Translation(not_implemented=not_implemented(leaves))
    gates = _feature_gates(file.get("featureGates") or {})
    _manager(file, out, default_namespace)
    _enforcement(file, out)
    _after_admission(file, gates, out)
    _sharing(file, out)
    _resources(file, gates, out)
    _visibility(file, gates, out)
    return out


READ_GATES = (
    "PriorityBoost",
    "VisibilityOnDemand",
    "TASBalancedPlacement",
    "TASMultiLayerTopology",
    *(name for name, _ in NodeFailureGates.GATES),
)
"""The feature gates quotagate reads (the TAS ones: docs/tas.md)."""


def _visibility(file: Mapping[str, Any], gates: Mapping[str, bool], out: Translation) -> None:
    """The gates quotagate reads itself (READ_GATES) and where the
    visibility API listens (`visibilityServer`; Kueue's defaults: every address, 8082)."""
    read = {name: gates[name] for name in READ_GATES if name in gates}
    if read:
        out.set("featureGates", read, True)
    server = file.get("visibilityServer") or {}
    if server.get("bindAddress"):
        out.set("visibility.address", server["bindAddress"], True)
    if server.get("bindPort"):
        out.set("visibility.port", server["bindPort"], True)


def _feature_gates(gates: Mapping[str, bool]) -> dict[str, bool]:
    for name, value in gates.items():
        if name not in FEATURE_GATES:
            raise KueueConfigInvalid(f"featureGates.{name}: unrecognized feature gate")
        locked = LOCKED_GATES.get(name)
        if locked is not None and value != locked:
            raise KueueConfigInvalid(
                f"featureGates.{name}: cannot set feature gate {name} to {value}, feature is "
                f"locked to {locked}"
            )
    return dict(gates)


def _manager(
    file: Mapping[str, Any], out: Translation, default_namespace: Callable[[], str]
) -> None:
    namespace = file.get("namespace") or default_namespace()
    leader = file.get("leaderElection") or {}
    out.set("leaderElection.enabled", leader.get("leaderElect", True), "leaderElect" in leader)
    out.take("leaderElection.leaseName", leader, "resourceName", "c1f6bfd2.kueue.x-k8s.io")
    out.set(
        "leaderElection.leaseNamespace",
        leader.get("resourceNamespace") or namespace,
        bool(leader.get("resourceNamespace")) or "namespace" in file,
    )
    lock = leader.get("resourceLock") or "leases"
    if lock != "leases":
        raise KueueConfigInvalid(
            f"leaderElection.resourceLock: {lock!r}: only leases are supported"
        )
    for kueue_key, ours, default in (
        ("leaseDuration", "leaseDurationSeconds", 15),
        ("renewDeadline", "renewDeadlineSeconds", 10),
        ("retryPeriod", "retryPeriodSeconds", 2),
    ):
        seconds = leader.get(kueue_key) or 0
        out.set(
            f"leaderElection.{ours}",
            _whole_seconds(seconds) if seconds else default,
            bool(seconds),
        )
    metrics = file.get("metrics") or {}
    address = metrics.get("bindAddress") or ":8443"
    out.set("metricsPort", _port(address, "metrics.bindAddress"), "bindAddress" in metrics)
    if _port(address, "metrics.bindAddress"):
        out.notes.append(
            f"metrics.bindAddress {address!r}: /metrics is served on that port over plain HTTP "
            "(Kueue serves it over HTTPS with authentication)"
        )
    health = file.get("health") or {}
    address = health.get("healthProbeBindAddress") or ":8081"
    out.set(
        "healthPort",
        _port(address, "health.healthProbeBindAddress"),
        "healthProbeBindAddress" in health,
    )
    webhook = file.get("webhook") or {}
    out.set("webhook.enabled", True, False)
    out.take("webhook.port", webhook, "port", 9443)
    out.take("webhook.address", webhook, "host", "0.0.0.0")
    out.take("webhook.certDir", webhook, "certDir", "/tmp/k8s-webhook-server/serving-certs")
    certs = file.get("internalCertManagement") or {}
    enabled = certs.get("enable", True)
    out.set("webhook.internalCertManagement.enabled", enabled, "enable" in certs)
    if enabled:
        managed = "webhook.internalCertManagement"
        out.take(f"{managed}.serviceName", certs, "webhookServiceName", "kueue-webhook-service")
        out.take(f"{managed}.secretName", certs, "webhookSecretName", "kueue-webhook-server-cert")


def _enforcement(file: Mapping[str, Any], out: Translation) -> None:
    out.set(
        "manageJobsWithoutQueueName",
        file.get("manageJobsWithoutQueueName", False),
        "manageJobsWithoutQueueName" in file,
    )
    selector = file.get("managedJobsNamespaceSelector")
    if selector is not None:
        out.set("managedJobsNamespaceSelector", selector, True)
    else:
        namespace = out.settings["leaderElection"]["leaseNamespace"]
        out.set("managedJobsNamespaceSelector", default_namespace_selector(namespace), False)
    integrations = file.get("integrations") or {}
    # Kept as listed: those quotagate has no integration for are reported with the others
    # (`config_report.py`) and left alone.
    out.take("integrations.frameworks", integrations, "frameworks", ["batch/job"])
    if integrations.get("externalFrameworks"):
        out.set("integrations.externalFrameworks", integrations["externalFrameworks"], True)
    if "labelKeysToCopy" in integrations:
        out.set("integrations.labelKeysToCopy", integrations["labelKeysToCopy"], True)


def _after_admission(file: Mapping[str, Any], gates: Mapping[str, bool], out: Translation) -> None:
    if gates.get("DisableWaitForPodsReady", False):
        if "waitForPodsReady" in file:
            out.notes.append("waitForPodsReady: off (featureGates.DisableWaitForPodsReady)")
        return
    # Kueue (v0.19 on) defaults waitForPodsReady on, with a 30 minute timeout.
    section = file.get("waitForPodsReady") or {}
    settings: dict[str, Any] = {"timeout": section.get("timeout") or 30 * 60.0}
    if "recoveryTimeout" in section:
        settings["recoveryTimeout"] = section["recoveryTimeout"]
    if "blockAdmission" in section:
        settings["blockAdmission"] = section["blockAdmission"]
    strategy = section.get("requeuingStrategy") or {}
    settings["requeuingStrategy"] = {k: v for k, v in strategy.items()}
    out.set("waitForPodsReady", settings, "waitForPodsReady" in file)
    if "waitForPodsReady" not in file:
        out.notes.append(
            "waitForPodsReady: on with a 30m timeout, Kueue's default (featureGates: "
            "{DisableWaitForPodsReady: true} turns it off)"
        )


def _sharing(file: Mapping[str, Any], out: Translation) -> None:
    if file.get("fairSharing") is not None:
        strategies = file["fairSharing"].get("preemptionStrategies") or []
        if not strategies:
            raise KueueConfigInvalid(
                "fairSharing.preemptionStrategies: Required value: must be specified"
            )
        out.set("fairSharing", {"preemptionStrategies": strategies}, True)
    afs = file.get("admissionFairSharing")
    if afs is not None:
        settings = {
            "usageHalfLifeTime": afs.get("usageHalfLifeTime") or 0.0,
            "usageSamplingInterval": afs.get("usageSamplingInterval") or 300.0,
            "resourceWeights": afs.get("resourceWeights") or {},
        }
        if afs.get("usageHalfLifeTime", 0.0) < 0:
            raise KueueConfigInvalid("admissionFairSharing.usageHalfLifeTime: must not be negative")
        out.set("admissionFairSharing", settings, True)


def _resources(file: Mapping[str, Any], gates: Mapping[str, bool], out: Translation) -> None:
    section = file.get("resources") or {}
    settings: dict[str, Any] = {}
    if section.get("excludeResourcePrefixes"):
        settings["excludeResourcePrefixes"] = section["excludeResourcePrefixes"]
    if section.get("transformations"):
        settings["transformations"] = section["transformations"]
    strategy = section.get("quotaCheckStrategy")
    if strategy is not None:
        if strategy not in ("BlockUndeclared", "IgnoreUndeclared"):
            raise KueueConfigInvalid(
                f'resources.quotaCheckStrategy: Unsupported value: "{strategy}": supported '
                'values: "IgnoreUndeclared", "BlockUndeclared"'
            )
        if gates.get("QuotaCheckStrategy", True):
            settings["quotaCheckStrategy"] = strategy
        else:
            out.notes.append(
                "resources.quotaCheckStrategy: not applied (featureGates.QuotaCheckStrategy: false)"
            )
    out.set("resources", settings, bool(section))
