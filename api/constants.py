"""Every name quotagate shares with Kueue and Kubernetes: group, kinds, labels, gates,
finalizers, condition types and reasons, and the closed value sets of the API.

Values are Kueue v1beta2's (`apis/kueue/v1beta2/*_types.go`, `constants.go`,
`pkg/controller/constants`), so manifests and dashboards written for Kueue keep working.
A closed set of values is a `StrEnum`; an open one (labels, annotations) is a `Final` str.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

# --- API group and version ----------------------------------------------------------

GROUP: Final = "kueue.x-k8s.io"
VERSION: Final = "v1beta2"
API_VERSION: Final = f"{GROUP}/{VERSION}"
SCHEDULING_GROUP: Final = "scheduling.k8s.io"
"""Group of the core Kubernetes `PriorityClass` (a Workload's `priorityClassRef.group`)."""


class Kind(StrEnum):
    """The kinds quotagate serves."""

    RESOURCE_FLAVOR = "ResourceFlavor"
    CLUSTER_QUEUE = "ClusterQueue"
    LOCAL_QUEUE = "LocalQueue"
    WORKLOAD = "Workload"
    WORKLOAD_PRIORITY_CLASS = "WorkloadPriorityClass"
    COHORT = "Cohort"
    TOPOLOGY = "Topology"
    ADMISSION_CHECK = "AdmissionCheck"
    PROVISIONING_REQUEST_CONFIG = "ProvisioningRequestConfig"


# --- labels, annotations, gates, finalizers -----------------------------------------

QUEUE_NAME_LABEL: Final = "kueue.x-k8s.io/queue-name"
"""On a Job or pod: the LocalQueue (in the same namespace) it is submitted to."""
POD_GROUP_NAME_LABEL: Final = "kueue.x-k8s.io/pod-group-name"
"""On pods: pods with the same value form one Workload (named after the group)."""
PRIORITY_CLASS_LABEL: Final = "kueue.x-k8s.io/priority-class"
"""On a Job or pod: the WorkloadPriorityClass; wins over the pod's PriorityClass."""
MAX_EXEC_TIME_LABEL: Final = "kueue.x-k8s.io/max-exec-time-seconds"
"""On a Job or pod (a whole number of seconds > 0): its Workload's
`spec.maximumExecutionTimeSeconds` (Kueue's jobframework)."""
MANAGED_LABEL: Final = "kueue.x-k8s.io/managed"
# The uid of the job a Workload was made for (Kueue puts it in preemption messages).
JOB_UID_LABEL: Final = "kueue.x-k8s.io/job-uid"
"""On pods (value `true`): the pod is managed by quotagate."""
PREEMPTIBILITY_LABEL: Final = "kai.scheduler/preemptibility"
"""On a pod or its owners: `preemptible` | `non-preemptible` | `semi-preemptible` (KAI)."""

OWNER_PREEMPTIBILITY_ANNOTATION: Final = "quotagate.x-k8s.io/owner-preemptibility"
"""On a Workload made from pods: JSON list of the owners' preemptibility labels, nearest
owner first ("" where an owner has none); read by the preemptibility resolver."""
POD_PREEMPTIBILITY_ANNOTATION: Final = "quotagate.x-k8s.io/pod-preemptibility"
"""On a Workload made from pods: the pods' preemptibility label."""

MINIMUM_RUNTIME_ANNOTATION: Final = "quotagate.x-k8s.io/minimum-runtime-seconds"
"""On a ClusterQueue (a whole number of seconds): its Workloads are not preemption
candidates for that long after their quota reservation, except to reclaim borrowed quota
(controller/core/preemption/minimum_runtime.py)."""
EXPECTED_RUNTIME_ANNOTATION: Final = "quotagate.x-k8s.io/expected-runtime-seconds"
"""On a Workload (a whole number of seconds): how long it is expected to run once admitted;
used only by the admission wait-time estimate (`kubectl quotagate describe`)."""
POD_GROUP_TOTAL_COUNT_ANNOTATION: Final = "kueue.x-k8s.io/pod-group-total-count"
"""On pods of a group: how many pods the group expects."""
POD_GROUP_NAME_ANNOTATION: Final = "kueue.x-k8s.io/pod-group-name"
"""On pods: the pod group's name as an annotation (Kueue's WorkloadIdentifierAnnotations);
the pod webhook validates it as Kueue does, the pods are grouped by the label only."""
RETRIABLE_IN_GROUP_ANNOTATION: Final = "kueue.x-k8s.io/retriable-in-group"
"""On pods of a group: "false" makes the group unretriable (a Kueue annotation the pod
webhook keeps from being turned back)."""
PRIORITY_BOOST_ANNOTATION: Final = "kueue.x-k8s.io/priority-boost"
"""On a Workload: a signed 32-bit integer added to its priority (Kueue's PriorityBoost gate,
alpha, off by default; `featureGates: {PriorityBoost: true}`). Missing = 0."""
ADMISSION_GATED_BY_ANNOTATION: Final = "kueue.x-k8s.io/admission-gated-by"
"""On a Workload (or the Job or pods it is made from): comma-separated gates, each a
domain-prefixed path; the Workload is not admitted while any is left (Kueue's
AdmissionGatedBy, on by default). Gates may only be removed after creation."""
ELASTIC_JOB_ANNOTATION: Final = "kueue.x-k8s.io/elastic-job"
"""On a job object (value `true`): Kueue's elastic jobs (workload slices), not implemented by
quotagate; Kueue refuses it together with a pod set's minCount."""
POD_SUSPENDING_PARENT_ANNOTATION: Final = "kueue.x-k8s.io/pod-suspending-parent"
"""On the pod template of a Deployment, StatefulSet or LeaderWorkerSet (the framework's
name): its pods are gated and queued through the pod integration."""
POD_GROUP_SERVING_ANNOTATION: Final = "kueue.x-k8s.io/pod-group-serving"
"""On pods of a group (`"true"`): a serving group, admitted and never finished."""
ROLE_HASH_ANNOTATION: Final = "kueue.x-k8s.io/role-hash"
"""On pods of a group: the pod set of their Workload they belong to."""

ADMISSION_GATE: Final = "kueue.x-k8s.io/admission"
"""Scheduling gate held on a pod until its Workload is admitted."""

RESOURCE_IN_USE_FINALIZER: Final = "kueue.x-k8s.io/resource-in-use"
"""On Workloads (and ClusterQueues, LocalQueues, ResourceFlavors in use)."""
MANAGED_POD_FINALIZER: Final = "kueue.x-k8s.io/managed"
"""On managed pods, so that a deleted pod's quota is accounted before it disappears."""

DEFAULT_POD_SET_NAME: Final = "main"


# --- conditions ---------------------------------------------------------------------


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class WorkloadConditionType(StrEnum):
    QUOTA_RESERVED = "QuotaReserved"
    ADMITTED = "Admitted"
    EVICTED = "Evicted"
    PREEMPTED = "Preempted"
    REQUEUED = "Requeued"
    FINISHED = "Finished"
    PODS_READY = "PodsReady"


class QueueConditionType(StrEnum):
    """Condition types of ClusterQueues, LocalQueues (and ResourceFlavors in Kueue)."""

    ACTIVE = "Active"


class QuotaReservedReason(StrEnum):
    """Reasons of a Workload's `QuotaReserved` condition (True: QUOTA_RESERVED)."""

    QUOTA_RESERVED = "QuotaReserved"
    WAITING_FOR_QUOTA = "WaitingForQuota"
    EXCEEDS_MAX_QUOTA = "ExceedsMaxQuota"
    NO_MATCHING_FLAVOR = "NoMatchingFlavor"
    WAITING_FOR_PREEMPTED_WORKLOADS = "WaitingForPreemptedWorkloads"
    MISCONFIGURED = "Misconfigured"
    SUSPENDED = "Suspended"
    PENDING_EVALUATION = "PendingEvaluation"
    ON_HOLD = "OnHold"
    PENDING = "Pending"
    """Legacy (Kueue with UnadmittedWorkloadsObservability off)."""
    WAITING = "Waiting"
    """Legacy (Kueue with UnadmittedWorkloadsObservability off)."""


class AdmittedReason(StrEnum):
    ADMITTED = "Admitted"
    NO_RESERVATION = "NoReservation"
    UNSATISFIED_ADMISSION_CHECKS = "UnsatisfiedAdmissionChecks"


class EvictionReason(StrEnum):
    """Reasons of `Evicted=True` (and of `schedulingStats.evictions[].reason`)."""

    PREEMPTED = "Preempted"
    PODS_READY_TIMEOUT = "PodsReadyTimeout"
    CLUSTER_QUEUE_STOPPED = "ClusterQueueStopped"
    LOCAL_QUEUE_STOPPED = "LocalQueueStopped"
    DEACTIVATED = "Deactivated"
    NODE_FAILURES = "NodeFailures"
    ADMISSION_CHECK = "AdmissionCheck"


class PreemptionReason(StrEnum):
    """Reasons of `Preempted=True`: where the preemptor's quota came from."""

    IN_CLUSTER_QUEUE = "InClusterQueue"
    IN_COHORT_RECLAMATION = "InCohortReclamation"
    IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"
    IN_COHORT_FAIR_SHARING = "InCohortFairSharing"


class RequeueReason(StrEnum):
    """Reasons of `Requeued`; True after `Preempted`/`NodeFailures` uses the eviction reason."""

    PREEMPTED = "Preempted"
    NODE_FAILURES = "NodeFailures"
    BACKOFF_FINISHED = "BackoffFinished"
    REACTIVATED = "Reactivated"
    CLUSTER_QUEUE_RESTARTED = "ClusterQueueRestarted"
    LOCAL_QUEUE_RESTARTED = "LocalQueueRestarted"
    PODS_READY_TIMEOUT = "PodsReadyTimeout"
    DEACTIVATED = "Deactivated"
    INADMISSIBLE = "Inadmissible"


class FinishedReason(StrEnum):
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    OUT_OF_SYNC = "OutOfSync"
    OWNER_NOT_FOUND = "OwnerNotFound"


class PodsReadyReason(StrEnum):
    STARTED = "Started"
    RECOVERED = "Recovered"
    WAIT_FOR_START = "WaitForStart"
    WAIT_FOR_RECOVERY = "WaitForRecovery"


class ActiveReason(StrEnum):
    """Reasons of a ClusterQueue's or LocalQueue's `Active` condition."""

    READY = "Ready"
    STOPPED = "Stopped"
    TERMINATING = "Terminating"
    FLAVOR_NOT_FOUND = "FlavorNotFound"
    CLUSTER_QUEUE_DOES_NOT_EXIST = "ClusterQueueDoesNotExist"
    CLUSTER_QUEUE_IS_INACTIVE = "ClusterQueueIsInactive"


# --- closed value sets of spec fields -----------------------------------------------


class QueueingStrategy(StrEnum):
    STRICT_FIFO = "StrictFIFO"
    BEST_EFFORT_FIFO = "BestEffortFIFO"


class StopPolicy(StrEnum):
    NONE = "None"
    HOLD = "Hold"
    HOLD_AND_DRAIN = "HoldAndDrain"


class AdmissionMode(StrEnum):
    """A ClusterQueue's `spec.admissionScope.admissionMode` (Kueue's admission fair sharing)."""

    USAGE_BASED_ADMISSION_FAIR_SHARING = "UsageBasedAdmissionFairSharing"
    NO_ADMISSION_FAIR_SHARING = "NoAdmissionFairSharing"


class WithinClusterQueuePolicy(StrEnum):
    """`spec.preemption.withinClusterQueue`."""

    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    LOWER_OR_NEWER_EQUAL_PRIORITY = "LowerOrNewerEqualPriority"


class ReclaimWithinCohortPolicy(StrEnum):
    """`spec.preemption.reclaimWithinCohort`."""

    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    ANY = "Any"


class BorrowWithinCohortPolicy(StrEnum):
    """`spec.preemption.borrowWithinCohort.policy`."""

    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"


class FlavorFungibilityPolicy(StrEnum):
    """`spec.flavorFungibility.whenCanBorrow` / `whenCanPreempt`."""

    MAY_STOP_SEARCH = "MayStopSearch"
    TRY_NEXT_FLAVOR = "TryNextFlavor"


class FlavorFungibilityPreference(StrEnum):
    """`spec.flavorFungibility.preference` (only with both policies `TryNextFlavor`)."""

    BORROWING_OVER_PREEMPTION = "BorrowingOverPreemption"
    PREEMPTION_OVER_BORROWING = "PreemptionOverBorrowing"


class PriorityClassGroup(StrEnum):
    """`spec.priorityClassRef.group`."""

    KUEUE = GROUP
    SCHEDULING = SCHEDULING_GROUP


class PriorityClassKind(StrEnum):
    """`spec.priorityClassRef.kind`."""

    WORKLOAD_PRIORITY_CLASS = "WorkloadPriorityClass"
    PRIORITY_CLASS = "PriorityClass"


class PriorityClassPreemptionPolicy(StrEnum):
    """`preemptionPolicy` of a scheduling.k8s.io PriorityClass: whether its Workloads may
    preempt at all."""

    PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"
    NEVER = "Never"


class Preemptibility(StrEnum):
    """`spec.preemptibility` and the `kai.scheduler/preemptibility` label (KAI)."""

    PREEMPTIBLE = "preemptible"
    NON_PREEMPTIBLE = "non-preemptible"
    SEMI_PREEMPTIBLE = "semi-preemptible"


class PreemptibilitySource(StrEnum):
    """Where `status.resolvedPreemptibility` came from, in resolution order."""

    SPEC = "spec"
    OWNER_LABEL = "ownerLabel"
    POD_LABEL = "podLabel"
    PRIORITY_THRESHOLD = "priorityThreshold"
    DEFAULT = "default"


class DisruptionMode(StrEnum):
    """`spec.disruptionMode` (KEP-5710): preempt the whole group, or pods above minCount."""

    POD_GROUP = "PodGroup"
    POD = "Pod"


class CheckState(StrEnum):
    """An admission check's state on a Workload, written by the check's controller."""

    PENDING = "Pending"
    READY = "Ready"
    RETRY = "Retry"
    REJECTED = "Rejected"


class GatePosition(StrEnum):
    """A preemption gate's position (Kueue's; not implemented by quotagate)."""

    CLOSED = "Closed"
    OPEN = "Open"


class DelayedTopologyRequestState(StrEnum):
    """Kueue's delayed topology request of a pod set assignment."""

    PENDING = "Pending"
    READY = "Ready"


class ConcurrentAdmissionMode(StrEnum):
    """Kueue's `concurrentAdmissionPolicy.migration.mode` (not implemented by quotagate)."""

    TRY_PREFERRED_FLAVORS = "TryPreferredFlavors"
    RETAIN_FIRST_ADMISSION = "RetainFirstAdmission"


class TaintEffect(StrEnum):
    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


class TolerationOperator(StrEnum):
    EXISTS = "Exists"
    EQUAL = "Equal"


class LabelSelectorOperator(StrEnum):
    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"


# --- the job framework's labels and annotations (Kueue's jobframework and jobs) ------

JOB_MIN_PARALLELISM_ANNOTATION: Final = "kueue.x-k8s.io/job-min-parallelism"
"""On a batch/v1 Job: the fewest pods it can run with (its pod set's `minCount`: partial
admission)."""
JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION: Final = (
    "kueue.x-k8s.io/job-completions-equal-parallelism"
)
"""On an Indexed batch/v1 Job (`"true"`): completions follow the admitted parallelism."""
PREBUILT_WORKLOAD_LABEL: Final = "kueue.x-k8s.io/prebuilt-workload-name"
"""On a job object (label or annotation): the existing Workload it runs under, instead of
one made for it."""
POD_SET_LABEL: Final = "kueue.x-k8s.io/podset"
"""On an admitted job's pod template: the name of its pod set."""
HOSTNAME_LABEL: Final = "kubernetes.io/hostname"
"""The node label of a topology's lowest level when that level is the node itself."""
TOPOLOGY_SCHEDULING_GATE: Final = "kueue.x-k8s.io/topology"
"""The scheduling gate holding a TAS pod until its domain's node selector is set."""
WORKLOAD_ANNOTATION: Final = "kueue.x-k8s.io/workload"
"""On an admitted TAS pod set's pods: the name of their Workload (the topology ungater
finds them by it)."""
POD_INDEX_OFFSET_ANNOTATION: Final = "kueue.x-k8s.io/pod-index-offset"
"""On a pod: what its pod index label counts beyond its rank in the pod set (the topology
ungater subtracts it)."""
POD_GROUP_POD_INDEX_LABEL: Final = "kueue.x-k8s.io/pod-group-pod-index"
"""On a plain pod or a pod group's pod: its rank in the group (the pod set's
`topologyRequest.podIndexLabel`)."""
POD_GROUP_POD_INDEX_LABEL_ANNOTATION: Final = "kueue.x-k8s.io/pod-group-pod-index-label"
"""On a pod: the label holding its index, copied by the webhook into
`kueue.x-k8s.io/pod-group-pod-index`."""
POD_SET_REQUIRED_TOPOLOGY_ANNOTATION: Final = "kueue.x-k8s.io/podset-required-topology"
POD_SET_PREFERRED_TOPOLOGY_ANNOTATION: Final = "kueue.x-k8s.io/podset-preferred-topology"
POD_SET_UNCONSTRAINED_TOPOLOGY_ANNOTATION: Final = "kueue.x-k8s.io/podset-unconstrained-topology"
POD_SET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION: Final = "kueue.x-k8s.io/podset-slice-required-topology"
POD_SET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS_ANNOTATION: Final = (
    "kueue.x-k8s.io/podset-slice-required-topology-constraints"
)
POD_SET_SLICE_SIZE_ANNOTATION: Final = "kueue.x-k8s.io/podset-slice-size"
POD_SET_GROUP_NAME_ANNOTATION: Final = "kueue.x-k8s.io/podset-group-name"
"""On a pod template: the topology a pod set asks for (Kueue's topology-aware scheduling);
they become the pod set's `topologyRequest`."""
