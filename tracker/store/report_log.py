"""The weekly report's rows: the archived files of each week and the mail deliveries."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from tracker.store.models import ReportArchive, ReportDelivery

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from tracker.store.db import Database


def upsert_archive_rows(conn: Connection, week: str, files: Mapping[str, tuple[str, str]],
                        created_at: datetime) -> None:
    """One row per (week, kind): its path and sha256, in the caller's transaction (the files
    are installed in the same one)."""
    table = ReportArchive.__table__
    for kind, (path, digest) in sorted(files.items()):
        existing = conn.execute(select(table.c.id).where(
            table.c.week == week, table.c.kind == kind)).scalar()
        values = {"path": path, "sha256": digest, "created_at": created_at}
        if existing is None:
            conn.execute(table.insert().values(week=week, kind=kind, **values))
        else:
            conn.execute(table.update().where(table.c.id == existing).values(**values))


def archive_rows(db: Database) -> tuple[list[Any], list[Any]]:
    """(every archived file by week and kind, every `sent` delivery by time)."""
    archive, delivery = ReportArchive.__table__, ReportDelivery.__table__
    with db.engine.connect() as conn:
        files = conn.execute(select(archive).order_by(archive.c.week, archive.c.kind)).fetchall()
        sends = conn.execute(select(delivery).where(delivery.c.status == "sent")
                             .order_by(delivery.c.sent_at, delivery.c.id)).fetchall()
    return list(files), list(sends)


def week_deliveries(db: Database, week: str) -> list[tuple[str, str]]:
    """(status, comma-separated recipients) of the week's deliveries, oldest first."""
    table = ReportDelivery.__table__
    with db.engine.connect() as conn:
        rows = conn.execute(select(table.c.status, table.c.recipients).where(
            table.c.week == week).order_by(table.c.id)).fetchall()
    return [(row.status, row.recipients) for row in rows]


def insert_delivery(db: Database, week: str, recipients: Sequence[str], sent_at: datetime,
                    message_id: str, status: str) -> int:
    """A committed delivery row; its id."""
    from tracker.store.db import inserted_id

    with db.write() as conn:
        return inserted_id(conn.execute(ReportDelivery.__table__.insert().values(
            week=week, recipients=",".join(recipients), sent_at=sent_at,
            message_id=message_id[:255], status=status)))


def set_delivery_status(db: Database, row_id: int, status: str) -> None:
    table = ReportDelivery.__table__
    with db.write() as conn:
        conn.execute(table.update().where(table.c.id == row_id).values(status=status))


__all__ = ["archive_rows", "insert_delivery", "set_delivery_status", "upsert_archive_rows",
           "week_deliveries"]
