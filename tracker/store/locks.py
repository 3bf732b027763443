"""The run lock: one refresh (or report) of a thing at a time, whoever starts it.

The same lock guards a run whether cron, a systemd timer, the built-in scheduler or a person
starts it, so two runs never overlap:

- SQLite: an `flock` file lock beside the database file (`tracker.store.db.refresh-aws.lock`),
  via `filelock`. The kernel releases it when the process ends, even on `kill -9`, so there
  are no stale lock files to clean up. Filesystems without `flock` fail loudly instead of
  silently falling back to a marker file that a crash would leave behind.
- PostgreSQL: a session-level advisory lock (`pg_try_advisory_lock`) held for the whole run
  on a dedicated connection (one per run, outside the connection pool). The key is derived
  from the lock name and the current schema, so schedulers on several hosts against one
  database exclude each other, and two installations in different schemas of one database
  do not. PostgreSQL releases it when the session ends: a killed process's connection
  closes and the lock goes with it; a host that vanishes is dropped by TCP keepalives.
- SQLite in memory (tests): a lock inside this process, since nothing else can see the database.

Keys are names such as `refresh:aws` or `report`. A run asks for several keys at once in
sorted order (so two waiting runs can never deadlock); with `partial=True` it keeps the
ones it got and reports the others as busy.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from tracker.core.errors import DatabaseError, TrackerError

if TYPE_CHECKING:
    from tracker.store.db import Database

log = logging.getLogger(__name__)

POLL_SECONDS = 0.2  # how often a waiting run retries a busy lock


class RunLock(Protocol):
    key: str

    def acquire(self, wait: float) -> bool:
        """Take the lock, waiting up to `wait` seconds (0: one try). False when still busy."""

    def release(self) -> None: ...


def _file_name(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", key).strip("-") or "run"


def lock_path(database_path: Path, key: str) -> Path:
    """Where the SQLite lock file for `key` lives: beside the database file."""
    return database_path.with_name(f"{database_path.name}.{_file_name(key)}.lock")


def advisory_key(schema: str, key: str) -> int:
    """A signed 64-bit PostgreSQL advisory lock key for `key` in `schema` (stable across hosts)."""
    digest = hashlib.blake2b(f"gpu-tracker:{schema}:{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class FileRunLock:
    """`flock` on a file beside the SQLite database; released by the kernel on any exit."""

    def __init__(self, path: Path, key: str) -> None:
        self.path = path
        self.key = key
        self._lock: Any = None

    def acquire(self, wait: float) -> bool:
        from filelock import FileLock, Timeout

        # A fresh FileLock (own file descriptor) per acquisition: flock then also excludes
        # another thread of this process, e.g. two scheduler jobs sharing a source.
        lock = FileLock(str(self.path), timeout=wait, fallback_to_soft=False,
                        preserve_lock_file=True, poll_interval=min(POLL_SECONDS, 0.05))
        try:
            lock.acquire(timeout=max(wait, 0))
        except Timeout:
            return False
        except OSError as exc:
            raise TrackerError(
                f"cannot take the run lock {self.path}: {exc.strerror or exc}") from None
        self._lock = lock
        return True

    def release(self) -> None:
        if self._lock is not None:
            self._lock.release(force=True)
            self._lock = None


class AdvisorySession:
    """One dedicated PostgreSQL session holding a run's advisory locks.

    Its own connection, outside the application's pool (so long-held locks never starve the
    writers of connections), in autocommit (never "idle in transaction"), named in
    `pg_stat_activity` (`application_name`), with TCP keepalives set for the session so the
    server drops it, and its locks, within minutes when a host vanishes without closing it.
    """

    KEEPALIVES = {"tcp_keepalives_idle": 60, "tcp_keepalives_interval": 10,
                  "tcp_keepalives_count": 6}

    def __init__(self, engine: Any, *, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._url = engine.url
        self._sleep = sleep
        self._clock = clock
        self._engine: Any = None
        self._connection: Any = None
        self._schema = "public"
        self._held: dict[str, int] = {}

    def _connect(self) -> Any:
        if self._connection is not None:
            return self._connection
        import os
        import socket

        from sqlalchemy import create_engine, text
        from sqlalchemy.pool import NullPool

        self._engine = create_engine(self._url, poolclass=NullPool,
                                     isolation_level="AUTOCOMMIT")
        connection = self._engine.connect()
        try:
            self._schema = connection.execute(text("SELECT current_schema()")).scalar() \
                or "public"
            name = f"gpu-tracker run lock {socket.gethostname()} pid {os.getpid()}"[:63]
            connection.execute(text("SELECT set_config('application_name', :v, false)"),
                               {"v": name})
            for setting, value in self.KEEPALIVES.items():
                connection.execute(text("SELECT set_config(:s, :v, false)"),
                                   {"s": setting, "v": str(value)})
        except BaseException:
            connection.close()
            raise
        self._connection = connection
        return connection

    def try_lock(self, key: str, wait: float) -> bool:
        from sqlalchemy import text
        from sqlalchemy.exc import SQLAlchemyError

        try:
            connection = self._connect()
            lock_id = advisory_key(self._schema, key)
            deadline = self._clock() + max(wait, 0)
            while True:
                got = connection.execute(
                    text("SELECT pg_try_advisory_lock(:k)"), {"k": lock_id}).scalar()
                if got:
                    self._held[key] = lock_id
                    return True
                remaining = deadline - self._clock()
                if remaining <= 0:
                    return False
                self._sleep(min(POLL_SECONDS, remaining))
        except SQLAlchemyError as exc:
            self.close()
            raise DatabaseError(f"cannot take the run lock {key}: {_reason(exc)}") from None
        except BaseException:
            self.close()  # ends the session: no lock of ours can outlive this
            raise

    def unlock(self, key: str) -> None:
        lock_id = self._held.pop(key, None)
        if lock_id is None or self._connection is None:
            return
        from sqlalchemy import text

        try:
            self._connection.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": lock_id})
        except Exception:  # the session is broken: closing it releases everything
            log.debug("advisory unlock of %s failed", key, exc_info=True)
            self.close()

    def close(self) -> None:
        connection, self._connection = self._connection, None
        self._held.clear()
        if connection is not None:
            with contextlib.suppress(Exception):
                connection.close()  # a closed session has released all its locks
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None


class AdvisoryRunLock:
    """A PostgreSQL session-level advisory lock for one key (in a shared or own session)."""

    def __init__(self, engine: Any, key: str, session: AdvisorySession | None = None) -> None:
        self.key = key
        self._own = session is None
        self._session = session or AdvisorySession(engine)

    def acquire(self, wait: float) -> bool:
        got = self._session.try_lock(self.key, wait)
        if not got and self._own:
            self._session.close()
        return got

    def release(self) -> None:
        self._session.unlock(self.key)
        if self._own:
            self._session.close()


class _ProcessRunLock:
    """For a database only this process can see (SQLite in memory)."""

    _locks: dict[tuple[int, str], threading.Lock] = {}
    _guard = threading.Lock()

    def __init__(self, owner: int, key: str) -> None:
        self.key = key
        with self._guard:
            self._lock = self._locks.setdefault((owner, key), threading.Lock())
        self._held = False

    def acquire(self, wait: float) -> bool:
        self._held = self._lock.acquire(timeout=wait) if wait > 0 else self._lock.acquire(
            blocking=False)
        return self._held

    def release(self) -> None:
        if self._held:
            self._held = False
            self._lock.release()


def _reason(exc: Exception) -> str:
    orig = getattr(exc, "orig", None)
    text_ = str(orig if orig is not None else exc).strip()
    return text_.splitlines()[0] if text_ else type(exc).__name__


def run_lock(db: Database, key: str, *, session: AdvisorySession | None = None) -> RunLock:
    """The lock for `key` on this database (not yet taken). On PostgreSQL, locks taken
    together share one `session` (one connection per run, not per key)."""
    if db.dialect == "postgresql":
        return AdvisoryRunLock(db.engine, key, session)
    path = db.sqlite_path
    if db.dialect == "sqlite" and path is not None:
        return FileRunLock(lock_path(path, key), key)
    if db.dialect == "sqlite":
        return _ProcessRunLock(id(db.engine), key)
    raise DatabaseError(f"no run lock for {db.dialect} databases (use SQLite or PostgreSQL)")


@dataclass
class HeldLocks:
    """What a run got: the keys it holds and the keys another run holds."""

    held: list[str] = field(default_factory=list)
    busy: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.busy


@contextlib.contextmanager
def hold_locks(
    db: Database, keys: Sequence[str], *, wait: float = 0.0, partial: bool = False,
    clock: Callable[[], float] = time.monotonic, stop: Callable[[], bool] | None = None,
) -> Iterator[HeldLocks]:
    """Take the locks for `keys` for the length of the `with` block.

    Busy locks are waited for up to `wait` seconds in total. Without `partial`, a run that
    cannot get every key holds none (`held` is empty, `busy` names the first busy key);
    with it, the run keeps what it got and `busy` lists every key it could not get.
    With `stop` (a Ctrl-C was pressed), waiting ends early: the wait goes in short slices.
    """
    ordered = sorted(set(keys))
    deadline = clock() + max(wait, 0.0)
    taken: list[RunLock] = []
    result = HeldLocks()
    session = AdvisorySession(db.engine) if db.dialect == "postgresql" and ordered else None
    try:
        for key in ordered:
            lock = run_lock(db, key, session=session)
            if _acquire_until(lock, key, deadline, clock, stop):
                taken.append(lock)
                result.held.append(key)
            else:
                result.busy.append(key)
                if not partial:
                    break
        if result.busy and not partial:
            for lock in reversed(taken):
                lock.release()
            taken.clear()
            result.held = []
        yield result
    finally:
        for lock in reversed(taken):
            lock.release()
        if session is not None:
            session.close()


STOP_CHECK_SECONDS = 0.5  # how often a waiting run looks whether it was asked to stop


def _acquire_until(lock: RunLock, key: str, deadline: float, clock: Callable[[], float],
                   stop: Callable[[], bool] | None) -> bool:
    if stop is None:
        return lock.acquire(max(0.0, deadline - clock()))
    if lock.acquire(0):
        return True
    if deadline - clock() <= 0:
        return False
    log.info("waiting up to %.0f s for the lock %s (another run holds it)",
             deadline - clock(), key)
    while True:
        remaining = max(0.0, deadline - clock())
        if lock.acquire(min(remaining, STOP_CHECK_SECONDS)):
            return True
        if remaining <= STOP_CHECK_SECONDS or stop():
            return False


__all__ = ["AdvisoryRunLock", "AdvisorySession", "FileRunLock", "HeldLocks", "RunLock",
           "advisory_key", "hold_locks", "lock_path", "run_lock"]
