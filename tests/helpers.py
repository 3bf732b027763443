"""Small builders shared by tests."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import httpx

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
