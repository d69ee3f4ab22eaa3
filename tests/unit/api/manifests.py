"""Realistic manifests for the API tests, in the form the API server returns them
(defaults filled in, status written, fields quotagate does not model kept)."""

from __future__ import annotations

import copy
from typing import Any

RESOURCE_FLAVOR: dict[str, Any] = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "ResourceFlavor",
    "metadata": {
        "name": "gpu-a100",
        "uid": "0b8c2c4e-7a52-4c5d-9d3f-1f1f6f0e2a01",
        "resourceVersion": "1201",
        "generation": 1,
        "creationTimestamp": "2026-03-01T08:00:00Z",
        "finalizers": ["kueue.x-k8s.io/resource-in-use"],
    },
    "spec": {
        "nodeLabels": {"cloud.provider.com/accelerator": "a100", "pool": "gpu"},
        "nodeTaints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
        "tolerations": [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
            {
                "key": "spot",
                "operator": "Equal",
                "value": "true",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
        ],
    },
}

CLUSTER_QUEUE: dict[str, Any] = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "ClusterQueue",
    "metadata": {
        "name": "team-a",
        "uid": "6f4a1b3c-0d9e-4a8b-8c7d-2e1f0a9b8c7d",
        "resourceVersion": "5531",
        "generation": 3,
        "creationTimestamp": "2026-03-01T08:00:01Z",
        "labels": {"team": "a"},
        "finalizers": ["kueue.x-k8s.io/resource-in-use"],
        "managedFields": [{"manager": "kubectl", "operation": "Apply"}],
    },
    "spec": {
        "cohortName": "research",
        "queueingStrategy": "StrictFIFO",
        "namespaceSelector": {
            "matchLabels": {"team": "a"},
            "matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["prod"]}],
        },
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [
                    {
                        "name": "on-demand",
                        "resources": [
                            {"name": "cpu", "nominalQuota": "9", "borrowingLimit": "6"},
                            {"name": "memory", "nominalQuota": "36Gi", "lendingLimit": "4Gi"},
                        ],
                    },
                    {
                        "name": "spot",
                        "resources": [
                            {"name": "cpu", "nominalQuota": "500m"},
                            {"name": "memory", "nominalQuota": "1536Mi"},
                        ],
                    },
                ],
            },
            {
                "coveredResources": ["nvidia.com/gpu"],
                "flavors": [
                    {
                        "name": "gpu-a100",
                        "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "8"}],
                    }
                ],
            },
        ],
        "flavorFungibility": {
            "whenCanBorrow": "TryNextFlavor",
            "whenCanPreempt": "TryNextFlavor",
            "preference": "PreemptionOverBorrowing",
        },
        "preemption": {
            "reclaimWithinCohort": "Any",
            "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100},
            "withinClusterQueue": "LowerOrNewerEqualPriority",
        },
        "stopPolicy": "None",
        "fairSharing": {"weight": "1"},
        "admissionScope": {"admissionMode": "UsageBasedAdmissionFairSharing"},
        "admissionChecksStrategy": {"admissionChecks": [{"name": "prov", "onFlavors": ["spot"]}]},
    },
    "status": {
        "conditions": [
            {
                "type": "Active",
                "status": "True",
                "reason": "Ready",
                "message": "Can admit new workloads",
                "lastTransitionTime": "2026-03-01T08:00:02Z",
                "observedGeneration": 3,
            }
        ],
        "pendingWorkloads": 4,
        "reservingWorkloads": 2,
        "admittedWorkloads": 2,
        "flavorsReservation": [
            {
                "name": "on-demand",
                "resources": [
                    {"name": "cpu", "total": "10", "borrowed": "1"},
                    {"name": "memory", "total": "20Gi", "borrowed": "0"},
                ],
            },
        ],
        "flavorsUsage": [
            {
                "name": "on-demand",
                "resources": [
                    {"name": "cpu", "total": "10", "borrowed": "1"},
                    {"name": "memory", "total": "20Gi", "borrowed": "0"},
                ],
            },
        ],
    },
}

LOCAL_QUEUE: dict[str, Any] = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "LocalQueue",
    "metadata": {"name": "user-queue", "namespace": "team-a", "uid": "a1", "generation": 1},
    "spec": {"clusterQueue": "team-a", "stopPolicy": "Hold", "fairSharing": {"weight": "2"}},
    "status": {
        "conditions": [
            {
                "type": "Active",
                "status": "False",
                "reason": "Stopped",
                "message": "LocalQueue is stopped",
                "lastTransitionTime": "2026-03-01T09:00:00Z",
            }
        ],
        "pendingWorkloads": 1,
        "reservingWorkloads": 0,
        "admittedWorkloads": 0,
        "flavorsUsage": [{"name": "on-demand", "resources": [{"name": "cpu", "total": "0"}]}],
        "fairSharing": {
            "weightedShare": 0,
            "admissionFairSharingStatus": {
                "consumedResources": {"cpu": "2500m", "memory": "12Gi"},
                "lastUpdate": "2026-03-01T09:00:00Z",
            },
        },
    },
}

COHORT: dict[str, Any] = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "Cohort",
    "metadata": {"name": "research", "generation": 2},
    "spec": {
        "parentName": "org",
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [
                    {
                        "name": "default-flavor",
                        "resources": [
                            {"name": "cpu", "nominalQuota": "8", "lendingLimit": "2"},
                            {"name": "memory", "nominalQuota": "32Gi", "borrowingLimit": "8Gi"},
                        ],
                    }
                ],
            }
        ],
        "fairSharing": {"weight": "2"},
    },
    "status": {
        "fairSharing": {"weightedShare": 0},
        "conditions": [
            {
                "type": "UnsupportedFields",
                "status": "True",
                "reason": "NotImplemented",
                "message": "spec.parentName: hierarchical cohorts are not implemented",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ],
    },
}

WORKLOAD_PRIORITY_CLASS: dict[str, Any] = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "WorkloadPriorityClass",
    "metadata": {"name": "sample-priority", "generation": 1},
    "value": 10000,
    "description": "Sample priority",
}

WORKLOAD: dict[str, Any] = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "Workload",
    "metadata": {
        "name": "job-sample-job-3c2f4",
        "namespace": "team-a",
        "uid": "f3c0a4d2-9e51-4a3b-8f6e-0c1d2e3f4a5b",
        "resourceVersion": "9911",
        "generation": 1,
        "creationTimestamp": "2026-03-01T10:00:00Z",
        "labels": {"kueue.x-k8s.io/job-uid": "0d1e2f3a"},
        "finalizers": ["kueue.x-k8s.io/resource-in-use"],
        "ownerReferences": [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": "sample-job",
                "uid": "0d1e2f3a",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    },
    "spec": {
        "active": True,
        "queueName": "user-queue",
        "priorityClassRef": {
            "group": "kueue.x-k8s.io",
            "kind": "WorkloadPriorityClass",
            "name": "sample-priority",
        },
        "priority": 10000,
        "maximumExecutionTimeSeconds": 3600,
        "preemptibility": "preemptible",
        "disruptionMode": "Pod",
        "podSets": [
            {
                "name": "main",
                "count": 3,
                "minCount": 2,
                "template": {
                    "metadata": {"labels": {"app": "sample"}, "annotations": {"a": "b"}},
                    "spec": {
                        "restartPolicy": "Never",
                        "priorityClassName": "high",
                        "nodeSelector": {"pool": "gpu"},
                        "tolerations": [{"key": "spot", "operator": "Exists"}],
                        "overhead": {"cpu": "250m"},
                        "initContainers": [
                            {
                                "name": "init",
                                "image": "busybox",
                                "resources": {"requests": {"cpu": "2"}},
                            }
                        ],
                        "containers": [
                            {
                                "name": "main",
                                "image": "registry.k8s.io/e2e-test-images/agnhost:2.53",
                                "args": ["pause"],
                                "resources": {
                                    "requests": {"cpu": "1500m", "memory": "200Mi"},
                                    "limits": {"nvidia.com/gpu": "1"},
                                },
                            }
                        ],
                    },
                },
                "topologyRequest": {"preferred": "cloud.provider.com/rack"},
            }
        ],
    },
    "status": {
        "conditions": [
            {
                "type": "QuotaReserved",
                "status": "True",
                "reason": "QuotaReserved",
                "message": "Quota reserved in ClusterQueue team-a",
                "lastTransitionTime": "2026-03-01T10:00:01Z",
                "observedGeneration": 1,
            },
            {
                "type": "Admitted",
                "status": "True",
                "reason": "Admitted",
                "message": "The workload is admitted",
                "lastTransitionTime": "2026-03-01T10:00:01Z",
            },
        ],
        "admission": {
            "clusterQueue": "team-a",
            "podSetAssignments": [
                {
                    "name": "main",
                    "flavors": {
                        "cpu": "on-demand",
                        "memory": "on-demand",
                        "nvidia.com/gpu": "gpu-a100",
                    },
                    "resourceUsage": {"cpu": "5250m", "memory": "600Mi", "nvidia.com/gpu": "3"},
                    "count": 3,
                    "topologyAssignment": {"levels": ["rack"], "slices": []},
                }
            ],
        },
        "requeueState": {"count": 1, "requeueAt": "2026-03-01T09:59:00Z"},
        "schedulingStats": {
            "evictions": [
                {"reason": "Preempted", "underlyingCause": "", "count": 2},
                {"reason": "PodsReadyTimeout", "underlyingCause": "", "count": 1},
            ]
        },
        "preemptionCost": "7",
        "resolvedPreemptibility": {"value": "preemptible", "source": "spec"},
        "resourceRequests": [{"name": "main", "resources": {"cpu": "1500m"}}],
        "accumulatedPastExecutionTimeSeconds": 12,
    },
}

ALL: dict[str, dict[str, Any]] = {
    "ResourceFlavor": RESOURCE_FLAVOR,
    "ClusterQueue": CLUSTER_QUEUE,
    "Cohort": COHORT,
    "LocalQueue": LOCAL_QUEUE,
    "WorkloadPriorityClass": WORKLOAD_PRIORITY_CLASS,
    "Workload": WORKLOAD,
}


def sample(kind: str) -> dict[str, Any]:
    """A fresh deep copy, safe to mutate in a test."""
    return copy.deepcopy(ALL[kind])
