"""Hardware quotes priced as owned cost per used GPU-hour, and rentals labelled apart.

A `quote` row (category `quote`) is hardware you would buy. Its stored price is only the
import's straight-line capex / life; set against rentals it must carry power × PUE, colo and
staff and be divided by the hours the GPUs actually work. `price_quotes` replaces each quote
row's price with that owned cost (`ownership.owned_cost`), from the quote's own columns
(capex, power_kw, lifetime_months) or the economics defaults, and keeps every part in the
row's attributes (`owned_cost`) so the answer can show it. The defaults' amounts (power price,
colo, staff) are stated in `[economics] currency`; a quote in another currency takes them
converted at the ECB rate of the quote's day, never relabelled.

Pure: rows and settings in, rows out (no database).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from tracker.core.categories import QUOTE_CATEGORY
from tracker.core.errors import InvalidInput
from tracker.economics.ownership import owned_cost
from tracker.economics.units import money_out

if TYPE_CHECKING:
    from tracker.core.fx import RateTable
    from tracker.economics.defaults import EconomicsSettings
    from tracker.store.queries import PriceRow

# Parts are shown to a millionth of a currency unit per GPU-hour (the import's amortized
# places); the owned price is the sum of the parts as shown, so they always add up.
PART_PLACES = Decimal("0.000001")


def _attribute(row: PriceRow, key: str) -> Decimal | None:
    value = (row.attributes or {}).get(key)
    if value in (None, ""):
        return None
    return Decimal(str(value))


def in_quote_currency(settings: EconomicsSettings, row: PriceRow,
                      rates: Callable[[], RateTable] | None) -> EconomicsSettings:
    """`settings` with its amounts in the quote's currency, converted at the ECB rate of the
    day the quote was first seen (`rates` gives the table, read only when one is needed)."""
    needed = settings.stated_currencies() - {row.currency}
    if not needed:
        return settings if settings.currency == row.currency else settings.in_currency(
            row.currency, {})
    if rates is None:
        raise InvalidInput(f"quote {row.provider} {row.instance_type} is in {row.currency} and "
                           f"the [economics] defaults in {', '.join(sorted(needed))}: no "
                           "exchange rates to convert them with")
    table = rates()
    converted = {code: table.rate(code, row.currency, row.observed_at.date())[0]
                 for code in needed}
    return settings.in_currency(row.currency, converted)


def owned_row(row: PriceRow, settings: EconomicsSettings,
              utilization: Decimal | None = None,
              rates: Callable[[], RateTable] | None = None) -> PriceRow:
    """A quote row priced as owned cost per used GPU-hour; other rows unchanged.

    Raises InvalidInput when neither the quote nor the defaults give capex or power."""
    if row.category != QUOTE_CATEGORY:
        return row
    settings = in_quote_currency(settings, row, rates)
    gpus = Decimal(repr(float(row.gpu_count)))
    capex = _attribute(row, "capex")
    if capex is None:
        raise InvalidInput(f"quote {row.provider} {row.instance_type} has no capex")
    parts_source: dict[str, str] = {"capex": "quote"}
    power_kw = _attribute(row, "power_kw")
    if power_kw is None:
        per_gpu = settings.power_kw_per_gpu(row.gpu)
        if per_gpu is None:
            raise InvalidInput(f"quote {row.provider} {row.instance_type} has no power_kw and "
                               f"there is no power default for {row.gpu}")
        power_kw = per_gpu * gpus
        parts_source["power_kw"] = settings.power_source(row.gpu)
    else:
        parts_source["power_kw"] = "quote"
    life = _attribute(row, "lifetime_months")
    if life is None:
        life_months = settings.integer("horizon_months")
        parts_source["lifetime_months"] = settings.source("horizon_months")
    else:
        life_months = int(life)
        parts_source["lifetime_months"] = "quote"
    if utilization is None:
        utilization = settings.value("owned_utilization")
        parts_source["utilization"] = settings.source("owned_utilization")
    else:
        parts_source["utilization"] = "given"
    inputs = settings.ownership_inputs(
        capex=capex, power_kw=power_kw, cloud_price_per_hour=Decimal(0),
        utilization=utilization, gpus=gpus)
    cost = owned_cost(inputs, life_months)
    parts = {name: money_out(getattr(cost, name), PART_PLACES)
             for name in ("capex", "power", "colo", "staff", "other")}
    total = sum(parts.values(), Decimal(0))
    breakdown: dict[str, Any] = {
        "utilization": cost.utilization, "life_months": life_months, "capex": capex,
        "power_kw": power_kw, "pue": inputs.pue, "kwh_price": inputs.kwh_price,
        "colo_per_kw_month": inputs.colo_per_kw_month,
        "staff_per_month": inputs.staff_per_month,
        "hours_per_month": inputs.hours_per_month,
        "per_gpu_hour": {**parts, "total": total},
        "sources": parts_source,
    }
    attributes = {**(row.attributes or {}), "owned_cost": breakdown,
                  "stored_price_per_hour": str(row.price_per_hour)}
    return replace(row, price_per_gpu_hour=total, price_per_hour=total * gpus,
                   attributes=attributes)


def price_quotes(rows: Sequence[PriceRow], settings: EconomicsSettings,
                 utilization: Decimal | None = None,
                 rates: Callable[[], RateTable] | None = None) -> list[PriceRow]:
    """Every row, quotes priced as owned (see `owned_row`), re-sorted cheapest per GPU-hour
    first on the same keys as `store.price_rows`."""
    priced = [owned_row(r, settings, utilization, rates) for r in rows]
    priced.sort(key=lambda r: (r.price_per_gpu_hour, r.gpu, r.provider, r.region, r.zone,
                               r.instance_type, r.category))
    return priced


def owned_notes(rows: Sequence[dict[str, Any]]) -> list[str]:
    """One line per owned row of a `prices`/`compare` answer, its parts added up:
    'owned onprem DGX H100: capex 1.92637 + power 0.2652 + colo 0.523973 + staff 0.342466
    = 3.058009 USD per GPU-hour at 50% utilization over 48 months'."""
    lines, seen = [], set()
    for row in rows:
        breakdown = row.get("owned_cost")
        key = (row.get("provider"), row.get("instance_type"))
        if not breakdown or key in seen:
            continue
        seen.add(key)
        p = breakdown["per_gpu_hour"]
        parts = [f"capex {p['capex']}", f"power {p['power']}", f"colo {p['colo']}",
                 f"staff {p['staff']}"] + ([f"other {p['other']}"] if Decimal(p["other"])
                                           else [])
        lines.append(f"owned {key[0]} {key[1]}: {' + '.join(parts)} = {p['total']} "
                     f"{row.get('currency', '')} per GPU-hour at "
                     f"{float(breakdown['utilization']):.0%} utilization over "
                     f"{breakdown['life_months']} months")
    return lines
