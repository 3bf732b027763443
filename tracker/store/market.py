"""Writes and reads of the market tables (exchange rates, alert state and events, FOCUS usage)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import bindparam, func, select

from tracker.store.models import AlertEvent, AlertState, ExchangeRate, FocusUsage, Offer, PriceSpan

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from scrapers.base import ExchangeRateFact
    from tracker.store.db import Database


def store_exchange_rates(conn: Connection, source: str, rates: Sequence[ExchangeRateFact],
                         fetched_at: datetime) -> int:
    """Insert new (currency, day) rates, update changed ones (the ECB rarely corrects)."""
    t = ExchangeRate.__table__
    days = sorted({r.rate_date.isoformat() for r in rates})
    existing: dict[tuple[str, str], Any] = {
        (row.currency, row.rate_date): row.rate
        for row in conn.execute(select(t.c.currency, t.c.rate_date, t.c.rate)
                                .where(t.c.rate_date.in_(days)))}
    inserts = []
    for fact in rates:
        key = (fact.currency, fact.rate_date.isoformat())
        if key not in existing:
            inserts.append({"currency": key[0], "rate_date": key[1], "rate": fact.rate,
                            "source": source, "fetched_at": fetched_at})
            existing[key] = fact.rate
        elif existing[key] != fact.rate:
            conn.execute(t.update().where(t.c.currency == key[0], t.c.rate_date == key[1])
                         .values(rate=fact.rate, source=source, fetched_at=fetched_at))
            existing[key] = fact.rate
    if inserts:
        conn.execute(t.insert(), inserts)
    return len(rates)


# -- alerts ----------------------------------------------------------------------------------

def alert_states(db: Database) -> dict[str, Any]:
    """Each rule's stored state row (active, since, checked_at, detail) by rule name."""
    t = AlertState.__table__
    with db.engine.connect() as conn:
        return {r.rule: r for r in conn.execute(select(t))}


def save_alert_state(db: Database, rule: str, active: bool, now: datetime, detail: str, *,
                     since_changed: bool) -> None:
    """Write the rule's state; `since` moves to `now` when the state changed (or is new)."""
    save_alert_states(db, [(rule, active, detail, since_changed)], now)


def save_alert_states(db: Database, states: Sequence[tuple[str, bool, str, bool]],
                      now: datetime) -> None:
    """Write several rules' (rule, active, detail, since_changed) checked at `now` in one
    transaction; a rule's `since` moves to `now` when its state changed (or is new)."""
    if not states:
        return
    t = AlertState.__table__
    with db.write() as conn:
        names = [rule for rule, _active, _detail, _changed in states]
        stored = set(conn.execute(select(t.c.rule).where(t.c.rule.in_(names))).scalars())
        for changed in (False, True):
            updates = [{"r": rule, "a": active, "d": detail}
                       for rule, active, detail, since_changed in states
                       if rule in stored and since_changed is changed]
            if updates:
                values: dict[str, Any] = {"active": bindparam("a"), "checked_at": now,
                                          "detail": bindparam("d")}
                if changed:
                    values["since"] = now
                conn.execute(t.update().where(t.c.rule == bindparam("r")).values(**values),
                             updates)
        inserts = [{"rule": rule, "active": active, "checked_at": now, "detail": detail,
                    "since": now} for rule, active, detail, _changed in states
                   if rule not in stored]
        if inserts:
            conn.execute(t.insert(), inserts)


def insert_alert_event(db: Database, rule: str, kind: str, at: datetime, message: str,
                       payload: str, delivered: str) -> int:
    """A committed event row (payload and delivery states already serialized); its id."""
    from tracker.store.db import inserted_id

    with db.write() as conn:
        return inserted_id(conn.execute(AlertEvent.__table__.insert().values(
            rule=rule, kind=kind, at=at, message=message, payload=payload,
            delivered=delivered)))


def set_alert_delivered(db: Database, event_id: int, delivered: str) -> None:
    t = AlertEvent.__table__
    with db.write() as conn:
        conn.execute(t.update().where(t.c.id == event_id).values(delivered=delivered))


def newest_fired_events(db: Database) -> list[Any]:
    """Each rule's newest `fired` event row (id, rule, payload, delivered)."""
    t = AlertEvent.__table__
    newest = (select(t.c.rule, func.max(t.c.id).label("id")).where(t.c.kind == "fired")
              .group_by(t.c.rule).subquery())
    with db.engine.connect() as conn:
        return list(conn.execute(select(t.c.id, t.c.rule, t.c.payload, t.c.delivered)
                                 .join(newest, newest.c.id == t.c.id)))


def alert_events(db: Database, rule: str | None = None, limit: int = 50) -> list[Any]:
    """The newest `limit` event rows (of one rule, or all), newest first."""
    t = AlertEvent.__table__
    query = select(t).order_by(t.c.at.desc(), t.c.id.desc()).limit(limit)
    if rule:
        query = query.where(t.c.rule == rule)
    with db.engine.connect() as conn:
        return list(conn.execute(query))


# -- FOCUS usage and export ------------------------------------------------------------------

def span_ends(db: Database, offer_ids: Sequence[int]) -> dict[tuple[int, datetime],
                                                              datetime | None]:
    """(offer id, first seen) -> valid_to of every price span of the offers."""
    s = PriceSpan.__table__
    ends: dict[tuple[int, datetime], datetime | None] = {}
    ids = sorted(set(offer_ids))
    with db.engine.connect() as conn:
        for start in range(0, len(ids), 500):
            chunk = ids[start:start + 500]
            for span in conn.execute(select(s.c.offer_id, s.c.first_seen, s.c.valid_to)
                                     .where(s.c.offer_id.in_(chunk))):
                ends[(span.offer_id, span.first_seen)] = span.valid_to
    return ends


def offer_gpus(db: Database) -> dict[tuple[str, str], tuple[str, float]]:
    """(provider, lower-case instance type) -> (GPU, count) of every tracked offer."""
    o = Offer.__table__
    with db.engine.connect() as conn:
        return {(r.provider, r.instance_type.lower()): (r.gpu_id, float(r.gpu_count))
                for r in conn.execute(select(o.c.provider, o.c.instance_type, o.c.gpu_id,
                                             o.c.gpu_count))}


def insert_usage(db: Database, file_sha256: str, rows: Sequence[dict[str, Any]]) -> int:
    """Store a usage file's lines (`rows`: focus_usage columns but the file's hash), skipping
    the lines of that file already stored; how many were new."""
    t = FocusUsage.__table__
    with db.write() as conn:
        seen = {r.line for r in conn.execute(
            select(t.c.line).where(t.c.file_sha256 == file_sha256))}
        new = [{"file_sha256": file_sha256, **row} for row in rows if row["line"] not in seen]
        if new:
            conn.execute(t.insert(), new)
    return len(new)


def usage_rows(db: Database, *, since: datetime | None = None,
               until: datetime | None = None) -> list[Any]:
    """The stored usage lines charged in [since, until), by charge start, file and line."""
    t = FocusUsage.__table__
    query = select(t).order_by(t.c.charge_period_start, t.c.file_sha256, t.c.line)
    if since is not None:
        query = query.where(t.c.charge_period_start >= since)
    if until is not None:
        query = query.where(t.c.charge_period_start < until)
    with db.engine.connect() as conn:
        return list(conn.execute(query))
