"""The store's shortcuts for a large market answer what the row-by-row reading answers: the
cheapest offer per class picked from the database's candidates (cheapest_per_gpu), the first
row of each shape group (price_rows_per_shape, for `compare` and `cost`), and each source's
newest sighting computed by the database (newest_sightings, for `sources`, `status` and the
alerts), on a synthetic market with spot, bids, closures and several as-of instants, on SQLite
and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest

from tools.synthetic_market import build_market_store
from tracker.store.db import open_database
from tracker.store.queries import (
    cheapest_of,
    cheapest_per_gpu,
    first_per_shape,
    newest_sightings,
    price_rows,
    price_rows_per_shape,
    source_statuses,
)

END = date(2026, 11, 30)
LAST = datetime(2026, 11, 29, 6, tzinfo=UTC)
INSTANTS = [None, LAST, LAST - timedelta(days=1, hours=3), LAST - timedelta(days=25),
            LAST - timedelta(days=200)]  # the last one is before the first refresh


@pytest.fixture
def market(any_db_url):
    build_market_store(any_db_url, offers=800, providers=40, days=60, seed=9, end=END)
    db = open_database(any_db_url)
    yield db
    db.close()


def _key(row):
    return (row.offer_id, row.price_per_hour, row.price_per_gpu_hour, row.observed_at,
            row.last_seen)


@pytest.mark.parametrize("as_of", INSTANTS)
def test_the_cheapest_per_class_is_the_row_by_row_one(market, as_of):
    for filters in ({}, {"category": "spot"}, {"gpu": ["h100-sxm", "l4"], "min_gpus": 2},
                    {"provider": ["aws", "vastai"], "currency": "USD"},
                    {"max_price": Decimal("2.5")}):
        expected = cheapest_of(price_rows(market, as_of=as_of, **filters))
        found = cheapest_per_gpu(market, as_of=as_of, **filters)
        assert [_key(r) for r in found] == [_key(r) for r in expected], filters
    if as_of is not None and as_of < LAST - timedelta(days=100):
        assert found == []


def test_a_tie_on_the_cheapest_price_is_broken_as_the_rows_sort(market):
    """Two offers of a class at one price per GPU-hour: the one price_rows sorts first."""
    from sqlalchemy import text

    rows = price_rows(market, gpu="h100-sxm", category="on-demand")
    first, other = rows[0], rows[-1]
    price = first.price_per_gpu_hour * Decimal(repr(other.gpu_count))
    with market.engine.begin() as conn:
        conn.execute(text("UPDATE price_span SET price_per_hour = :p WHERE id = "
                          "(SELECT latest_span_id FROM offer WHERE id = :o)"),
                     {"p": str(price) if market.dialect == "sqlite" else price,
                      "o": other.offer_id})
    expected = cheapest_of(price_rows(market, gpu="h100-sxm", category="on-demand"))
    assert [_key(r) for r in cheapest_per_gpu(market, gpu="h100-sxm", category="on-demand")] \
        == [_key(r) for r in expected]


def _other_currencies_quotes_and_ties(market):
    """Some current prices in EUR, some offers hardware quotes, and offers of one shape group
    at one price (the tie is broken by price_rows' order)."""
    from sqlalchemy import text

    from tracker.store.queries import shape_of

    groups: dict[tuple, list] = {}
    for row in price_rows(market, category="on-demand"):
        groups.setdefault(shape_of(row), []).append(row)
    first, other = next(group for group in groups.values() if len(group) > 2)[:2]
    with market.engine.begin() as conn:
        conn.execute(text("UPDATE price_span SET price_per_hour = :p WHERE id = "
                          "(SELECT latest_span_id FROM offer WHERE id = :o)"),
                     {"p": str(first.price_per_hour) if market.dialect == "sqlite"
                      else first.price_per_hour, "o": other.offer_id})
        conn.execute(text("UPDATE price_span SET currency = 'EUR' WHERE id IN (SELECT "
                          "latest_span_id FROM offer WHERE id % 17 = 3)"))
        conn.execute(text("UPDATE offer SET category = 'quote' WHERE id % 23 = 5 AND "
                          "category = 'on-demand'"))


@pytest.mark.parametrize("as_of", INSTANTS[:4])
def test_the_rows_per_shape_are_the_first_of_each_group(market, as_of):
    """price_rows_per_shape keeps of price_rows' rows, in their order, the first of each shape
    group (store.queries.first_per_shape) of the rows in the currency asked, and every row of
    another currency and every quote."""
    _other_currencies_quotes_and_ties(market)
    for by_instance, named in ((frozenset(), True), (frozenset(), False),
                               (frozenset({"aws", "vastai"}), False)):
        for filters in ({}, {"category": ["spot", "quote"]}, {"gpu": ["h100-sxm", "l4"]}):
            rows = price_rows(market, as_of=as_of, **filters)
            usd = [r for r in rows if r.currency == "USD" and r.category != "quote"]
            first = {id(r) for r in first_per_shape(usd, by_instance, named)}
            expected = [r for r in rows if id(r) in first or r not in usd]
            found = price_rows_per_shape(market, currency="USD", as_of=as_of,
                                         by_instance=by_instance, named_unclustered=named,
                                         **filters)
            assert found == expected, (by_instance, named, filters)
            assert any(r.currency == "EUR" for r in found) or not rows
            assert len(found) < len(rows) or not rows


@pytest.mark.parametrize("as_of", INSTANTS)
def test_each_sources_newest_sighting_is_the_row_by_row_one(market, as_of):
    expected: dict[str, datetime] = {}
    counts: dict[str, int] = {}
    for row in price_rows(market, as_of=as_of):
        counts[row.source] = counts.get(row.source, 0) + 1
        if row.source not in expected or row.last_seen > expected[row.source]:
            expected[row.source] = row.last_seen
    assert {source: (count, seen) for source, count, seen in newest_sightings(market, as_of)} \
        == {source: (counts[source], seen) for source, seen in expected.items()}
    if as_of is not None:
        # As of an instant a price was last seen by its source's newest run started by then
        # (every run of the market succeeded; one a day at 06:00).
        day_run = datetime.combine(as_of.date(), LAST.timetz())
        run = day_run if day_run <= as_of else day_run - timedelta(days=1)
        statuses = {s.source: (s.newest_price_at, s.offers)
                    for s in source_statuses(market, sorted(expected), as_of)}
        assert statuses == {source: (min(seen, as_of, run), counts[source])
                            for source, seen in expected.items()}


@pytest.mark.parametrize("as_of", [LAST, LAST + timedelta(days=3), LAST - timedelta(hours=1)])
def test_prices_as_of_now_are_read_as_the_current_ones_only_when_they_are(market, as_of):
    """At or after everything stored, price_rows reads each offer's newest span by its pointer;
    the rows are the ones the seek per offer finds (and before it, the seek is used)."""
    from tracker.store import queries

    assert (queries._past(market, as_of) is None) == (as_of >= LAST)
    query, _o, _s = queries._price_query(as_of, market.dialect)  # always the seek
    with market.engine.connect() as conn:
        sought = queries._price_rows(conn, query)
    assert sorted(map(_key, price_rows(market, as_of=as_of))) == sorted(map(_key, sought))
