"""Cross-source price checks: the same offer reported by two sources, compared at one instant.

Several sources report the same provider's offers: AWS through its price file (`aws`) and
through SkyPilot's catalog (`skypilot`); Lambda through its API (`lambda`), SkyPilot and
gpuhunt. Two rows are the same offer when provider, region, zone, instance type, variant,
pricing category, GPU and GPU count agree and both are priced in the same currency.

Which source is authoritative for an offer's current price is one rule (`authority_rank`):
the provider's own API first (the source named like the provider: `aws` for aws, `lambda` for
lambda), then the other sources by the most recent sighting (a catalog read an hour ago beats
one read last week), then by source name so the order is stable. The other sources' prices are
compared with the authoritative one; a difference over the threshold (percent of the
authoritative price) is a disagreement.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from tracker.store.queries import PriceRow

DEFAULT_THRESHOLD_PCT = Decimal(5)

CHECK_JSON_KEYS = (
    "provider", "region", "zone", "instance_type", "variant", "category", "gpu", "gpu_count",
    "currency", "authority_source", "authority_price_per_hour", "authority_last_seen",
    "other_source", "other_price_per_hour", "other_last_seen", "difference_pct",
)


@dataclass(frozen=True, slots=True)
class Disagreement:
    provider: str
    region: str
    zone: str
    instance_type: str
    variant: str
    category: str
    gpu: str
    gpu_count: float
    currency: str
    authority_source: str
    authority_price_per_hour: Decimal
    authority_last_seen: datetime
    other_source: str
    other_price_per_hour: Decimal
    other_last_seen: datetime
    difference_pct: Decimal  # (other - authority) / authority * 100, 2 decimals

    def to_json(self) -> dict[str, Any]:
        from tracker.core.serialization import to_jsonable

        return {key: to_jsonable(getattr(self, key)) for key in CHECK_JSON_KEYS}


@dataclass(frozen=True, slots=True)
class CrossCheck:
    as_of: datetime | None
    threshold_pct: Decimal
    compared: int  # offers reported by two or more sources
    disagreements: list[Disagreement]  # largest difference first

    @property
    def largest(self) -> Disagreement | None:
        return self.disagreements[0] if self.disagreements else None

    def summary_json(self) -> dict[str, Any]:
        """The counts and the largest disagreement (the report's data-quality section)."""
        largest = self.largest
        return {"threshold_pct": self.threshold_pct, "compared": self.compared,
                "disagreements": len(self.disagreements),
                "largest": largest.to_json() if largest is not None else None}


def authority_rank(row: PriceRow) -> tuple[int, float, str]:
    """Sort key: the most authoritative source for an offer's price first (module docstring)."""
    own_api = 0 if row.source == row.provider else 1
    return (own_api, -row.last_seen.timestamp(), row.source)


def _offer_key(row: PriceRow) -> tuple:
    return (row.provider, row.region, row.zone, row.instance_type, row.variant, row.category,
            row.gpu, float(row.gpu_count), row.currency)


def compare_prices(rows: Sequence[PriceRow], *, threshold_pct: Decimal = DEFAULT_THRESHOLD_PCT,
                   as_of: datetime | None = None) -> CrossCheck:
    """Compare the prices of offers reported by more than one source (pure: rows in)."""
    if threshold_pct < 0:
        from tracker.core.errors import InvalidInput

        raise InvalidInput(f"threshold must not be negative, got {threshold_pct}")
    by_offer: dict[tuple, list[PriceRow]] = defaultdict(list)
    for row in rows:
        by_offer[_offer_key(row)].append(row)
    compared = 0
    found: list[Disagreement] = []
    for group in by_offer.values():
        sources = {row.source for row in group}
        if len(sources) < 2:
            continue
        compared += 1
        ranked = sorted(group, key=authority_rank)
        authority = ranked[0]
        for other in ranked[1:]:
            if other.source == authority.source or authority.price_per_hour <= 0:
                continue
            pct = ((other.price_per_hour - authority.price_per_hour) * 100
                   / authority.price_per_hour).quantize(Decimal("0.01"))
            if abs(pct) > threshold_pct:
                found.append(Disagreement(
                    provider=authority.provider, region=authority.region, zone=authority.zone,
                    instance_type=authority.instance_type, variant=authority.variant,
                    category=authority.category, gpu=authority.gpu,
                    gpu_count=authority.gpu_count, currency=authority.currency,
                    authority_source=authority.source,
                    authority_price_per_hour=authority.price_per_hour,
                    authority_last_seen=authority.last_seen, other_source=other.source,
                    other_price_per_hour=other.price_per_hour, other_last_seen=other.last_seen,
                    difference_pct=pct))
    found.sort(key=lambda d: (-abs(d.difference_pct), d.provider, d.region, d.instance_type,
                              d.category, d.other_source))
    return CrossCheck(as_of=as_of, threshold_pct=threshold_pct, compared=compared,
                      disagreements=found)


def cross_check(db: Any, *, as_of: datetime | None = None,
                threshold_pct: Decimal = DEFAULT_THRESHOLD_PCT) -> CrossCheck:
    """The prices valid at `as_of` (default: now) of every source, compared across sources."""
    from tracker.store.queries import price_rows

    return compare_prices(price_rows(db, as_of=as_of), threshold_pct=threshold_pct,
                          as_of=as_of)
