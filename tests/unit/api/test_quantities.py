"""Exact quantity parsing and canonical printing (controller/core/quantities.py)."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from api.quantities import (
    Format,
    InvalidQuantity,
    Quantity,
    canonical,
    decimal_text,
    exact_value,
    parse_quantity,
)


@pytest.mark.parametrize(
    ("text", "milli", "printed"),
    [
        ("500m", 500, "500m"),
        ("2", 2000, "2"),
        ("1.5", 1500, "1500m"),
        (".5", 500, "500m"),
        ("1Gi", (1 << 30) * 1000, "1Gi"),
        ("1.5Gi", 3 * (1 << 29) * 1000, "1536Mi"),
        ("1Ki", 1024 * 1000, "1Ki"),
        ("1e3", 1_000_000, "1e3"),
        ("1E3", 1_000_000, "1e3"),
        ("2.5e-3", 3, "3e-3"),
        ("1k", 1_000_000, "1k"),
        ("2M", 2_000_000_000, "2M"),
        ("12e6", 12_000_000_000, "12e6"),
        ("1025", 1_025_000, "1025"),
        ("2000", 2_000_000, "2k"),
        ("0", 0, "0"),
        ("+3", 3000, "3"),
        ("-1", -1000, "-1"),
        ("1n", 1, "1m"),  # sub-milli rounds up, never under-counts quota
        ("1u", 1, "1m"),
        ("1000n", 1, "1m"),
        ("1000000n", 1, "1m"),
    ],
)
def test_parses_every_kubernetes_form(text: str, milli: int, printed: str) -> None:
    quantity = parse_quantity(text)
    assert quantity.milli == milli
    assert str(quantity) == printed


@pytest.mark.parametrize(
    "text", ["", "abc", "1.2.3", "1Kb", "1 Gi", "Gi", "1ki", "--1", "1e", "e3", "1ee3"]
)
def test_invalid_strings_name_the_value(text: str) -> None:
    with pytest.raises(InvalidQuantity, match="invalid quantity"):
        parse_quantity(text)
    with pytest.raises(InvalidQuantity) as info:
        parse_quantity(text)
    assert repr(text) in str(info.value)


def test_json_numbers_are_quantities() -> None:
    assert parse_quantity(3).milli == 3000
    assert parse_quantity(0.25).milli == 250
    with pytest.raises(InvalidQuantity):
        parse_quantity(True)
    with pytest.raises(InvalidQuantity):
        parse_quantity(float("nan"))


def test_arithmetic_and_comparison_are_exact() -> None:
    a, b = parse_quantity("1001m"), parse_quantity("1")
    assert a > b
    assert (a - b).milli == 1
    assert parse_quantity("100m") * 3 == parse_quantity("300m")
    assert parse_quantity("1Gi") == parse_quantity("1073741824")  # equal value, other format
    assert parse_quantity("1500m").value == 2  # Value() rounds up


@given(st.integers(min_value=-(10**15), max_value=10**15), st.sampled_from(list(Format)))
def test_canonical_text_round_trips(milli: int, fmt: Format) -> None:
    text = canonical(milli, fmt)
    assert parse_quantity(text).milli == milli


@given(st.integers(min_value=0, max_value=10**12), st.integers(min_value=0, max_value=10**12))
def test_sum_of_parsed_equals_parsed_sum(a: int, b: int) -> None:
    qa, qb = Quantity(a), Quantity(b)
    assert parse_quantity(str(qa)) + parse_quantity(str(qb)) == Quantity(a + b)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.5, "500m"),
        (6.25, "6250m"),
        (2000.0, "2k"),
        (8.0, "8"),
        (1.2345678919, "1234567891n"),  # rounded down at nano-units, as Kueue's MulByFloat
        (1.5e-7, "150n"),
        (1e-10, "0"),
        (0.0, "0"),
        (Decimal("1073741824"), "1073741824"),
    ],
)
def test_decimal_text_is_canonical_to_the_nano(value: float | Decimal, text: str) -> None:
    assert decimal_text(value) == text


def test_decimal_text_refuses_what_is_not_a_number() -> None:
    with pytest.raises(InvalidQuantity, match="not finite"):
        decimal_text(float("inf"))


@given(st.integers(min_value=0, max_value=10**18))
def test_decimal_text_round_trips_nano_units(nanos: int) -> None:
    value = Decimal(nanos).scaleb(-9)
    assert exact_value(decimal_text(value)) == Fraction(nanos, 10**9)
