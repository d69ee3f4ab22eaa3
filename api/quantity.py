"""Pydantic field types for Kubernetes quantities, validated by `api.quantities`.

A field typed `QuantityValue` holds an exact `Quantity`; it accepts a string or a JSON
number (as `resource.Quantity` does) and serializes to the canonical string. Its JSON
schema is the one controller-gen writes for `resource.Quantity` (int-or-string + pattern).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

from api.quantities import (
    NON_NEGATIVE_QUANTITY_PATTERN,
    QUANTITY_PATTERN,
    InvalidQuantity,
    Quantity,
    parse_quantity,
)

__all__ = ["NonNegativeQuantity", "QuantityValue", "QuotaQuantity"]


class _QuantityField:
    """Annotation that turns `Quantity` into a pydantic field type."""

    def __init__(self, *, non_negative: bool, signed_schema: bool = False) -> None:
        self.non_negative = non_negative
        self.signed_schema = signed_schema

    def _validate(self, value: Any) -> Quantity:
        try:
            quantity = parse_quantity(value)
        except InvalidQuantity as exc:
            raise ValueError(str(exc)) from None
        if self.non_negative and quantity.milli < 0:
            raise ValueError(f"quantity {value!r} must not be negative")
        return quantity

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(
            self._validate,
            serialization=core_schema.plain_serializer_function_ser_schema(
                str, return_schema=core_schema.str_schema(), when_used="json"
            ),
        )

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        quantity_schema: JsonSchemaValue = {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": True,
        }
        if self.non_negative and not self.signed_schema:
            # The pattern checks strings only; `minimum` catches a negative JSON number.
            quantity_schema["pattern"] = NON_NEGATIVE_QUANTITY_PATTERN
            quantity_schema["minimum"] = 0
        return quantity_schema


QuantityValue = Annotated[Quantity, _QuantityField(non_negative=False)]
"""Any Kubernetes quantity (usage, requests)."""
NonNegativeQuantity = Annotated[Quantity, _QuantityField(non_negative=True)]
"""A quantity that must be ≥ 0, in the CRD too (quotagate's preemption cost)."""
QuotaQuantity = Annotated[Quantity, _QuantityField(non_negative=True, signed_schema=True)]
"""A quota, limit or fair-sharing weight: ≥ 0. As in Kueue, the CRD accepts any quantity
and the webhook refuses a negative one ("must be greater than or equal to 0",
api/validation/quota.py)."""
