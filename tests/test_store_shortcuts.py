"""The store's shortcuts for a large market answer what the row-by-row reading answers: the
cheapest offer per class picked from the database's candidates (cheapest_per_gpu), and each
source's newest sighting computed by the database (newest_sightings, for `sources`, `status`
and the alerts), on a synthetic market with spot, bids, closures and several as-of instants,
on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest

from tools.synthetic_market import build_market_store
from tracker.store.db import open_database
from tracker.store.queries import (
    cheapest_of,
    cheapest_per_gpu,
    newest_sightings,
    price_rows,
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
