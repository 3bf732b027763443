"""Ingest validation: which records a run can store, and the raw form kept of those it can't.

`sort_records` splits one run's records by kind and validates every price observation. The
checks that depend only on the kind of offer (category, currency, GPU count, GPU name and
memory) are computed once per distinct kind; only the identity fields and the price are
checked per row, and anything unusual goes through `validate`, which gives the reason.
"""

from __future__ import annotations

import functools
import json
import math
import operator
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from scrapers.base import (
    CATEGORIES,
    CatalogVersion,
    ExchangeRateFact,
    InterruptionFact,
    PriceObservation,
    Rejected,
)
from tracker.gpus import canonical_gpu, memory_mismatch
from tracker.money import ISO_4217, decimal_to_str

MAX_PRICE_PER_GPU_HOUR = Decimal(500)

# A reject as ingest keeps it until the run's end: (reason, provider, raw payload, when).
Reject = tuple[str, str, Any, datetime]

# The fields that make an offer's kind (the cached checks), read at C speed per row.
offer_kind = operator.attrgetter("category", "currency", "gpu_count", "gpu_name", "gpu_memory_gb")


@dataclass
class SortedRecords:
    """One run's records by kind; `accepted` observations passed validation."""

    accepted: list[PriceObservation] = field(default_factory=list)
    rejects: list[Reject] = field(default_factory=list)
    unmapped: int = 0  # rejects of an instance type the source maps to no GPU
    facts: list[InterruptionFact] = field(default_factory=list)
    versions: list[CatalogVersion] = field(default_factory=list)
    rates: list[ExchangeRateFact] = field(default_factory=list)
    # (category, currency, count, gpu name, memory) -> (GPU id, reason, price cap)
    offer_checks: dict[tuple, tuple[str | None, str | None, Decimal]] = field(
        default_factory=dict)

    def gpu_of(self, obs: PriceObservation) -> str:
        gpu = self.offer_checks[offer_kind(obs)][0]
        assert gpu is not None  # accepted rows passed _validate_offer, which found their GPU
        return gpu


def sort_records(source: str, items: Iterable[Any], started_at: datetime) -> SortedRecords:
    """Split and validate one run's records; raises TypeError for a record of no known kind."""
    out = SortedRecords()
    accept, checks = out.accepted.append, out.offer_checks
    for item in items:
        if type(item) is PriceObservation:
            # The offer-kind checks are cached per kind; the per-row checks come cheapest
            # first, and a row failing any of them goes through validate() for its reason.
            kind = offer_kind(item)
            checked = checks.get(kind)
            if checked is None:
                checked = checks[kind] = _validate_offer(*kind)
            price = item.price_per_hour
            if (checked[1] is None and item.provider and item.instance_type
                    and type(price) is Decimal and price.is_finite() and 0 < price <= checked[2]
                    and item.observed_at.tzinfo is not None):
                accept(item)
                continue
        _sort_other(out, source, item, started_at)
    return out


def _sort_other(out: SortedRecords, source: str, item: Any, started_at: datetime) -> None:
    if isinstance(item, PriceObservation):
        _gpu, reason = validate(item)
        if reason is not None:
            raw = item.raw if item.raw is not None else observation_raw(item)
            out.rejects.append((reason, item.provider, raw, item.observed_at))
        else:
            kind = offer_kind(item)
            if kind not in out.offer_checks:  # a subclass, or a row of odd but valid types
                out.offer_checks[kind] = _validate_offer(*kind)
            out.accepted.append(item)
    elif isinstance(item, Rejected):
        out.rejects.append((item.reason, item.provider, item.raw, started_at))
        out.unmapped += item.unmapped
    elif isinstance(item, InterruptionFact):
        out.facts.append(item)
    elif isinstance(item, CatalogVersion):
        out.versions.append(item)
    elif isinstance(item, ExchangeRateFact):
        out.rates.append(item)
    else:
        raise TypeError(f"source {source} yielded {type(item).__name__}, not a record")


def validate(obs: PriceObservation) -> tuple[str | None, str | None]:
    """(canonical GPU id, None) for a storable observation, else (None, reason)."""
    if not obs.provider or not obs.instance_type:
        return None, "missing provider or instance type"
    if obs.observed_at is None or obs.observed_at.tzinfo is None:
        return None, "observed_at missing or not timezone-aware"
    gpu_id, reason, cap = _validate_offer(
        obs.category, obs.currency, obs.gpu_count, obs.gpu_name, obs.gpu_memory_gb)
    if reason is not None:
        return None, reason
    price = obs.price_per_hour
    if not isinstance(price, Decimal):
        return None, f"price is not a Decimal: {price!r}"
    if not price.is_finite():
        return None, f"price is not a finite number: {price}"
    if price <= 0:
        return None, f"price must be positive, got {decimal_to_str(price)}"
    if price > cap:
        return None, (f"absurd price {decimal_to_str(price)} {obs.currency}/h for "
                      f"{obs.gpu_count:g} GPU(s): above {MAX_PRICE_PER_GPU_HOUR} per GPU-hour")
    return gpu_id, None


@functools.lru_cache(maxsize=4096)
def _validate_offer(category: str, currency: str, count: Any, gpu_name: str | None,
                    memory_gb: float | None) -> tuple[str | None, str | None, Decimal]:
    """The checks that depend only on what kind of offer a row is; cached, since a source
    lists thousands of rows of a few dozen kinds."""
    cap = Decimal(0)
    if category not in CATEGORIES:
        return None, f"unknown pricing category {category!r}", cap
    if currency not in ISO_4217:
        return None, f"currency {currency!r} is not an ISO 4217 code", cap
    if count is None or isinstance(count, bool) or not isinstance(count, (int, float)) \
            or not math.isfinite(count) or count <= 0:
        return None, f"GPU count must be positive, got {count!r}", cap
    gpu_id = canonical_gpu(gpu_name or "", memory_gb)
    if gpu_id is None:
        return None, f"unknown GPU {gpu_name!r}", cap
    # Never re-class silently: memory that cannot be this GPU's means the row was misread.
    mismatch = memory_mismatch(gpu_id, memory_gb)
    if mismatch is not None:
        return None, mismatch, cap
    return gpu_id, None, MAX_PRICE_PER_GPU_HOUR * Decimal(repr(float(count)))


def raw_json(value: Any) -> str:
    try:
        return json.dumps(value, default=_json_default, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        return json.dumps(repr(value))


def _json_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return decimal_to_str(value) if value.is_finite() else str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if hasattr(value, "__dataclass_fields__"):
        return asdict(value)
    return repr(value)


def observation_raw(obs: PriceObservation) -> dict[str, Any]:
    data = {f: getattr(obs, f) for f in obs.__dataclass_fields__ if f != "raw"}
    data["attributes"] = dict(obs.attributes)
    return data
