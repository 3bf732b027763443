"""Opening the database: engine set-up, schema migrations (Alembic), GPU table sync.

`open_database(url)` is the one way in. It creates a SQLite file's directory, upgrades an
older schema to the current head under a cross-process lock (so two processes opening a
fresh database don't race), and keeps the `gpu_model` table in step with data/gpus.json.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

from sqlalchemy import event, inspect, text
from sqlalchemy.engine import Connection, CursorResult, Engine, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError, SQLAlchemyError
from sqlmodel import Session, create_engine

from tracker.core.errors import DatabaseError

log = logging.getLogger(__name__)

HEAD_REVISION = "0011"  # 0003 -> 0006 (market) -> 0005 (network) -> 0004 (rejects) -> 0007
# -> 0008 (FOCUS usage tags) -> 0009 (span first-seen index) -> 0010 (open span index)
# -> 0011 (source state)
_PG_MIGRATION_LOCK = 0x6770_7574  # advisory lock key for migrations ("gput")


def normalize_url(url: str) -> str:
    """Accept plain paths and postgres:// spellings; pick the psycopg 3 driver for PostgreSQL."""
    if "://" not in url:
        return f"sqlite:///{Path(url).expanduser()}"
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    return url


def safe_url(url: str) -> str:
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url


class Database:
    """An open database: `engine`, `session()`, `url`, `dialect`, `close()`."""

    def __init__(self, engine: Engine, url: str) -> None:
        self.engine = engine
        self.url = url

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @property
    def sqlite_path(self) -> Path | None:
        if self.dialect != "sqlite":
            return None
        database = make_url(self.url).database
        if not database or database == ":memory:":
            return None
        return Path(database)

    @contextlib.contextmanager
    def write(self) -> Iterator[Connection]:
        """One write transaction (BEGIN IMMEDIATE on SQLite); commits on success, else rolls
        back."""
        with self.engine.connect() as connection:
            connection = connection.execution_options(immediate=True)
            with connection.begin():
                yield connection

    @contextlib.contextmanager
    def session(self) -> Iterator[Session]:
        with Session(self.engine, expire_on_commit=False) as session:
            yield session

    def close(self) -> None:
        self.engine.dispose()


def lock_timeout_s() -> float:
    """Seconds a writer waits for another process's lock (GPU_TRACKER_DB_LOCK_TIMEOUT, default
    30) before giving up with "the database is locked": SQLite's busy timeout, PostgreSQL's
    lock_timeout."""
    import os

    try:
        return max(0.0, float(os.environ.get("GPU_TRACKER_DB_LOCK_TIMEOUT", "30")))
    except ValueError:
        return 30.0


# A refresh rewrites scattered rows (each changed offer's pointer, each closed span, the span
# index): with 16 KiB pages it touches fewer pages and so writes fewer WAL frames than with
# SQLite's default 4 KiB. Measured over 100 cold refreshes of 10k offers (bench/ingest.py):
# 37-39 ms CPU per refresh against 41-43 ms at 4 KiB; 8 KiB gave 39-40, 32 KiB 37-39 with a
# larger file, 64 KiB 44-45 (the benchmark table in the README, "Development").
SQLITE_PAGE_SIZE = 16384


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # Take transaction control from pysqlite so writers can BEGIN IMMEDIATE (see _sqlite_begin).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    # Before WAL is switched on, which writes the first page: a new database gets this page
    # size, an existing one keeps its own (SQLite ignores the pragma then).
    cursor.execute(f"PRAGMA page_size={SQLITE_PAGE_SIZE}")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute(f"PRAGMA busy_timeout={int(lock_timeout_s() * 1000)}")
    cursor.close()


def create_db_engine(url: str) -> Engine:
    url = normalize_url(url)
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise DatabaseError(f"cannot open database {url!r}: not a database URL") from None
    kwargs: dict[str, Any] = {}
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            path = Path(parsed.database)
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise DatabaseError(
                    f"cannot open database {safe_url(url)}: {exc.strerror}") from None
        kwargs["connect_args"] = {"timeout": lock_timeout_s(), "check_same_thread": False}
    else:
        kwargs["pool_pre_ping"] = True
    try:
        engine = create_engine(url, **kwargs)
    except NoSuchModuleError:
        raise DatabaseError(
            f"cannot open database {safe_url(url)}: unknown database type "
            f"{parsed.drivername!r} (use sqlite:///PATH or postgresql+psycopg://...)") from None
    except (ArgumentError, ImportError) as exc:
        hint = " (install gpu-tracker[postgres] for PostgreSQL)" if "postgres" in url else ""
        raise DatabaseError(f"cannot open database {safe_url(url)}: {exc}{hint}") from None
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
        event.listen(engine, "begin", _sqlite_begin)
    elif engine.dialect.name == "postgresql":
        event.listen(engine, "connect", _postgres_settings)
    return engine


def _postgres_settings(dbapi_connection: Any, _record: Any) -> None:
    # A row or table lock another process holds fails after the timeout instead of hanging
    # a cron job forever (session setting, so the URL's own options stay untouched).
    autocommit = dbapi_connection.autocommit
    dbapi_connection.autocommit = True
    with dbapi_connection.cursor() as cursor:
        cursor.execute(f"SET lock_timeout = {int(lock_timeout_s() * 1000)}")
    dbapi_connection.autocommit = autocommit


def _sqlite_begin(connection: Connection) -> None:
    # A writer asks for the write lock up front (execution option `immediate`), so two
    # processes never both hold read locks and then deadlock upgrading to write.
    immediate = connection.get_execution_options().get("immediate", False)
    connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def current_revision(connection: Connection) -> str | None:
    if not inspect(connection).has_table("alembic_version"):
        return None
    return connection.execute(text("SELECT version_num FROM alembic_version")).scalar()


def _alembic_config(connection: Connection) -> Any:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(resources.files("tracker.store") / "migrations"))
    cfg.attributes["connection"] = connection
    return cfg


def migrate(engine: Engine, revision: str = "head") -> None:
    """Upgrade the schema to `revision` (default: the newest)."""
    from alembic import command

    with engine.begin() as connection:
        command.upgrade(_alembic_config(connection), revision)


@contextlib.contextmanager
def _migration_lock(engine: Engine, sqlite_path: Path | None) -> Iterator[None]:
    if engine.dialect.name == "postgresql":
        with engine.connect() as connection:
            connection.execute(text("SELECT pg_advisory_lock(:k)"), {"k": _PG_MIGRATION_LOCK})
            try:
                yield
            finally:
                connection.execute(
                    text("SELECT pg_advisory_unlock(:k)"), {"k": _PG_MIGRATION_LOCK})
                connection.commit()
    elif sqlite_path is not None:
        from filelock import FileLock

        with FileLock(str(sqlite_path) + ".migrate.lock", timeout=120):
            yield
    else:
        yield


def inserted_id(result: CursorResult[Any]) -> int:
    """The primary key of a one-row INSERT. SQLAlchemy types `inserted_primary_key` Optional
    because an executemany INSERT has none; a single-row INSERT always has it."""
    key = result.inserted_primary_key
    assert key is not None
    return key[0]


def insert_missing(connection: Connection, table: Any, rows: list[dict[str, Any]]) -> None:
    """Insert rows, skipping any whose key another process inserted meanwhile.

    Two processes (or two sources refreshing in parallel on PostgreSQL) may both find a
    provider or GPU row missing; ON CONFLICT DO NOTHING lets both go on.
    """
    if not rows:
        return
    from sqlalchemy.dialects import postgresql, sqlite

    if connection.dialect.name == "postgresql":
        connection.execute(postgresql.insert(table).on_conflict_do_nothing(), rows)
    else:
        connection.execute(sqlite.insert(table).on_conflict_do_nothing(), rows)


def sync_gpu_models(engine: Engine) -> None:
    """Insert or update the canonical GPU rows so offers can reference every known GPU."""
    from tracker.core.gpus import gpu_table
    from tracker.store.models import GpuModel

    table = GpuModel.__table__
    with engine.begin() as connection:
        existing = {
            row.id: tuple(row[1:])
            for row in connection.execute(text(
                "SELECT id, name, vendor, memory_gb, form_factor FROM gpu_model"))
        }
        insert_missing(connection, table, [
            {"id": gpu.id, "name": gpu.name, "vendor": gpu.vendor, "memory_gb": gpu.memory_gb,
             "form_factor": gpu.form_factor}
            for gpu in gpu_table().values() if gpu.id not in existing])
        for gpu in gpu_table().values():
            values = (gpu.name, gpu.vendor, gpu.memory_gb, gpu.form_factor)
            if gpu.id in existing and existing[gpu.id] != values:
                connection.execute(table.update().where(table.c.id == gpu.id).values(
                    name=gpu.name, vendor=gpu.vendor, memory_gb=gpu.memory_gb,
                    form_factor=gpu.form_factor))


def missing_database(url: str) -> str | None:
    """Why `url` names no existing gpu-tracker database (a SQLite file that is not there), or
    None. A typo in `--db` must not quietly start an empty store."""
    url = normalize_url(url)
    try:
        parsed = make_url(url)
    except ArgumentError:
        return None  # create_db_engine says what is wrong with it
    if parsed.get_backend_name() != "sqlite" or not parsed.database \
            or parsed.database == ":memory:" or parsed.database.startswith("file:"):
        return None
    if Path(parsed.database).exists():
        return None
    return f"no database at {parsed.database}; run `gpu-tracker init` to create it"


def check_writable(db: Database) -> None:
    """Raise (one line at the CLI boundary) unless a write transaction can commit: rewrites
    the schema revision with its own value, which a read-only file or database refuses."""
    with db.write() as connection:
        connection.execute(text(
            "UPDATE alembic_version SET version_num = version_num"))


def _read_only_hint(path: Path | None) -> str | None:
    """SQLite says only "unable to open database file" when its file system is read-only."""
    import os

    if path is None:
        return None
    probe = path if path.exists() else path.parent
    try:
        if os.statvfs(probe).f_flag & os.ST_RDONLY:
            return f"the database is on a read-only file system ({probe})"
    except OSError:
        return None
    if not os.access(probe, os.W_OK):
        return f"the database is read-only: permission denied ({probe})"
    return None


def open_database(url: str, *, upgrade: bool = True, create: bool = True) -> Database:
    """Open (and by default create or upgrade) the database at `url`.

    With `create=False` (every read-only command) a SQLite file that does not exist, or a
    database without the gpu-tracker schema, is refused ("run `gpu-tracker init`") instead
    of being created empty.
    """
    url = normalize_url(url)
    read_only = False
    if not create:
        reason = missing_database(url)
        if reason is not None:
            raise DatabaseError(reason)
        read_only = _sqlite_read_only(url)
    engine = _read_only_engine(url) if read_only else create_db_engine(url)
    db = Database(engine, url)
    if read_only:
        upgrade = False  # nothing can be written; a stale schema is said below
    try:
        with engine.connect() as connection:
            revision = current_revision(connection)
        if not create and revision is None:
            engine.dispose()
            raise DatabaseError(f"{safe_url(url)} holds no gpu-tracker data; run "
                                "`gpu-tracker init` to create it")
        if read_only and revision != HEAD_REVISION:
            engine.dispose()
            raise DatabaseError(f"{safe_url(url)} is read-only and its schema is older than "
                                "this version's; run `gpu-tracker init` once where it is "
                                "writable")
        if upgrade and revision != HEAD_REVISION:
            with _migration_lock(engine, db.sqlite_path):
                with engine.connect() as connection:
                    revision = current_revision(connection)
                if revision != HEAD_REVISION:
                    log.info("upgrading database schema from %s to %s", revision, HEAD_REVISION)
                    migrate(engine)
        if upgrade:
            sync_gpu_models(engine)
    except OperationalError as exc:
        engine.dispose()
        from tracker.core.errors import describe_failure

        reason = _read_only_hint(db.sqlite_path) or describe_failure(exc) \
            or str(exc).splitlines()[0]
        raise DatabaseError(f"cannot open database {safe_url(url)}: {reason}") from None
    except SQLAlchemyError as exc:
        engine.dispose()
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DatabaseError(f"cannot open database {safe_url(url)}: {first}") from None
    return db


def _sqlite_read_only(url: str) -> bool:
    """Whether `url` is a SQLite file this process cannot write (a read-only file system, or
    a file or directory without write permission): a read command then opens it read-only."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return False
    if parsed.get_backend_name() != "sqlite" or not parsed.database \
            or parsed.database == ":memory:" or parsed.database.startswith("file:"):
        return False
    return _read_only_hint(Path(parsed.database)) is not None


def _read_only_engine(url: str) -> Engine:
    """A SQLite engine that never writes: `mode=ro`, and `immutable=1` when the directory
    cannot hold the WAL index (-shm) SQLite would otherwise create; in a directory nobody can
    write, no writer can change the file under the reader either."""
    import os
    import sqlite3
    from urllib.parse import quote

    path = Path(make_url(url).database or "").resolve()
    wal_ready = (path.with_name(path.name + "-shm").exists()
                 and path.with_name(path.name + "-wal").exists())
    can_write_dir = os.access(path.parent, os.W_OK) and not (
        os.statvfs(path.parent).f_flag & os.ST_RDONLY)
    options = "mode=ro" if wal_ready or can_write_dir else "mode=ro&immutable=1"
    uri = f"file:{quote(str(path))}?{options}"

    def connect() -> sqlite3.Connection:
        return sqlite3.connect(uri, uri=True, timeout=lock_timeout_s(),
                               check_same_thread=False)

    engine = create_engine("sqlite://", creator=connect)
    event.listen(engine, "connect", _sqlite_read_only_pragmas)
    event.listen(engine, "begin", _sqlite_begin)
    return engine


def _sqlite_read_only_pragmas(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.isolation_level = None  # as _sqlite_pragmas, without the writing ones
    cursor = dbapi_connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout={int(lock_timeout_s() * 1000)}")
    cursor.close()


def epoch_ms_sql(dialect: str, column: str) -> str:
    """SQL for a timestamp column as epoch milliseconds, computed by the database (the unit of
    reports.sections.common.epoch_ms)."""
    if dialect == "postgresql":
        return f"CAST(ROUND(EXTRACT(EPOCH FROM {column}) * 1000) AS BIGINT)"
    return f"CAST(ROUND((julianday({column}) - 2440587.5) * 86400000) AS INTEGER)"
