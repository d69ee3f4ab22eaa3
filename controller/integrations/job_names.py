"""Kueue's name checks of `jobframework.ValidateJobOnCreate`, which every job kind's webhook
runs on creation (and the Job's on update too), and whose queue-name check the serving
kinds' webhooks (Deployment, StatefulSet, LeaderWorkerSet) run first: the queue name and
the prebuilt Workload's name must be valid object names (`IsDNS1123Subdomain`), as the
LocalQueue and the Workload they name must be. Pure: the object in, the problems out, each
`field: message` as Kubernetes' `field.Error` prints it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from api.constants import PREBUILT_WORKLOAD_LABEL, QUEUE_NAME_LABEL
from api.validation.field_errors import Path, invalid
from api.validation.names import is_dns1123_subdomain
from controller.integrations.job_update import metadata_map, prebuilt_workload_source

__all__ = [
    "annotation_as_name_problems",
    "label_as_name_problems",
    "prebuilt_workload_name_problems",
    "queue_name_problems",
]

_META = Path("metadata")


def _as_name_problems(obj: Mapping[str, Any], which: str, key: str) -> list[str]:
    values = metadata_map(obj, which)
    if key not in values:
        return []
    value = str(values[key])
    errors = is_dns1123_subdomain(value, bytes_unit=False)
    if not errors:
        return []
    return [str(invalid(_META.child(which).key(key), value, ",".join(errors)))]


def label_as_name_problems(obj: Mapping[str, Any], key: str) -> list[str]:
    """Kueue's `ValidateLabelAsCRDName`: the label, when present (even empty), names an
    object."""
    return _as_name_problems(obj, "labels", key)


def annotation_as_name_problems(obj: Mapping[str, Any], key: str) -> list[str]:
    """Kueue's `ValidateAnnotationAsCRDName`: the annotation, when present, names an
    object."""
    return _as_name_problems(obj, "annotations", key)


def queue_name_problems(obj: Mapping[str, Any]) -> list[str]:
    """Kueue's `ValidateQueueName`: `metadata.labels[kueue.x-k8s.io/queue-name]`."""
    return label_as_name_problems(obj, QUEUE_NAME_LABEL)


def prebuilt_workload_name_problems(obj: Mapping[str, Any]) -> list[str]:
    """Kueue's `ValidatePrebuiltWorkloadName` (WorkloadIdentifierAnnotations on, its
    default): the `kueue.x-k8s.io/prebuilt-workload-name` annotation when it is set, else
    the label."""
    return _as_name_problems(obj, prebuilt_workload_source(obj), PREBUILT_WORKLOAD_LABEL)
