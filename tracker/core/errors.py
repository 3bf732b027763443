"""Typed errors of the library; the CLI turns each into one line and an exit code."""

from __future__ import annotations

from collections.abc import Callable


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


def first_line(text: str) -> str:
    """The first non-blank line of a message, stripped."""
    lines = [line.strip() for line in str(text).strip().splitlines() if line.strip()]
    return lines[0] if lines else ""


# Describers of failures from libraries the foundation does not know (the store registers the
# database's: tracker.store.failures), asked before the generic rules below.
_DESCRIBERS: list[Callable[[BaseException], str | None]] = []


def register_failure_describer(describer: Callable[[BaseException], str | None]) -> None:
    """Add a function that gives one line for the failures it knows, None for the rest."""
    if describer not in _DESCRIBERS:
        _DESCRIBERS.append(describer)


def describe_failure(exc: BaseException) -> str | None:
    """One line for an expected failure that is not a TrackerError (database locked,
    read-only, corrupt, disk full, unreachable server, permission denied, bad encoding,
    numeric overflow), or None for a bug, which keeps its traceback."""
    import decimal
    import errno

    for describer in _DESCRIBERS:
        described = describer(exc)
        if described is not None:
            return described
    if isinstance(exc, UnicodeError):
        reason = exc.reason if isinstance(exc, UnicodeDecodeError) else first_line(str(exc))
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
