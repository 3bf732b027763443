"""Typed errors of the library; the CLI turns each into one line and an exit code."""


class TrackerError(Exception):
    """Base class: a problem the user can act on, described in one line."""

    usage = False  # True: a value the user typed is wrong; the CLI exits 2, as for click's own


class NotFound(TrackerError):
    """A named thing (GPU, model, source, offer, price) does not exist."""


class InvalidInput(TrackerError):
    """An input value is malformed or out of range."""


class DatabaseError(TrackerError):
    """The database cannot be opened, migrated or written."""


class SourceError(TrackerError):
    """A price source failed: HTTP error, malformed response, limits exceeded."""


class MissingCredentials(SourceError):
    """A source needs a key from the environment and it is not set."""


class Interrupted(TrackerError):
    """The user (Ctrl-C) or the system (SIGTERM) asked the run to stop."""


def _first_line(text: str) -> str:
    lines = [line.strip() for line in str(text).strip().splitlines() if line.strip()]
    return lines[0] if lines else ""


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


def describe_failure(exc: BaseException) -> str | None:
    """One line for an expected failure that is not a TrackerError (database locked,
    read-only, corrupt, disk full, unreachable server, permission denied, bad encoding,
    numeric overflow), or None for a bug, which keeps its traceback."""
    import decimal
    import errno

    try:
        from sqlalchemy.exc import DBAPIError, SQLAlchemyError
    except ImportError:  # pragma: no cover - sqlalchemy is a dependency
        DBAPIError = SQLAlchemyError = ()  # type: ignore[assignment,misc]

    if isinstance(exc, DBAPIError):
        detail = _first_line(str(exc.orig) if exc.orig is not None else str(exc))
        lowered = detail.lower()
        for needles, meaning in _DATABASE_FAULTS:
            if any(n in lowered for n in needles):
                return f"{meaning} ({detail})" if detail and detail.lower() != meaning else meaning
        return f"database error: {detail}"
    if isinstance(exc, SQLAlchemyError):
        return f"database error: {_first_line(str(exc))}"
    if type(exc).__module__.startswith("psycopg"):
        return f"the database server is unreachable ({_first_line(str(exc))})"
    if isinstance(exc, UnicodeError):
        reason = exc.reason if isinstance(exc, UnicodeDecodeError) else _first_line(str(exc))
        return f"text is not valid UTF-8 ({reason})"
    if isinstance(exc, (decimal.InvalidOperation, decimal.Overflow, OverflowError)):
        return "a number is too large (or not a number) for this calculation; use smaller inputs"
    if isinstance(exc, OSError):
        where = f": {exc.filename}" if exc.filename else ""
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return f"the disk is full{where}; nothing was written"
        if exc.errno in (errno.EACCES, errno.EPERM):
            return f"permission denied{where}"
        if exc.errno == errno.EROFS:
            return f"read-only file system{where}"
        if exc.errno == errno.ENOENT:
            return f"no such file or directory{where}"
        return f"{exc.strerror or type(exc).__name__}{where}"
    if isinstance(exc, MemoryError):
        return "out of memory"
    return None


def usage_error(message: str) -> InvalidInput:
    """An InvalidInput about a value the user gave (an option, a typed name): exit 2."""
    error = InvalidInput(message)
    error.usage = True
    return error
