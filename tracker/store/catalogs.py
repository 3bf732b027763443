"""The catalog versions the sources have read (`catalog_version`), with the runs that read
them."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from tracker.store.models import CatalogVersionRow, IngestRun

if TYPE_CHECKING:
    from tracker.store.db import Database


def catalog_versions_read(db: Database, as_of: datetime) -> tuple[list[Any], list[Any]]:
    """(every catalog version read by `as_of`, the id, source and start of every successful
    ingest run started by then)."""
    cv, runs = CatalogVersionRow.__table__, IngestRun.__table__
    with db.engine.connect() as conn:
        rows = conn.execute(select(cv).where(cv.c.last_seen <= as_of)).fetchall()
        ok_runs = conn.execute(
            select(runs.c.id, runs.c.source, runs.c.started_at)
            .where(runs.c.status == "ok", runs.c.started_at <= as_of)).fetchall()
    return list(rows), list(ok_runs)


__all__ = ["catalog_versions_read"]
