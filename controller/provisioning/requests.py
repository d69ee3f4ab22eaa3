"""The ProvisioningRequest admission check (`controllerName:
kueue.x-k8s.io/provisioning-request`), its rules as pure functions of the objects (Kueue's
pkg/controller/admissionchecks/provisioning): the names of the requests and their pod
templates, whether a Workload needs a request, the request a ProvisioningRequestConfig
asks for, and the check state each of the cluster autoscaler's conditions maps to. The
controller that acts on them is controller/runtime/provisioning.py.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from api.constants import CheckState
from controller.core.after_admission import backoff_seconds
from controller.provisioning.pod_sets import uses_resources

__all__ = [
    "CONSUME_ANNOTATION",
    "CONTROLLER_NAME",
    "PROVISIONING_CLASS_ANNOTATION",
    "CheckUpdate",
    "RetryStrategy",
    "attempt_of",
    "is_unused",
    "next_state",
    "pod_set_updates",
    "pod_template_name",
    "request_is_needed",
    "request_name",
]

CONTROLLER_NAME: Final = "kueue.x-k8s.io/provisioning-request"
CONSUME_ANNOTATION: Final = "autoscaling.x-k8s.io/consume-provisioning-request"
"""On the pods: the request whose capacity they use (the cluster autoscaler reads it)."""
PROVISIONING_CLASS_ANNOTATION: Final = "autoscaling.x-k8s.io/provisioning-class-name"

_HASH_LENGTH: Final = 5
_MAX_PREFIX: Final = 252 - _HASH_LENGTH
_POD_TEMPLATE_PREFIX: Final = "ppt"


def _limited(name: str) -> str:
    """Kueue's `limitObjectName`: a name past 247 characters is cut and given a hash."""
    if len(name) <= _MAX_PREFIX:
        return name
    digest = hashlib.sha1(name.encode(), usedforsecurity=False).hexdigest()
    return f"{name[:_MAX_PREFIX]}-{digest[:_HASH_LENGTH]}"


def request_name(workload: str, check: str, attempt: int) -> str:
    """The ProvisioningRequest of `workload` for `check`, attempt `attempt` (from 1)."""
    return _limited(f"{workload}-{check}-{attempt}")


def pod_template_name(request: str, pod_set: str) -> str:
    return _limited(f"{_POD_TEMPLATE_PREFIX}-{request}-{pod_set}")


def attempt_of(name: str, workload: str, check: str) -> int | None:
    """The attempt a request's name carries, or None when it is not the Workload's for
    the check (Kueue's `getAttempt` regular expression)."""
    prefix = re.escape(_limited(f"{workload}-{check}-"))
    found = re.fullmatch(f"{prefix}([0-9]+)", name)
    return int(found.group(1)) if found else None


def is_unused(request: Mapping[str, Any], workload: Mapping[str, Any] | None) -> bool:
    """Whether a request the check made is to be deleted (Kueue's
    `deleteUnusedProvisioningRequests`, with CleanupProvisioningRequestsOnEviction on, its
    default): its Workload is gone, finished or evicted, or it is an earlier attempt than
    the one the Workload's check is on."""
    if workload is None:
        return True
    status = workload.get("status") or {}
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or ()}
    if conditions.get("Finished") == "True" or conditions.get("Evicted") == "True":
        return True
    name = str((request.get("metadata") or {}).get("name"))
    workload_name = str((workload.get("metadata") or {}).get("name"))
    for check in status.get("admissionChecks") or ():
        attempt = attempt_of(name, workload_name, str(check.get("name")))
        if attempt is not None:
            return attempt < int(check.get("retryCount") or 0) + 1
    return False


@dataclass(frozen=True, slots=True)
class RetryStrategy:
    """`retryStrategy` with Kueue's defaults (3 retries, 60 s doubling up to 1800 s)."""

    backoff_limit_count: int = 3
    backoff_base_seconds: int = 60
    backoff_max_seconds: int = 1800

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any] | None) -> RetryStrategy:
        spec = spec or {}
        default = cls()
        return cls(
            int(spec.get("backoffLimitCount", default.backoff_limit_count)),
            int(spec.get("backoffBaseSeconds", default.backoff_base_seconds)),
            int(spec.get("backoffMaxSeconds", default.backoff_max_seconds)),
        )


def request_is_needed(workload: Mapping[str, Any], managed_resources: Sequence[str]) -> bool:
    """Kueue's `reqIsNeeded`: some pod set with pods admitted asks for a managed resource
    (every resource when the config names none)."""
    managed = frozenset(managed_resources)
    status = workload.get("status") or {}
    counts = {
        a.get("name"): a.get("count")
        for a in (status.get("admission") or {}).get("podSetAssignments") or ()
    }
    for pod_set in (workload.get("spec") or {}).get("podSets") or ():
        count = int(pod_set.get("count", 1))
        spec = (pod_set.get("template") or {}).get("spec") or {}
        if count <= 0 or (managed and not uses_resources(spec, managed)):
            continue
        admitted = counts.get(pod_set.get("name"), count)
        if (count if admitted is None else int(admitted)) > 0:
            return True
    return False


@dataclass(frozen=True, slots=True)
class CheckUpdate:
    """The check's new state and message; `requeue_after_seconds` with a Retry."""

    state: CheckState
    message: str
    requeue_after_seconds: int | None = None
    pod_set_updates: tuple[Mapping[str, Any], ...] | None = None


def _condition(request: Mapping[str, Any], type_: str) -> Mapping[str, Any] | None:
    for found in (request.get("status") or {}).get("conditions") or ():
        if found.get("type") == type_:
            condition: Mapping[str, Any] = found
            return condition
    return None


def _true(request: Mapping[str, Any], type_: str) -> bool:
    found = _condition(request, type_)
    return found is not None and found.get("status") == "True"


def _message(request: Mapping[str, Any], type_: str) -> str:
    return str((_condition(request, type_) or {}).get("message") or "")


def next_state(
    request: Mapping[str, Any],
    attempt: int,
    retry_count: int,
    admitted: bool,
    active: bool,
    strategy: RetryStrategy,
    updates: tuple[Mapping[str, Any], ...],
) -> CheckUpdate | None:
    """The check state the request's conditions call for (Kueue's `syncCheckStates`), or
    None when they call for no change: Failed → Retry while attempts are left (requeue
    after Kueue's backoff), else Rejected; CapacityRevoked → Rejected (an active,
    unfinished Workload); BookingExpired before admission → as Failed; Provisioned →
    Ready with `updates`; Accepted with a Provisioned condition → Pending with its message
    (the ETA); no condition yet → Pending."""
    if _true(request, "Failed"):
        return _retry_or_reject(request, "Failed", "failure", attempt, retry_count, strategy)
    if _true(request, "CapacityRevoked"):
        if not active:
            return None
        return CheckUpdate(CheckState.REJECTED, _message(request, "CapacityRevoked"))
    if _true(request, "BookingExpired"):
        if admitted:
            return None
        return _retry_or_reject(
            request, "BookingExpired", "booking expired", attempt, retry_count, strategy
        )
    if _true(request, "Provisioned"):
        return CheckUpdate(CheckState.READY, _message(request, "Provisioned"), None, updates)
    if _true(request, "Accepted") and _condition(request, "Provisioned") is not None:
        return CheckUpdate(CheckState.PENDING, _message(request, "Provisioned"))
    return CheckUpdate(CheckState.PENDING, "")


def _retry_or_reject(
    request: Mapping[str, Any],
    condition: str,
    what: str,
    attempt: int,
    retry_count: int,
    strategy: RetryStrategy,
) -> CheckUpdate | None:
    """Retry after Kueue's backoff while attempts are left, else Rejected; None for an
    old request whose retry is counted already."""
    if attempt > strategy.backoff_limit_count:
        return CheckUpdate(CheckState.REJECTED, _message(request, condition))
    if attempt <= retry_count:
        return None
    delay = backoff_seconds(
        retry_count + 1, strategy.backoff_base_seconds, strategy.backoff_max_seconds
    )
    message = f"Retrying after {what}: {_message(request, condition)}"
    return CheckUpdate(CheckState.RETRY, message, int(delay))


def pod_set_updates(
    request: Mapping[str, Any],
    pod_sets: Sequence[str],
    node_selectors: Sequence[Mapping[str, Any]] = (),
) -> tuple[dict[str, Any], ...]:
    """Kueue's `podSetUpdates` for a provisioned request: each pod set in the request gets
    the consume and class annotations, and the config's node selectors whose values the
    request's `provisioningClassDetails` hold (a detail that is missing is left out)."""
    name = str((request.get("metadata") or {}).get("name"))
    spec = request.get("spec") or {}
    details = (request.get("status") or {}).get("provisioningClassDetails") or {}
    by_template = {pod_template_name(name, ps): ps for ps in pod_sets}
    updates = []
    for entry in spec.get("podSets") or ():
        template = (entry.get("podTemplateRef") or {}).get("name")
        update: dict[str, Any] = {
            "name": by_template.get(str(template), ""),
            "annotations": {
                CONSUME_ANNOTATION: name,
                PROVISIONING_CLASS_ANNOTATION: str(spec.get("provisioningClassName", "")),
            },
        }
        if node_selectors:
            update["nodeSelector"] = {
                str(s["key"]): str(details[s["valueFromProvisioningClassDetail"]])
                for s in node_selectors
                if s.get("valueFromProvisioningClassDetail") in details
            }
        updates.append(update)
    return tuple(updates)
