"""AdmissionCheck and ProvisioningRequestConfig rules: Kueue has no webhook for either kind;
their CRDs carry the rules (`apis/kueue/v1beta2/admissioncheck_types.go`,
`provisioningrequestconfig_types.go`), all structural schema except one transition rule:
an AdmissionCheck's `spec.controllerName` never changes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from api.validation.clusterqueue import FIELD_IMMUTABLE
from api.validation.field_errors import FieldError, Path, invalid

__all__ = ["validate_admission_check_update"]

_CONTROLLER_NAME: Final = Path("spec.controllerName")


def validate_admission_check_update(
    old: Mapping[str, Any], new: Mapping[str, Any]
) -> list[FieldError]:
    """The CRD's transition rule on `spec.controllerName` (run only while the field is in
    both versions; a rule on a string: the API server shows the new value)."""
    before = (old.get("spec") or {}).get("controllerName")
    after = (new.get("spec") or {}).get("controllerName")
    if before is not None and after is not None and before != after:
        return [invalid(_CONTROLLER_NAME, after, FIELD_IMMUTABLE, "cel:controller-name-immutable")]
    return []
