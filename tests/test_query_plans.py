"""The questions that read price history do it through indexes, never by a full scan of the
span table (issue #26): `prices --as-of`, `compare`'s rows per shape, `history`, `index` and
the weekly report's series.

Each question runs against a small synthetic market (tools/synthetic_market.py); every
statement it sends that reads price_span is captured as sent and explained: EXPLAIN QUERY PLAN
on SQLite, EXPLAIN (FORMAT JSON) on PostgreSQL with sequential scans priced out
(`enable_seqscan = off`, so the plan shows whether an index can answer the query at all; on a
store this small the planner would rightly scan anyway). A plan fails on SQLite when it
SCANs price_span (a table or a whole index), on PostgreSQL when a scan of price_span has no
index condition, unless it scans `ix_price_span_open` (revision 0010): the open spans, as
many as the current prices asked for.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import event

from tools.synthetic_market import build_market_store
from tracker.store.db import Database, open_database

END = date(2026, 11, 30)
LAST = datetime(2026, 11, 29, 6, tzinfo=UTC)
SPAN_NAMES = ("price_span", "span_at")  # the table and the alias tracker.store.series uses
OPEN_SPANS = "ix_price_span_open"  # PostgreSQL, WHERE valid_to IS NULL: the current prices


@pytest.fixture
def market_db(any_db_url: str) -> Iterator[Database]:
    build_market_store(any_db_url, offers=300, providers=12, days=60, seed=4, end=END)
    db = open_database(any_db_url)
    yield db
    db.close()


@contextmanager
def captured(db: Database) -> Iterator[list[tuple[str, Any]]]:
    """The statements (with their parameters) sent while the block runs that read spans."""
    statements: list[tuple[str, Any]] = []

    def record(_conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any,
               _many: bool) -> None:
        if "price_span" in statement and statement.lstrip().upper().startswith(("SELECT",
                                                                                "WITH")):
            statements.append((statement, parameters))

    event.listen(db.engine, "before_cursor_execute", record)
    try:
        yield statements
    finally:
        event.remove(db.engine, "before_cursor_execute", record)


def full_scans_sqlite(db: Database, statement: str, parameters: Any) -> list[str]:
    with db.engine.connect() as conn:
        plan = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters).fetchall()
    return [row[3] for row in plan
            if row[3].startswith("SCAN ") and row[3].split()[1] in SPAN_NAMES]


def _nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from _nodes(child)


def full_scans_postgres(db: Database, statement: str, parameters: Any) -> list[str]:
    with db.engine.connect() as conn:
        conn.exec_driver_sql("SET enable_seqscan = off")
        plan = conn.exec_driver_sql(f"EXPLAIN (FORMAT JSON) {statement}",
                                    parameters).scalar()
        conn.rollback()
    plan = plan if isinstance(plan, list) else json.loads(plan)
    bad = []
    for node in _nodes(plan[0]["Plan"]):
        if node.get("Relation Name") != "price_span":
            continue
        kind = node["Node Type"]
        if kind == "Seq Scan" or (kind in ("Index Scan", "Index Only Scan")
                                  and "Index Cond" not in node
                                  and node.get("Index Name") != OPEN_SPANS):
            bad.append(f"{kind} on price_span ({node.get('Alias')})")
    return bad


def assert_no_full_scan(db: Database, question: Callable[[], Any]) -> None:
    with captured(db) as statements:
        question()
    assert statements, "the question read no spans"
    explain = full_scans_sqlite if db.dialect == "sqlite" else full_scans_postgres
    for statement, parameters in statements:
        scans = explain(db, statement, parameters)
        assert not scans, f"full scan of the span table: {scans} in\n{statement}"


def test_prices_as_of_reads_one_span_per_offer(market_db):
    from tracker.store.queries import cheapest_per_gpu, price_at, price_rows, price_rows_per_shape

    as_of = LAST - timedelta(days=30)
    assert_no_full_scan(market_db, lambda: price_rows(market_db, as_of=as_of))
    assert_no_full_scan(market_db, lambda: cheapest_per_gpu(market_db, as_of=as_of))
    assert_no_full_scan(market_db, lambda: price_at(market_db, 1, as_of))
    assert_no_full_scan(market_db, lambda: price_rows_per_shape(  # compare's read
        market_db, currency="USD", as_of=as_of, by_instance={"aws"}))


def test_the_current_prices_and_the_alerts_read_no_history(market_db):
    """The current prices (each offer's newest span, if open), the alerts' watched prices
    and the new-low rules' window of spans."""
    from tracker.store.queries import PriceWatch, cheapest_per_gpu, price_rows, watched_prices
    from tracker.store.series import low_span_rows

    now = LAST + timedelta(hours=1)
    assert_no_full_scan(market_db, lambda: price_rows(market_db))
    assert_no_full_scan(market_db, lambda: price_rows(market_db, as_of=now))
    assert_no_full_scan(market_db, lambda: cheapest_per_gpu(market_db, as_of=now))
    assert_no_full_scan(market_db, lambda: watched_prices(
        market_db, [PriceWatch("h100-sxm", "on-demand", "USD"),
                    PriceWatch("l4", "spot", "EUR", provider="aws")],
        as_of=now, seen_since=now - timedelta(hours=48)))
    assert_no_full_scan(market_db, lambda: low_span_rows(
        market_db, ["h100-sxm", "l4"], categories=["on-demand"],
        since=now - timedelta(days=30), until=now))


def test_history_of_a_window_reads_the_window(market_db):
    from tracker.store.queries import history

    assert_no_full_scan(market_db, lambda: history(
        market_db, ["h100-sxm", "a100-80gb"], since=LAST - timedelta(days=14), until=LAST))
    assert_no_full_scan(market_db, lambda: history(market_db, "h100-sxm"))


def test_the_index_reads_its_classes_spans(market_db):
    from tracker.market.index import price_index

    assert_no_full_scan(market_db, lambda: price_index(
        market_db, ["h100-sxm", "l4"], since=LAST.date() - timedelta(days=20),
        until=LAST.date()))


def test_the_report_series_read_the_window(market_db):
    from reports.build import load_spans

    assert_no_full_scan(market_db, lambda: load_spans(
        market_db, since=LAST - timedelta(days=28), until=LAST, currency="USD"))


def test_prices_as_of_cheapest_runs_without_jit_on_postgresql(market_db):
    """PostgreSQL: `prices --cheapest --as-of`'s near-cheapest read (one seek per offer, which
    prices it past jit_above_cost on a large store) runs with JIT off, in its own transaction
    only: the connection's setting is as it was after it."""
    if market_db.dialect != "postgresql":
        pytest.skip("PostgreSQL's JIT")
    from tracker.store.queries import cheapest_per_gpu

    with market_db.engine.connect() as conn:
        before = conn.exec_driver_sql("SHOW jit").scalar()
    settings: list[str] = []

    def record(_conn: Any, cursor: Any, statement: str, _parameters: Any, _context: Any,
               _many: bool) -> None:
        if statement.lstrip().upper().startswith("WITH") and "price_span" in statement:
            settings.append(cursor.connection.execute("SHOW jit").fetchone()[0])

    event.listen(market_db.engine, "before_cursor_execute", record)
    try:
        rows = cheapest_per_gpu(market_db, as_of=LAST - timedelta(days=30))
    finally:
        event.remove(market_db.engine, "before_cursor_execute", record)
    assert rows and settings == ["off"]
    with market_db.engine.connect() as conn:
        assert conn.exec_driver_sql("SHOW jit").scalar() == before
