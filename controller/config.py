"""The controller's configuration file (`quotagate run --config FILE`; `quotagate plan --config`
reads the same file for the parts that decide admission: `configure_state`).

Every option has a documented default, so an empty file (or none) is a valid
configuration. Unknown keys are errors: a typo must not be silently ignored.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from controller.config_sections import (
    Resources,
    default_namespace_selector,
    parse_namespace_selector,
)
from controller.core.afs.usage import AdmissionFairSharing
from controller.core.fairsharing.settings import ALLOWED_STRATEGIES, FairSharing, PreemptionStrategy
from controller.core.model.selectors import LabelSelector
from controller.core.state import ClusterState
from controller.core.tas.node_failure import NodeFailureGates
from controller.kube.leader import LeaderElection
from controller.kueue_config import (
    EXTENSIONS_KEY,
    KueueConfigInvalid,
    is_kueue_configuration,
    translate,
)


class ConfigError(ValueError):
    """An invalid configuration; the message names the offending key."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns))+$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def parse_duration(value: Any) -> float:
    """A Kubernetes `metav1.Duration` ("30m", "1h30m", "2.5s", "0s") in seconds; a bare
    number is taken as seconds. Negative durations are refused."""
    if isinstance(value, bool):
        raise ValueError(f"expected a duration such as 30s or 5m, not {value!r}")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and _DURATION.match(value.strip()):
        seconds = sum(
            float(number) * _UNIT_SECONDS[unit]
            for number, unit in _DURATION_PART.findall(value.strip())
        )
    else:
        raise ValueError(f"expected a duration such as 30s, 5m or 1h30m, not {value!r}")
    if seconds < 0:
        raise ValueError(f"must not be negative, not {value!r}")
    return seconds


class RequeuingStrategy(_Section):
    """Kueue's `waitForPodsReady.requeuingStrategy`: how a Workload evicted for
    PodsReadyTimeout waits before it competes again, and when it is given up."""

    timestamp: Literal["Eviction", "Creation"] = Field(
        "Eviction",
        description="queue order of a requeued Workload: its PodsReadyTimeout eviction time "
        "(Eviction) or its creation time (Creation)",
    )
    backoff_limit_count: int | None = Field(
        None,
        alias="backoffLimitCount",
        ge=0,
        description="requeues before the Workload is deactivated (RequeuingLimitExceeded); "
        "unset = requeue forever",
    )
    backoff_base_seconds: int = Field(
        60, alias="backoffBaseSeconds", ge=0, description="first delay: base·2^(count−1)"
    )
    backoff_max_seconds: int = Field(
        3600, alias="backoffMaxSeconds", ge=0, description="cap on the delay (0 = no cap)"
    )


class WaitForPodsReady(_Section):
    """Kueue's `waitForPodsReady`: an admitted Workload whose pods are not all ready in
    time gives its quota back (docs/after-admission.md)."""

    enable: bool = Field(
        True,
        description="on when the section is given (Kueue v1beta2); `enable: false` turns it "
        "off (v1beta1's switch)",
    )
    timeout: float = Field(
        30 * 60.0,
        description="time from admission to PodsReady=True before eviction (PodsReadyTimeout)",
    )
    recovery_timeout: float | None = Field(
        None,
        alias="recoveryTimeout",
        description="time from PodsReady turning False (WaitForRecovery) before eviction; "
        "unset = timeout, 0s = off",
    )
    block_admission: bool = Field(
        False,
        alias="blockAdmission",
        description="admit nothing while an admitted Workload is not PodsReady",
    )
    requeuing_strategy: RequeuingStrategy = Field(
        default_factory=lambda: RequeuingStrategy(), alias="requeuingStrategy"
    )

    @field_validator("timeout", "recovery_timeout", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> Any:
        return None if value is None else parse_duration(value)

    @model_validator(mode="after")
    def _positive_timeout(self) -> WaitForPodsReady:
        if self.enable and self.timeout <= 0:
            raise ValueError("timeout: must be more than 0s")
        return self


class Preemptibility(_Section):
    """How a Workload's preemptibility is resolved when nothing more specific says."""

    priority_threshold: int | None = Field(
        None,
        alias="priorityThreshold",
        description="if set, priority < threshold ⇒ preemptible, else non-preemptible "
        "(KAI uses 100); unset keeps Kueue's behaviour: everything is preemptible",
    )


class FairSharingConfig(_Section):
    """Kueue's `fairSharing`: share idle quota in a cohort by weight (docs/fair-sharing.md)."""

    enable: bool = Field(
        True,
        description="on when the section is given (Kueue v1beta2); `enable: false` turns it "
        "off (v1beta1's switch)",
    )
    preemption_strategies: list[PreemptionStrategy] = Field(
        default_factory=lambda: list(ALLOWED_STRATEGIES[2]),
        alias="preemptionStrategies",
        description="LessThanOrEqualToFinalShare, LessThanInitialShare, or both in that order",
    )

    @field_validator("preemption_strategies")
    @classmethod
    def _allowed(cls, value: list[PreemptionStrategy]) -> list[PreemptionStrategy]:
        if not value:
            return list(ALLOWED_STRATEGIES[2])  # Kueue: empty means the default pair
        if tuple(value) not in ALLOWED_STRATEGIES:
            allowed = ", ".join(str(list(map(str, s))) for s in ALLOWED_STRATEGIES)
            raise ValueError(f"must be one of {allowed}, not {list(map(str, value))}")
        return value

    def core(self) -> FairSharing | None:
        return FairSharing(tuple(self.preemption_strategies)) if self.enable else None


class AdmissionFairSharingConfig(_Section):
    """Kueue's `admissionFairSharing`: order a ClusterQueue's Workloads by their
    LocalQueue's recent usage (docs/admission-fair-sharing.md)."""

    usage_half_life_time: float = Field(
        0.0,
        alias="usageHalfLifeTime",
        description="time after which consumed usage decays by half; 0s resets it at every sample",
    )
    usage_sampling_interval: float = Field(
        300.0,
        alias="usageSamplingInterval",
        description="how often a LocalQueue's consumed usage is updated",
    )
    resource_weights: dict[str, float] = Field(
        default_factory=dict,
        alias="resourceWeights",
        description="per resource, its weight in a LocalQueue's usage (unlisted: 1)",
    )

    @field_validator("usage_half_life_time", "usage_sampling_interval", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> Any:
        return parse_duration(value)

    @field_validator("usage_sampling_interval")
    @classmethod
    def _positive_interval(cls, value: float) -> float:
        if value <= 0:
            raise ValueError("must be more than 0s")
        return value

    @field_validator("resource_weights")
    @classmethod
    def _weights(cls, value: dict[str, float]) -> dict[str, float]:
        for name, weight in value.items():
            if weight < 0:
                raise ValueError(f"{name}: a weight must not be negative, not {weight}")
        return value

    def core(self) -> AdmissionFairSharing:
        return AdmissionFairSharing(
            self.usage_half_life_time, self.usage_sampling_interval, dict(self.resource_weights)
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
        description="the Mutating- and ValidatingWebhookConfiguration (one name, two kinds) "
        "whose caBundle is kept in step",
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
    """The webhook server: the mutating webhook that gates queue-labelled pods and suspends
    queue-labelled Jobs, and the validating webhook that refuses what Kueue's webhooks
    refuse on ResourceFlavors, ClusterQueues, Cohorts, LocalQueues and Workloads."""

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
    validation: bool = Field(
        True,
        description="with manageConfiguration: register the ValidatingWebhookConfiguration "
        "`quotagate` for Kueue's kinds too (the server always answers it)",
    )
    validation_failure_policy: Literal["Fail", "Ignore"] = Field(
        "Fail",
        alias="validationFailurePolicy",
        description="the validating webhook's failurePolicy when manageConfiguration "
        "registers it: Fail (Kueue's) refuses writes of Kueue's kinds while no replica "
        "answers; Ignore lets them through unchecked, and the controller reports what it "
        "finds invalid",
    )


KUEUE_FRAMEWORKS = (
    "batch/job",
    "kubeflow.org/mpijob",
    "ray.io/rayjob",
    "ray.io/rayservice",
    "ray.io/raycluster",
    "jobset.x-k8s.io/jobset",
    "kubeflow.org/paddlejob",
    "kubeflow.org/pytorchjob",
    "kubeflow.org/tfjob",
    "kubeflow.org/xgboostjob",
    "kubeflow.org/jaxjob",
    "trainer.kubeflow.org/trainjob",
    "workload.codeflare.dev/appwrapper",
    "sparkoperator.k8s.io/sparkapplication",
    "pod",
    "deployment",
    "statefulset",
    "leaderworkerset.x-k8s.io/leaderworkerset",
)
"""Every name Kueue's `integrations.frameworks` accepts (Kueue's `Integrations` type);
which of them quotagate implements is the integrations registry's
(controller/integrations/framework/registry.py), checked when `quotagate run` starts."""


class Integrations(_Section):
    """Kueue's `integrations`: which kinds of job objects are queued."""

    frameworks: list[str] = Field(
        default_factory=lambda: ["batch/job"],
        description="Kueue's framework names of the integrations to run (Kueue's default: "
        "batch/job only)",
    )
    external_frameworks: list[str] = Field(
        default_factory=list,
        alias="externalFrameworks",
        description="kinds managed for Kueue by external controllers: not implemented, listed "
        "at start as such (their Workloads are queued, no object is run for them)",
    )
    label_keys_to_copy: list[str] = Field(
        default_factory=list,
        alias="labelKeysToCopy",
        description="label keys copied from a job object to its Workload when it is created",
    )

    @field_validator("frameworks")
    @classmethod
    def _kueue_names(cls, value: list[str]) -> list[str]:
        if not value:
            return ["batch/job"]  # Kueue's defaulting: an empty list is the default
        seen: set[str] = set()
        for index, name in enumerate(value):
            if name not in KUEUE_FRAMEWORKS:
                raise ValueError(
                    f"[{index}]: {name!r} is not a Kueue framework; supported values: "
                    + ", ".join(KUEUE_FRAMEWORKS)
                )
            if name in seen:
                raise ValueError(f"[{index}]: {name!r} is listed twice")
            seen.add(name)
        return value


class Visibility(_Section):
    """Kueue's visibility API (`visibility.kueue.x-k8s.io/v1beta2`: the pending Workloads of
    a ClusterQueue or a LocalQueue with their positions), served by every replica as an
    aggregated API behind the APIService `v1beta2.visibility.kueue.x-k8s.io`
    (controller/runtime/visibility_server.py, docs/visibility.md)."""

    enabled: bool = Field(False, description="serve it (the chart turns it on, as Kueue does)")
    address: str = Field("0.0.0.0", description="address to listen on")
    port: int = Field(8082, ge=1, le=65535, description="Kueue's port")
    service_name: str = Field(
        "quotagate-visibility",
        alias="serviceName",
        min_length=1,
        description="the Service the APIService points at (in the leader-election namespace); "
        "the managed webhook certificate names it too",
    )
    manage_api_service: bool = Field(
        False,
        alias="manageAPIService",
        description="local runs: create/update that Service (without selector), an "
        "EndpointSlice to endpointAddress and the APIService with our CA; in a cluster the "
        "chart ships them",
    )
    endpoint_address: str | None = Field(
        None,
        alias="endpointAddress",
        description="with manageAPIService: the IP the API server reaches this process at "
        "(not a loopback address: Kubernetes refuses those in an EndpointSlice)",
    )

    @model_validator(mode="after")
    def _managed_needs_an_address(self) -> Visibility:
        if self.manage_api_service and not self.endpoint_address:
            raise ValueError("manageAPIService needs endpointAddress")
        return self


IMPLEMENTED_FEATURE_GATES: dict[str, bool] = {
    "PriorityBoost": False,
    "VisibilityOnDemand": True,
    "TASBalancedPlacement": False,
    "TASMultiLayerTopology": True,
    # Failed nodes under TAS Workloads (controller/core/tas/node_failure.py).
    **{name: bool(getattr(NodeFailureGates(), attr)) for name, attr in NodeFailureGates.GATES},
}
"""Kueue's feature gates quotagate reads from `featureGates`, with Kueue's defaults."""


class ControllerConfig(_Section):
    """Top-level configuration of `quotagate run`."""

    namespaces: list[str] = Field(
        default_factory=list, description="namespaces to manage; empty = all namespaces"
    )
    wait_for_pods_ready: WaitForPodsReady | None = Field(
        None,
        alias="waitForPodsReady",
        description="Kueue's waitForPodsReady; unset = off (docs/after-admission.md)",
    )
    preemptibility: Preemptibility = Field(default_factory=Preemptibility)
    fair_sharing: FairSharingConfig | None = Field(
        None,
        alias="fairSharing",
        description="Kueue's fairSharing; unset = off (docs/fair-sharing.md)",
    )
    admission_fair_sharing: AdmissionFairSharingConfig | None = Field(
        None,
        alias="admissionFairSharing",
        description="Kueue's admissionFairSharing; unset = off (docs/admission-fair-sharing.md)",
    )
    manage_jobs_without_queue_name: bool = Field(
        False,
        alias="manageJobsWithoutQueueName",
        description="Kueue's: also manage jobs without the queue-name label in the namespaces "
        "managedJobsNamespaceSelector selects (docs/enforcement.md)",
    )
    managed_jobs_namespace_selector: dict[str, Any] | None = Field(
        None,
        alias="managedJobsNamespaceSelector",
        description="Kueue's: the namespaces whose jobs are managed at all; unset = every "
        "namespace but kube-system and leaderElection.leaseNamespace",
    )
    resources: Resources = Field(default_factory=lambda: Resources())
    provisioning_request: bool = Field(
        True,
        alias="provisioningRequest",
        description="run the ProvisioningRequest admission check controller "
        "(kueue.x-k8s.io/provisioning-request); false: such checks stay inactive",
    )
    leader_election: LeaderElection = Field(
        default_factory=lambda: LeaderElection(), alias="leaderElection"
    )
    webhook: Webhook = Field(default_factory=lambda: Webhook())
    visibility: Visibility = Field(default_factory=lambda: Visibility())
    feature_gates: dict[str, bool] = Field(
        default_factory=dict,
        alias="featureGates",
        description=(
            "Kueue's featureGates; read: PriorityBoost (off), VisibilityOnDemand (on), "
            "TASBalancedPlacement (off), TASMultiLayerTopology (on), "
            "TASFailedNodeReplacement (on), TASFailedNodeReplacementFailFast (on), "
            "TASReplaceNodeOnPodTermination (on), TASReplaceNodeDueToNotReadyOverFixedTime (off), "
            "TASReplaceNodeOnNodeTaints (on)"
        ),
    )
    integrations: Integrations = Field(default_factory=lambda: Integrations())
    metrics_port: int = Field(8080, alias="metricsPort", ge=0, le=65535, description="0 = off")
    health_port: int = Field(
        8081,
        alias="healthPort",
        ge=0,
        le=65535,
        description="port of /healthz and /readyz for the kubelet's probes; 0 = off",
    )
    write_parallelism: int = Field(
        16,
        alias="writeParallelism",
        ge=1,
        le=256,
        description="concurrent API writes of decisions (admissions, evictions); information "
        "(pending reasons, queue statuses, conditions) has a sixteenth as many of its own",
    )
    write_parallelism_max: int | None = Field(
        32,
        alias="writeParallelismMax",
        ge=1,
        le=256,
        description="the most concurrent decision writes: above writeParallelism, the controller adds a "
        "slot each second while the API server's watch keeps up (the last second's decision writes "
        "reached the Workload watch within 0.5 s on average) and decisions wait for one, and keeps "
        "70 % of them (never fewer than writeParallelism) while the mean is over 2 s; null or "
        "writeParallelism: fixed",
    )
    event_qps: float = Field(
        10.0,
        alias="eventQPS",
        gt=0,
        description="Events recorded per second at most, beyond a burst (as the kubelet's "
        "eventRecordQPS); Events over the limit are dropped and counted in "
        "quotagate_events_dropped_total",
    )
    event_burst: int = Field(100, alias="eventBurst", ge=1, description="Events allowed in a burst")
    pending_reason_delay_seconds: float = Field(
        1.0,
        alias="pendingReasonDelaySeconds",
        ge=0,
        description="how long a refused Workload waits before its pending reason is written; "
        "one admitted meanwhile gets none, and the reasons of that time coalesce into the latest",
    )
    pending_reason_qps: float = Field(
        20.0,
        alias="pendingReasonQPS",
        gt=0,
        description="pending reasons (and resolvedPreemptibility patches) written per second at "
        "most, beyond a burst; under a backlog each Workload's latest reason waits its turn, and "
        "one admitted meanwhile gets none",
    )
    pending_reason_burst: int = Field(
        100, alias="pendingReasonBurst", ge=1, description="pending reasons written in a burst"
    )
    cycle_interval_seconds: float = Field(
        0.02,
        alias="cycleIntervalSeconds",
        gt=0,
        description="pause after each admission cycle, so a burst of events is decided in one cycle; "
        "a cycle that took longer is followed by as long a pause (the watches and writers get at "
        "least half of the controller's event loop)",
    )

    def gate(self, name: str) -> bool:
        """A Kueue feature gate quotagate reads: as configured, else Kueue's default."""
        return self.feature_gates.get(name, IMPLEMENTED_FEATURE_GATES[name])

    def serves_visibility(self) -> bool:
        return self.visibility.enabled and self.gate("VisibilityOnDemand")

    _not_implemented: tuple[tuple[str, str], ...] = PrivateAttr(default=())
    _notes: tuple[str, ...] = PrivateAttr(default=())
    _kueue_format: bool = PrivateAttr(default=False)

    @property
    def notes(self) -> tuple[str, ...]:
        """How a Kueue file's implemented fields were read where quotagate differs."""
        return self._notes

    @property
    def kueue_format(self) -> bool:
        """Whether the file was Kueue's Configuration."""
        return self._kueue_format

    @property
    def own_namespace(self) -> str:
        """Where the controller runs (Kueue's `namespace`): the Lease's namespace."""
        return self.leader_election.lease_namespace

    @property
    def namespace_selector_spec(self) -> dict[str, Any]:
        """`managedJobsNamespaceSelector` as given, or Kueue's default."""
        if self.managed_jobs_namespace_selector is not None:
            return self.managed_jobs_namespace_selector
        return default_namespace_selector(self.own_namespace)

    def namespace_selector(self) -> LabelSelector:
        """`managedJobsNamespaceSelector` as the integrations match it."""
        return parse_namespace_selector(self.namespace_selector_spec, self.own_namespace)

    @property
    def not_implemented(self) -> tuple[tuple[str, str], ...]:
        """(field, why) for each field quotagate read but does not implement: of a Kueue
        Configuration file (`kueue_config.py`), and the integrations it does not have."""
        return self._not_implemented

    @model_validator(mode="after")
    def _namespace_selector_is_valid(self) -> ControllerConfig:
        try:
            self.namespace_selector()
        except ValueError as exc:
            raise ValueError(f"managedJobsNamespaceSelector: {exc}") from None
        return self

    @model_validator(mode="before")
    @classmethod
    def _requeue_backoff_moved(cls, data: Any) -> Any:
        if isinstance(data, dict) and "requeueBackoff" in data:
            raise ValueError(
                "requeueBackoff was removed: the backoff after a PodsReadyTimeout eviction is "
                "waitForPodsReady.requeuingStrategy.backoffBaseSeconds/backoffMaxSeconds "
                "(Kueue's fields); other evictions requeue at once, as in Kueue"
            )
        return data


def load_config(path: Path | None, overrides: dict[str, Any] | None = None) -> ControllerConfig:
    """Read and validate a YAML config file, in quotagate's own format or as Kueue's
    Configuration (`kueue_config.py`); `overrides` (from flags) win over the file."""
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
    source = str(path) if path is not None else "configuration"
    not_implemented: list[tuple[str, str]] = []
    notes: list[str] = []
    kueue_format = is_kueue_configuration(data)
    explicit: set[str] = set()
    if kueue_format:
        data, not_implemented, notes, explicit = _from_kueue(data, source)
    for dotted, value in (overrides or {}).items():
        clash = _clash(explicit, dotted)
        if clash is not None:
            notes.append(
                f"{clash} (as quotagate names it) set by the file is replaced by {value!r} from "
                "the command line or --overrides"
            )
        _set_dotted(data, dotted, value)
    try:
        config = ControllerConfig.model_validate(data)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            key = ".".join(str(part) for part in error["loc"])
            message = error["msg"].removeprefix("Value error, ")
            problems.append(f"{key}: {message}" if key else message)
        raise ConfigError(f"{source}: invalid configuration: " + "; ".join(problems)) from exc
    config._not_implemented = tuple(not_implemented)
    config._notes = tuple(notes)
    config._kueue_format = kueue_format
    return config


def _clash(explicit: set[str], dotted: str) -> str | None:
    """A key set explicitly by the Kueue file that `dotted` would replace or contain."""
    return next(
        (
            k
            for k in sorted(explicit)
            if k == dotted or k.startswith(f"{dotted}.") or dotted.startswith(f"{k}.")
        ),
        None,
    )


def _from_kueue(
    data: dict[str, Any], source: str
) -> tuple[dict[str, Any], list[tuple[str, str]], list[str], set[str]]:
    """A Kueue Configuration as quotagate's settings, with its `quotagate:` section merged
    in; a `quotagate:` key that a Kueue field of the file also sets is refused."""
    try:
        translation = translate(data)
    except KueueConfigInvalid as exc:
        raise ConfigError(f"{source}: invalid Kueue configuration: {exc}") from None
    extensions = data.get(EXTENSIONS_KEY) or {}
    if not isinstance(extensions, dict):
        raise ConfigError(f"{source}: invalid configuration: {EXTENSIONS_KEY}: expected a mapping")
    settings = translation.settings
    for dotted in sorted(dotted_keys(extensions)):
        clash = _clash(translation.explicit, dotted)
        if clash is not None:
            raise ConfigError(
                f"{source}: invalid configuration: {EXTENSIONS_KEY}.{dotted}: the file sets it "
                f"with Kueue's field too ({clash} in quotagate's terms); set it in one place"
            )
        _set_dotted(settings, dotted, dotted_value(extensions, dotted))
    return settings, translation.not_implemented, translation.notes, translation.explicit


def dotted_keys(data: dict[str, Any], prefix: str = "") -> list[str]:
    """The dotted paths of every leaf of a nested mapping (`webhook.port`)."""
    keys = []
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            keys.extend(dotted_keys(value, f"{dotted}."))
        else:
            keys.append(dotted)
    return keys


def dotted_value(data: dict[str, Any], dotted: str) -> Any:
    node: Any = data
    for part in dotted.split("."):
        node = node[part]
    return node


def _set_dotted(data: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    node = data
    for part in parents:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"{dotted}: {part} is not a section")
        node = child
    node[leaf] = value


def configure_state(config: ControllerConfig, state: ClusterState) -> ClusterState:
    """Set what the admission engine reads from the configuration on `state`."""
    pods_ready = config.wait_for_pods_ready
    if pods_ready is not None and pods_ready.enable:
        state.block_admission = pods_ready.block_admission
        state.requeuing_timestamp = pods_ready.requeuing_strategy.timestamp
    state.preemptibility_threshold = config.preemptibility.priority_threshold
    state.priority_boost = config.gate("PriorityBoost")
    state.tas.set_gates(
        balanced_placement=config.gate("TASBalancedPlacement"),
        multi_layer=config.gate("TASMultiLayerTopology"),
    )
    state.failed_nodes.gates = NodeFailureGates.from_gates(
        {name: config.gate(name) for name, _ in NodeFailureGates.GATES}
    )
    state.fair_sharing = config.fair_sharing.core() if config.fair_sharing else None
    afs = config.admission_fair_sharing
    state.admission_fair_sharing = afs.core() if afs is not None else None
    state.resource_rules = config.resources.core()
    return state
