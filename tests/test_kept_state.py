"""What a source's last run kept for the next (tracker/store/ingest/kept_state.py): a
cron-started refresh compares its listing with it and reads back only the offers that may
change something, and stores exactly what a refresh that reads every offer back stores."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from tests.helpers import at, obs
from tracker.store import ingest
from tracker.store.db import open_database
from tracker.store.ingest import kept_state
from tracker.store.models import Offer, PriceSpan, SourceState

T0 = at("2026-09-10", 6)


def _listing(hour: int, prices: dict[str, str], currency: str = "USD") -> list:
    when = T0 + timedelta(hours=hour)
    return [obs(price, when, instance_type=name, currency=currency)
            for name, price in prices.items()]


def _history(db) -> list[tuple]:
    o, s = Offer.__table__, PriceSpan.__table__
    with db.engine.connect() as conn:
        return [tuple(row) for row in conn.execute(
            select(o.c.instance_type, s.c.price_per_hour, s.c.currency, s.c.first_seen,
                   s.c.last_seen, s.c.valid_to, s.c.run_id)
            .select_from(s.join(o, o.c.id == s.c.offer_id))
            .order_by(o.c.instance_type, s.c.first_seen))]


def _run(db, batch: list, source: str = "kept") -> tuple[int, ...]:
    ingest.forget_offer_states()  # each run as a new process (cron)
    summary = ingest.ingest_records(db, source, batch, started_at=batch[0].observed_at)
    assert summary.status == "ok", summary.error
    return (summary.offers_seen, summary.new_offers, summary.prices_changed,
            summary.offers_closed, summary.rejected)


@pytest.fixture
def reads(monkeypatch) -> list:
    """The offer ids each run read back (None: every offer of the source)."""
    seen: list = []
    real = ingest.load_states

    def recording(conn, source, *, sightings=True, offer_ids=None):
        seen.append(None if offer_ids is None else sorted(offer_ids))
        return real(conn, source, sightings=sightings, offer_ids=offer_ids)

    monkeypatch.setattr(ingest, "load_states", recording)
    return seen


def _without_kept_state(monkeypatch) -> None:
    monkeypatch.setattr(kept_state, "read", lambda *_args: None)


RUNS = [
    {"a": "10.00", "b": "20.00", "c": "30.00", "d": "40.00"},
    {"a": "10.00", "b": "21.00", "c": "30.00", "d": "40.00"},  # b repriced
    {"a": "10.00", "b": "21.00", "d": "40.00"},  # c gone
    {"d": "40.00", "c": "30.00", "a": "10.0", "e": "50.00"},  # new order, c back, e new, b gone
    {"d": "40.00", "c": "30.00", "a": "10.0", "e": "50.00"},  # the same again
]


def test_a_refresh_reads_back_only_the_offers_that_may_change(any_db_url, reads) -> None:
    db = open_database(any_db_url)
    try:
        summaries = [_run(db, _listing(hour, prices)) for hour, prices in enumerate(RUNS)]
        with db.engine.connect() as conn:
            ids = dict(conn.execute(select(Offer.__table__.c.instance_type,
                                           Offer.__table__.c.id)).fetchall())
            parts = sorted(tuple(row) for row in conn.execute(
                select(SourceState.__table__.c.part, SourceState.__table__.c.run_id)))
        history = _history(db)
    finally:
        db.close()
        ingest.forget_offer_states()
    assert summaries == [(4, 4, 0, 0, 0), (4, 0, 1, 0, 0), (3, 0, 0, 1, 0), (4, 1, 0, 1, 0),
                         (4, 0, 0, 0, 0)]
    assert reads == [
        None,  # a new source: nothing kept yet
        [ids["b"]],  # only the repriced offer
        [ids["c"]],  # only the offer no longer listed
        # a's price written another way (10.0), b no longer listed, c closed; e is new
        sorted([ids["a"], ids["b"], ids["c"]]),
        [],  # nothing changed (the state kept a's text as last listed)
    ]
    # The offers row was rewritten by the run that changed the order and added e (run 4),
    # the prices row by every run.
    assert parts == [("offers", 4), ("prices", 5)]
    c_spans = [row for row in history if row[0] == "c"]
    assert [(row[1], row[5] is None) for row in c_spans] == [
        (Decimal("30.00"), False), (Decimal("30.00"), True)]


def test_what_is_stored_is_what_a_refresh_reading_every_offer_stores(
        any_db_url, tmp_path, monkeypatch) -> None:
    db = open_database(any_db_url)
    other = open_database(f"sqlite:///{tmp_path / 'unkept.db'}")
    try:
        for hour, prices in enumerate(RUNS):
            _run(db, _listing(hour, prices))
        kept_history = _history(db)
        _without_kept_state(monkeypatch)
        for hour, prices in enumerate(RUNS):
            _run(other, _listing(hour, prices))
        assert kept_history == _history(other)
    finally:
        db.close()
        other.close()
        ingest.forget_offer_states()


def test_a_run_in_between_makes_the_kept_state_stale(tmp_path, reads) -> None:
    """A failed run (a record of no known kind) leaves a run row: the next run finds the
    kept state is not its predecessor's and reads every offer back; so does the run after a
    backfill in a process that keeps the state in memory, which deletes what was kept."""
    db = open_database(f"sqlite:///{tmp_path / 'stale.db'}")
    try:
        _run(db, _listing(0, RUNS[0]))
        failed = ingest.ingest_records(db, "kept", [object()], started_at=T0)
        assert failed.status == "failed"
        assert _run(db, _listing(1, RUNS[1])) == (4, 0, 1, 0, 0)
        assert reads == [None, None]
        # Kept again, from the offers as stored: a price the database holds in another
        # form than the listing's (10 for 10.00) is read back once, then kept as listed.
        with db.engine.connect() as conn:
            ids = dict(conn.execute(select(Offer.__table__.c.instance_type,
                                           Offer.__table__.c.id)).fetchall())
        _run(db, _listing(2, RUNS[1]))
        assert reads[2:] == [sorted([ids["a"], ids["c"], ids["d"]])]
        _run(db, _listing(3, RUNS[1]))
        assert reads[3:] == [[]]
        # A long-running process: its ordinary refreshes use the stored state too, but a
        # backfill (its second run of the source, older than the newest snapshot) keeps
        # the state in memory and deletes the stored one; a later cron run reads
        # everything back.
        ingest.forget_offer_states()
        for hour in (4, -1):
            summary = ingest.ingest_records(db, "kept", _listing(hour, RUNS[1]),
                                            started_at=T0 + timedelta(hours=hour))
            assert summary.status == "ok", summary.error
        assert reads[4:] == [[], None]
        with db.engine.connect() as conn:
            assert conn.execute(select(SourceState.__table__)).fetchall() == []
        _run(db, _listing(6, RUNS[1]))
        assert reads[-1] is None
    finally:
        db.close()
        ingest.forget_offer_states()


@pytest.mark.parametrize("separator", ["\x1f", "\x1d", "\x1e"])
def test_an_identity_holding_a_separator_is_not_kept_and_still_stored_right(
        any_db_url, separator, reads) -> None:
    db = open_database(any_db_url)
    try:
        name = f"odd{separator}type"
        runs = [{"a": "1.00", name: "2.00"}, {"a": "1.00", name: "2.50"},
                {"a": "1.00", name: "2.50"}]
        summaries = [_run(db, _listing(hour, prices)) for hour, prices in enumerate(runs)]
        with db.engine.connect() as conn:
            kept_rows = conn.execute(select(SourceState.__table__)).fetchall()
        history = _history(db)
    finally:
        db.close()
        ingest.forget_offer_states()
    assert summaries == [(2, 2, 0, 0, 0), (2, 0, 1, 0, 0), (2, 0, 0, 0, 0)]
    assert kept_rows == [] and reads == [None, None, None]
    assert [(row[0], row[1]) for row in history] == [
        ("a", Decimal("1.00")), (name, Decimal("2.00")), (name, Decimal("2.50"))]


def test_kept_state_round_trips_and_damaged_bodies_are_refused() -> None:
    kept = kept_state.KeptState(
        newest_ms=1_790_000_000_000, identities="aws\x1fus\x1f\x1fp5\x1f\x1fon-demand",
        offer_ids="07", id_width=2, prices=["98.32"], currencies=["USD"], open="1")
    bodies = kept_state._encode(kept, offers_run=3)
    assert bodies is not None and bodies[0] is not None
    back = kept_state.decode(bodies[0], bodies[1], 3)
    assert back == kept_state.KeptState(**{**kept.__dict__, "offers_run": 3})
    assert back is not None and back.offer_id(0) == 7 and back.keys() == [kept.identities]
    assert kept_state.decode(bodies[0], bodies[1], 4) is None  # rows of other runs
    assert kept_state.decode(bodies[0].replace("07", "0²"), bodies[1], 3) is None
    assert kept_state.decode(bodies[0], bodies[1].replace("98.32", "98\x1f32"), 3) is None


@settings(max_examples=60, deadline=None)
@given(offers=st.text(max_size=80), prices=st.text(max_size=80))
def test_decoding_any_text_gives_a_state_or_none_never_an_error(offers, prices) -> None:
    for body in (offers, f"1\x1e1\x1e1\x1e{offers}\x1e7"):
        result = kept_state.decode(body, prices, 1)
        assert result is None or isinstance(result, kept_state.KeptState)
