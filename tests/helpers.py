"""Small builders shared by tests."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

from scrapers.base import PriceObservation


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
