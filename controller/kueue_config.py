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
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.config_sections import default_namespace_selector

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


class KueueConfigInvalid(ValueError):
    """The file is not a valid Kueue Configuration; the message names the field."""


# -- Kueue's schema --------------------------------------------------------------------------
# A node is a leaf check (a function returning the value or raising ValueError), a dict of
# fields (an object), `ListOf(node)` or `MapOf(node)`.

Check = Callable[[Any], Any]


@dataclass(frozen=True, slots=True)
class ListOf:
    item: Any


@dataclass(frozen=True, slots=True)
class MapOf:
    value: Any


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, not {value!r}")
    return value


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected an integer, not {value!r}")
    return value


def _nullable_int(value: Any) -> int | None:
    return None if value is None else _int(value)


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"expected a number, not {value!r}")
    return float(value)


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, not {value!r}")
    return value


_DURATION = re.compile(r"^-?(?:(\d+(?:\.\d*)?|\.\d+)(h|m|s|ms|us|µs|ns))+$|^0$")
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(h|ms|m|s|us|µs|ns)")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def _duration(value: Any) -> float:
    """A metav1.Duration (Go's time.ParseDuration syntax) in seconds."""
    if value is None:
        return 0.0
    if not isinstance(value, str) or not _DURATION.match(value):
        raise ValueError(f"expected a duration such as 30s, 5m or 1h30m, not {value!r}")
    seconds = sum(float(n) * _UNITS[u] for n, u in _PART.findall(value))
    return -seconds if value.startswith("-") else seconds


def _nanoseconds(value: Any) -> Any:
    """A Go time.Duration field (JSON: an integer of nanoseconds)."""
    return _int(value)


def _any_object(value: Any) -> Any:
    if not isinstance(value, Mapping):
        raise ValueError(f"expected an object, not {value!r}")
    return value


def _selector(value: Any) -> Any:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ValueError(f"expected a label selector, not {value!r}")
    unknown = set(value) - {"matchLabels", "matchExpressions"}
    if unknown:
        raise ValueError(f'unknown field "{sorted(unknown)[0]}" in a label selector')
    return value


def _quantity(value: Any) -> Any:
    from api.quantities import InvalidQuantity, exact_value

    try:
        exact_value(value)
    except (InvalidQuantity, ValueError, TypeError) as exc:
        raise ValueError(str(exc)) from None
    return value


_S, _B, _I, _D = _str, _bool, _int, _duration
_LS = ListOf(_str)

SCHEMA: dict[str, Any] = {
    "apiVersion": _S,
    "kind": _S,
    "namespace": _S,
    "webhook": {"port": _I, "host": _S, "certDir": _S},
    "leaderElection": {
        "leaderElect": _B,
        "leaseDuration": _D,
        "renewDeadline": _D,
        "retryPeriod": _D,
        "resourceLock": _S,
        "resourceName": _S,
        "resourceNamespace": _S,
    },
    "metrics": {
        "bindAddress": _S,
        "enableClusterQueueResources": _B,
        "customLabels": ListOf(
            {
                "name": _S,
                "sourceLabelKey": _S,
                "sourceAnnotationKey": _S,
                "sourceKind": _S,
                "trackedValues": _LS,
            }
        ),
        "localQueueMetrics": {"enable": _B, "localQueueSelector": _selector},
    },
    "health": {
        "healthProbeBindAddress": _S,
        "readinessEndpointName": _S,
        "livenessEndpointName": _S,
    },
    "pprofBindAddress": _S,
    "controller": {"groupKindConcurrency": MapOf(_I), "cacheSyncTimeout": _nanoseconds},
    "tls": {"minVersion": _S, "cipherSuites": _LS, "curvePreferences": ListOf(_I)},
    "manageJobsWithoutQueueName": _B,
    "managedJobsNamespaceSelector": _selector,
    "internalCertManagement": {"enable": _B, "webhookServiceName": _S, "webhookSecretName": _S},
    "waitForPodsReady": {
        "timeout": _D,
        "blockAdmission": _B,
        "requeuingStrategy": {
            "timestamp": _S,
            "backoffLimitCount": _nullable_int,
            "backoffBaseSeconds": _I,
            "backoffMaxSeconds": _I,
        },
        "recoveryTimeout": _D,
    },
    "clientConnection": {"qps": _number, "burst": _I},
    "integrations": {"frameworks": _LS, "externalFrameworks": _LS, "labelKeysToCopy": _LS},
    "multiKueue": {
        "gcInterval": _D,
        "origin": _S,
        "workerLostTimeout": _D,
        "dispatcherName": _S,
        "externalFrameworks": ListOf({"name": _S}),
        "clusterProfile": {
            "accessProviders": ListOf({"name": _S, "execConfig": _any_object}),
            "credentialsProviders": ListOf({"name": _S, "execConfig": _any_object}),
        },
        "incrementalDispatcherConfig": {"stepSize": _I},
    },
    "fairSharing": {"preemptionStrategies": _LS},
    "admissionFairSharing": {
        "usageHalfLifeTime": _D,
        "usageSamplingInterval": _D,
        "resourceWeights": MapOf(_number),
    },
    "resources": {
        "quotaCheckStrategy": _S,
        "excludeResourcePrefixes": _LS,
        "transformations": ListOf(
            {"input": _S, "strategy": _S, "multiplyBy": _S, "outputs": MapOf(_quantity)}
        ),
        "deviceClassMappings": ListOf(
            {"name": _S, "deviceClassNames": _LS, "sources": ListOf(_any_object)}
        ),
    },
    "featureGates": MapOf(_B),
    "objectRetentionPolicies": {"workloads": {"afterFinished": _D, "afterDeactivatedByKueue": _D}},
    "visibilityServer": {"bindAddress": _S, "bindPort": _I},
}
"""Every field of Kueue's v1beta2 `Configuration` (apis/config/v1beta2/configuration_types.go)."""

FEATURE_GATES = frozenset(
    [
        "PartialAdmission",
        "FlavorFungibility",
        "VisibilityOnDemand",
        "DisableWaitForPodsReady",
        "PrioritySortingWithinCohort",
        "FairSharingPreemptWithinNominal",
        "FairSharingPrioritizeNonBorrowing",
        "MultiKueue",
        "TopologyAwareScheduling",
        "LocalQueueMetrics",
        "TASProfileMixed",
        "AdmissionFairSharing",
        "TASFailedNodeReplacement",
        "ElasticJobsViaWorkloadSlices",
        "ElasticJobsViaWorkloadSlicesWithTAS",
        "TASFailedNodeReplacementFailFast",
        "TASReplaceNodeOnPodTermination",
        "SkipReassignmentForPodOwnedWorkloads",
        "TASReplaceNodeDueToNotReadyOverFixedTime",
        "ManagedJobsNamespaceSelectorAlwaysRespected",
        "TASBalancedPlacement",
        "TASAssignmentsEncodingByHostnamePrefix",
        "KueueDRAIntegration",
        "KueueDRAIntegrationExtendedResource",
        "KueueDRARejectWorkloadsWhenDRADisabled",
        "KueueDRAIntegrationPartitionableDevices",
        "KueueDRAIntegrationConsumableCapacity",
        "MultiKueueAdaptersForCustomJobs",
        "WorkloadRequestUseMergePatch",
        "MultiKueueKubeConfigPathValidation",
        "ReclaimablePods",
        "MultiKueueClusterProfile",
        "FailureRecoveryPolicy",
        "TLSOptions",
        "RemoveFinalizersWithStrictPatch",
        "TASReplaceNodeOnNodeTaints",
        "AssignQueueLabelsForPods",
        "TASMultiLayerTopology",
        "SchedulingEquivalenceHashing",
        "CustomMetricLabels",
        "SparkApplicationIntegration",
        "MultiKueueOrchestratedPreemption",
        "PriorityBoost",
        "AdmissionGatedBy",
        "ShortWorkloadNames",
        "FastQuotaReleaseInPodIntegration",
        "RejectUpdatesToCQWithInvalidOnFlavors",
        "FinishOrphanedWorkloads",
        "MultiKueueIncrementalDispatcherConfig",
        "MultiKueueIncrementalDispatcherRespectConfigOrder",
        "ConcurrentAdmission",
        "QuotaCheckStrategy",
        "MetricForWorkloadCreationLatency",
        "TASRespectNodeAffinityPreferred",
        "MultiKueueManagerQuotaAutomation",
        "WorkloadIdentifierAnnotations",
        "WorkloadPriorityClassDefaulting",
        "MetricsForCohorts",
        "CleanupProvisioningRequestsOnEviction",
        "TASHandleOverlappingFlavors",
        "UnadmittedWorkloadsObservability",
        "TASRecomputeAssignmentWithinSchedulingCycle",
        "UnadmittedWorkloadsExplicitStatus",
        "DeferRayServiceFinalizationForRedisCleanup",
        "TASCacheNodeMatchResults",
        "TASCachingRemainingResources",
        "TASCacheTopologyTree",
        "SchedulerLibraryIntegration",
        "VectorizedResourceRequests",
        "WorkloadValidateResourcesAreNonNegative",
        "TASValidateWorkloadSliceSize",
        "WorkloadValidationForPodSetMetadata",
        "PrioritizePreemptorWorkloads",
        "LWSImmutableGroupSize",
        "FlavorFungibilityPreserveScanProgress",
        "SkipAncestorCheckForDeletedWorkloads",
        "MultiKueueRemoteSpecSync",
        "RecomputeAssignmentUponPreemptionTargetsOverlap",
        "PodIntegrationValidateGroupOwner",
        "ValidateRayAndSparkJobUpdates",
    ]
)
"""Kueue's feature gate names (pkg/features/kube_features.go); another name is invalid."""

LOCKED_GATES = {"ManagedJobsNamespaceSelectorAlwaysRespected": True, "TLSOptions": True}
"""Gates Kueue locks to their default (GA): setting another value is invalid."""

IMPLEMENTED_GATES = {
    "DisableWaitForPodsReady": "waitForPodsReady is off when true",
    "QuotaCheckStrategy": "resources.quotaCheckStrategy is applied only while true (Kueue's "
    "default)",
    "ManagedJobsNamespaceSelectorAlwaysRespected": "always true, as in Kueue",
}

# Fields read into quotagate's settings (a list index is written `[]`).
IMPLEMENTED = frozenset(
    {
        "apiVersion",
        "kind",
        "namespace",
        "webhook.port",
        "webhook.host",
        "webhook.certDir",
        "leaderElection.leaderElect",
        "leaderElection.leaseDuration",
        "leaderElection.renewDeadline",
        "leaderElection.retryPeriod",
        "leaderElection.resourceLock",
        "leaderElection.resourceName",
        "leaderElection.resourceNamespace",
        "metrics.bindAddress",
        "health.healthProbeBindAddress",
        "manageJobsWithoutQueueName",
        "managedJobsNamespaceSelector",
        "internalCertManagement.enable",
        "internalCertManagement.webhookServiceName",
        "internalCertManagement.webhookSecretName",
        "waitForPodsReady.timeout",
        "waitForPodsReady.blockAdmission",
        "waitForPodsReady.recoveryTimeout",
        "waitForPodsReady.requeuingStrategy.timestamp",
        "waitForPodsReady.requeuingStrategy.backoffLimitCount",
        "waitForPodsReady.requeuingStrategy.backoffBaseSeconds",
        "waitForPodsReady.requeuingStrategy.backoffMaxSeconds",
        "integrations.frameworks",
        "integrations.labelKeysToCopy",
        "fairSharing.preemptionStrategies",
        "admissionFairSharing.usageHalfLifeTime",
        "admissionFairSharing.usageSamplingInterval",
        "admissionFairSharing.resourceWeights",
        "resources.quotaCheckStrategy",
        "resources.excludeResourcePrefixes",
        "resources.transformations",
        "featureGates",
    }
)

WHY_NOT = {
    "pprofBindAddress": "no pprof endpoint (Python has no Go profiler)",
    "controller": "per-kind reconcile concurrency and cache sync timeout: quotagate's "
    "reconcilers are asyncio tasks without these knobs",
    "tls": "TLS options of Kueue's servers: the webhook uses Python's defaults",
    "clientConnection": "client QPS and burst: quotagate paces its writes with "
    "writeParallelism and pendingReasonQPS (docs/configuration.md)",
    "multiKueue": "MultiKueue is not implemented",
    "objectRetentionPolicies": "automatic deletion of Workloads is not implemented",
    "visibilityServer": "the visibility API server's address and port",
    "metrics.enableClusterQueueResources": "ClusterQueue resource metrics are always exported",
    "metrics.customLabels": "custom metric labels are not implemented",
    "metrics.localQueueMetrics": "LocalQueue metric options",
    "health.readinessEndpointName": "the endpoints are /readyz and /healthz",
    "health.livenessEndpointName": "the endpoints are /readyz and /healthz",
    "integrations.externalFrameworks": "external frameworks: nothing creates their Workloads",
    "resources.deviceClassMappings": "Dynamic Resource Allocation is not implemented",
}


def _why(path: str) -> str:
    parts = path.replace("[]", "").split(".")
    for end in range(len(parts), 0, -1):
        found = WHY_NOT.get(".".join(parts[:end]))
        if found is not None:
            return found
    return "not implemented"


def _normalise(path: str) -> str:
    return re.sub(r"\[\d+\]", "[]", path)


def _walk(node: Any, value: Any, path: str, leaves: dict[str, Any]) -> Any:
    """Check `value` against `node`; record every present leaf's path in `leaves`."""
    if isinstance(node, dict):
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise KueueConfigInvalid(f"{path}: expected an object, not {value!r}")
        out = {}
        for key, item in value.items():
            child = f"{path}.{key}" if path else str(key)
            if key not in node:
                raise KueueConfigInvalid(
                    f'{child}: unknown field "{key}" (Kueue\'s Configuration has no such field)'
                )
            out[key] = _walk(node[key], item, child, leaves)
        return out
    if isinstance(node, ListOf):
        if value is None:
            return []
        if not isinstance(value, list):
            raise KueueConfigInvalid(f"{path}: expected a list, not {value!r}")
        leaves.setdefault(path, value)
        return [_walk(node.item, item, f"{path}[{i}]", {}) for i, item in enumerate(value)]
    if isinstance(node, MapOf):
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise KueueConfigInvalid(f"{path}: expected a map, not {value!r}")
        leaves.setdefault(path, value)
        return {k: _walk(node.value, v, f"{path}.{k}", {}) for k, v in value.items()}
    try:
        checked = node(value)
    except ValueError as exc:
        raise KueueConfigInvalid(f"{path}: {exc}") from None
    leaves[path] = checked
    return checked


# -- translation -------------------------------------------------------------------------------


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
    kueue = {k: v for k, v in data.items() if k != EXTENSIONS_KEY}
    leaves: dict[str, Any] = {}
    file = _walk(SCHEMA, kueue, "", leaves)
    out = Translation()
    gates = _feature_gates(file.get("featureGates") or {})
    _not_implemented(leaves, out)
    _manager(file, out, default_namespace)
    _enforcement(file, out)
    _after_admission(file, gates, out)
    _sharing(file, out)
    _resources(file, gates, out)
    return out


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


def _not_implemented(leaves: Mapping[str, Any], out: Translation) -> None:
    for path, value in leaves.items():
        if path == "featureGates":
            for gate in value:
                if gate not in IMPLEMENTED_GATES:
                    out.not_implemented.append(
                        (f"featureGates.{gate}", "quotagate has no such feature gate")
                    )
        elif path == "integrations.frameworks":
            from controller.integrations.framework.registry import frameworks

            known = frameworks()
            for index, name in enumerate(value):
                if name not in known:
                    out.not_implemented.append(
                        (
                            f"integrations.frameworks[{index}]",
                            f"{name}: no such integration in quotagate; its objects are left alone",
                        )
                    )
        elif _normalise(path) not in IMPLEMENTED and not _implemented_value(path, value):
            out.not_implemented.append((path, _why(path)))


def _implemented_value(path: str, value: Any) -> bool:
    """Fields quotagate reads only at their default value: the default is implemented."""
    defaults: dict[str, Any] = {
        "health.readinessEndpointName": "readyz",
        "health.livenessEndpointName": "healthz",
        "pprofBindAddress": ("", "0"),
        "metrics.enableClusterQueueResources": (True, False),
    }
    found = defaults.get(path)
    if isinstance(found, tuple):
        return value in found
    return found is not None and value == found


def _manager(
    file: Mapping[str, Any], out: Translation, default_namespace: Callable[[], str]
) -> None:
    namespace = file.get("namespace") or default_namespace()
    leader = file.get("leaderElection") or {}
    out.set("leaderElection.enabled", leader.get("leaderElect", True), "leaderElect" in leader)
    out.set(
        "leaderElection.leaseName",
        leader.get("resourceName") or "c1f6bfd2.kueue.x-k8s.io",
        bool(leader.get("resourceName")),
    )
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
    out.set("webhook.port", webhook.get("port") or 9443, "port" in webhook)
    out.set("webhook.address", webhook.get("host") or "0.0.0.0", "host" in webhook)
    out.set(
        "webhook.certDir",
        webhook.get("certDir") or "/tmp/k8s-webhook-server/serving-certs",
        "certDir" in webhook,
    )
    certs = file.get("internalCertManagement") or {}
    enabled = certs.get("enable", True)
    out.set("webhook.internalCertManagement.enabled", enabled, "enable" in certs)
    if enabled:
        out.set(
            "webhook.internalCertManagement.serviceName",
            certs.get("webhookServiceName") or "kueue-webhook-service",
            bool(certs.get("webhookServiceName")),
        )
        out.set(
            "webhook.internalCertManagement.secretName",
            certs.get("webhookSecretName") or "kueue-webhook-server-cert",
            bool(certs.get("webhookSecretName")),
        )


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
    from controller.integrations.framework.registry import frameworks

    known = frameworks()
    listed = integrations.get("frameworks") or ["batch/job"]
    out.set(
        "integrations.frameworks",
        [name for name in listed if name in known],
        "frameworks" in integrations,
    )
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
        if settings["usageHalfLifeTime"] < 0:
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
