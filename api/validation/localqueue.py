"""LocalQueue rules: Kueue has no LocalQueue webhook; its CRD keeps `spec.clusterQueue`
immutable (`apis/kueue/v1beta2/localqueue_types.go`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from api.validation.clusterqueue import FIELD_IMMUTABLE
from api.validation.field_errors import FieldError, Path, rule_failed

__all__ = ["validate_local_queue_update"]

_CLUSTER_QUEUE: Final = Path("spec.clusterQueue")


def validate_local_queue_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[FieldError]:
    """The CRD's transition rule: the ClusterQueue a LocalQueue points at never changes."""
    before = (old.get("spec") or {}).get("clusterQueue")
    after = (new.get("spec") or {}).get("clusterQueue")
    if before != after:
        return [rule_failed(_CLUSTER_QUEUE, FIELD_IMMUTABLE, "cel:cluster-queue-immutable")]
    return []
