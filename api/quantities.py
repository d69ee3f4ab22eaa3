"""Exact Kubernetes quantities.

A `Quantity` is kept as an integer number of milli-units, so quota arithmetic is
exact (no floats anywhere). Every Kubernetes form parses: plain and decimal numbers
(`2`, `1.5`, `.5`), decimal SI suffixes (`500m`, `1k`, `2M`, `1n`), binary SI suffixes
(`1Ki`, `1.5Gi`) and decimal exponents (`1e3`, `2.5E-3`). A value finer than one
milli-unit (`1n`, `1u`) rounds up to the next milli-unit, as Kubernetes' `MilliValue`
does: quota is never under-counted.

The canonical text follows Kubernetes: the largest suffix of the quantity's own
format that keeps the mantissa an integer (`1536Mi`, `1500m`, `2k`, `12e6`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal, InvalidOperation
from enum import StrEnum
from fractions import Fraction
from functools import total_ordering
from typing import Final

__all__ = [
    "Format",
    "InvalidQuantity",
    "Quantity",
    "decimal_text",
    "exact_value",
    "parse_quantity",
]


class InvalidQuantity(ValueError):
    """A string that is not a Kubernetes quantity; the message names the value."""


class Format(StrEnum):
    """How a quantity was written, which decides how it prints (as in Kubernetes)."""

    DECIMAL_SI = "DecimalSI"
    BINARY_SI = "BinarySI"
    DECIMAL_EXPONENT = "DecimalExponent"


_BINARY: Final = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL: Final = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_DECIMAL_BY_EXP: Final = {exp: suffix for suffix, exp in _DECIMAL.items() if exp >= -3}

_QUANTITY_RE: Final = re.compile(
    r"^(?P<num>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?P<suffix>(?:[KMGTPE]i)|[numkMGTPE]|(?:[eE][+-]?[0-9]+))?$"
)

# The JSON-schema pattern for a quantity, used in the generated CRDs.
QUANTITY_PATTERN: Final = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?[0-9]+))?$"
)
# The same without a sign: quota and costs are never negative.
NON_NEGATIVE_QUANTITY_PATTERN: Final = (
    r"^\+?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?[0-9]+))?$"
)

_MAX_EXPONENT: Final = 60  # beyond 10^60 nothing is a sane quota; refuse rather than allocate


@total_ordering
@dataclass(frozen=True, slots=True)
class Quantity:
    """An exact quantity in milli-units. Compare, add and subtract freely."""

    milli: int
    format: Format = field(default=Format.DECIMAL_SI, compare=False, hash=False)

    @classmethod
    def parse(cls, value: str | int | float | Quantity) -> Quantity:
        """Parse a Kubernetes quantity (a string, or a JSON number as the API allows)."""
        if isinstance(value, Quantity):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return cls(value * 1000)
        return _parse_text(_text(value))

    @classmethod
    def from_units(cls, units: int, fmt: Format = Format.DECIMAL_SI) -> Quantity:
        """A whole number of units (cores, bytes, pods)."""
        return cls(units * 1000, fmt)

    @property
    def value(self) -> int:
        """Whole units, rounded up (Kubernetes `Value()`)."""
        return -((-self.milli) // 1000)

    def is_zero(self) -> bool:
        return self.milli == 0

    def __add__(self, other: Quantity) -> Quantity:
        return Quantity(self.milli + other.milli, self.format)

    def __sub__(self, other: Quantity) -> Quantity:
        return Quantity(self.milli - other.milli, self.format)

    def __neg__(self) -> Quantity:
        return Quantity(-self.milli, self.format)

    def __mul__(self, factor: int) -> Quantity:
        return Quantity(self.milli * factor, self.format)

    __rmul__ = __mul__

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.milli < other.milli

    def __str__(self) -> str:
        return canonical(self.milli, self.format)

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r})"


def parse_quantity(value: str | int | float | Quantity) -> Quantity:
    """Parse a quantity; raises `InvalidQuantity` naming the value when it is not one."""
    return Quantity.parse(value)


def exact_value(value: str | int | float) -> Fraction:
    """A quantity's exact value as a fraction of units (no milli-unit rounding): for
    ratios such as a fair-sharing weight, where `1n` must not become `1m`."""
    if isinstance(value, int) and not isinstance(value, bool):
        return Fraction(value)
    return Fraction(_exact(_text(value))[0])


def _text(value: object) -> str:
    """A quantity given as a string or a JSON number (not an int: the callers take those
    exactly), as text; InvalidQuantity for anything else."""
    if isinstance(value, bool):
        raise InvalidQuantity(f"invalid quantity {value!r}: not a number")
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise InvalidQuantity(f"invalid quantity {value!r}: not finite")
        return repr(value)
    if not isinstance(value, str):
        raise InvalidQuantity(f"invalid quantity {value!r}: expected a string or number")
    return value


def _parse_text(text: str) -> Quantity:
    exact, fmt = _exact(text)
    milli = int((exact * 1000).to_integral_value(rounding=ROUND_CEILING))
    return Quantity(milli, fmt)


def _exact(text: str) -> tuple[Decimal, Format]:
    match = _QUANTITY_RE.match(text)
    if match is None:
        raise InvalidQuantity(
            f"invalid quantity {text!r}: must match <number><suffix> with suffix one of "
            "Ki Mi Gi Ti Pi Ei, n u m k M G T P E, or an exponent like e3"
        )
    number, suffix = match.group("num"), match.group("suffix") or ""
    try:
        mantissa = Decimal(number)
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only decimals
        raise InvalidQuantity(f"invalid quantity {text!r}: bad number") from exc

    if suffix in _BINARY:
        fmt = Format.BINARY_SI
        exact = mantissa * (1 << _BINARY[suffix])
    elif suffix in _DECIMAL:
        fmt = Format.DECIMAL_SI
        exact = mantissa.scaleb(_DECIMAL[suffix])
    else:
        fmt = Format.DECIMAL_EXPONENT
        exponent = int(suffix[1:])
        if abs(exponent) > _MAX_EXPONENT:
            raise InvalidQuantity(f"invalid quantity {text!r}: exponent out of range")
        exact = mantissa.scaleb(exponent)
    return exact, fmt


def canonical(milli: int, fmt: Format) -> str:
    """Kubernetes' canonical text for a value in milli-units of the given format."""
    sign = "-" if milli < 0 else ""
    magnitude = abs(milli)
    if magnitude == 0:
        return "0"
    if fmt is Format.BINARY_SI and magnitude % 1000 == 0:
        units = magnitude // 1000
        for suffix, shift in sorted(_BINARY.items(), key=lambda item: -item[1]):
            if units % (1 << shift) == 0:
                return f"{sign}{units >> shift}{suffix}"
        return f"{sign}{units}"
    # Decimal forms: find the largest power of 10^3 that divides the milli value.
    exp = -3
    mantissa = magnitude
    while mantissa % 1000 == 0 and exp < 18:
        mantissa //= 1000
        exp += 3
    if fmt is Format.DECIMAL_EXPONENT:
        return f"{sign}{mantissa}" + (f"e{exp}" if exp != 0 else "")
    return f"{sign}{mantissa}{_DECIMAL_BY_EXP[exp]}"


def decimal_text(value: Decimal | float) -> str:
    """A non-integral amount as a canonical Kubernetes decimal quantity, rounded down to
    nano-units as Kueue rounds its decayed usage (`MulByFloat`, scale 9): `0.5` → `500m`,
    `6.25` → `6250m`, `2000` → `2k`, `1e-10` → `0`. A float is read by its shortest repr."""
    exact = Decimal(repr(value)) if isinstance(value, float) else value
    if not exact.is_finite():
        raise InvalidQuantity(f"invalid quantity {value!r}: not finite")
    nanos = int((exact * 1_000_000_000).to_integral_value(rounding=ROUND_FLOOR))
    if nanos == 0:
        return "0"
    sign = "-" if nanos < 0 else ""
    mantissa, exp = abs(nanos), -9
    while mantissa % 1000 == 0 and exp < 18:
        mantissa //= 1000
        exp += 3
    suffix = {-9: "n", -6: "u", **_DECIMAL_BY_EXP}[exp]
    return f"{sign}{mantissa}{suffix}"
