"""Small builders shared by tests."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from scrapers.base import PriceObservation, Rejected, Source
from scrapers.http import HttpClient
from tracker.core.http_settings import HttpSettings


def at(day: str, hour: int = 0) -> datetime:
    return datetime.fromisoformat(day).replace(hour=hour, tzinfo=UTC)


def obs(price: str | Decimal, when: datetime, *, provider: str = "aws",
        instance_type: str = "p5.48xlarge", gpu_name: str = "H100", gpu_count: float = 8,
        category: str = "on-demand", region: str = "us-east-1", zone: str = "",
        currency: str = "USD", variant: str = "", **extra) -> PriceObservation:
    return PriceObservation(
        provider=provider, instance_type=instance_type, gpu_name=gpu_name, gpu_count=gpu_count,
        category=category, price_per_hour=Decimal(price) if isinstance(price, str) else price,
        currency=currency, observed_at=when, region=region, zone=zone, variant=variant,
        **extra)


def store_p5_prices(db) -> None:
    """AWS p5 (8x H100) in us-east-1: on-demand 98.32 then 55.04 (from 2026-10-03), a 1-year
    reservation at 32 an hour (4 per GPU-hour) and spot at 20 throughout."""
    from tracker.store.ingest import ingest_records

    for day, on_demand in (("2026-10-01", "98.32"), ("2026-10-03", "55.04")):
        when = at(day)
        ingest_records(db, "catalog", [
            obs(on_demand, when), obs("32", when, category="reserved-1y"),
            obs("20", when, category="spot")], started_at=when)

def mock_client(handler: Callable[[httpx.Request], httpx.Response], **http: Any) -> HttpClient:
    """The shared HTTP client over a mock transport, without backoff or sleeping; `http`
    overrides other `[http]` settings (e.g. retries=1)."""
    return HttpClient(HttpSettings(**{"backoff": 0, **http}),
                      transport=httpx.MockTransport(handler), sleep=lambda _s: None)


def fetch_records(source: Source, handler: Callable[[httpx.Request], httpx.Response],
                  fetched_at: datetime, **http: Any) -> list[PriceObservation | Rejected]:
    """Everything a source yields from one fetch through `mock_client`."""
    with mock_client(handler, **http) as client:
        return list(source.fetch(client, fetched_at))


@contextlib.contextmanager
def mounted_tmpfs(mount: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` (e.g. "2m") mounted on the empty folder `mount` for the block, then
    unmounted; the test is skipped with the reason where mounting is not permitted (not root)."""
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip() or 'not permitted'}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def row_counts(sqlite_url: str, *tables: str) -> tuple[int, ...]:
    """How many rows each table of a SQLite database holds: a command that refuses its input
    leaves these unchanged."""
    import sqlite3

    with sqlite3.connect(sqlite_url.removeprefix("sqlite:///")) as conn:
        return tuple(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                     for table in tables)


def observations_by(records: list, *fields: str) -> dict[tuple, PriceObservation]:
    """A source's price observations keyed by the values of `fields`: each key only once."""
    found: dict[tuple, PriceObservation] = {}
    for record in records:
        if isinstance(record, PriceObservation):
            key = tuple(getattr(record, name) for name in fields)
            assert key not in found, key
            found[key] = record
    return found
