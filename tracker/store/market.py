"""Writes and reads of the market tables (exchange rates, alert state and events, FOCUS usage)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from tracker.store.models import ExchangeRate

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from scrapers.base import ExchangeRateFact


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
