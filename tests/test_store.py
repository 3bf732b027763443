"""The price store: exact money, spans, as-of queries, idempotence, atomic failure."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select, text

from scrapers.base import Rejected
from tracker.core.errors import DatabaseError, SourceError
from tracker.store.db import HEAD_REVISION, current_revision, migrate, open_database
from tracker.store.ingest import imported_versions, ingest_records
from tracker.store.models import IngestRun, Offer, PriceSpan, RejectedRow
from tracker.store.queries import cheapest_per_gpu, history, price_at, price_rows

from .helpers import at, obs


def count(db, table) -> int:
    with db.engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(table.__table__)).scalar()


EXACT_PRICES = ["98.32", "0.001000001", "123.123456789012345678", "31.464", "0.1",
                "2.2", "3.3000000000000003", "55.04000000"]


def test_decimal_prices_round_trip_exactly(any_db_url):
    db = open_database(any_db_url)
    t = at("2026-11-02")
    records = [obs(p, t, instance_type=f"i{n}", gpu_count=1) for n, p in enumerate(EXACT_PRICES)]
    summary = ingest_records(db, "test", records, started_at=t)
    assert summary.status == "ok", summary.error
    stored = {r.instance_type: r.price_per_hour for r in price_rows(db)}
    for n, price in enumerate(EXACT_PRICES):
        assert stored[f"i{n}"] == Decimal(price)
        assert isinstance(stored[f"i{n}"], Decimal)
    # 0.1 + 2.2 stays 2.3 exactly, as it would not with floats.
    assert stored["i4"] + stored["i5"] == Decimal("2.3")
    db.close()


def test_sqlite_stores_money_as_exact_text(sqlite_url):
    db = open_database(sqlite_url)
    t = at("2026-11-02")
    ingest_records(db, "test", [obs("123.123456789012345678", t)], started_at=t)
    with db.engine.connect() as conn:
        raw, kind = conn.execute(text(
            "SELECT price_per_hour, typeof(price_per_hour) FROM price_span")).one()
    assert (raw, kind) == ("123.123456789012345678", "text")


def test_new_sqlite_file_gets_16k_pages_and_an_older_file_keeps_its_own(tmp_path):
    import sqlite3

    from tracker.store.db import SQLITE_PAGE_SIZE

    fresh = tmp_path / "fresh.db"
    open_database(f"sqlite:///{fresh}").close()
    older = tmp_path / "older.db"
    con = sqlite3.connect(older)
    con.execute("PRAGMA journal_mode=WAL")  # fixes SQLite's default page size, 4 KiB
    con.execute("CREATE TABLE kept (x)")
    con.close()
    db = open_database(f"sqlite:///{older}")
    t = at("2026-11-02")
    ingest_records(db, "test", [obs("1.5", t)], started_at=t)
    db.close()
    sizes = {path.name: sqlite3.connect(path).execute("PRAGMA page_size").fetchone()[0]
             for path in (fresh, older)}
    assert SQLITE_PAGE_SIZE == 16384
    assert sizes == {"fresh.db": 16384, "older.db": 4096}


def test_unchanged_price_extends_span_changed_price_opens_new(any_db_url):
    db = open_database(any_db_url)
    days = [at("2026-11-01"), at("2026-11-02"), at("2026-11-03"), at("2026-11-04")]
    for day, price in zip(days, ["98.32", "98.32", "98.32", "90.00"], strict=True):
        assert ingest_records(db, "test", [obs(price, day)], started_at=day).status == "ok"
    spans = history(db, "h100-sxm")
    assert [(s.price_per_hour, s.valid_from, s.last_seen, s.valid_to) for s in spans] == [
        (Decimal("98.32"), days[0], days[2], days[3]),
        (Decimal("90.00"), days[3], days[3], None),
    ]
    assert count(db, PriceSpan) == 2
    assert count(db, Offer) == 1


def test_as_of_queries(any_db_url):
    db = open_database(any_db_url)
    d1, d2, d3 = at("2026-10-01"), at("2026-10-15"), at("2026-11-01")
    ingest_records(db, "test", [obs("98.32", d1), obs("40", d1, instance_type="p4d.24xlarge",
                                                       gpu_name="A100", gpu_memory_gb=40)],
                   started_at=d1)
    ingest_records(db, "test", [obs("88.00", d2), obs("40", d2, instance_type="p4d.24xlarge",
                                                       gpu_name="A100", gpu_memory_gb=40)],
                   started_at=d2)
    ingest_records(db, "test", [obs("88.00", d3)], started_at=d3)  # the A100 left the list
    offer_id = next(r.offer_id for r in price_rows(db, gpu="h100-sxm"))
    assert price_at(db, offer_id, d1 - timedelta(seconds=1)) is None
    assert price_at(db, offer_id, d1).price_per_hour == Decimal("98.32")
    assert price_at(db, offer_id, d2 - timedelta(seconds=1)).price_per_hour == Decimal("98.32")
    assert price_at(db, offer_id, d2).price_per_hour == Decimal("88.00")
    assert price_at(db, offer_id, d3 + timedelta(days=30)).price_per_hour == Decimal("88.00")
    # The A100 offer is priced on 2026-10-20 but no longer listed now.
    assert [r.gpu for r in price_rows(db, as_of=at("2026-10-20"))] == ["a100-40gb", "h100-sxm"]
    assert [r.gpu for r in price_rows(db)] == ["h100-sxm"]
    # observed_at is when the current price was first seen, not when the offer first was.
    assert [(r.observed_at, r.last_seen) for r in price_rows(db)] == [(d2, d3)]
    cheapest = cheapest_per_gpu(db, as_of=at("2026-10-20"))
    assert [(r.gpu, r.price_per_gpu_hour) for r in cheapest] == [
        ("a100-40gb", Decimal("5")), ("h100-sxm", Decimal("11"))]


def test_same_snapshot_twice_adds_no_rows(any_db_url):
    db = open_database(any_db_url)
    t = at("2026-11-02")
    records = [obs("98.32", t), obs("31.464", t, category="spot", zone="use1-az1"),
               obs("1.29", t, provider="lambda", instance_type="gpu_1x_a100", gpu_name="A100",
                   gpu_count=1, gpu_memory_gb=40, region="us-east-1")]
    first = ingest_records(db, "test", records, started_at=t)
    sizes = (count(db, Offer), count(db, PriceSpan))
    second = ingest_records(db, "test", records, started_at=t)
    assert (first.new_offers, second.new_offers, second.prices_changed) == (3, 0, 0)
    assert (count(db, Offer), count(db, PriceSpan)) == sizes == (3, 3)


def test_failing_fetch_leaves_nothing_but_a_failed_run(any_db_url):
    db = open_database(any_db_url)
    t = at("2026-11-02")

    def records():
        yield obs("98.32", t)
        yield obs("40", t, instance_type="x")
        raise SourceError("https://example.test/prices: HTTP 500 after 4 tries")

    summary = ingest_records(db, "test", records(), started_at=t)
    assert summary.status == "failed"
    assert summary.error == "https://example.test/prices: HTTP 500 after 4 tries"
    assert (count(db, Offer), count(db, PriceSpan)) == (0, 0)
    with db.engine.connect() as conn:
        runs = conn.execute(select(IngestRun.__table__)).all()
    assert [(r.status, r.error) for r in runs] == [("failed", summary.error)]


def test_failure_inside_the_transaction_rolls_back(any_db_url, monkeypatch):
    db = open_database(any_db_url)
    t = at("2026-11-02")
    import tracker.store.ingest as ingest

    def boom(*args, **kwargs):
        raise RuntimeError("disk full")

    # Offers and spans are written, then storing the interruption facts fails.
    monkeypatch.setattr(ingest, "_store_facts", boom)
    summary = ingest_records(db, "test", [obs("98.32", t)], started_at=t)
    assert summary.status == "failed" and "disk full" in summary.error
    assert (count(db, Offer), count(db, PriceSpan), count(db, RejectedRow)) == (0, 0, 0)


@pytest.mark.parametrize(("record", "reason"), [
    (obs("0", at("2026-11-02")), "price must be positive"),
    (obs("-3", at("2026-11-02")), "price must be positive"),
    (obs("NaN", at("2026-11-02")), "not a finite number"),
    (obs("4000.01", at("2026-11-02")), "absurd price"),
    (obs("10", at("2026-11-02"), gpu_name="Voodoo 5"), "unknown GPU"),
    (obs("10", at("2026-11-02"), currency="XYZ"), "not an ISO 4217 code"),
    (obs("10", at("2026-11-02"), instance_type=""), "missing provider or instance type"),
    (obs("10", at("2026-11-02"), gpu_count=0), "GPU count must be positive"),
])
def test_invalid_rows_are_quarantined_with_reason(sqlite_url, record, reason):
    db = open_database(sqlite_url)
    t = at("2026-11-02")
    summary = ingest_records(db, "test", [record, obs("98.32", t, instance_type="ok")],
                             started_at=t)
    assert (summary.status, summary.rejected, summary.offers_seen) == ("ok", 1, 1)
    with db.engine.connect() as conn:
        rejected = conn.execute(select(RejectedRow.__table__)).one()
    assert reason in rejected.reason
    assert '"price_per_hour"' in rejected.raw
    assert [r.instance_type for r in price_rows(db)] == ["ok"]


def test_source_rejects_are_stored_with_raw_payload(sqlite_url):
    db = open_database(sqlite_url)
    t = at("2026-11-02")
    summary = ingest_records(db, "test", [Rejected("missing price", {"sku": "X", "price": None},
                                                   provider="azure")], started_at=t)
    assert summary.rejected == 1
    with db.engine.connect() as conn:
        row = conn.execute(select(RejectedRow.__table__)).one()
    assert (row.reason, row.provider, row.raw) == (
        "missing price", "azure", '{"price": null, "sku": "X"}')


def test_several_snapshots_in_one_run_and_offers_leaving(sqlite_url):
    db = open_database(sqlite_url)
    d1, d2, d3 = at("2026-09-07"), at("2026-09-28"), at("2026-10-19")
    records = [obs("98.32", d1), obs("40.97", d1, instance_type="p4d.24xlarge",
                                     gpu_name="A100", gpu_memory_gb=40),
               obs("55.04", d2), obs("55.04", d3)]  # the p4d left after d1
    summary = ingest_records(db, "bundled", records, started_at=d3)
    assert (summary.offers_seen, summary.prices_changed, summary.offers_closed) == (4, 1, 1)
    assert [r.instance_type for r in price_rows(db, as_of=d1)] == ["p4d.24xlarge",
                                                                   "p5.48xlarge"]
    assert [r.instance_type for r in price_rows(db, as_of=d2)] == ["p5.48xlarge"]


def test_backfilled_older_observations_merge_into_history(sqlite_url):
    db = open_database(sqlite_url)
    d0, d1, d2, d3 = at("2026-06-01"), at("2026-07-01"), at("2026-08-01"), at("2026-09-01")
    ingest_records(db, "test", [obs("90", d2)], started_at=d2)
    ingest_records(db, "test", [obs("90", d3)], started_at=d3)
    # Older versions arrive later (a backfill): same price extends backwards, another
    # price opens an earlier span that ends where the known one begins.
    ingest_records(db, "test", [obs("90", d1)], started_at=d3, version="v1")
    ingest_records(db, "test", [obs("98.32", d0)], started_at=d3, version="v0")
    spans = history(db, "h100-sxm")
    assert [(s.price_per_hour, s.valid_from, s.valid_to) for s in spans] == [
        (Decimal("98.32"), d0, d1), (Decimal("90"), d1, None)]
    offer_id = spans[0].offer_id
    assert price_at(db, offer_id, d0 + timedelta(days=3)).price_per_hour == Decimal("98.32")
    assert imported_versions(db, "test") == {"v0", "v1"}


def test_a_backfill_before_a_delisted_offers_end_is_history_and_does_not_reopen_it(
        any_db_url):
    """An offer last seen at 06:00 and gone at 09:00, then a backfill of 07:30: the offer
    was listed at 07:30 (at another price: the span splits there), but not since 09:00."""
    db = open_database(any_db_url)
    day = "2026-09-10"
    for hour, rows in [(3, [obs("2.56", at(day, 3)), obs("5", at(day, 3), instance_type="b")]),
                       (6, [obs("2.56", at(day, 6)), obs("5", at(day, 6), instance_type="b")]),
                       (9, [obs("5", at(day, 9), instance_type="b")])]:
        assert ingest_records(db, "gap", rows, started_at=at(day, hour)).status == "ok"
    late = at(day, 7).replace(minute=30)
    summary = ingest_records(db, "gap", [obs("3.06", late)], started_at=at(day, 10))
    assert (summary.status, summary.prices_changed, summary.new_offers) == ("ok", 1, 0)
    spans = [s for s in history(db, "h100-sxm") if s.instance_type == "p5.48xlarge"]
    assert [(s.price_per_hour, s.valid_from, s.last_seen, s.valid_to) for s in spans] == [
        (Decimal("2.56"), at(day, 3), at(day, 6), late),
        (Decimal("3.06"), late, late, at(day, 9))]
    assert [r.instance_type for r in price_rows(db, as_of=at(day, 10))] == ["b"]
    db.close()


def test_unopenable_database_is_one_clear_error(tmp_path):
    with pytest.raises(DatabaseError, match=r"cannot open database"):
        open_database("postgresql+psycopg://nobody@127.0.0.1:1/none")
    with pytest.raises(DatabaseError, match=r"unknown database type .bogus."):
        open_database("bogus://")
    (tmp_path / "file").write_text("x")
    with pytest.raises(DatabaseError, match=r"cannot open database"):
        open_database(f"sqlite:///{tmp_path / 'file' / 'db.sqlite'}")


def test_migration_from_first_revision_keeps_data(tmp_path):
    from tracker.store.db import create_db_engine, sync_gpu_models

    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = create_db_engine(url)
    migrate(engine, "0001")
    sync_gpu_models(engine)
    with engine.begin() as conn:
        assert current_revision(conn) == "0001"
        conn.execute(text("INSERT INTO provider (id, display_name) VALUES ('aws', 'AWS')"))
        conn.execute(text(
            "INSERT INTO offer (id, source, provider, region, zone, instance_type, variant, "
            "category, gpu_id, gpu_raw, gpu_count, fractional, attributes, first_seen, "
            "latest_span_id) VALUES (1, 'old', 'aws', 'us-east-1', '', 'p5.48xlarge', '', "
            "'on-demand', 'h100-sxm', 'H100', 8, 0, '{}', '2026-01-01 00:00:00.000000', 1)"))
        conn.execute(text(
            "INSERT INTO price_span (id, offer_id, price_per_hour, currency, first_seen, "
            "last_seen) VALUES (1, 1, '98.32', 'USD', '2026-01-01 00:00:00.000000', "
            "'2026-01-02 00:00:00.000000')"))
    engine.dispose()
    db = open_database(url)  # a command opening an older database upgrades it
    with db.engine.connect() as conn:
        assert current_revision(conn) == HEAD_REVISION
        assert conn.execute(text("SELECT count(*) FROM spot_interruption")).scalar() == 0
    rows = price_rows(db)
    assert [(r.instance_type, r.price_per_hour, r.observed_at) for r in rows] == [
        ("p5.48xlarge", Decimal("98.32"), at("2026-01-01"))]


def test_migration_0007_raises_each_regions_scope_to_its_latest_stored_instant(any_db_url):
    """Spans stored without scope rows (before revision 0003) get them; a later scope time
    already there is kept. After it, no stored instant of a source is past its scope."""
    from tracker.store.db import create_db_engine, sync_gpu_models
    from tracker.store.models import Provider, SourceScope

    engine = create_db_engine(any_db_url)
    migrate(engine, "0004")
    sync_gpu_models(engine)
    offers, spans, scope = Offer.__table__, PriceSpan.__table__, SourceScope.__table__
    with engine.begin() as conn:  # typed inserts: each instant in its stored form
        conn.execute(Provider.__table__.insert(), [{"id": "aws", "display_name": "AWS"}])
        conn.execute(offers.insert(), [
            {"id": offer_id, "source": "old", "provider": "aws", "region": region, "zone": "",
             "instance_type": it, "variant": "", "category": "on-demand", "gpu_id": "h100-sxm",
             "gpu_raw": "H100", "gpu_count": 8.0, "fractional": False, "attributes": "{}",
             "first_seen": at("2026-01-01"), "latest_span_id": offer_id}
            for offer_id, region, it in [(1, "us-east-1", "a"), (2, "us-east-1", "b"),
                                         (3, "eu-west-1", "c")]])
        conn.execute(spans.insert(), [
            {"id": span_id, "offer_id": span_id, "price_per_hour": Decimal("98.32"),
             "currency": "USD", "first_seen": at("2026-01-01"), "last_seen": last,
             "valid_to": end}
            for span_id, last, end in [(1, at("2026-01-03"), None),
                                       (2, at("2026-01-02"), at("2026-01-04")),  # closed
                                       (3, at("2026-01-05"), None)]])
        conn.execute(scope.insert(), [{"source": "old", "provider": "aws", "region": "eu-west-1",
                                       "last_snapshot_at": at("2026-01-09")}])
    migrate(engine, "head")
    with engine.connect() as conn:
        rows = {(r.region, r.last_snapshot_at) for r in conn.execute(select(scope))}
    engine.dispose()
    assert rows == {("us-east-1", at("2026-01-04")), ("eu-west-1", at("2026-01-09"))}


def test_head_revision_constant_matches_migration_scripts():
    from importlib import resources

    from alembic.config import Config
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(resources.files("tracker.store") / "migrations"))
    assert ScriptDirectory.from_config(cfg).get_current_head() == HEAD_REVISION


def test_schema_matches_models(sqlite_url):
    """The migrations create exactly what the SQLModel tables declare."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from tracker.store.models import SQLModel

    db = open_database(sqlite_url)
    with db.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), SQLModel.metadata)
    # An index the models declare for PostgreSQL only (ddl_if) is not created on SQLite.
    elsewhere = {index.name for table in SQLModel.metadata.tables.values()
                 for index in table.indexes
                 if index._ddl_if is not None and index._ddl_if.dialect == "postgresql"}
    assert elsewhere == {"ix_price_span_open"}
    assert [d for d in diff if not (d[0] == "add_index" and d[1].name in elsewhere)] == []


def test_the_open_span_index_is_created_on_postgresql_only(any_db_url):
    from sqlalchemy import inspect

    db = open_database(any_db_url)
    with db.engine.connect() as conn:
        names = {index["name"] for index in inspect(conn).get_indexes("price_span")}
    db.close()
    assert ("ix_price_span_open" in names) == (db.dialect == "postgresql")
    assert {"ix_price_span_offer_first_seen", "ix_price_span_first_seen"} <= names


prices_strategy = st.decimals(min_value=Decimal("0.01"), max_value=Decimal("400"), places=4)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(series=st.lists(
    st.lists(st.one_of(st.none(), prices_strategy), min_size=3, max_size=3)
    .filter(lambda snapshot: any(p is not None for p in snapshot)),
    min_size=1, max_size=8))
def test_as_of_returns_what_each_snapshot_said(tmp_path_factory, series):
    """Property: after ingesting snapshots in order, the price as of each snapshot instant is
    exactly what that snapshot listed (None when the offer was absent). An empty snapshot
    is not generated: it closes nothing, since an empty answer is likelier a broken fetch."""
    path = tmp_path_factory.mktemp("prop") / "p.db"
    db = open_database(f"sqlite:///{path}")
    start = at("2026-01-01")
    for step, snapshot in enumerate(series):
        t = start + timedelta(days=step)
        records = [obs(p, t, instance_type=f"i{i}", gpu_count=1)
                   for i, p in enumerate(snapshot) if p is not None]
        assert ingest_records(db, "prop", records, started_at=t).status == "ok"
    for step, snapshot in enumerate(series):
        t = start + timedelta(days=step)
        listed = {r.instance_type: r.price_per_hour for r in price_rows(db, as_of=t)}
        expected = {f"i{i}": p for i, p in enumerate(snapshot) if p is not None}
        assert listed == expected
    # Spans stay few: at most one per change, never one per observation.
    changes = sum(1 for i in range(3) for a, b in zip([None, *[s[i] for s in series]],
                                                       [s[i] for s in series], strict=False)
                  if b is not None and a != b)
    assert count(db, PriceSpan) == changes
    db.close()


def test_postgres_provider_inserted_meanwhile_by_another_writer_is_no_error(pg_url):
    """Two sources refreshing at once on PostgreSQL may both add the same provider."""
    import threading

    db = open_database(pg_url)
    t = at("2026-11-02")
    with db.engine.connect() as other:
        other.execute(text("INSERT INTO provider (id, display_name) VALUES ('aws', 'AWS')"))
        result: dict = {}
        worker = threading.Thread(target=lambda: result.update(
            summary=ingest_records(db, "test", [obs("98.32", t)], started_at=t)))
        worker.start()
        worker.join(timeout=1.0)  # blocked on the other writer's uncommitted provider row
        other.commit()
    worker.join(timeout=30)
    assert result["summary"].status == "ok", result["summary"].error
    assert [r.provider for r in price_rows(db)] == ["aws"]
    db.close()


def test_an_old_observation_contradicting_a_later_sighting_is_rejected(sqlite_url):
    """The open span was seen at every later snapshot of its region, so an old observation at
    another price inside that time is a conflict, not a price change."""
    db = open_database(sqlite_url)
    d1, d2, d3 = at("2026-08-01"), at("2026-08-10"), at("2026-08-20")
    for day in (d1, d3):
        ingest_records(db, "test", [obs("90", day)], started_at=day)
    summary = ingest_records(db, "test", [obs("70", d2)], started_at=d3, version="old")
    assert (summary.rejected, summary.prices_changed) == (1, 0)
    spans = history(db, "h100-sxm")
    assert [(s.price_per_hour, s.valid_from, s.last_seen, s.valid_to) for s in spans] == [
        (Decimal("90"), d1, d3, None)]


def test_unchanged_refreshes_write_no_span_rows(sqlite_url):
    db = open_database(sqlite_url)
    days = [at("2026-08-01", hour) for hour in range(5)]
    for day in days:
        ingest_records(db, "test", [obs("90", day), obs("40", day, instance_type="x")],
                       started_at=day)
    with db.engine.connect() as conn:
        stored = conn.execute(text("SELECT DISTINCT last_seen FROM price_span")).scalars().all()
    assert len(stored) == 1  # the spans were written once, when they opened
    assert {r.last_seen for r in price_rows(db)} == {days[-1]}


def test_the_error_boundary_learns_database_failures_from_the_store():
    """tracker.core.errors knows no database: the store registers its describer on import
    (tracker/store/failures.py), and a driver message still becomes one line."""
    import subprocess
    import sys

    from sqlalchemy.exc import OperationalError

    import tracker.store  # noqa: F401  (registers the describer)
    from tracker.core.errors import describe_failure

    code = ("import sys, tracker.core.errors\n"
            "print(any(m.startswith('sqlalchemy') for m in sys.modules))")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "False"
    locked = OperationalError("INSERT INTO x", {}, Exception("database is locked"))
    assert describe_failure(locked) == ("the database is locked by another process; try again "
                                        "when it has finished (database is locked)")
    assert describe_failure(ValueError("a bug")) is None
