"""Shared fixtures: a fresh SQLite file database (and `db`, opened on the module's `db_url`),
one holding the bundled prices, and a PostgreSQL one in its own schema."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING
from urllib.parse import quote

import pytest
from hypothesis import settings

if TYPE_CHECKING:
    from tracker.store.db import Database

PG_ENV = "GPU_TRACKER_TEST_POSTGRES_URL"


# The suite's outcome is the same on every run and machine: examples are derived from each
# test (derandomize) and none is read from or written to a local `.hypothesis/` database.
# `HYPOTHESIS_PROFILE=explore` searches at random (with the database) to look for new cases.
# No per-example deadline: on a loaded 2-core machine (xdist workers, CI) one example of an
# HTTP-parsing property took over the default 200 ms and failed a correct test; the
# properties assert values, and a timing belongs in bench/.
settings.register_profile("repeatable", derandomize=True, database=None, print_blob=True,
                          deadline=None)
settings.register_profile("explore", derandomize=False, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """Never touch the user's real config or database, nor read their GPU_TRACKER_* settings."""
    for key in list(os.environ):
        if key.startswith("GPU_TRACKER_") and key != PG_ENV:
            monkeypatch.delenv(key)
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / "state"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / "cache"))
    yield
    from tracker.core.gpus import gpu_overrides, set_gpu_overrides

    if gpu_overrides():  # a test's [gpus.<id>] configuration never leaks into the next
        set_gpu_overrides({})


@pytest.fixture(autouse=True)
def _forget_learned_secrets() -> Iterator[None]:
    """The scrubber learns secrets for the life of the process; a test's password (say
    "nope") must not mask a later test's output in the same worker."""
    yield
    from tracker.core.secrets import forget_all

    forget_all()


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'tracker.db'}"


@pytest.fixture
def db_url(sqlite_url: str) -> str:
    """The database a module's `db` opens: a fresh SQLite file unless the module names
    another (e.g. `any_db_url`, for both databases)."""
    return sqlite_url


@pytest.fixture
def db(db_url: str) -> Iterator[Database]:
    """The database at `db_url`, opened (created and migrated) for the test, closed after."""
    from tracker.store.db import open_database

    database = open_database(db_url)
    yield database
    database.close()


@pytest.fixture(scope="module")
def bundled_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The URL of a SQLite database refreshed once from the bundled price snapshots (real list
    prices), shared by the tests of one module."""
    from tracker.collect.refresh import refresh_sources
    from tracker.config.schema import load_config
    from tracker.store.db import open_database

    url = f"sqlite:///{tmp_path_factory.mktemp('bundled') / 'b.db'}"
    db = open_database(url)
    refresh_sources(db, load_config(environ={}), ["bundled"], environ={})
    db.close()
    return url


def postgres_base_url() -> str | None:
    return os.environ.get(PG_ENV) or None


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A PostgreSQL URL whose search_path is a fresh schema, dropped afterwards."""
    base = postgres_base_url()
    if not base:
        pytest.skip(f"PostgreSQL tests need {PG_ENV} (e.g. "
                    "postgresql+psycopg://postgres@127.0.0.1:5432/test)")
    from sqlalchemy import create_engine, text

    schema = f"gt_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    separator = "&" if "?" in base else "?"
    url = f"{base}{separator}options={quote(f'-csearch_path={schema}')}"
    try:
        yield url
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture(params=["sqlite", "postgres"])
def any_db_url(request: pytest.FixtureRequest, tmp_path) -> str:
    """Run a test on both databases (PostgreSQL skipped, visibly, without the env var)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'tracker.db'}"
    return request.getfixturevalue("pg_url")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Say plainly whether the PostgreSQL tests ran, so CI output shows it."""
    passed = [r for r in terminalreporter.stats.get("passed", []) if "pg_url" in r.nodeid
              or "postgres" in r.nodeid]
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if "postgres" in r.nodeid
               or "pg_url" in r.nodeid]
    url = postgres_base_url()
    where = f" against {url}" if url else f" ({PG_ENV} unset)"
    terminalreporter.write_line(
        f"PostgreSQL tests: {len(passed)} passed, {len(skipped)} skipped{where}")
