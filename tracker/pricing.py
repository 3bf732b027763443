"""Prices for the economics answers, looked up in the store as of an instant.

The economics engine receives prices; this module finds them: the cheapest stored offer
whose instances make up a GPU count (optionally sized per offer), one instance type's price,
a Spot Advisor band as an MTTI, and the ranked runs of `compare`. When nothing matches, the
NotFound says in one line what was asked for and what the store has instead.

Imports the store (SQLAlchemy): import this module only when a price must be looked up.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from tracker.economics.cost import tiling_offer
from tracker.economics.documents import (
    as_of_text,
    check_fits,
    compare_rows,
    size_run,
    whole_count,
)
from tracker.economics.spot import band_probability, mtti_from_probability
from tracker.errors import InvalidInput, NotFound
from tracker.options import priced_options
from tracker.store import PriceRow, interruption_facts, price_rows

if TYPE_CHECKING:
    from tracker.db import Database
    from tracker.economics.cost import BillingRule
    from tracker.economics.defaults import EconomicsSettings
    from tracker.sizing import SizingResult

Billing = Callable[[str], "tuple[BillingRule, str]"]


def _priced(db: Database, currency: str, *, as_of: datetime | None,
            **filters: Any) -> list[PriceRow]:
    """Stored prices in `currency`: offers quoted in another currency converted at the ECB
    rate of their observation day (tracker.market.fx), never compared unconverted."""
    from tracker.market.fx import priced_in

    return priced_in(db, price_rows(db, as_of=as_of, **filters), currency, as_of)


def describe_gpu_prices(rows: Sequence[PriceRow], limit: int = 8) -> str:
    """'aws on-demand (8 GPUs); lambda on-demand (1, 8 GPUs)': what a GPU's rows offer."""
    groups: dict[tuple[str, str], set[float]] = {}
    for row in rows:
        groups.setdefault((row.provider, row.category), set()).add(float(row.gpu_count))
    parts = []
    for (provider, category), counts in sorted(groups.items())[:limit]:
        sizes = ", ".join(f"{c:g}" for c in sorted(counts))
        parts.append(f"{provider} {category} ({sizes} GPUs)")
    more = f" and {len(groups) - limit} more" if len(groups) > limit else ""
    return "; ".join(parts) + more


def no_price(
    db: Database, *, as_of: datetime | None, gpu: str, count: float, provider: str | None,
    region: str | None, category: str | None, currency: str,
) -> NotFound:
    """One line: what was asked for, and what the store does have instead."""
    wanted = " ".join(x for x in (category or "any-category", "price for",
                                  f"{count:g}x {gpu}") if x)
    if provider:
        wanted += f" from {provider}"
    if region:
        wanted += f" in {region}"
    wanted += f" as of {as_of_text(as_of)}"
    same_gpu = _priced(db, currency, as_of=as_of, gpu=gpu)
    if same_gpu:
        return NotFound(f"no {wanted}; {gpu} prices exist for: {describe_gpu_prices(same_gpu)}")
    others = sorted({r.gpu for r in _priced(db, currency, as_of=as_of)})
    if others:
        shown = ", ".join(others[:12]) + (" ..." if len(others) > 12 else "")
        return NotFound(f"no {wanted}; GPUs with {currency} prices: {shown}")
    return NotFound(f"no {wanted}; the store has no {currency} prices then "
                    "(run `gpu-tracker refresh`)")


def priced_offer(
    db: Database, *, gpu: str, count: float, as_of: datetime | None, provider: str | None,
    region: str | None, category: str | None, currency: str,
) -> tuple[PriceRow, int]:
    """The cheapest stored offer whose instances tile `count` GPUs: (row, instances)."""
    rows = _priced(db, currency, as_of=as_of, gpu=gpu, provider=provider, region=region,
                   category=category)
    chosen = tiling_offer(rows, count)
    if chosen is None:
        raise no_price(db, as_of=as_of, gpu=gpu, count=count, provider=provider,
                       region=region, category=category, currency=currency)
    return chosen


def cheapest_sized_offer(
    db: Database, *, gpu: str, count: float, workload: Mapping[str, Any], billing: Billing,
    as_of: datetime | None, provider: str | None, region: str | None, category: str | None,
    currency: str,
) -> tuple[PriceRow, int, SizingResult]:
    """The stored offer with the cheapest run on `count` GPUs: (row, instances, sizing).

    The offer decides the node: eight 1-GPU instances talk over the network, one 8-GPU
    instance over NVLink, so each instance size is sized and priced apart.
    """
    rows = _priced(db, currency, as_of=as_of, gpu=gpu, provider=provider, region=region,
                   category=category)
    fields = {k: v for k, v in workload.items() if v is not None}
    options, skipped = priced_options(rows, fields, billing=billing, max_gpus=int(count),
                                      gpu_counts=[whole_count(count)])
    if options:
        best = options[0]
        return best.offer, best.instances, best.sized
    if skipped:
        raise InvalidInput(f"cannot size this job: {skipped[0]}")
    if rows:  # offers exist, but the job fits none of their node shapes
        check_fits(size_run(gpu, count, workload), count, gpu)
    raise no_price(db, as_of=as_of, gpu=gpu, count=count, provider=provider,
                   region=region, category=category, currency=currency)


def offer_for_run(
    db: Database, *, gpu: str, count: float, workload: Mapping[str, Any] | None,
    billing: Billing, as_of: datetime | None, provider: str | None, region: str | None,
    category: str | None, currency: str,
) -> tuple[PriceRow, int, SizingResult | None]:
    """(row, instances, sizing) for a run on `count` GPUs: with a `workload`, the offer with
    the cheapest sized run; without one (the run time is known), the cheapest that tiles."""
    filters: dict[str, Any] = {"as_of": as_of, "provider": provider, "region": region,
                               "category": category, "currency": currency}
    if workload is None:
        return (*priced_offer(db, gpu=gpu, count=count, **filters), None)
    return cheapest_sized_offer(db, gpu=gpu, count=count, workload=workload, billing=billing,
                                **filters)


def cloud_price(
    db: Database, *, gpu: str, gpus: Decimal, as_of: datetime | None, provider: str | None,
    region: str | None, category: str | None, currency: str,
) -> tuple[Decimal, PriceRow]:
    """The cheapest stored price per hour for `gpus` GPUs together, and its offer."""
    offer, _instances = priced_offer(db, gpu=gpu, count=float(gpus), as_of=as_of,
                                     provider=provider, region=region, category=category,
                                     currency=currency)
    return offer.price_per_gpu_hour * gpus, offer


def instance_price(
    db: Database, *, provider: str, region: str | None, instance: str, category: str,
    as_of: datetime | None, currency: str,
) -> PriceRow:
    """The cheapest stored price of one instance type (across zones) in a category."""
    rows = [r for r in _priced(db, currency, as_of=as_of, provider=provider, region=region,
                               category=category)
            if r.instance_type == instance]
    if rows:
        return rows[0]
    listed = _priced(db, currency, as_of=as_of, provider=provider, region=region)
    same = sorted({r.category for r in listed if r.instance_type == instance})
    where = f"{provider} {region}" if region else provider
    when = as_of_text(as_of)
    if same:
        raise NotFound(f"no {category} price for {instance} in {where} as of {when}; "
                       f"it has: {', '.join(same)}")
    types = sorted({r.instance_type for r in listed if r.category == category})
    if types:
        shown = ", ".join(types[:10]) + (" ..." if len(types) > 10 else "")
        raise NotFound(f"no {category} price for {instance} in {where} as of {when}; "
                       f"{category} prices exist for: {shown}")
    raise NotFound(f"no {category} prices from {where} as of {when} "
                   "(run `gpu-tracker refresh`)")


def band_mtti(
    db: Database, settings: EconomicsSettings, *, provider: str, region: str, instance: str,
    as_of: datetime | None,
) -> tuple[float, str] | None:
    """(MTTI hours, source) from the stored interruption band of an instance type (the Linux
    one when there are several), converted as the settings say; None without a band."""
    facts = interruption_facts(db, provider=provider, region=region, instance_type=instance,
                               as_of=as_of)
    if not facts:
        return None
    fact = next((f for f in facts if f.os.lower() == "linux"), facts[0])
    conversion, window, point, open_top = settings.band_settings()
    share = band_probability(fact.min_pct, fact.max_pct, point, open_top)
    mtti = mtti_from_probability(share, conversion, window)
    source = (f"{provider} interruption band '{fact.band_label}' for {instance} in {region} "
              f"(as of {as_of_text(fact.as_of)}): {share:.1%} per {window:g} h as a {conversion}")
    return mtti, source


def no_compare_prices(db: Database, *, as_of: datetime | None, gpus: Sequence[str] | None,
                      currency: str) -> NotFound:
    """No stored price matches the compare filters: which GPUs do have prices then."""
    others = sorted({r.gpu for r in _priced(db, currency, as_of=as_of)})
    asked = f" for {', '.join(gpus)}" if gpus else ""
    when = as_of_text(as_of)
    if others:
        return NotFound(f"no {currency} prices match{asked} as of {when}; GPUs with "
                        f"prices: {', '.join(others)}")
    return NotFound(f"the store has no {currency} prices as of {when} "
                    "(run `gpu-tracker refresh`)")


def compare_runs(
    db: Database, *, workload: Mapping[str, Any], billing: Billing, max_gpus: int,
    as_of: datetime | None, currency: str, gpus: Sequence[str] | None = None,
    providers: Sequence[str] | None = None, regions: Sequence[str] | None = None,
    categories: Sequence[str] | None = None, limit: int | None = None,
) -> tuple[list[dict[str, Any]], list[str]]:
    """(rows, skipped): every stored GPU model and count that fits the workload, priced per
    run and ranked cheapest first (see `tracker.options.priced_options`); `skipped` says
    which GPUs could not be sized. Empty filters mean all."""
    rows = _priced(db, currency, as_of=as_of, gpu=gpus or None, provider=providers or None,
                   region=regions or None, category=categories or None)
    if not rows:
        raise no_compare_prices(db, as_of=as_of, gpus=gpus or None, currency=currency)
    fields = {k: v for k, v in workload.items() if v is not None}
    options, skipped = priced_options(rows, fields, billing=billing, max_gpus=max_gpus)
    ranked = compare_rows(options, skipped=skipped, priced_gpus=[r.gpu for r in rows],
                          max_gpus=max_gpus, as_of=as_of, limit=limit)
    return ranked, skipped
