"""Kind → model, and `load_object` to turn a decoded manifest into its model."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from pydantic import ValidationError

from api.admissioncheck import AdmissionCheck
from api.clusterqueue import ClusterQueue
from api.cohort import Cohort
from api.constants import API_VERSION, Kind
from api.localqueue import LocalQueue
from api.objects import InvalidObjectError, KueueObject
from api.provisioningrequestconfig import ProvisioningRequestConfig
from api.resourceflavor import ResourceFlavor
from api.topology import Topology
from api.workload import Workload
from api.workloadpriorityclass import WorkloadPriorityClass

__all__ = ["MODELS", "load_object"]

MODELS: Final[Mapping[Kind, type[KueueObject]]] = {
    Kind.RESOURCE_FLAVOR: ResourceFlavor,
    Kind.CLUSTER_QUEUE: ClusterQueue,
    Kind.COHORT: Cohort,
    Kind.LOCAL_QUEUE: LocalQueue,
    Kind.WORKLOAD: Workload,
    Kind.WORKLOAD_PRIORITY_CLASS: WorkloadPriorityClass,
    Kind.TOPOLOGY: Topology,
    Kind.ADMISSION_CHECK: AdmissionCheck,
    Kind.PROVISIONING_REQUEST_CONFIG: ProvisioningRequestConfig,
}


def load_object(data: Mapping[str, Any]) -> KueueObject:
    """The model for a decoded `kueue.x-k8s.io/v1beta2` manifest, chosen by its kind.

    Raises `InvalidObjectError` naming the kind, the object and every bad field.
    """
    if not isinstance(data, Mapping):
        raise InvalidObjectError("?", "?", [("", f"expected an object, got {type(data).__name__}")])
    kind = str(data.get("kind") or "")
    metadata = data.get("metadata")
    name = ""
    if isinstance(metadata, Mapping):
        name = str(metadata.get("name") or "")
        if metadata.get("namespace"):
            name = f"{metadata['namespace']}/{name}"
    api_version = data.get("apiVersion")
    if api_version != API_VERSION:
        raise InvalidObjectError(
            kind or "?", name, [("apiVersion", f"expected {API_VERSION!r}, got {api_version!r}")]
        )
    try:
        model = MODELS[Kind(kind)]
    except ValueError:
        known = ", ".join(MODELS)
        raise InvalidObjectError(
            kind or "?", name, [("kind", f"unsupported kind {kind!r}; expected one of {known}")]
        ) from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InvalidObjectError.from_validation_error(kind, name, exc) from None
