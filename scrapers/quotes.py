"""Your own prices: negotiated and reserved rates, and on-prem hardware quotes, from a CSV.

Import with `gpu-tracker import quotes.csv` (every row is checked first; one bad row and
nothing is imported), or point the `quotes` source at the file (`[sources.quotes] path =
"..."`, or `url` = a path or an http(s) URL) so `gpu-tracker refresh` re-reads it.

Format: UTF-8 CSV with a header row; column order is free, names are exact (lowercase).
Blank lines and lines whose first cell starts with `#` are ignored.

Columns (* = required; `capex` is required on `quote` rows):
- `provider`*: who sells it, a short lowercase id (`aws`, `lambda`, `coreweave`, `onprem`).
- `region`: region, site or datacenter (`us-east-1`, `fra-dc2`); may be empty.
- `instance_type`*: the product: instance type, plan or system (`p5.48xlarge`, `DGX H100`).
- `gpu`*: the GPU model, a canonical id or a name `gpu-tracker gpus` knows (`h100-sxm`,
  `H100 SXM`, `A100 80GB`); a family name alone (`H100`) is refused as ambiguous.
- `gpu_count`*: GPUs in the product (> 0; fractions allowed).
- `category`*: `on-demand`, `spot`, `reserved-1y`, `reserved-3y`, `bid`, or `quote` for a
  hardware purchase quote.
- `price_per_hour`* (may be empty on `quote` rows, see below): price per hour of the WHOLE
  product (all `gpu_count` GPUs), a plain decimal such as `2.49` (no currency sign, no
  thousands comma).
- `currency`*: ISO 4217 code (`USD`, `EUR`, ...) of `price_per_hour` and `capex`.
- `valid_from`*: the date (`2025-06-01`, midnight UTC) or ISO 8601 time with a zone
  (`2025-06-01T09:00:00Z`) from which the price holds.
- `source_url`: where the number comes from, an `http(s)://` link (offer page, PDF, ticket).
- `notes`: free text (contract terms, who quoted it, references that are not links).
- `capex`: purchase price of the hardware (same currency), for `quote` rows.
- `power_kw`: power draw of the system in kW.
- `lifetime_months`: depreciation life in whole months.

A `quote` row may leave `price_per_hour` empty when `capex` and `lifetime_months` are
given: it is then the straight-line amortized capex, `capex / (lifetime_months × 730 h)`
rounded to 6 decimals, without power, hosting or financing, and `attributes["price_basis"]`
says so.
`capex`, `power_kw` and `lifetime_months` are kept in the offer's attributes, with
`source_url` and `notes`, for the economics commands.

A row is in force from `valid_from` until a later row of the same offer (same provider,
region, instance_type and category) replaces it, so one file can hold a price history:
import emits one snapshot per distinct `valid_from`, each listing every offer in force at
that instant. Importing the same file again adds nothing. Removing a row later does not
delete what was imported; that offer is closed at the newest `valid_from` only if the file
still lists other offers of the same provider and region.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from scrapers.base import CATEGORIES, PriceObservation, Record, Source
from tracker.core.errors import (
    InvalidInput,
    MissingCredentials,
    NotFound,
    SourceError,
    TrackerError,
)
from tracker.core.gpus import get_gpu, gpu_table, resolve_gpu
from tracker.core.money import ISO_4217
from tracker.core.serialization import formula_like

if TYPE_CHECKING:
    from collections.abc import Mapping

    from scrapers.http import HttpClient

COLUMNS = (
    "provider", "region", "instance_type", "gpu", "gpu_count", "category", "price_per_hour",
    "currency", "valid_from", "source_url", "notes", "capex", "power_kw", "lifetime_months",
)
REQUIRED_COLUMNS = ("provider", "instance_type", "gpu", "gpu_count", "category",
                    "price_per_hour", "currency", "valid_from")
HOURS_PER_MONTH = Decimal(730)  # 8760 h / 12
AMORTIZED_PLACES = Decimal("0.000001")
MAX_ERRORS_IN_MESSAGE = 3
_PROVIDER_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


@dataclass(frozen=True, slots=True)
class QuoteError:
    """One problem with one line of a quotes file (line 1 is the header)."""

    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


class QuotesInvalid(InvalidInput):
    """A quotes file with bad rows; `errors` lists every one."""

    def __init__(self, where: str, errors: list[QuoteError]) -> None:
        self.errors = errors
        shown = "; ".join(str(e) for e in errors[:MAX_ERRORS_IN_MESSAGE])
        more = f" (and {len(errors) - MAX_ERRORS_IN_MESSAGE} more)" \
            if len(errors) > MAX_ERRORS_IN_MESSAGE else ""
        noun = "problem" if len(errors) == 1 else "problems"
        super().__init__(f"{where}: {len(errors)} {noun}, nothing imported: {shown}{more}")


@dataclass(frozen=True, slots=True)
class _Quote:
    line: int
    key: tuple[str, str, str, str]
    gpu_id: str
    gpu_count: float
    valid_from: datetime
    observation: PriceObservation


def validate_quotes(text: str, *, source_url: str | None = None) -> tuple[
        list[PriceObservation], list[QuoteError]]:
    """Check every row of a quotes CSV; (observations, errors).

    When `errors` is not empty the observations must not be imported. The observations are
    the snapshots described in the module docstring: one per distinct `valid_from`, each
    carrying every offer in force at that instant.
    """
    errors: list[QuoteError] = []
    if text.startswith("\ufeff"):
        text = text[1:]
    reader = csv.reader(io.StringIO(text, newline=""))
    header: list[str] | None = None
    quotes: list[_Quote] = []
    first_line_of: dict[tuple[Any, ...], int] = {}
    product_of: dict[tuple[str, str, str, str], _Quote] = {}
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            errors.append(QuoteError(reader.line_num, f"not valid CSV ({exc})"))
            break
        line = reader.line_num
        if not cells or all(not c.strip() for c in cells) or cells[0].lstrip().startswith("#"):
            continue
        if header is None:
            header = [c.strip() for c in cells]
            problem = _check_header(header)
            if problem:
                errors.append(QuoteError(line, problem))
                return [], errors
            continue
        if len(cells) != len(header):
            errors.append(QuoteError(
                line, f"has {len(cells)} cells, the header has {len(header)} columns"))
            continue
        row = {name: value.strip() for name, value in zip(header, cells, strict=True)}
        # A text cell a spreadsheet would run (`=cmd|' /C calc'!A0`) is refused here, so it
        # can never be stored and come back out in a CSV export.
        formulas = [f"{name} {raw[:40]!r} starts like a spreadsheet formula ({raw[:1]!r}); "
                    "refused" for name, raw in zip(header, cells, strict=True)
                    if formula_like(raw) or formula_like(raw.strip())]
        formulas += [f"{name} holds a NUL byte; refused"
                     for name, raw in zip(header, cells, strict=True) if "\x00" in raw]
        if formulas:
            errors.extend(QuoteError(line, message) for message in formulas)
            continue
        quote, row_errors = _parse_quote(row, line, source_url)
        if row_errors:
            errors.extend(QuoteError(line, message) for message in row_errors)
            continue
        assert quote is not None
        dedupe = (*quote.key, quote.valid_from)
        if dedupe in first_line_of:
            errors.append(QuoteError(
                line, "same provider, region, instance_type, category and valid_from as line "
                      f"{first_line_of[dedupe]}"))
            continue
        earlier = product_of.get(quote.key)
        if earlier is not None and (earlier.gpu_id, earlier.gpu_count) != (
                quote.gpu_id, quote.gpu_count):
            errors.append(QuoteError(
                line, f"{quote.key[2]!r} is {earlier.gpu_count:g} x {earlier.gpu_id} on line "
                      f"{earlier.line}; a different product needs its own instance_type"))
            continue
        product_of.setdefault(quote.key, quote)
        first_line_of[dedupe] = line
        quotes.append(quote)
    if header is None:
        errors.append(QuoteError(1, "the file is empty (expected a header row: "
                                    + ",".join(COLUMNS) + ")"))
    if errors:
        return [], errors
    return _snapshots(quotes), []


def _check_header(header: list[str]) -> str | None:
    unknown = [c for c in header if c not in COLUMNS]
    if unknown:
        return (f"unknown column(s) {', '.join(repr(c) for c in unknown)}; "
                f"known: {', '.join(COLUMNS)}")
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        return f"missing required column(s): {', '.join(missing)}"
    duplicated = sorted({c for c in header if header.count(c) > 1})
    if duplicated:
        return f"column(s) given twice: {', '.join(duplicated)}"
    return None


def _parse_quote(row: dict[str, str], line: int,
                 file_url: str | None) -> tuple[_Quote | None, list[str]]:
    problems: list[str] = []
    provider = row.get("provider", "").lower()
    if not provider:
        problems.append("provider is empty")
    elif not _PROVIDER_RE.match(provider):
        problems.append(f"provider {row['provider']!r} must be a short id of letters, digits, "
                        "'.', '_' or '-'")
    instance_type = row.get("instance_type", "")
    if not instance_type:
        problems.append("instance_type is empty")
    region = row.get("region", "")

    gpu_written = row.get("gpu", "")
    gpu_id: str | None = None
    if not gpu_written:
        problems.append("gpu is empty")
    else:
        try:
            resolved = resolve_gpu(gpu_written)
        except NotFound as exc:
            problems.append(str(exc))
        else:
            exact_id = gpu_written.strip().lower() == resolved.gpu.id
            if resolved.warnings and not exact_id:
                # A price is only comparable when the exact part is known (H100 SXM vs PCIe).
                siblings = sorted(g.id for g in gpu_table().values()
                                  if g.family == resolved.gpu.family)
                problems.append(f"gpu {gpu_written!r} is ambiguous; use one of "
                                f"{', '.join(siblings)}")
            else:
                gpu_id = resolved.gpu.id

    gpu_count = _positive_number(row.get("gpu_count", ""), "gpu_count", problems)
    category = row.get("category", "")
    if category not in CATEGORIES:
        problems.append(f"category {category!r} is not one of {', '.join(CATEGORIES)}")

    currency = row.get("currency", "").upper()
    if currency not in ISO_4217:
        problems.append(f"currency {row.get('currency', '')!r} is not an ISO 4217 code")

    valid_from = _parse_when(row.get("valid_from", ""), problems)
    capex = _money(row.get("capex", ""), "capex", problems, allow_zero=False)
    power_kw = _positive_number(row.get("power_kw", ""), "power_kw", problems, required=False)
    lifetime = _lifetime(row.get("lifetime_months", ""), problems)
    price = _money(row.get("price_per_hour", ""), "price_per_hour", problems, allow_zero=False)

    attributes: dict[str, Any] = {}
    if category == "quote":
        if not row.get("capex"):
            problems.append("a quote row needs capex (the purchase price)")
        if price is None and not row.get("price_per_hour"):
            if capex is not None and lifetime is not None:
                price = (capex / (HOURS_PER_MONTH * lifetime)).quantize(
                    AMORTIZED_PLACES, rounding=ROUND_HALF_EVEN)
                attributes["price_basis"] = (
                    "amortized capex: capex / (lifetime_months x 730 h); "
                    "excludes power, hosting and financing")
            elif capex is not None:
                problems.append("price_per_hour is empty: give it, or lifetime_months to "
                                "amortize capex over")
    elif price is None and not row.get("price_per_hour"):
        problems.append("price_per_hour is empty")

    url = row.get("source_url", "")
    _check_bounds(problems, gpu_count=gpu_count, price=price, capex=capex, power_kw=power_kw,
                  valid_from=valid_from, currency=currency)
    if url and not re.match(r"^https?://\S+$", url):
        problems.append(f"source_url {url!r} is not an http(s) link (put other references "
                        "in notes)")
    if problems:
        return None, problems

    assert gpu_id is not None and gpu_count is not None and valid_from is not None
    assert price is not None
    if capex is not None:
        attributes["capex"] = capex
    if power_kw is not None:
        attributes["power_kw"] = power_kw
    if lifetime is not None:
        attributes["lifetime_months"] = lifetime
    if row.get("notes"):
        attributes["notes"] = row["notes"]
    if gpu_written != gpu_id:
        attributes["gpu_as_written"] = gpu_written
    gpu = get_gpu(gpu_id)
    observation = PriceObservation(
        provider=provider, instance_type=instance_type, gpu_name=gpu_id, gpu_count=gpu_count,
        category=category, price_per_hour=price, currency=currency, observed_at=valid_from,
        region=region, gpu_memory_gb=float(gpu.memory_gb), source_url=url or file_url,
        attributes=attributes, raw=dict(row),
    )
    # The offer's identity as ingest sees it (tracker/store/ingest/spans.py `offer_identity`), less
    # zone and variant, which a quote never sets.
    key = (provider, region, instance_type, category)
    return _Quote(line, key, gpu_id, gpu_count, valid_from, observation), []


def _check_bounds(problems: list[str], *, gpu_count: float | None, price: Decimal | None,
                  capex: Decimal | None, power_kw: float | None, valid_from: datetime | None,
                  currency: str) -> None:
    """A row outside tracker/core/bounds.py is refused (the file with it), never quarantined:
    a quote is the user's own number, so a typo must be fixed, not skipped."""
    from tracker.core import bounds

    if gpu_count is not None and gpu_count > bounds.MAX_GPUS_PER_OFFER:
        problems.append(f"gpu_count {gpu_count:g} is above {bounds.MAX_GPUS_PER_OFFER} "
                        "(tracker/core/bounds.py)")
        gpu_count = None
    if price is not None and gpu_count is not None:
        per_gpu = price / Decimal(repr(gpu_count))
        if not bounds.MIN_PRICE_PER_GPU_HOUR <= per_gpu <= bounds.MAX_PRICE_PER_GPU_HOUR:
            problems.append(
                f"price_per_hour {price} {currency} is {per_gpu:.6g} per GPU-hour, outside "
                f"[{bounds.MIN_PRICE_PER_GPU_HOUR}, {bounds.MAX_PRICE_PER_GPU_HOUR}] "
                "(tracker/core/bounds.py)")
    if capex is not None and capex > bounds.MAX_MONEY:
        problems.append(f"capex {capex} is above {bounds.MAX_MONEY:f}")
    if power_kw is not None and power_kw > bounds.MAX_POWER_KW:
        problems.append(f"power_kw {power_kw:g} is above {bounds.MAX_POWER_KW:g} kW")
    if valid_from is not None and not bounds.MIN_YEAR <= valid_from.year <= bounds.MAX_YEAR:
        problems.append(f"valid_from year {valid_from.year} is outside "
                        f"{bounds.MIN_YEAR}..{bounds.MAX_YEAR}")


def _snapshots(quotes: list[_Quote]) -> list[PriceObservation]:
    """For every distinct valid_from, every offer's row in force then (see module doc)."""
    instants = sorted({q.valid_from for q in quotes})
    by_key: dict[tuple[Any, ...], list[_Quote]] = {}
    for quote in quotes:
        by_key.setdefault(quote.key, []).append(quote)
    for history in by_key.values():
        history.sort(key=lambda q: q.valid_from)
    out: list[PriceObservation] = []
    for instant in instants:
        for history in by_key.values():
            current = None
            for quote in history:
                if quote.valid_from <= instant:
                    current = quote
                else:
                    break
            if current is None:
                continue
            obs = current.observation
            if obs.observed_at != instant:
                obs = replace(obs, observed_at=instant)
            out.append(obs)
    return out


def _positive_number(text: str, name: str, problems: list[str], *,
                     required: bool = True) -> float | None:
    if not text:
        if required:
            problems.append(f"{name} is empty")
        return None
    try:
        value = float(text)
    except ValueError:
        problems.append(f"{name} {text!r} is not a number")
        return None
    if not value > 0 or value == float("inf"):
        problems.append(f"{name} must be a positive number, got {text!r}")
        return None
    return value


def _money(text: str, name: str, problems: list[str], *, allow_zero: bool) -> Decimal | None:
    """A plain decimal amount: digits and one point, no currency signs or thousands commas
    (so `1,234` cannot be read as 1.234 or 1234 by mistake)."""
    if not text:
        return None
    if not re.fullmatch(r"[0-9]+(\.[0-9]+)?|\.[0-9]+", text):
        problems.append(f"{name} {text!r} is not a plain decimal number (like 2.49)")
        return None
    try:
        value = Decimal(text)
    except InvalidOperation:
        problems.append(f"{name} {text!r} is not a number")
        return None
    if value < 0 or (value == 0 and not allow_zero):
        problems.append(f"{name} must be positive, got {text}")
        return None
    return value


def _lifetime(text: str, problems: list[str]) -> int | None:
    if not text:
        return None
    if not text.isdigit() or int(text) <= 0:
        problems.append(f"lifetime_months {text!r} must be a whole number of months > 0")
        return None
    return int(text)


def _parse_when(text: str, problems: list[str]) -> datetime | None:
    if not text:
        problems.append("valid_from is empty")
        return None
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
            return datetime.combine(date.fromisoformat(text), time(), tzinfo=UTC)
        value = datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError:
        problems.append(f"valid_from {text!r} is not a date (YYYY-MM-DD) or ISO 8601 time")
        return None
    if value.tzinfo is None:
        problems.append(f"valid_from {text!r} has a time but no timezone (add Z for UTC)")
        return None
    return value.astimezone(UTC)


def read_quotes_text(path: str | Path) -> str:
    """The text of a local quotes file; InvalidInput when it cannot be read."""
    from tracker.core.local_input import MAX_QUOTES_BYTES, read_capped

    path = Path(path).expanduser()
    try:
        return read_capped(path, "quotes file", MAX_QUOTES_BYTES).decode("utf-8-sig")
    except FileNotFoundError:
        raise InvalidInput(f"quotes file not found: {path}") from None
    except IsADirectoryError:
        raise InvalidInput(f"quotes file is a directory: {path}") from None
    except UnicodeDecodeError:
        raise InvalidInput(f"quotes file is not UTF-8 text: {path}") from None
    except OSError as exc:
        raise InvalidInput(f"cannot read quotes file {path}: {exc.strerror}") from None


def import_quotes_csv(path: str | Path) -> list[Record]:
    """Every observation of a quotes file; raises `QuotesInvalid` (with all errors) if any row
    is bad, so nothing of a bad file is ever imported."""
    text = read_quotes_text(path)
    observations, errors = validate_quotes(text, source_url=None)
    if errors:
        raise QuotesInvalid(str(path), errors)
    return list(observations)


class QuotesSource(Source):
    name = "quotes"
    description = "Your own negotiated, reserved and on-prem hardware prices from a CSV file."
    DEFAULTS = {
        "url": "",  # a file path or an http(s) URL of the quotes CSV
        "path": "",  # a file path (wins over url)
    }
    SECRET_ENV = None
    MAY_BE_EMPTY = True  # a quotes file with every quote removed is a valid answer

    @classmethod
    def from_config(cls, file_settings: Mapping[str, Any] | None = None,
                    environ: Mapping[str, str] | None = None) -> Self:
        source = super().from_config(file_settings, environ)
        if not (source.settings.get("path") or source.settings.get("url")):
            raise MissingCredentials(
                "source quotes skipped: no quotes file configured (set [sources.quotes] path, "
                "or GPU_TRACKER_SOURCE_QUOTES_PATH)")
        return source

    def fetch(self, client: HttpClient, fetched_at: datetime) -> Iterator[Record]:
        location = str(self.settings.get("path") or self.settings.get("url") or "").strip()
        if not location:
            raise SourceError("source quotes: no quotes file configured (setting path or url)")
        if location.startswith(("http://", "https://")):
            text = client.get_text(location)
            where = location.split("?", 1)[0]
        else:
            try:
                text = read_quotes_text(location)
            except TrackerError as exc:
                raise SourceError(str(exc)) from None
            where = location
        observations, errors = validate_quotes(text)
        if errors:
            raise SourceError(str(QuotesInvalid(where, errors)))
        yield from observations
