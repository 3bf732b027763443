"""FOCUS: the tracked prices as FOCUS price rows, and the invoice check of a FOCUS usage export.

Implements the column names and allowed values of FOCUS 1.2 (the FinOps Foundation's FinOps
Open Cost and Usage Specification; column list and values in `data/focus-1.2.json`, taken from
the spec repository at tag v1.2). FOCUS 1.2 defines only the cost-and-usage dataset (a SKU
price dataset is still a draft), so the export uses the 1.2 columns that describe a price
(provider, service, region, SKU and SKU price ids, pricing category and unit, list unit price,
currencies) and `x_`-prefixed columns for the rest, as the spec's column-handling rule asks:
GPU model, count and memory, instance type, source, price per GPU-hour, the dates the price was
in effect (`x_SkuPriceEffectiveStart`/`End`, named after the draft SKU price dataset's
columns), and the exchange rate when `--currency` converts.

The invoice check reads the GPU lines of a FOCUS cost-and-usage export (ProviderName, SkuId /
ResourceId / instance type, ConsumedQuantity or PricingQuantity in hours, EffectiveCost,
BillingCurrency, ChargePeriodStart/End), stores them in `focus_usage`, and compares what each
line paid per GPU-hour with the tracked market on its charge day: the same offer's list price,
the cheapest comparable offer (same GPU class, on-demand, whole GPUs) and the saving.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracker.answers.offers import plan_shaped_offer
from tracker.core.bounds import MAX_HOURS
from tracker.core.errors import InvalidInput

if TYPE_CHECKING:
    from tracker.store.db import Database
    from tracker.store.queries import PriceRow

FOCUS_VERSION = "1.2"
# Our pricing categories -> FOCUS 1.2 PricingCategory allowed values.
PRICING_CATEGORY = {"on-demand": "Standard", "spot": "Dynamic", "bid": "Dynamic",
                    "reserved-1y": "Committed", "reserved-3y": "Committed", "quote": "Standard"}
# The provider's own name for the service its GPU instances are billed under, where known.
SERVICE_NAMES = {"aws": "Amazon Elastic Compute Cloud", "azure": "Virtual Machines",
                 "gcp": "Compute Engine"}
FOCUS_PRICE_COLUMNS = (
    "ProviderName", "PublisherName", "ServiceName", "ServiceCategory", "ServiceSubcategory",
    "RegionId", "RegionName", "AvailabilityZone", "SkuId", "SkuPriceId", "SkuPriceDetails",
    "PricingCategory", "PricingUnit", "PricingCurrency", "PricingCurrencyListUnitPrice",
    "PricingCurrencyContractedUnitPrice", "BillingCurrency", "ListUnitPrice",
    "ContractedUnitPrice",
)
CUSTOM_PRICE_COLUMNS = (
    "x_GpuModel", "x_GpuName", "x_GpuCount", "x_GpuMemoryGB", "x_InstanceType", "x_Variant",
    "x_PricePerGpuHour", "x_SkuPriceEffectiveStart", "x_SkuPriceEffectiveEnd", "x_LastSeen",
    "x_Source", "x_SourceUrl", "x_ExchangeRate", "x_ExchangeRateDate",
)
EXPORT_COLUMNS = FOCUS_PRICE_COLUMNS + CUSTOM_PRICE_COLUMNS
# ProviderName as FOCUS exports write it -> our provider ids.
PROVIDER_ALIASES = {"amazon web services": "aws", "aws": "aws", "microsoft": "azure",
                    "microsoft azure": "azure", "azure": "azure", "google cloud": "gcp",
                    "google": "gcp", "google cloud platform": "gcp", "gcp": "gcp",
                    "lambda": "lambda", "lambda labs": "lambda", "lambda cloud": "lambda",
                    "coreweave": "coreweave", "runpod": "runpod", "vast.ai": "vastai",
                    "oracle": "oci", "oracle cloud infrastructure": "oci"}
HOUR_UNITS = {"hour": 1.0, "hours": 1.0, "hrs": 1.0, "hr": 1.0, "h": 1.0, "minutes": 1 / 60,
              "minute": 1 / 60, "seconds": 1 / 3600, "second": 1 / 3600}


@lru_cache(maxsize=1)
def spec() -> dict[str, Any]:
    """The FOCUS 1.2 column list and allowed values bundled in data/."""
    from tracker.core.data_files import read_json

    return read_json("focus-1.2.json")


def spec_columns() -> list[str]:
    return [c["id"] for c in spec()["columns"]]


# --------------------------------------------------------------------------------------------
# Export


def sku_id(row: PriceRow) -> str:
    return "/".join(x for x in (row.provider, row.instance_type, row.variant) if x)


def sku_price_id(row: PriceRow) -> str:
    """Stable across refreshes: the offer's identity without its price."""
    return "/".join((row.provider, row.region or "-", row.zone or "-", row.instance_type,
                     row.variant or "-", row.category))


def price_record(row: PriceRow, valid_to: datetime | None, *, currency: str | None = None,
                 rates: Any = None, gpu_memory_gb: float | None = None,
                 gpu_name: str = "", as_of: datetime | None = None) -> dict[str, Any]:
    """One tracked price as a FOCUS price row (pure; Decimal money, ISO UTC times). A
    conversion uses the ECB rate of the price's latest sighting, not after `as_of`."""
    from tracker.core.serialization import iso_utc

    billing = currency or row.currency
    rate = rate_day = None
    price, per_gpu = row.price_per_hour, row.price_per_gpu_hour
    if billing != row.currency:
        seen = (min(row.last_seen, as_of) if as_of is not None else row.last_seen).date()
        conversion = rates.convert(row.price_per_hour, row.currency, billing, seen)
        price = conversion.amount
        per_gpu = rates.convert(row.price_per_gpu_hour, row.currency, billing, seen).amount
        rate, rate_day = conversion.rate, conversion.rate_date
    negotiated = row.category == "quote"
    from tracker.core.money import decimal_to_str, display_rate

    def money(value: Decimal | None) -> str:
        return decimal_to_str(value) if value is not None else ""

    return {
        "ProviderName": row.provider, "PublisherName": row.provider,
        "ServiceName": SERVICE_NAMES.get(row.provider, "GPU instances"),
        "ServiceCategory": "Compute", "ServiceSubcategory": "Virtual Machines",
        "RegionId": row.region, "RegionName": row.region, "AvailabilityZone": row.zone,
        "SkuId": sku_id(row), "SkuPriceId": sku_price_id(row),
        "SkuPriceDetails": json.dumps({"InstanceType": row.instance_type}, sort_keys=True),
        "PricingCategory": PRICING_CATEGORY[row.category], "PricingUnit": "Hours",
        "PricingCurrency": row.currency,
        "PricingCurrencyListUnitPrice": "" if negotiated else money(row.price_per_hour),
        "PricingCurrencyContractedUnitPrice": money(row.price_per_hour) if negotiated else "",
        "BillingCurrency": billing,
        "ListUnitPrice": "" if negotiated else money(price),
        "ContractedUnitPrice": money(price) if negotiated else "",
        "x_GpuModel": row.gpu, "x_GpuName": gpu_name or row.gpu_raw,
        "x_GpuCount": f"{float(row.gpu_count):g}",
        "x_GpuMemoryGB": f"{gpu_memory_gb:g}" if gpu_memory_gb else "",
        "x_InstanceType": row.instance_type, "x_Variant": row.variant,
        "x_PricePerGpuHour": money(per_gpu),
        "x_SkuPriceEffectiveStart": iso_utc(row.observed_at),
        "x_SkuPriceEffectiveEnd": iso_utc(valid_to) if valid_to else "",
        "x_LastSeen": iso_utc(row.last_seen), "x_Source": row.source,
        "x_SourceUrl": row.source_url or "",
        "x_ExchangeRate": decimal_to_str(display_rate(rate)) if rate is not None else "",
        "x_ExchangeRateDate": rate_day.isoformat() if rate_day else "",
    }


def export_rows(db: Database, as_of: datetime, currency: str | None = None) -> list[dict]:
    """Every price valid at `as_of` (tracked prices and your quotes) as FOCUS price rows."""
    from tracker.core.gpus import gpu_table
    from tracker.store.market import span_ends
    from tracker.store.queries import price_rows
    from tracker.store.rates import rate_table

    rows = price_rows(db, as_of=as_of)
    ends = span_ends(db, [r.offer_id for r in rows])
    rates = rate_table(db) if currency and any(r.currency != currency for r in rows) else None
    table = gpu_table()
    records = []
    for row in sorted(rows, key=lambda r: (r.provider, r.region, r.zone, r.instance_type,
                                           r.variant, r.category, r.source)):
        gpu = table.get(row.gpu)
        records.append(price_record(row, ends.get((row.offer_id, row.observed_at)),
                                    currency=currency, rates=rates,
                                    gpu_memory_gb=gpu.memory_gb if gpu else None,
                                    gpu_name=gpu.name if gpu else "", as_of=as_of))
    return records


def write_export(records: Sequence[dict], out: Path) -> str:
    """CSV, or Parquet when the file ends in .parquet (needs pyarrow). Written through the
    one output writer (tracker.core.output_files): a new temporary file in the target directory,
    renamed over `out` only if `out` is a regular file or a new path, so a failure leaves
    nothing half-written and a device or symlink is never replaced."""
    from tracker.core.output_files import check_target, write_atomically

    out = check_target(out)
    if out.suffix.lower() == ".parquet":
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            raise InvalidInput("Parquet output needs pyarrow (pip install "
                               "'gpu-tracker[parquet]'); or write a .csv file") from None
        table = pa.table({c: [r[c] for r in records] for c in EXPORT_COLUMNS},
                         schema=pa.schema([(c, pa.string()) for c in EXPORT_COLUMNS]))
        write_atomically(out, lambda handle: pq.write_table(table, handle))
        return "parquet"
    from tracker.core.serialization import write_csv

    # The project's one CSV writer: text cells that would run as a formula are guarded.
    text = write_csv(list(EXPORT_COLUMNS),
                     (["" if r.get(c) is None else str(r[c]) for c in EXPORT_COLUMNS]
                      for r in records))
    write_atomically(out, text.encode("utf-8"))
    return "csv"


# --------------------------------------------------------------------------------------------
# Import of a FOCUS cost-and-usage export


@dataclass(frozen=True)
class UsageLine:
    line: int
    provider: str
    region: str
    sku_id: str
    resource_id: str
    instance_type: str
    gpu_id: str
    gpu_count: float
    pricing_category: str
    charge_period_start: datetime
    charge_period_end: datetime
    usage_hours: float
    effective_cost: Decimal
    billing_currency: str
    tags: tuple[tuple[str, str], ...] = ()  # FOCUS `Tags`, sorted (key, value) pairs


def parse_tags(text: str) -> tuple[tuple[str, str], ...]:
    """FOCUS 1.2 `Tags`: a JSON object of key/value pairs (values as text; a key without a
    value maps to ""). InvalidInput when it is not a JSON object."""
    if not text.strip():
        return ()
    try:
        value = json.loads(text)
    except ValueError:
        raise InvalidInput("Tags is not a JSON object") from None
    if not isinstance(value, dict):
        raise InvalidInput("Tags is not a JSON object")
    return tuple(sorted((str(k), "" if v is None else str(v)) for k, v in value.items()))


@dataclass(frozen=True)
class LineError:
    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


def _instant(text: str, what: str) -> datetime:
    from tracker.core.serialization import parse_instant

    if not text.strip():
        raise InvalidInput(f"{what} is empty")
    return parse_instant(text)


def known_offers(db: Database) -> dict[tuple[str, str], tuple[str, float]]:
    """(provider, instance type) -> (GPU, count) from the tracked offers."""
    from tracker.store.market import offer_gpus

    return offer_gpus(db)


def parse_usage(text: str | Iterable[str], offers: dict[tuple[str, str], tuple[str, float]]
                ) -> tuple[list[UsageLine], list[LineError], int]:
    """(GPU lines, errors, non-GPU lines skipped) of a FOCUS cost-and-usage CSV.

    A line is a GPU line when it names a GPU (`x_GpuModel`) or its instance type (from
    `x_InstanceType`, `SkuPriceDetails.InstanceType`, `SkuId` or `ResourceType`) is a tracked
    offer of that provider. GPU lines must have a cost, a currency, a charge period and hours,
    within tracker/core/bounds.py; a cell with a NUL byte or that a spreadsheet would run as a
    formula is refused on any line. `text` may be the lines of a file, read as parsed.
    """
    from tracker.core.gpus import canonical_gpu
    from tracker.core.money import check_currency, to_decimal

    lines_in = io.StringIO(text.lstrip("\ufeff")) if isinstance(text, str) else text
    reader = csv.DictReader(lines_in)
    header = set(reader.fieldnames or ())
    missing = {"ProviderName", "EffectiveCost", "BillingCurrency", "ChargePeriodStart",
               "ChargePeriodEnd"} - header
    if missing:
        raise InvalidInput(f"not a FOCUS cost and usage export: missing column(s) "
                           f"{', '.join(sorted(missing))}")
    lines: list[UsageLine] = []
    errors: list[LineError] = []
    skipped = 0
    for number, raw in enumerate(reader, start=2):
        row = {k: (v or "").strip() for k, v in raw.items() if k}
        refused = _refused_cells(row)
        if refused:
            errors.append(LineError(number, refused))
            continue
        provider_name = row.get("ProviderName", "")
        provider = PROVIDER_ALIASES.get(provider_name.lower(), provider_name.lower())
        details = _details(row.get("SkuPriceDetails", ""))
        candidates = [c for c in (row.get("x_InstanceType", ""),
                                  str(details.get("InstanceType") or ""), row.get("SkuId", ""),
                                  row.get("ResourceType", "")) if c]
        instance = next((c for c in candidates if (provider, c.lower()) in offers),
                        candidates[0] if candidates else "")
        gpu_id: str | None = None
        count: float | None = None
        if row.get("x_GpuModel"):
            gpu_id = canonical_gpu(row["x_GpuModel"], None)
            if gpu_id is None:
                errors.append(LineError(number, _unknown_gpu(row["x_GpuModel"])))
                continue
        known = offers.get((provider, instance.lower()))
        if known is not None:
            gpu_id = gpu_id or known[0]
            count = known[1]
        if gpu_id is None:
            skipped += 1  # not a GPU line (storage, network, CPU instances, ...)
            continue
        if row.get("ChargeCategory") and row["ChargeCategory"] != "Usage":
            skipped += 1
            continue
        try:
            if row.get("x_GpuCount"):
                count = float(row["x_GpuCount"])
            if not count or count <= 0:
                raise InvalidInput("GPU count unknown: give x_GpuCount or a tracked "
                                   "instance type")
            cost = to_decimal(row.get("EffectiveCost", ""), what="EffectiveCost")
            currency = check_currency(row.get("BillingCurrency", ""))
            start = _instant(row.get("ChargePeriodStart", ""), "ChargePeriodStart")
            end = _instant(row.get("ChargePeriodEnd", ""), "ChargePeriodEnd")
            if end <= start:
                raise InvalidInput("ChargePeriodEnd is not after ChargePeriodStart")
            hours = _hours(row)
            if not 0 < hours <= MAX_HOURS:
                raise InvalidInput(f"usage quantity must be in (0, {MAX_HOURS:g}] hours")
            _check_usage_bounds(count, cost, hours, start, end)
            tags = parse_tags(row.get("Tags", ""))
        except (InvalidInput, ValueError) as exc:
            errors.append(LineError(number, str(exc)))
            continue
        lines.append(UsageLine(
            line=number, provider=provider, region=row.get("RegionId", ""),
            sku_id=row.get("SkuId", ""), resource_id=row.get("ResourceId", ""),
            instance_type=instance, gpu_id=gpu_id, gpu_count=count,
            pricing_category=row.get("PricingCategory", ""), charge_period_start=start,
            charge_period_end=end, usage_hours=hours, effective_cost=cost,
            billing_currency=currency, tags=tags))
    return lines, errors, skipped


def _refused_cells(row: dict[str, str]) -> str | None:
    """Why a line's cells are refused (a NUL byte, a spreadsheet formula), or None."""
    from tracker.core.serialization import formula_like

    for name, value in row.items():
        if "\x00" in value:
            return f"{name} holds a NUL byte; refused"
        if formula_like(value):
            return f"{name} {value[:40]!r} starts like a spreadsheet formula; refused"
    return None


def _check_usage_bounds(count: float, cost: Decimal, hours: float, start: datetime,
                        end: datetime) -> None:
    """A usage line inside tracker/core/bounds.py: GPU count, cost per GPU-hour, years."""
    from tracker.core.bounds import MAX_GPUS_PER_OFFER, MAX_PRICE_PER_GPU_HOUR, MAX_YEAR, MIN_YEAR

    if not math.isfinite(count) or count > MAX_GPUS_PER_OFFER:
        raise InvalidInput(f"GPU count {count:g} is above {MAX_GPUS_PER_OFFER}")
    for when, what in ((start, "ChargePeriodStart"), (end, "ChargePeriodEnd")):
        if not MIN_YEAR <= when.year <= MAX_YEAR:
            raise InvalidInput(f"{what} year {when.year} is outside {MIN_YEAR}..{MAX_YEAR}")
    per_gpu_hour = abs(cost) / Decimal(repr(hours * count))
    if per_gpu_hour > MAX_PRICE_PER_GPU_HOUR:
        raise InvalidInput(f"EffectiveCost is {per_gpu_hour:.2f} per GPU-hour, above "
                           f"{MAX_PRICE_PER_GPU_HOUR} (tracker/core/bounds.py)")


def _unknown_gpu(name: str) -> str:
    """"unknown GPU 'X'; did you mean ...?" (the suggestions every GPU name error gives)."""
    from tracker.core.errors import NotFound
    from tracker.core.gpus import resolve_gpu

    try:
        resolve_gpu(name)
    except NotFound as exc:
        return str(exc)
    return f"unknown GPU {name!r}"


def _details(text: str) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _hours(row: dict[str, str]) -> float:
    for quantity, unit in (("ConsumedQuantity", "ConsumedUnit"),
                           ("PricingQuantity", "PricingUnit")):
        if row.get(quantity):
            factor = HOUR_UNITS.get(row.get(unit, "").lower())
            if factor is None:
                raise InvalidInput(f"{unit} {row.get(unit)!r} is not a time unit (Hours)")
            try:
                return float(row[quantity]) * factor
            except ValueError:
                raise InvalidInput(f"{quantity} {row[quantity]!r} is not a number") from None
    raise InvalidInput("no usage quantity (ConsumedQuantity or PricingQuantity in Hours)")


def import_usage(db: Database, text: str, now: datetime) -> dict[str, Any]:
    """Validate the whole file, then store its GPU lines (a file imported twice adds nothing).
    Raises UsageFileError listing every bad line when any GPU line is bad."""
    lines, errors, skipped = parse_usage(text, known_offers(db))
    if errors:
        raise UsageFileError(errors)
    return _store_usage(db, lines, skipped, hashlib.sha256(text.encode("utf-8")).hexdigest(),
                        now)


def import_usage_file(db: Database, path: str | Path, now: datetime) -> dict[str, Any]:
    """`import_usage` of a file, streamed: only its GPU lines are held, the digest is taken
    as it is read (the same as of its text), and a file above the cap is refused."""
    from tracker.core.local_input import MAX_USAGE_BYTES, text_lines

    digest = hashlib.sha256()
    with text_lines(path, "FOCUS usage file", MAX_USAGE_BYTES) as lines_in:
        def hashed() -> Iterator[str]:
            for line in lines_in:
                digest.update(line.encode("utf-8"))
                yield line

        lines, errors, skipped = parse_usage(hashed(), known_offers(db))
    if errors:
        raise UsageFileError(errors)
    return _store_usage(db, lines, skipped, digest.hexdigest(), now)


def _store_usage(db: Database, lines: list[UsageLine], skipped: int, digest: str,
                 now: datetime) -> dict[str, Any]:
    from tracker.store.market import insert_usage

    imported = insert_usage(db, digest, [{
        "line": u.line, "provider": u.provider, "region": u.region, "sku_id": u.sku_id,
        "resource_id": u.resource_id, "instance_type": u.instance_type, "gpu_id": u.gpu_id,
        "gpu_count": u.gpu_count, "pricing_category": u.pricing_category,
        "charge_period_start": u.charge_period_start,
        "charge_period_end": u.charge_period_end, "usage_hours": u.usage_hours,
        "effective_cost": u.effective_cost, "billing_currency": u.billing_currency,
        "tags": json.dumps(dict(u.tags), sort_keys=True), "imported_at": now} for u in lines])
    return {"file_sha256": digest, "gpu_lines": len(lines), "imported": imported,
            "already_imported": len(lines) - imported, "skipped_non_gpu": skipped}


class UsageFileError(InvalidInput):
    def __init__(self, errors: Sequence[LineError]) -> None:
        self.errors = list(errors)
        super().__init__(f"{len(errors)} bad GPU line(s); nothing imported")


# --------------------------------------------------------------------------------------------
# The invoice check

CHECK_COLUMNS = ("line", "provider", "instance_type", "gpu", "gpu_count", "charge_day",
                 "gpu_hours", "effective_cost", "paid_per_gpu_hour", "list_per_gpu_hour",
                 "cheapest_per_gpu_hour", "cheapest_offer", "saving", "saving_pct",
                 "currency")


def usage_lines(db: Database, *, since: datetime | None = None,
                until: datetime | None = None) -> list[UsageLine]:
    from tracker.store.market import usage_rows

    return [UsageLine(
        line=r.line, provider=r.provider, region=r.region, sku_id=r.sku_id,
        resource_id=r.resource_id, instance_type=r.instance_type, gpu_id=r.gpu_id,
        gpu_count=r.gpu_count, pricing_category=r.pricing_category,
        charge_period_start=r.charge_period_start, charge_period_end=r.charge_period_end,
        usage_hours=r.usage_hours, effective_cost=r.effective_cost,
        billing_currency=r.billing_currency,
        tags=tuple(sorted(json.loads(r.tags or "{}").items())))
        for r in usage_rows(db, since=since, until=until)]


def check_line(line: UsageLine, market: Iterable[PriceRow]) -> dict[str, Any]:
    """One usage line against the market rows of its charge day (already in its currency;
    pure): the same offer's list price, the cheapest comparable offer (one that holds the
    line's GPUs in one instance or a joined cluster: `offers.plan_shaped_offer`; its price
    per GPU-hour is the bill for holding them) and the saving."""
    from tracker.core.money import round_money

    gpu_hours = Decimal(repr(line.usage_hours)) * Decimal(repr(line.gpu_count))
    paid = line.effective_cost / gpu_hours
    same_category = {"Dynamic": ("spot", "bid"), "Committed": ("reserved-1y", "reserved-3y")}
    categories = same_category.get(line.pricing_category, ("on-demand",))
    same = [r for r in market if r.provider == line.provider
            and r.instance_type.lower() == line.instance_type.lower()
            and r.category in categories and (not line.region or r.region == line.region)]
    # The comparator has the line's shape: its GPUs in one instance, or instances a cluster
    # network joins; an 8-GPU NVLink node "could have cost" no community pod's price.
    comparable = sorted((r for r in market if r.gpu == line.gpu_id
                         and r.category == "on-demand" and float(r.gpu_count) >= 1),
                        key=lambda r: (r.price_per_gpu_hour, r.provider))
    listed = min(same, key=lambda r: r.price_per_gpu_hour) if same else None
    shaped = plan_shaped_offer(comparable, max(line.gpu_count, 1.0))
    cheapest_per_gpu_hour: Decimal | None = None
    cheapest_text = ""
    saving = None
    if shaped is not None:
        cheapest, instances, cheapest_per_gpu_hour = shaped
        cheapest_text = _offer_text(cheapest) + _shape_text(cheapest, instances, line.gpu_count)
        saving = round_money(line.effective_cost - cheapest_per_gpu_hour * gpu_hours)
    places = Decimal("0.0001")
    return {
        "line": line.line, "provider": line.provider, "instance_type": line.instance_type,
        "region": line.region, "gpu": line.gpu_id, "gpu_count": line.gpu_count,
        "charge_day": line.charge_period_start.date().isoformat(),
        "usage_hours": line.usage_hours, "gpu_hours": float(gpu_hours),
        "effective_cost": line.effective_cost, "currency": line.billing_currency,
        "paid_per_gpu_hour": paid.quantize(places),
        "list_per_gpu_hour": listed.price_per_gpu_hour.quantize(places) if listed else None,
        "list_offer": _offer_text(listed),
        "cheapest_per_gpu_hour": cheapest_per_gpu_hour.quantize(places)
        if cheapest_per_gpu_hour is not None else None,
        "cheapest_offer": cheapest_text,
        "saving": saving,
        "saving_pct": round(float(saving / line.effective_cost * 100), 1)
        if saving is not None and line.effective_cost else None,
    }


def _shape_text(row: PriceRow, instances: int, gpus: float) -> str:
    """' (8 GPUs x 2)': the comparator's shape, and what it bills beyond the line's GPUs."""
    held = float(row.gpu_count) * instances
    extra = f", {held:g} GPUs billed" if held > gpus + 1e-9 else ""
    return f" ({float(row.gpu_count):g} GPUs x {instances}{extra})"


def _offer_text(row: PriceRow | None) -> str:
    if row is None:
        return ""
    return " ".join(x for x in (row.provider, row.region, row.instance_type, row.category) if x)


def invoice_check(db: Database, *, since: datetime | None = None,
                  until: datetime | None = None) -> list[dict[str, Any]]:
    """Every imported GPU usage line against the tracked market on its charge day."""
    from tracker.core.fx import rows_in_currency
    from tracker.store.queries import price_rows
    from tracker.store.rates import rate_table

    lines = usage_lines(db, since=since, until=until)
    rates = None
    cache: dict[tuple[datetime, str], list[PriceRow]] = {}
    results = []
    for line in lines:
        key = (line.charge_period_start, line.billing_currency)
        if key not in cache:
            rows = price_rows(db, as_of=line.charge_period_start, gpu=line.gpu_id)
            if rates is None and any(r.currency != line.billing_currency for r in rows):
                rates = rate_table(db)
            cache[key] = rows_in_currency(rows, line.billing_currency, rates,
                                          line.charge_period_start)
        results.append(check_line(line, cache[key]))
    return results


__all__ = ["CHECK_COLUMNS", "EXPORT_COLUMNS", "FOCUS_VERSION", "UsageFileError", "UsageLine",
           "check_line", "export_rows", "import_usage", "invoice_check", "parse_usage",
           "price_record", "spec_columns", "write_export"]
