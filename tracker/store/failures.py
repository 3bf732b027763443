"""The database's failures in one line each (locked, read-only, full, corrupt, unreachable),
for the error boundary: registered with tracker.core.errors.describe_failure when the store
is imported, so the foundation never imports SQLAlchemy."""

from __future__ import annotations

import sys

from tracker.core.errors import first_line

# Substrings of SQLite / PostgreSQL driver messages -> what the user should read and do.
_DATABASE_FAULTS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("database is locked", "database table is locked", "lock timeout"),
     "the database is locked by another process; try again when it has finished"),
    (("readonly database", "read-only", "read only", "in a read-only transaction"),
     "the database is read-only (file or directory permissions, or a read-only file system)"),
    (("database or disk is full", "disk is full", "no space left", "could not extend file"),
     "the disk holding the database is full; nothing was written"),
    (("file is not a database", "malformed", "file is encrypted"),
     "the database file is corrupt or not a database"),
    (("unable to open database file",),
     "cannot open the database file (missing directory or permission denied)"),
    (("connection refused", "could not connect", "server closed the connection",
      "terminating connection", "connection is closed", "connection timeout",
      "could not translate host name", "no route to host", "consuming input failed",
      "the connection is lost", "server conn crashed"),
     "the database server is unreachable"),
    (("permission denied",), "permission denied by the database"),
)


def describe_database_failure(exc: BaseException) -> str | None:
    """One line for a SQLAlchemy or psycopg error; None for anything else."""
    if "sqlalchemy.exc" not in sys.modules:
        return None  # no SQLAlchemy error can exist before it is imported
    from sqlalchemy.exc import DBAPIError, SQLAlchemyError

    if isinstance(exc, DBAPIError):
        detail = first_line(str(exc.orig) if exc.orig is not None else str(exc))
        lowered = detail.lower()
        for needles, meaning in _DATABASE_FAULTS:
            if any(n in lowered for n in needles):
                return f"{meaning} ({detail})" if detail and detail.lower() != meaning else meaning
        return f"database error: {detail}"
    if isinstance(exc, SQLAlchemyError):
        return f"database error: {first_line(str(exc))}"
    if type(exc).__module__.startswith("psycopg"):
        return f"the database server is unreachable ({first_line(str(exc))})"
    return None


__all__ = ["describe_database_failure"]
