"""The price index on a fixed dataset: each provider once at its cheapest whole-GPU offer,
median/p10/p90 exact, a marketplace outlier moving the cheapest price but not the median,
seen-once, fractional and stale prices left out."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.helpers import at, obs
from tracker.market.index import percentile, price_index

DAYS = ["2026-11-01", "2026-11-02", "2026-11-03"]


def snapshot(day: str) -> list:
    when = at(day)
    vast = "1.90" if day != "2026-11-03" else "0.50"  # the marketplace outlier on day 3
    rows = [
        obs("32.00", when, provider="aws"),  # 8 GPUs: 4.00 per GPU-hour
        obs("40.00", when, provider="aws", instance_type="p5-big"),  # aws again, pricier
        obs("24.00", when, provider="azure", instance_type="ND96isr_H100_v5"),  # 3.00
        obs("3.50", when, provider="gcp", instance_type="a3-1g", gpu_count=1),
        obs("2.50", when, provider="lambda", instance_type="gpu_1x_h100", gpu_count=1),
        obs(vast, when, provider="vastai", instance_type="1x H100", gpu_count=1),
        obs("0.20", when, provider="slices", instance_type="h100-1/2", gpu_count=0.5),
        obs("1.20", when, provider="aws", category="spot"),  # 0.15 per GPU-hour
    ]
    if day == "2026-11-03":  # listed once, far below the rest: left out
        rows.append(obs("0.10", when, provider="oddcloud", instance_type="x", gpu_count=1))
    return rows


@pytest.fixture
def db(any_db_url):
    from tracker.store.db import open_database
    from tracker.store.ingest import ingest_records

    database = open_database(any_db_url)
    records = [r for day in DAYS for r in snapshot(day)]
    summary = ingest_records(database, "test", records, started_at=at("2026-11-03", 1))
    assert summary.status == "ok", summary.error
    yield database
    database.close()


def test_index_values_on_the_fixed_dataset(db):
    result = price_index(db, ["h100-sxm"], since=date(2026, 11, 1), until=date(2026, 11, 3),
                         categories=["on-demand"], max_age_hours=48)
    points = {p.date.isoformat(): p for p in result.points}
    assert sorted(points) == DAYS
    first, third = points["2026-11-01"], points["2026-11-03"]
    # Day 1: per provider [vastai 1.90, lambda 2.50, azure 3.00, gcp 3.50, aws 4.00].
    assert first.providers == 5  # aws counted once; the half GPU and the seen-once are out
    assert (first.median, first.p10, first.p90) == (Decimal("3.0000"), Decimal("2.1400"),
                                                    Decimal("3.8000"))
    assert (first.cheapest, first.cheapest_provider) == (Decimal("1.9000"), "vastai")
    # Day 3: the marketplace listing drops to 0.50: the cheapest moves, the median does not.
    assert (third.cheapest, third.cheapest_provider) == (Decimal("0.5000"), "vastai")
    assert third.median == first.median == Decimal("3.0000")
    assert third.p10 == Decimal("1.3000")  # 0.50 + 0.4 × (2.50 − 0.50)
    assert third.providers == 5  # oddcloud, seen once, is not a provider of the index
    assert result.excluded["seen_once"] == 1
    assert result.excluded["fractional_gpu"] == 1  # one unchanged span of the half GPU


def test_spot_is_its_own_series_and_stale_prices_drop_out(db):
    spot = price_index(db, ["h100-sxm"], since=date(2026, 11, 3), until=date(2026, 11, 3),
                       categories=["spot"], max_age_hours=48)
    assert [(p.category, p.median, p.providers) for p in spot.points] == [
        ("spot", Decimal("0.1500"), 1)]
    # Four days after the last refresh nothing has been seen within 48 hours.
    later = price_index(db, ["h100-sxm"], since=date(2026, 11, 4), until=date(2026, 11, 7),
                        categories=["on-demand"], max_age_hours=48)
    assert [p.date.isoformat() for p in later.points] == ["2026-11-04"]


def test_index_in_euro_converts_at_each_days_rate(db):
    from tracker.store.rates import rate_table

    result = price_index(db, ["h100-sxm"], since=date(2026, 10, 31), until=date(2026, 11, 1),
                         categories=["on-demand"], currency="EUR", max_age_hours=48)
    (point,) = result.points  # 10-31 has no prices yet
    rate, rate_day = rate_table(None).rate("USD", "EUR", date(2026, 11, 1))
    assert rate_day == date(2026, 10, 30)  # Sunday 1 November -> Friday 30 October
    assert point.currency == "EUR"
    assert point.median == (Decimal("3.00") * rate).quantize(Decimal("0.0001"))
    assert point.rates[0][0] == "USD" and point.rates[0][2] == rate_day


def test_unknown_category_is_refused(db):
    from tracker.core.errors import InvalidInput

    with pytest.raises(InvalidInput, match="index category"):
        price_index(db, ["h100-sxm"], since=date(2026, 11, 1), until=date(2026, 11, 1),
                    categories=["quote"])


@given(st.lists(st.decimals(min_value=0, max_value=100, places=2), min_size=1, max_size=30))
def test_percentiles_are_ordered_and_within_the_range(values):
    values = sorted(values)
    p10, p50, p90 = (percentile(values, Decimal(f)) for f in ("0.1", "0.5", "0.9"))
    assert values[0] <= p10 <= p50 <= p90 <= values[-1]
