"""Fixtures the economics tests share: the seeded price store (tests/economics/seed.py)."""

from __future__ import annotations

import pytest

from tracker.store.db import open_database

from .seed import seed_prices


def _seeded(url: str) -> str:
    db = open_database(url)
    seed_prices(db)
    db.close()
    return url


@pytest.fixture
def priced_db(sqlite_url) -> str:
    """A SQLite store with H100 and A100 prices on two dates and an AWS Spot Advisor band."""
    return _seeded(sqlite_url)


@pytest.fixture
def priced_any_db(any_db_url) -> str:
    """The same store on SQLite and, when configured, PostgreSQL."""
    return _seeded(any_db_url)
