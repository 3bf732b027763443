"""A cron-started refresh has no in-process offer state: reading it back must give the same
history as the warm path (the scheduler's cached state), on both databases."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from tests.helpers import at, obs
from tracker.store import ingest
from tracker.store.db import open_database
from tracker.store.models import Offer, PriceSpan


def run_three_refreshes(url: str, cold: bool) -> list[tuple]:
    db = open_database(url)
    t0 = at("2026-09-01", 6)
    batches = [
        [obs("98.32", t0), obs("12.29", t0, instance_type="p4d.24xlarge", gpu_name="A100",
                                gpu_memory_gb=40.0)],
        [obs("98.32", t0 + timedelta(hours=1)),
         obs("11.50", t0 + timedelta(hours=1), instance_type="p4d.24xlarge", gpu_name="A100",
             gpu_memory_gb=40.0)],
        [obs("90.00", t0 + timedelta(hours=2))],  # p4d gone: its span closes
    ]
    summaries = []
    for batch in batches:
        if cold:
            ingest.forget_offer_states()
        summary = ingest.ingest_records(db, "cold-test", batch, started_at=batch[0].observed_at)
        assert summary.status == "ok", summary.error
        summaries.append((summary.new_offers, summary.prices_changed, summary.offers_closed))
    o, s = Offer.__table__, PriceSpan.__table__
    with db.engine.connect() as conn:  # typed columns: the same values on both databases
        spans = conn.execute(
            select(o.c.instance_type, s.c.price_per_hour, s.c.first_seen, s.c.last_seen,
                   s.c.valid_to).select_from(s.join(o, o.c.id == s.c.offer_id))
            .order_by(o.c.instance_type, s.c.first_seen)).fetchall()
    db.close()
    ingest.forget_offer_states()
    return [tuple(summaries), *[tuple(row) for row in spans]]


def test_cold_state_load_matches_the_warm_path(any_db_url: str, tmp_path) -> None:
    cold = run_three_refreshes(any_db_url, cold=True)
    warm_url = f"sqlite:///{tmp_path / 'warm.db'}"
    warm = run_three_refreshes(warm_url, cold=False)
    assert cold == warm
    assert cold[0] == ((2, 0, 0), (0, 1, 0), (0, 1, 1))
    assert len(cold) == 1 + 4  # p4d 12.29 then 11.50; p5 98.32 then 90.00


def test_rows_written_by_the_batched_inserts_keep_the_column_types_stored_form(tmp_path) -> None:
    """Offers and spans are inserted through the DBAPI with each column's own converter: the
    stored text is the one every other writer and reader of the SQLite file uses."""
    import sqlite3

    url = f"sqlite:///{tmp_path / 'forms.db'}"
    db = open_database(url)
    t0 = at("2026-09-01", 6)
    ingest.forget_offer_states()
    summary = ingest.ingest_records(db, "forms", [obs("98.3200", t0)], started_at=t0)
    assert summary.status == "ok", summary.error
    db.close()
    conn = sqlite3.connect(tmp_path / "forms.db")
    assert conn.execute("SELECT price_per_hour, currency, first_seen, last_seen, valid_to "
                        "FROM price_span").fetchall() == [
        ("98.32", "USD", "2026-09-01 06:00:00.000000", "2026-09-01 06:00:00.000000", None)]
    assert conn.execute("SELECT first_seen, fractional, typeof(gpu_count), latest_span_id "
                        "FROM offer").fetchall() == [("2026-09-01 06:00:00.000000", 0, "real", 1)]
    conn.close()


def test_an_ordinary_refresh_keeps_unchanged_offers_and_finds_new_changed_and_duplicate_rows(
        any_db_url: str) -> None:
    """The in-order snapshot's prefilter drops unchanged rows only: a new offer, a changed
    price, a changed currency and a reopened offer still write, and a duplicate row (which
    turns the prefilter off) is rejected with the first row kept."""
    db = open_database(any_db_url)
    t0 = at("2026-09-02", 6)
    later = [t0 + timedelta(hours=h) for h in range(4)]
    ingest.forget_offer_states()
    first = ingest.ingest_records(db, "order", [
        obs("10.00", t0), obs("20.00", t0, instance_type="b"), obs("30.00", t0,
                                                                    instance_type="c")],
        started_at=t0)
    assert (first.new_offers, first.prices_changed) == (3, 0)
    summaries = []
    batches = [
        # unchanged a, changed b (same value, other currency), c gone, new d
        [obs("10.0", later[1]), obs("20.00", later[1], instance_type="b", currency="EUR"),
         obs("40.00", later[1], instance_type="d")],
        # c back at its old price: a new span, not a price change; d duplicated
        [obs("10.00", later[2]), obs("20.00", later[2], instance_type="b", currency="EUR"),
         obs("30.00", later[2], instance_type="c"), obs("41.00", later[2], instance_type="d"),
         obs("42.00", later[2], instance_type="d")],
    ]
    for batch in batches:
        ingest.forget_offer_states()
        summary = ingest.ingest_records(db, "order", batch, started_at=batch[0].observed_at)
        assert summary.status == "ok", summary.error
        summaries.append((summary.offers_seen, summary.new_offers, summary.prices_changed,
                          summary.offers_closed, summary.rejected))
    assert summaries == [(3, 1, 1, 1, 0), (4, 0, 1, 0, 1)]
    o, s = Offer.__table__, PriceSpan.__table__
    with db.engine.connect() as conn:
        spans = [(row[0], row[1], row[2], row[3] is None) for row in conn.execute(
            select(o.c.instance_type, s.c.price_per_hour, s.c.currency, s.c.valid_to)
            .select_from(s.join(o, o.c.id == s.c.offer_id))
            .order_by(o.c.instance_type, s.c.first_seen))]
    db.close()
    ingest.forget_offer_states()
    assert spans == [
        ("b", Decimal("20.00"), "USD", False), ("b", Decimal("20.00"), "EUR", True),
        ("c", Decimal("30.00"), "USD", False), ("c", Decimal("30.00"), "USD", True),
        ("d", Decimal("40.00"), "USD", False), ("d", Decimal("41.00"), "USD", True),
        ("p5.48xlarge", Decimal("10.00"), "USD", True)]


def test_a_repeated_new_offer_in_an_ordinary_refresh_is_rejected_with_the_first_row_kept(
        any_db_url: str) -> None:
    """The prefilter tells a snapshot that repeats a key by its lookups: a new offer listed
    twice (two lookups that found nothing) turns it off as a repeated stored one does, and
    the second row is rejected; a snapshot without repeats closes what it no longer lists."""
    db = open_database(any_db_url)
    t0 = at("2026-09-03", 6)
    runs = [
        [obs("10.00", t0), obs("20.00", t0, instance_type="b")],
        # a unchanged, b gone, new e twice (the first price kept)
        [obs("10.00", t0 + timedelta(hours=1)),
         obs("50.00", t0 + timedelta(hours=1), instance_type="e"),
         obs("51.00", t0 + timedelta(hours=1), instance_type="e")],
        # e unchanged; a gone
        [obs("50.00", t0 + timedelta(hours=2), instance_type="e")],
    ]
    summaries = []
    try:
        for batch in runs:
            ingest.forget_offer_states()
            summary = ingest.ingest_records(db, "repeat", batch,
                                            started_at=batch[0].observed_at)
            assert summary.status == "ok", summary.error
            summaries.append((summary.offers_seen, summary.new_offers,
                              summary.prices_changed, summary.offers_closed,
                              summary.rejected))
        o, s = Offer.__table__, PriceSpan.__table__
        with db.engine.connect() as conn:
            spans = [(row[0], row[1], row[2] is None) for row in conn.execute(
                select(o.c.instance_type, s.c.price_per_hour, s.c.valid_to)
                .select_from(s.join(o, o.c.id == s.c.offer_id))
                .order_by(o.c.instance_type, s.c.first_seen))]
    finally:
        db.close()
        ingest.forget_offer_states()
    assert summaries == [(2, 2, 0, 0, 0), (2, 1, 0, 1, 1), (1, 0, 0, 1, 0)]
    assert spans == [("b", Decimal("20.00"), False), ("e", Decimal("50.00"), True),
                     ("p5.48xlarge", Decimal("10.00"), False)]


def test_a_new_price_takes_over_the_offers_newest_span_row_and_the_old_one_moves_to_history(
        any_db_url: str) -> None:
    """A price change writes no offer row: the offer keeps pointing at its first span's row,
    which now holds the new open span, and the closed span is a new row with its old price,
    run, first and last sighting (the region's last snapshot) and its end. A reopened offer
    (closed, then listed again) does the same with its closed span copied as it was."""
    db = open_database(any_db_url)
    t0 = at("2026-09-03", 6)
    hours = [t0 + timedelta(hours=h) for h in range(5)]
    runs = []
    for when, batch in [
            (hours[0], [obs("10.00", hours[0]), obs("5.00", hours[0], instance_type="b")]),
            (hours[1], [obs("10.00", hours[1]), obs("5.00", hours[1], instance_type="b")]),
            (hours[2], [obs("12.50", hours[2])]),  # a repriced, b gone
            (hours[3], [obs("12.50", hours[3]), obs("5.00", hours[3], instance_type="b")])]:
        ingest.forget_offer_states()
        summary = ingest.ingest_records(db, "reprice", batch, started_at=when)
        assert summary.status == "ok", summary.error
        runs.append(summary.run_id)
    o, s = Offer.__table__, PriceSpan.__table__
    with db.engine.connect() as conn:
        pointers = dict(conn.execute(select(o.c.instance_type, o.c.latest_span_id)).fetchall())
        spans = [tuple(row) for row in conn.execute(
            select(o.c.instance_type, s.c.id, s.c.price_per_hour, s.c.first_seen,
                   s.c.last_seen, s.c.valid_to, s.c.run_id)
            .select_from(s.join(o, o.c.id == s.c.offer_id))
            .order_by(o.c.instance_type, s.c.first_seen))]
    db.close()
    ingest.forget_offer_states()
    assert pointers == {"p5.48xlarge": 1, "b": 2}  # the first spans' rows, never moved
    assert spans == [
        ("b", 4, Decimal("5.00"), hours[0], hours[1], hours[2], runs[0]),
        ("b", 2, Decimal("5.00"), hours[3], hours[3], None, runs[3]),
        ("p5.48xlarge", 3, Decimal("10.00"), hours[0], hours[1], hours[2], runs[0]),
        ("p5.48xlarge", 1, Decimal("12.50"), hours[2], hours[2], None, runs[2])]


def test_offer_identities_of_any_text_are_found_again_when_the_state_is_read_back(
        any_db_url: str) -> None:
    """The state read back (one JSON array on SQLite) gives each identity's text exactly:
    quotes, backslashes, control characters and non-ASCII text match the observation again,
    so an unchanged refresh writes nothing and a price change is one change."""
    names = ['a "quoted" type', "back\\slash\\n", "tab\tand\nnewline", "São Paulo 東京 ✓",
             "", "null", "[1, 2]"]
    db = open_database(any_db_url)
    t0 = at("2026-09-04", 6)

    def refresh(hours: int, price: str) -> tuple[int, int, int, int]:
        when = t0 + timedelta(hours=hours)
        rows = [obs(price if i == 0 else "7.25", when, instance_type=f"x{name}",
                    region=name, zone=name[:3], variant=name[::-1]) for i, name in enumerate(names)]
        ingest.forget_offer_states()
        summary = ingest.ingest_records(db, "text", rows, started_at=when)
        assert summary.status == "ok", summary.error
        return (summary.new_offers, summary.prices_changed, summary.offers_closed,
                summary.rejected)

    try:
        assert refresh(0, "7.25") == (len(names), 0, 0, 0)
        assert refresh(1, "7.25") == (0, 0, 0, 0)
        assert refresh(2, "8.00") == (0, 1, 0, 0)
        with db.engine.connect() as conn:
            spans = conn.execute(select(PriceSpan.__table__.c.id)).fetchall()
        assert len(spans) == len(names) + 1
    finally:
        db.close()
        ingest.forget_offer_states()


def test_a_run_pauses_the_garbage_collector_and_restores_it_as_it_was(
        tmp_path, monkeypatch) -> None:
    import gc

    seen: list[bool] = []
    real_sort = ingest.sort_records

    def spying_sort(*args, **kwargs):
        seen.append(gc.isenabled())
        return real_sort(*args, **kwargs)

    monkeypatch.setattr(ingest, "sort_records", spying_sort)
    db = open_database(f"sqlite:///{tmp_path / 'gc.db'}")
    t0 = at("2026-09-01", 6)
    was_enabled = gc.isenabled()
    try:
        gc.enable()
        assert ingest.ingest_records(db, "gc", [obs("98.32", t0)], started_at=t0).status == "ok"
        assert seen == [False] and gc.isenabled()
        # A failing run (a record of no known kind) still turns the collector back on.
        summary = ingest.ingest_records(db, "gc", [object()], started_at=t0)
        assert summary.status == "failed" and seen == [False, False] and gc.isenabled()
        # Off before the run: it stays off.
        gc.disable()
        ingest.ingest_records(db, "gc", [obs("98.32", t0 + timedelta(hours=1))], started_at=t0)
        assert seen == [False, False, False] and not gc.isenabled()
    finally:
        (gc.enable if was_enabled else gc.disable)()
        db.close()
        ingest.forget_offer_states()


def test_overlapping_pauses_turn_the_collector_back_on_only_after_the_last() -> None:
    import gc
    import threading

    was_enabled = gc.isenabled()
    gc.enable()
    inner_started, release = threading.Event(), threading.Event()
    states: list[bool] = []

    def other_run() -> None:
        with ingest.collector_paused():
            inner_started.set()
            release.wait(5)
            states.append(gc.isenabled())

    try:
        with ingest.collector_paused():
            thread = threading.Thread(target=other_run)
            thread.start()
            assert inner_started.wait(5)
        # The first pause ended while the other run is still inside its own.
        assert not gc.isenabled()
        release.set()
        thread.join(5)
        assert states == [False] and gc.isenabled()
    finally:
        release.set()
        (gc.enable if was_enabled else gc.disable)()


def test_a_process_keeps_a_sources_state_only_for_runs_the_stored_one_cannot_serve(
        tmp_path, monkeypatch) -> None:
    """An ordinary refresh, first run or not, compares with what the last run stored
    (kept_state) and reads back only the offers that may change. A process keeps a source's
    whole state in memory from its second run of it on, for the runs that cannot use the
    stored one (a backfill, older than the newest snapshot, and the runs after it in that
    process); it reads the sightings back only for such a state or a backfill."""
    reads: list[tuple[str, bool, int | None]] = []
    real_load = ingest.load_states

    def counting_load(conn, source, *, sightings=True, offer_ids=None):
        reads.append((source, sightings, None if offer_ids is None else len(offer_ids)))
        return real_load(conn, source, sightings=sightings, offer_ids=offer_ids)

    monkeypatch.setattr(ingest, "load_states", counting_load)
    db = open_database(f"sqlite:///{tmp_path / 'keep.db'}")
    t0 = at("2026-09-01", 6)
    ingest.forget_offer_states()

    def refresh(hours: int, source: str = "keep") -> None:
        when = t0 + timedelta(hours=hours)
        assert ingest.ingest_records(db, source, [obs("98.32", when)],
                                     started_at=when).status == "ok"

    try:
        refresh(0)  # a new source: every offer (none) read, with sightings; nothing kept
        assert reads == [("keep", True, None)] and ingest._STATE_CACHE == {}
        refresh(1)  # what run 0 stored: no offer to read back, nothing kept in memory
        assert reads[1:] == [("keep", False, 0)] and ingest._STATE_CACHE == {}
        refresh(-1)  # a backfill in the same process: read whole, with sightings, and kept
        assert reads[2:] == [("keep", True, None)] and (db.url, "keep") in ingest._STATE_CACHE
        refresh(-2)  # another: the kept state serves it
        assert len(reads) == 3
        refresh(2)  # in order, but the backfills stored nothing: the kept state again...
        assert len(reads) == 3
        refresh(3)  # ...which stored what the next ordinary refresh compares with
        assert reads[3:] == [("keep", False, 0)]
        refresh(4, source="other")  # per source
        assert reads[4:] == [("other", True, None)]
        assert (db.url, "other") not in ingest._STATE_CACHE
        ingest.forget_offer_states()  # as a new process
        refresh(-3)  # a backfill as its first run of the source: read whole, not kept...
        assert reads[5:] == [("keep", True, None)] and ingest._STATE_CACHE == {}
        refresh(5)  # ...but what it left is stored for the next ordinary refresh
        assert reads[6:] == [("keep", False, 0)] and ingest._STATE_CACHE == {}
    finally:
        ingest.forget_offer_states()
        db.close()


# One run: (hour, [(offer index, price index, listed)], region listed) over three offers in two
# regions; an hour may repeat or go back (a backfill), a region may be left out.
_runs = st.lists(st.tuples(
    st.integers(0, 12),
    st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2)), min_size=1, max_size=4),
    st.sampled_from(["both", "us-east-1", "eu-west-1"])), min_size=1, max_size=7)
_OFFERS = [("a", "us-east-1"), ("b", "us-east-1"), ("c", "eu-west-1")]


def _history_after(url: str, runs: list, cold: bool, sightings: bool = False,
                   kept: bool = True) -> tuple[list, list]:
    """(the spans without their ids, (span instant, its region's scope) pairs) after `runs`;
    `sightings` makes every run read every offer's state back with its sightings, as if no
    run preceded the stored ones; `kept=False` makes every run ignore what the last one kept
    (tracker/store/ingest/kept_state.py) and read every offer's state back."""
    if sightings or not kept:
        real_load = ingest.load_states
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(ingest.kept_state, "read", lambda *_args: None)
            if sightings:
                patch.setattr(ingest, "load_states", lambda conn, source, **_kw: real_load(
                    conn, source, sightings=True))
            return _history_after(url, runs, cold)
    db = open_database(url)
    t0 = at("2026-09-05")
    ingest.forget_offer_states()
    for hour, rows, regions in runs:
        when = t0 + timedelta(hours=hour)
        batch = [obs(("4.00", "5.00", "6.50")[price], when, instance_type=_OFFERS[i][0],
                     region=_OFFERS[i][1]) for i, price in rows
                 if regions in ("both", _OFFERS[i][1])]
        if cold:
            ingest.forget_offer_states()
        assert ingest.ingest_records(db, "prop", batch, started_at=when).status == "ok"
    o, s = Offer.__table__, PriceSpan.__table__
    from tracker.store.models import SourceScope

    sc = SourceScope.__table__
    with db.engine.connect() as conn:
        spans = [tuple(r) for r in conn.execute(
            select(o.c.instance_type, s.c.price_per_hour, s.c.first_seen, s.c.last_seen,
                   s.c.valid_to, s.c.run_id).select_from(s.join(o, o.c.id == s.c.offer_id))
            .order_by(o.c.instance_type, s.c.first_seen))]
        bounds = [(instant, r.last_snapshot_at) for r in conn.execute(
            select(s.c.first_seen, s.c.last_seen, s.c.valid_to, sc.c.last_snapshot_at)
            .select_from(s.join(o, o.c.id == s.c.offer_id).outerjoin(
                sc, (sc.c.source == o.c.source) & (sc.c.provider == o.c.provider)
                & (sc.c.region == o.c.region))))
            for instant in (r.first_seen, r.last_seen, r.valid_to) if instant is not None]
    db.close()
    ingest.forget_offer_states()
    return spans, bounds


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(runs=_runs)
# a closed (its last sighting, 01:00, kept in the process's state too), then backfilled at 00:00
@example(runs=[(0, [(0, 0)], "both"), (1, [(0, 0)], "both"), (2, [(1, 0)], "both"),
               (0, [(0, 0)], "both")])
# a gone at 06:00, then seen at 04:00 and 03:00 (history, which the kept state must follow)
@example(runs=[(0, [(0, 0)], "both"), (2, [(0, 0)], "both"), (6, [(1, 0)], "both"),
               (4, [(0, 0)], "both"), (3, [(0, 0)], "both")])
# a closed, then backfilled before its last sighting: a run that needs the sightings read back
@example(runs=[(5, [(0, 0), (1, 0)], "both"), (7, [(1, 0)], "us-east-1"),
               (3, [(0, 1)], "both")])
def test_every_stored_instant_is_within_its_scope_and_cold_runs_store_what_warm_ones_do(
        tmp_path_factory, runs) -> None:
    """The bound a run that reads no sightings relies on (revision 0007): no span instant is
    later than its region's scope time; and refreshes that each start cold (cron, mostly
    without sightings) store the same history as ones that read every sighting back and as
    one process keeping its state."""
    base = tmp_path_factory.mktemp("prop")
    cold_spans, bounds = _history_after(f"sqlite:///{base / 'cold.db'}", runs, cold=True)
    unkept_spans, _ = _history_after(f"sqlite:///{base / 'unkept.db'}", runs, cold=True,
                                     kept=False)
    full_spans, _ = _history_after(f"sqlite:///{base / 'full.db'}", runs, cold=True,
                                   sightings=True)
    warm_spans, _ = _history_after(f"sqlite:///{base / 'warm.db'}", runs, cold=False)
    assert cold_spans == unkept_spans == full_spans == warm_spans
    assert all(scope is not None and instant <= scope for instant, scope in bounds)


def test_a_run_sets_the_page_cache_back_as_it_was(tmp_path, monkeypatch) -> None:
    """A run lets SQLite's page cache grow (tracker.store.ingest.sql.page_cache) and gives it
    back on the pooled connection afterwards, after a failed run too."""
    import tracker.store.ingest as ingest_module

    db = open_database(f"sqlite:///{tmp_path / 'cache.db'}")
    t0 = at("2026-09-01", 6)
    during: list[int] = []
    real_load_scope = ingest_module.load_scope

    def spying_load_scope(conn, source):
        during.append(conn.exec_driver_sql("PRAGMA cache_size").scalar())
        return real_load_scope(conn, source)

    def cache_size() -> int:
        with db.engine.connect() as conn:
            return conn.exec_driver_sql("PRAGMA cache_size").scalar()

    monkeypatch.setattr(ingest_module, "load_scope", spying_load_scope)
    try:
        before = cache_size()
        assert ingest.ingest_records(db, "cache", [obs("98.32", t0)], started_at=t0).status \
            == "ok"
        assert during == [-ingest_module._RUN_PAGE_CACHE_KIB] and cache_size() == before

        def failing_load_scope(conn, source):
            spying_load_scope(conn, source)
            raise RuntimeError("boom")

        monkeypatch.setattr(ingest_module, "load_scope", failing_load_scope)
        summary = ingest.ingest_records(db, "cache", [obs("98.32", t0)], started_at=t0)
        assert summary.status == "failed" and "boom" in (summary.error or "")
        assert len(during) == 2 and cache_size() == before
    finally:
        db.close()
        ingest.forget_offer_states()
