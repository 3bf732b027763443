"""The stored text of an amount: exact, canonical, and the same for equal amounts."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracker.core.money import decimal_to_str, normalize_decimal

# Amounts as sources write them: a coefficient of up to 21 digits at any sign and scale,
# with or without trailing zeros or an exponent (Decimal("1.50"), Decimal("1E+2")). Decimal's
# context keeps 28 digits, which no price comes near.
coefficients = st.integers(min_value=-10**21, max_value=10**21)
exponents = st.integers(min_value=-12, max_value=4)


@given(coefficients, exponents)
def test_text_is_the_normalized_amount_in_plain_notation(coefficient: int, exponent: int) -> None:
    value = Decimal(coefficient).scaleb(exponent)
    text = decimal_to_str(value)
    assert text == format(normalize_decimal(value), "f")
    assert Decimal(text) == value
    assert "E" not in text and "e" not in text


@given(coefficients, exponents, st.integers(min_value=1, max_value=6))
def test_equal_amounts_have_one_text(coefficient: int, exponent: int, zeros: int) -> None:
    value = Decimal(coefficient).scaleb(exponent)
    padded = Decimal(coefficient * 10**zeros).scaleb(exponent - zeros)
    assert padded == value and str(padded) != str(value)
    assert decimal_to_str(padded) == decimal_to_str(value)


@pytest.mark.parametrize(("value", "text"), [
    (Decimal("1.50"), "1.5"), (Decimal("1E+2"), "100"), (Decimal("0.000"), "0"),
    (Decimal("-0"), "0"), (Decimal("98.3200"), "98.32"), (Decimal("2.5E-7"), "0.00000025"),
])
def test_known_texts(value: Decimal, text: str) -> None:
    assert decimal_to_str(value) == text
