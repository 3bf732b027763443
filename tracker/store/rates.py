"""The exchange rates as the store holds them: the bundled ECB snapshot with the rates the
`ecb` source stored on top, and price rows converted with them (the arithmetic is
tracker.core.fx, pure)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

from tracker.core.fx import (
    SNAPSHOT_SOURCE,
    RateTable,
    merge_rates,
    rows_in_currency,
    snapshot_rates,
)

if TYPE_CHECKING:
    from tracker.store.db import Database


def rate_table(db: Database | None) -> RateTable:
    """The snapshot with the stored ECB rates on top (stored days win)."""
    if db is None:
        return RateTable(snapshot_rates(), SNAPSHOT_SOURCE)
    from sqlalchemy import select

    from tracker.store.models import ExchangeRate

    t = ExchangeRate.__table__
    with db.engine.connect() as conn:
        stored = [(r.currency, date.fromisoformat(r.rate_date), r.rate)
                  for r in conn.execute(select(t.c.currency, t.c.rate_date, t.c.rate))]
    source = SNAPSHOT_SOURCE + (", plus rates stored by the ecb source" if stored else "")
    return RateTable(merge_rates(snapshot_rates(), stored), source)


def priced_in(db: Database, rows: Sequence[Any], currency: str | None,
              as_of: datetime | None = None) -> list[Any]:
    """`rows_in_currency` with the store's rates (read only when a conversion is needed)."""
    if currency is None or all(r.currency == currency for r in rows):
        return [r for r in rows if currency is None or r.currency == currency]
    return rows_in_currency(rows, currency, rate_table(db), as_of)


__all__ = ["priced_in", "rate_table"]
