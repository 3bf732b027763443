"""daily_index takes each day's cheapest price per provider with arrays (issue #26): the same
points, exclusions and warnings as the span-by-span reading it replaced, kept here as the
oracle, on random spans (ties, stale and seen-once offers, spans in another currency)."""

from __future__ import annotations

import bisect
from datetime import date, timedelta
from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.market.index import (
    IndexSpan,
    _ms,
    daily_index,
    percentile,
    sample_instant,
)

DAYS = [date(2026, 11, 1) + timedelta(days=i) for i in range(12)]
DAY_MS = 86_400_000
START = _ms(sample_instant(DAYS[0])) - 2 * DAY_MS
PRICES = [Decimal("1.5"), Decimal("1.50"), Decimal("2.25"), Decimal("0.9999"), Decimal("3")]


def oracle(spans, days, currency, max_age_hours):
    """The span-by-span cheapest per (day, gpu, category, provider), the spans of other
    currencies left out (no rates): the median/p10/p90/providers/cheapest of each day."""
    spans = list(spans)
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for s in spans:
        first[s.offer_id] = min(first.get(s.offer_id, s.first_ms), s.first_ms)
        last[s.offer_id] = max(last.get(s.offer_id, s.last_ms), s.last_ms)
    instants = [_ms(sample_instant(d)) for d in days]
    max_age = round(max_age_hours * 3_600_000)
    best: dict[tuple, Decimal] = {}
    stale = 0
    for s in spans:
        if float(s.gpu_count) < 1 or first[s.offer_id] == last[s.offer_id]:
            continue
        lo = bisect.bisect_left(instants, s.first_ms)
        hi_valid = (len(instants) if s.valid_to_ms is None
                    else bisect.bisect_left(instants, s.valid_to_ms))
        hi = min(hi_valid, bisect.bisect_right(instants, s.last_ms + max_age))
        stale += max(0, hi_valid - max(lo, hi))
        if s.currency != currency:
            continue
        for i in range(lo, hi):
            key = (i, s.gpu, s.category, s.provider)
            if key not in best or s.price_per_gpu_hour < best[key]:
                best[key] = s.price_per_gpu_hour
    series: dict[tuple, list] = {}
    for (i, gpu, category, provider), price in best.items():
        series.setdefault((i, gpu, category), []).append((price, provider))
    points = []
    for (i, gpu, category), values in sorted(series.items()):
        values.sort()
        prices = [v for v, _ in values]
        q = Decimal("0.0001")
        points.append((days[i], gpu, category, percentile(prices, Decimal("0.5")).quantize(q),
                       percentile(prices, Decimal("0.1")).quantize(q),
                       percentile(prices, Decimal("0.9")).quantize(q), len(prices),
                       prices[0].quantize(q), values[0][1]))
    return points, stale


span_strategy = st.builds(
    lambda offer, gpu, category, provider, count, price, currency, first, length, open_, seen:
    IndexSpan(offer, gpu, category, provider, count, price, currency,
              START + first * DAY_MS // 4,
              None if open_ else START + (first + length) * DAY_MS // 4,
              START + (first + min(seen, length)) * DAY_MS // 4),
    st.integers(1, 12), st.sampled_from(["h100-sxm", "l4"]),
    st.sampled_from(["on-demand", "spot"]), st.sampled_from(["aws", "gcp", "lambda", "vast"]),
    st.sampled_from([0.5, 1.0, 8.0]), st.sampled_from(PRICES), st.sampled_from(["USD", "EUR"]),
    st.integers(0, 50), st.integers(1, 30), st.booleans(), st.integers(0, 30))


@settings(max_examples=150, deadline=None)
@given(st.lists(span_strategy, max_size=40), st.sampled_from([6.0, 48.0, 1000.0]))
def test_the_arrays_give_the_span_by_span_index(spans, max_age_hours):
    result = daily_index(spans, DAYS, currency="USD", rates=None, max_age_hours=max_age_hours)
    points = [(p.date, p.gpu, p.category, p.median, p.p10, p.p90, p.providers, p.cheapest,
               p.cheapest_provider) for p in result.points]
    expected, stale = oracle(spans, DAYS, "USD", max_age_hours)
    assert points == expected
    assert result.excluded["stale_price_samples"] == stale
    if any(s.currency == "EUR" for s in spans if s.gpu_count >= 1):
        assert all("EUR" in w for w in result.warnings)
