"""Ingest's statements at the DBAPI level: plain SQL on the transaction's own DBAPI connection.

A run issues a dozen small statements (its run row, the source's scope, the span updates)
and reads one large result (the offers' state). Through SQLAlchemy each small statement
costs a few hundred microseconds of compilation, parameter and result set-up, as much as the
database's own work; here it is one cursor call. The SQL is written with '?' placeholders
and translated once to the driver's paramstyle (psycopg: %s). A driver error is raised as
SQLAlchemy raises its own (DBAPIError), so a lock timeout still reads as one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError
from sqlalchemy.types import TypeEngine

from tracker.store.types import UTCDateTime


def driver_sql(conn: Connection, sql: str) -> str:
    """`sql` written with '?' placeholders, in the driver's own paramstyle (psycopg: %s)."""
    return sql if conn.dialect.paramstyle == "qmark" else sql.replace("?", "%s")


@contextlib.contextmanager
def _cursor(conn: Connection, sql: str, params: Any) -> Iterator[Any]:
    dbapi_error = conn.dialect.loaded_dbapi.Error
    cursor = conn.connection.cursor()
    try:
        yield cursor
    except dbapi_error as error:
        raise DBAPIError.instance(sql, params, error, dbapi_error,
                                  dialect=conn.dialect) from error
    finally:
        cursor.close()


def fetch_rows(conn: Connection, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
    """Rows of `sql` as the cursor gives them: plain tuples, no per-value processing."""
    sql = driver_sql(conn, sql)
    with _cursor(conn, sql, params) as cursor:
        cursor.execute(sql, params)
        return cast(list[tuple], cursor.fetchall())


def fetch_value(conn: Connection, sql: str, params: Sequence[Any] = ()) -> Any:
    """The first value of the first row of `sql` (None when there is no row)."""
    rows = fetch_rows(conn, sql, params)
    return rows[0][0] if rows else None


def execute(conn: Connection, sql: str, params: Sequence[Any] = ()) -> None:
    sql = driver_sql(conn, sql)
    with _cursor(conn, sql, params) as cursor:
        cursor.execute(sql, params)


def execute_many(conn: Connection, sql: str, rows: Sequence[Sequence[Any]]) -> None:
    sql = driver_sql(conn, sql)
    with _cursor(conn, sql, rows) as cursor:
        cursor.executemany(sql, rows)


@contextlib.contextmanager
def page_cache(conn: Connection, kib: int) -> Iterator[None]:
    """Within the block, let SQLite's page cache of this connection grow to `kib` KiB, then
    set it back to what it was (the pages beyond it are let go; the dirty ones are written
    at the commit as always). A cache size changes no stored byte and no durability: it
    only decides how often SQLite reads a page again, or writes a dirty page to the WAL
    before the commit, because it ran out of room. Nothing on PostgreSQL."""
    if conn.dialect.name != "sqlite":
        yield
        return
    before = int(fetch_value(conn, "PRAGMA cache_size"))
    execute(conn, f"PRAGMA cache_size = {-int(kib)}")
    try:
        yield
    except BaseException:
        with contextlib.suppress(Exception):  # the block's own error is the one to report
            execute(conn, f"PRAGMA cache_size = {before}")
        raise
    execute(conn, f"PRAGMA cache_size = {before}")


def insert_id(conn: Connection, sql: str, params: Sequence[Any]) -> int:
    """Run a one-row INSERT into a table with an integer `id` and return the new id."""
    returning = conn.dialect.name != "sqlite"
    sql = driver_sql(conn, sql + " RETURNING id" if returning else sql)
    with _cursor(conn, sql, params) as cursor:
        cursor.execute(sql, params)
        return int(cursor.fetchone()[0] if returning else cursor.lastrowid)


def bind_processor_of(conn: Connection, column_type: TypeEngine[Any]) -> \
        Callable[[Any], Any] | None:
    """What `column_type` turns a value into for the driver on this dialect (None: as it is),
    as SQLAlchemy's own inserts convert it."""
    return column_type.dialect_impl(conn.dialect).bind_processor(conn.dialect)


def instant_binder(conn: Connection) -> Callable[[datetime | None], Any]:
    """An aware datetime in the form a UTCDateTime column stores (naive UTC text on SQLite)."""
    process = bind_processor_of(conn, UTCDateTime())
    return process if process is not None else (lambda value: value)


def instant_reader(conn: Connection) -> Callable[[Any], datetime | None]:
    """A stored UTCDateTime value as the aware datetime SQLAlchemy would return."""
    column_type = UTCDateTime().dialect_impl(conn.dialect)
    process = column_type.result_processor(conn.dialect, None)
    return process if process is not None else (lambda value: value)
