"""The state of Kueue's admission checks on a Workload (`status.admissionChecks`): quotagate
runs no admission checks (a ClusterQueue that names any is inactive), and keeps what Kueue's
check controllers wrote, with the CRD rules of Kueue's schema."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from api.common import (
    DNSLabel,
    KueueModel,
    NonNegativeInt32,
    Toleration,
    atomic_list,
    toleration_list,
)
from api.constants import CheckState

__all__ = ["AdmissionCheckState", "PodSetUpdate"]


class PodSetUpdate(KueueModel):
    """What an admission check adds to a pod set (written by Kueue's admission checks)."""

    name: DNSLabel
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    node_selector: dict[str, str] | None = None
    tolerations: list[Toleration] | None = Field(
        default=None, max_length=8, json_schema_extra=toleration_list()
    )


class AdmissionCheckState(KueueModel):
    """The state of one admission check (quotagate runs none; kept as written)."""

    name: str = Field(min_length=1, max_length=316)
    state: CheckState
    last_transition_time: datetime
    message: str = Field(max_length=32768)
    pod_set_updates: list[PodSetUpdate] | None = Field(
        default=None, max_length=18, json_schema_extra=atomic_list()
    )
    requeue_after_seconds: NonNegativeInt32 | None = None
    retry_count: NonNegativeInt32 | None = None
