"""Every rule Kueue's API applies to the kinds quotagate serves, as pure functions of the
objects (decoded JSON): the checks of Kueue's validating webhooks and, for objects stored
before the CRDs carried them, the CRDs' own rules. The validating webhook
(controller/runtime/validating_webhook.py) answers with them; the controller checks every
object it reads with them and reports what fails (docs/validation.md lists each rule,
where it is enforced and the Kueue file it comes from).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from api.constants import Kind
from api.validation.admissioncheck import validate_admission_check_update
from api.validation.clusterqueue import (
    validate_cluster_queue,
    validate_cluster_queue_update,
    validate_cohort,
)
from api.validation.field_errors import FieldError, aggregate
from api.validation.localqueue import validate_local_queue_update
from api.validation.resourceflavor import (
    validate_resource_flavor,
    validate_resource_flavor_update,
)
from api.validation.topology import validate_topology, validate_topology_update
from api.validation.workload import validate_workload, validate_workload_update

__all__ = ["VALIDATED_KINDS", "FieldError", "aggregate", "validate", "validate_update"]

Object = Mapping[str, Any]

_CREATE: Final[dict[str, Callable[[Object], list[FieldError]]]] = {
    Kind.RESOURCE_FLAVOR: validate_resource_flavor,
    Kind.CLUSTER_QUEUE: validate_cluster_queue,
    Kind.COHORT: validate_cohort,
    Kind.LOCAL_QUEUE: lambda obj: [],
    Kind.WORKLOAD: validate_workload,
    Kind.TOPOLOGY: validate_topology,
    Kind.ADMISSION_CHECK: lambda obj: [],
}
_UPDATE: Final[dict[str, Callable[[Object, Object], list[FieldError]]]] = {
    Kind.RESOURCE_FLAVOR: validate_resource_flavor_update,
    Kind.CLUSTER_QUEUE: validate_cluster_queue_update,
    Kind.COHORT: lambda old, new: validate_cohort(new),
    Kind.LOCAL_QUEUE: validate_local_queue_update,
    Kind.WORKLOAD: validate_workload_update,
    Kind.TOPOLOGY: validate_topology_update,
    Kind.ADMISSION_CHECK: validate_admission_check_update,
}

VALIDATED_KINDS: Final = frozenset(_CREATE)
"""The kinds with rules (WorkloadPriorityClass and ProvisioningRequestConfig have none
beyond their schema)."""


def validate(obj: Object) -> list[FieldError]:
    """What is wrong with `obj` as stored or created (no errors: valid, or not a kind
    with rules)."""
    check = _CREATE.get(str(obj.get("kind") or ""))
    return check(obj) if check is not None else []


def validate_update(old: Object, new: Object) -> list[FieldError]:
    """What is wrong with the change from `old` to `new` (and with `new` itself)."""
    check = _UPDATE.get(str(new.get("kind") or ""))
    return check(old, new) if check is not None else []
