"""Admission checks as the engine sees them: the AdmissionCheck objects (their controller
and whether it reports them `Active`), the checks a ClusterQueue names with the flavors
they apply to (`admissionChecksStrategy.admissionChecks[].onFlavors`), and each check's
state on a Workload (`status.admissionChecks`), converted from the API.

Kueue's two-phase admission (site/content/en/docs/concepts/admission_check.md): quota is
reserved first; the Workload is admitted only once every check its reservation needs is
`Ready` (the rules are in controller/core/admission_checks.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from api.constants import CheckState

if TYPE_CHECKING:  # api_fields imports the Workload model, which holds CheckStatus
    from controller.core.model.api_fields import FieldReader
    from controller.core.model.workloads import Toleration

__all__ = [
    "AdmissionCheck",
    "CheckRule",
    "CheckStatus",
    "admission_check_from_api",
    "check_rules_from_api",
    "check_statuses_from_api",
]


@dataclass(frozen=True, slots=True)
class AdmissionCheck:
    """An AdmissionCheck object: its controller, and its `Active` condition as written."""

    name: str
    controller_name: str
    active: bool = False
    # The Active condition's message (why it is not active), for the ClusterQueue's.
    message: str = ""


@dataclass(frozen=True, slots=True)
class CheckRule:
    """One check a ClusterQueue names; `on_flavors` empty: every flavor of the queue."""

    name: str
    on_flavors: frozenset[str] = frozenset()

    def applies_to(self, flavors: frozenset[str]) -> bool:
        """Whether a reservation in `flavors` needs the check (Kueue's
        `admissionChecksForAdmission`: an empty onFlavors means all the queue's flavors)."""
        return not self.on_flavors or bool(self.on_flavors & flavors)


@dataclass(frozen=True, slots=True)
class CheckStatus:
    """One check's state on a Workload (`status.admissionChecks[]`), as its controller
    wrote it."""

    name: str
    state: CheckState
    message: str = ""
    last_transition: float = 0.0
    requeue_after_seconds: int | None = None
    retry_count: int = 0
    # podSetUpdates[].tolerations, by pod set: what the check adds to its pods' tolerations
    # (read by the TAS node-taint check, controller/core/tas/node_taints.py)
    pod_set_tolerations: tuple[tuple[str, tuple[Toleration, ...]], ...] = ()


def admission_check_from_api(
    r: FieldReader, meta: Mapping[str, Any], spec: Mapping[str, Any], status: Mapping[str, Any]
) -> AdmissionCheck:
    """An AdmissionCheck object; active iff its `Active` condition is True."""
    active = next(
        (
            c
            for c in r.seq(status.get("conditions"), "status.conditions")
            if isinstance(c, Mapping) and c.get("type") == "Active"
        ),
        None,
    )
    return AdmissionCheck(
        name=r.text(meta.get("name"), "metadata.name"),
        controller_name=r.text(spec.get("controllerName"), "spec.controllerName"),
        active=active is not None and active.get("status") == "True",
        message=str(active.get("message") or "") if active is not None else "",
    )


def check_rules_from_api(spec: Mapping[str, Any]) -> tuple[CheckRule, ...]:
    """The checks a ClusterQueue spec names, in order, each once: v1beta2's
    `admissionChecksStrategy.admissionChecks` (with their onFlavors) and v1beta1's
    `admissionChecks` (every flavor)."""
    rules: dict[str, CheckRule] = {}
    strategy = spec.get("admissionChecksStrategy")
    if isinstance(strategy, Mapping):
        for rule in strategy.get("admissionChecks") or ():
            if isinstance(rule, Mapping) and rule.get("name"):
                flavors = frozenset(str(f) for f in rule.get("onFlavors") or () if f)
                rules.setdefault(str(rule["name"]), CheckRule(str(rule["name"]), flavors))
    for legacy in spec.get("admissionChecks") or ():
        if isinstance(legacy, str) and legacy:
            rules.setdefault(legacy, CheckRule(legacy))
    return tuple(rules.values())


def check_statuses_from_api(r: FieldReader, status: Mapping[str, Any]) -> tuple[CheckStatus, ...]:
    """`status.admissionChecks`, in the order written."""
    found = []
    for i, raw in enumerate(r.seq(status.get("admissionChecks"), "status.admissionChecks")):
        path = f"status.admissionChecks[{i}]"
        item = r.obj(raw, path)
        retry_count = r.integer(item.get("retryCount"), f"{path}.retryCount", 0)
        found.append(
            CheckStatus(
                name=r.text(item.get("name"), f"{path}.name"),
                state=r.enum(item.get("state"), f"{path}.state", CheckState, CheckState.PENDING),
                message=str(item.get("message") or ""),
                last_transition=r.time(item.get("lastTransitionTime"), f"{path}.lastTransitionTime")
                or 0.0,
                requeue_after_seconds=r.integer(
                    item.get("requeueAfterSeconds"), f"{path}.requeueAfterSeconds"
                ),
                retry_count=retry_count or 0,
                pod_set_tolerations=_pod_set_tolerations(r, item, path),
            )
        )
    return tuple(found)


def _pod_set_tolerations(
    r: FieldReader, item: Mapping[str, Any], path: str
) -> tuple[tuple[str, tuple[Toleration, ...]], ...]:
    """`podSetUpdates[]`'s tolerations, by pod set (those that add any)."""
    found = []
    for j, raw in enumerate(r.seq(item.get("podSetUpdates"), f"{path}.podSetUpdates")):
        update = r.obj(raw, f"{path}.podSetUpdates[{j}]")
        if update.get("tolerations"):
            name = r.text(update.get("name"), f"{path}.podSetUpdates[{j}].name")
            tolerations = r.tolerations(
                update["tolerations"], f"{path}.podSetUpdates[{j}].tolerations"
            )
            found.append((name, tolerations))
    return tuple(found)
