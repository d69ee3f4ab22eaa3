"""Kueue's v1beta2 `Configuration` schema (apis/config/v1beta2/configuration_types.go), as a
strict decoder checks a file against it, and which of its fields quotagate implements
(`kueue_config.py` translates those).

`check(data)` walks a file: a key Kueue does not know, or a value of the wrong type, raises
`KueueConfigInvalid` naming the field; it returns the file's values and every leaf present,
by path, so that the fields quotagate does not implement can be listed (`not_implemented`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "FEATURE_GATES",
    "IMPLEMENTED_GATES",
    "LOCKED_GATES",
    "KueueConfigInvalid",
    "check",
    "not_implemented",
]


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
    return int(value)


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
    "PriorityBoost": "the kueue.x-k8s.io/priority-boost annotation (docs/priority-boost.md)",
    "VisibilityOnDemand": "the visibility API is served only while true (Kueue's default)",
    "TASBalancedPlacement": "balanced topology placement of preferred requests while true "
    "(off by default, as in Kueue; docs/tas.md)",
    "TASMultiLayerTopology": "slices in more than one layer are placed while true (Kueue's "
    "default); false: only the outermost layer",
    "TASFailedNodeReplacement": "failed nodes under TAS Workloads replaced (docs/tas.md)",
    "TASFailedNodeReplacementFailFast": "no replacement evicts at once (docs/tas.md)",
    "TASReplaceNodeOnPodTermination": "a NotReady node fails once its pods are gone (docs/tas.md)",
    "TASReplaceNodeDueToNotReadyOverFixedTime": "a NotReady node fails after 30 s (docs/tas.md)",
    "TASReplaceNodeOnNodeTaints": "a Ready node's untolerated NoSchedule/NoExecute taints "
    "fail it (docs/tas.md)",
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
        "integrations.externalFrameworks",
        "integrations.labelKeysToCopy",
        "fairSharing.preemptionStrategies",
        "admissionFairSharing.usageHalfLifeTime",
        "admissionFairSharing.usageSamplingInterval",
        "admissionFairSharing.resourceWeights",
        "resources.quotaCheckStrategy",
        "resources.excludeResourcePrefixes",
        "resources.transformations",
        "featureGates",
        "visibilityServer.bindAddress",
        "visibilityServer.bindPort",
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
    "metrics.enableClusterQueueResources": "ClusterQueue resource metrics are always exported",
    "metrics.customLabels": "custom metric labels are not implemented",
    "metrics.localQueueMetrics": "LocalQueue metrics are always exported; their switch and "
    "localQueueSelector are not read",
    "health.readinessEndpointName": "the endpoints are /readyz and /healthz",
    "health.livenessEndpointName": "the endpoints are /readyz and /healthz",
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


def check(data: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The file's values, checked against Kueue's schema, and its leaves by path."""
    leaves: dict[str, Any] = {}
    return _walk(SCHEMA, data, "", leaves), leaves


def not_implemented(leaves: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(field, why) for each field present that quotagate does not implement (the
    frameworks it has no integration for are `config_report.py`'s)."""
    found = []
    for path, value in leaves.items():
        if path == "featureGates":
            found += [
                (f"featureGates.{gate}", "quotagate has no such feature gate")
                for gate in value
                if gate not in IMPLEMENTED_GATES
            ]
        elif _normalise(path) not in IMPLEMENTED and not _implemented_value(path, value):
            found.append((path, _why(path)))
    return found


def _implemented_value(path: str, value: Any) -> bool:
    """Fields quotagate reads only at their default value: the default is implemented."""
    defaults: dict[str, Any] = {
        "health.readinessEndpointName": ("readyz",),
        "health.livenessEndpointName": ("healthz",),
        "pprofBindAddress": ("", "0"),
        "metrics.enableClusterQueueResources": (True, False),
    }
    return value in defaults.get(path, ())
