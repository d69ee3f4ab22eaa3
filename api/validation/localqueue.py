"""LocalQueue rules: Kueue has no LocalQueue webhook; its CRD keeps `spec.clusterQueue`
immutable (`apis/kueue/v1beta2/localqueue_types.go`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from api.validation.clusterqueue import FIELD_IMMUTABLE
from api.validation.field_errors import FieldError, Path, invalid

__all__ = ["validate_local_queue_update"]

_CLUSTER_QUEUE: Final = Path("spec.clusterQueue")


def validate_local_queue_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[FieldError]:
    """The CRD's transition rule: the ClusterQueue a LocalQueue points at never changes
    (a transition rule runs only while the field is in both versions)."""
    before = (old.get("spec") or {}).get("clusterQueue")
    after = (new.get("spec") or {}).get("clusterQueue")
    if before is not None and after is not None and before != after:
        # A rule on a string: the API server shows the new value.
        return [invalid(_CLUSTER_QUEUE, after, FIELD_IMMUTABLE, "cel:cluster-queue-immutable")]
    return []
